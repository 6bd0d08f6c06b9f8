//! The AST printed back as canonical `.tile` source (`tilec compile --emit ast`). Parsing the
//! printed text gives the same tree, spans aside; every expression is fully parenthesised where
//! precedence matters, so the printed text shows how the parser grouped it.

use std::fmt::{self, Display, Formatter, Write};

use super::ast::*;

impl Display for File {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            match item {
                Item::Kernel(k) => fn_def(f, "kernel", k)?,
                Item::Function(k) => fn_def(f, "fn", k)?,
                Item::Run(r) => {
                    write!(f, "run {} ", r.kernel.name)?;
                    block(f, &r.body, 0)?;
                    f.write_str("\n")?;
                }
            }
        }
        Ok(())
    }
}

fn attrs(f: &mut Formatter<'_>, attrs: &[Attribute], indent: usize) -> fmt::Result {
    for a in attrs {
        write!(f, "{}#[{}", "    ".repeat(indent), a.name.name)?;
        if !a.args.is_empty() {
            write!(f, "({})", list(&a.args))?;
        }
        f.write_str("]\n")?;
    }
    Ok(())
}

fn fn_def(f: &mut Formatter<'_>, kw: &str, k: &FnDef) -> fmt::Result {
    attrs(f, &k.attrs, 0)?;
    write!(f, "{kw} {}", k.name.name)?;
    if !k.consts.is_empty() {
        let cs: Vec<String> = k
            .consts
            .iter()
            .map(|c| {
                let v = match &c.value {
                    ConstValueSpec::Required => String::new(),
                    ConstValueSpec::Default(e) => format!(" = {e}"),
                    ConstValueSpec::Choices(es) => format!(" in [{}]", list(es)),
                };
                format!("const {}: {}{v}", c.name.name, c.ty)
            })
            .collect();
        write!(f, "<{}>", cs.join(", "))?;
    }
    let ps: Vec<String> = k
        .params
        .iter()
        .map(|p| match &p.ty {
            Some(t) => format!("{}: {t}", p.name.name),
            None => p.name.name.clone(),
        })
        .collect();
    write!(f, "({})", ps.join(", "))?;
    if let Some(r) = &k.ret {
        write!(f, " -> {r}")?;
    }
    f.write_str(" ")?;
    block(f, &k.body, 0)?;
    f.write_str("\n")
}

impl Display for TypeExpr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            TypeExpr::Named(n) => f.write_str(&n.name),
            TypeExpr::Ptr {
                mutable: true, pointee, ..
            } => write!(f, "*mut {pointee}"),
            TypeExpr::Ptr {
                mutable: false,
                pointee,
                ..
            } => write!(f, "*{pointee}"),
        }
    }
}

fn block(f: &mut Formatter<'_>, b: &Block, indent: usize) -> fmt::Result {
    f.write_str("{\n")?;
    let pad = "    ".repeat(indent + 1);
    for s in &b.stmts {
        match s {
            Stmt::Let { pattern, ty, value, .. } => {
                write!(f, "{pad}let {}", pat(pattern))?;
                if let Some(t) = ty {
                    write!(f, ": {t}")?;
                }
                writeln!(f, " = {};", Indented(value, indent + 1))?;
            }
            Stmt::Assign { target, op, value, .. } => {
                let o = op.map_or(String::new(), |o| o.symbol().to_string());
                writeln!(f, "{pad}{} {o}= {};", target.name, Indented(value, indent + 1))?;
            }
            Stmt::For(l) => {
                attrs(f, &l.attrs, indent + 1)?;
                let range = match &l.step {
                    Some(s) => format!("({}..{}).step_by({s})", l.start, l.end),
                    None => format!("{}..{}", l.start, l.end),
                };
                write!(f, "{pad}for {} in {range} ", l.var.name)?;
                block(f, &l.body, indent + 1)?;
                f.write_str("\n")?;
            }
            Stmt::Expr { expr, semi, .. } => {
                writeln!(f, "{pad}{}{}", Indented(expr, indent + 1), if *semi { ";" } else { "" })?;
            }
        }
    }
    if let Some(t) = &b.tail {
        writeln!(f, "{pad}{}", Indented(t, indent + 1))?;
    }
    write!(f, "{}}}", "    ".repeat(indent))
}

fn pat(p: &Pattern) -> String {
    match p {
        Pattern::Bind { name, mutable: true } => format!("mut {}", name.name),
        Pattern::Bind { name, mutable: false } => name.name.clone(),
        Pattern::Tuple { items, .. } => {
            format!("({})", items.iter().map(pat).collect::<Vec<_>>().join(", "))
        }
        Pattern::Wildcard(_) => "_".into(),
    }
}

fn list(es: &[Expr]) -> String {
    es.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", ")
}

fn args(a: &[Arg]) -> String {
    a.iter()
        .map(|a| match &a.name {
            Some(n) => format!("{}: {}", n.name, a.value),
            None => a.value.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// An expression printed inside a block at some indentation (for `if` bodies).
struct Indented<'a>(&'a Expr, usize);

impl Display for Indented<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        expr(f, self.0, self.1)
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        expr(f, self, 0)
    }
}

fn expr(f: &mut Formatter<'_>, e: &Expr, indent: usize) -> fmt::Result {
    match &e.kind {
        ExprKind::Int(v) => write!(f, "{v}"),
        ExprKind::Float(v) => {
            if v.is_finite() {
                let s = format!("{v:?}");
                f.write_str(&s)
            } else {
                // Only reachable from literals that overflow f64; print a literal that does too.
                f.write_str("1e999")
            }
        }
        ExprKind::Bool(b) => write!(f, "{b}"),
        ExprKind::Str(s) => {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\t' => out.push_str("\\t"),
                    c => out.push(c),
                }
            }
            out.push('"');
            f.write_str(&out)
        }
        ExprKind::Name(n) => f.write_str(n),
        ExprKind::Unary(op, x) => {
            let s = if *op == UnOp::Neg { "-" } else { "!" };
            f.write_str(s)?;
            atom(f, x, indent)
        }
        ExprKind::Binary(op, a, b) => {
            atom(f, a, indent)?;
            write!(f, " {} ", op.symbol())?;
            atom(f, b, indent)
        }
        ExprKind::Call { func, args: a } => write!(f, "{}({})", func.name, args(a)),
        ExprKind::Method { recv, name, args: a } => {
            atom(f, recv, indent)?;
            write!(f, ".{}({})", name.name, args(a))
        }
        ExprKind::Index { base, items } => {
            atom(f, base, indent)?;
            let its: Vec<&str> = items
                .iter()
                .map(|i| if matches!(i, IndexItem::Full(_)) { ":" } else { "None" })
                .collect();
            write!(f, "[{}]", its.join(", "))
        }
        ExprKind::Paren(x) => {
            f.write_str("(")?;
            expr(f, x, indent)?;
            f.write_str(")")
        }
        ExprKind::Tuple(xs) => write!(f, "({},)", list(xs)),
        ExprKind::List(xs) => write!(f, "[{}]", list(xs)),
        ExprKind::If { cond, then, els } => {
            write!(f, "if {cond} ")?;
            block(f, then, indent)?;
            if let Some(e) = els {
                f.write_str(" else ")?;
                match &e.kind {
                    ExprKind::Block(b) => block(f, b, indent)?,
                    _ => expr(f, e, indent)?,
                }
            }
            Ok(())
        }
        ExprKind::Block(b) => block(f, b, indent),
    }
}

/// Prints a sub-expression, parenthesised unless it is atomic.
fn atom(f: &mut Formatter<'_>, e: &Expr, indent: usize) -> fmt::Result {
    match &e.kind {
        ExprKind::Binary(..) | ExprKind::Unary(..) | ExprKind::If { .. } => {
            let mut s = String::new();
            write!(s, "{}", Indented(e, indent))?;
            write!(f, "({s})")
        }
        ExprKind::Int(_) | ExprKind::Float(_) if matches!(e.kind, ExprKind::Float(v) if v < 0.0) => {
            write!(f, "({e})")
        }
        _ => expr(f, e, indent),
    }
}
