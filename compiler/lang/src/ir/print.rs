//! The IR's text form. One op per line:
//!
//! ```text
//! %6 = reduce<sum, 1> %5 : f32[64] @12:9
//! store<mask> %9, %8, %4 @14:5
//! %12, %13 = for<stages = 3> %0, %10, %1, %2, %3 : f32[64, 64], (*bf16)[64, 32] {
//! ^(%14: i32, %15: f32[64, 64], %16: (*bf16)[64, 32]):
//!   ...
//!   yield %20, %21
//! }
//! ```
//!
//! Attributes sit in `<..>` after the name, result types after `:`, the source location after `@`,
//! regions in braces. Operand types are not printed: they follow from the definitions.

use std::fmt::{self, Write};

use super::*;

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernel @{}(", self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} %{}: {}", p.name, p.value.0, p.elem)?;
        }
        f.write_str(")")?;
        if !self.consts.is_empty() {
            let c: Vec<String> = self.consts.iter().map(|(n, v)| format!("{n} = {v}")).collect();
            write!(f, " consts({})", c.join(", "))?;
        }
        let list = |v: &[u32]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ");
        if !self.warps.is_empty() {
            write!(f, " warps({})", list(&self.warps))?;
        }
        if !self.stages.is_empty() {
            write!(f, " stages({})", list(&self.stages))?;
        }
        if self.cluster > 1 {
            write!(f, " cluster({})", self.cluster)?;
        }
        let fixed: Vec<&str> = self
            .params
            .iter()
            .filter(|p| !p.specialize)
            .map(|p| p.name.as_str())
            .collect();
        if !fixed.is_empty() {
            write!(f, " no_specialize({})", fixed.join(", "))?;
        }
        f.write_str(" {\n")?;
        let mut s = String::new();
        print_ops(self, &self.body, 1, &mut s)?;
        f.write_str(&s)?;
        f.write_str("}\n")
    }
}

fn print_ops(k: &Kernel, r: &Region, depth: usize, out: &mut String) -> fmt::Result {
    for op in &r.ops {
        print_op(k, op, depth, out)?;
    }
    Ok(())
}

fn print_op(k: &Kernel, op: &Op, depth: usize, out: &mut String) -> fmt::Result {
    let pad = "  ".repeat(depth);
    out.push_str(&pad);
    if !op.results.is_empty() {
        let r: Vec<String> = op.results.iter().map(|v| format!("%{}", v.0)).collect();
        write!(out, "{} = ", r.join(", "))?;
    }
    out.push_str(op.kind.name());
    let attrs = attrs(&op.kind);
    if !attrs.is_empty() {
        write!(out, "<{}>", attrs.join(", "))?;
    }
    if !op.operands.is_empty() {
        let o: Vec<String> = op.operands.iter().map(|v| format!("%{}", v.0)).collect();
        write!(out, " {}", o.join(", "))?;
    }
    if !op.results.is_empty() {
        let t: Vec<String> = op.results.iter().map(|v| k.ty(*v).to_string()).collect();
        write!(out, " : {}", t.join(", "))?;
    }
    if op.loc != Loc::default() {
        write!(out, " @{}:{}", op.loc.line, op.loc.col)?;
    }
    for region in &op.regions {
        out.push_str(" {\n");
        out.push_str(&pad);
        out.push('^');
        let a: Vec<String> = region.args.iter().map(|v| format!("%{}: {}", v.0, k.ty(*v))).collect();
        writeln!(out, "({}):", a.join(", "))?;
        print_ops(k, region, depth + 1, out)?;
        out.push_str(&pad);
        out.push('}');
    }
    out.push('\n');
    Ok(())
}

/// The `<..>` attributes of an op, as printed.
pub(super) fn attrs(kind: &OpKind) -> Vec<String> {
    use OpKind::*;
    let flag = |on: bool, name: &str| if on { vec![name.to_string()] } else { vec![] };
    let evict_word = |e: Evict| flag(e != Evict::Normal, &format!("evict_{}", e.name()));
    match kind {
        Const(v) => vec![v.to_string()],
        ProgramId(a) | NumPrograms(a) => vec![a.to_string()],
        Arange { start, end } => vec![start.to_string(), end.to_string()],
        ExpandDims(a) => vec![a.to_string()],
        LoadBlock { rank } | StoreBlock { rank } => vec![rank.to_string()],
        Permute(p) => p.iter().map(|x| x.to_string()).collect(),
        Cast(r) => vec![r.name().to_string()],
        Load { mask, other, evict } => [flag(*mask, "mask"), flag(*other, "other"), evict_word(*evict)].concat(),
        Store { mask, evict } => [flag(*mask, "mask"), evict_word(*evict)].concat(),
        AtomicCas { mask } => flag(*mask, "mask"),
        Atomic { op, mask } => [vec![op.name().to_string()], flag(*mask, "mask")].concat(),
        Dot(p) => vec![p.name().to_string()],
        Reduce { op, axis } => vec![op.name().to_string(), axis.to_string()],
        ClusterReduce(op) => vec![op.name().to_string()],
        ArgReduce { axis, .. } | ReduceWith { axis } => vec![axis.to_string()],
        Scan { op, axis, reverse } => {
            [vec![op.name().to_string(), axis.to_string()], flag(*reverse, "reverse")].concat()
        }
        ScanWith { axis, reverse } => [vec![axis.to_string()], flag(*reverse, "reverse")].concat(),
        For {
            stages,
            warp_specialize,
            pingpong,
        } => {
            let mut a = Vec::new();
            if let Some(s) = stages {
                a.push(format!("stages = {s}"));
            }
            if let Some(w) = warp_specialize {
                a.push(format!("warp_specialize = {w}"));
            }
            if let Some(p) = pingpong {
                a.push(format!("pingpong = {p}"));
            }
            a
        }
        MultipleOf(n) | MaxContiguous(n) => vec![n.to_string()],
        Print(m) | Assert(m) => vec![quote(m)],
        Broadcast | Reshape | Join | Split | Unary(_) | Binary(_) | Cmp(_) | Fma | Select | Bitcast | PtrAdd | If
        | ClusterReduceWith | SplitSum | Yield => vec![],
    }
}

pub(super) fn quote(s: &str) -> String {
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
    out
}
