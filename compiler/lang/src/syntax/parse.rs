//! Source text to AST: the pest grammar in `tile.pest`, expressions through pest's Pratt parser.
//!
//! The parser never panics and never hangs: nesting deeper than [`MAX_NESTING`] is refused before
//! pest sees the text (deep recursion would overflow the stack), and pest's call limit bounds
//! backtracking.

use std::num::NonZeroUsize;
use std::sync::Once;

use pest::Parser as _;
use pest::iterators::{Pair, Pairs};
use pest::pratt_parser::{Assoc, Op, PrattParser};

use super::ast::*;
use crate::diag::{Diagnostic, Span};

#[derive(pest_derive::Parser)]
#[grammar = "syntax/tile.pest"]
struct TileParser;

/// Brackets nested deeper than this are refused with a diagnostic.
pub const MAX_NESTING: usize = 128;
/// Operators in one statement (nested blocks included) beyond this are refused.
pub const MAX_OPERATORS: usize = 512;
/// Sources larger than this are refused (a kernel file is a few kilobytes).
pub const MAX_SOURCE_BYTES: usize = 1 << 20;
const CALL_LIMIT: usize = 20_000_000;

/// Parses a whole `.tile` file.
pub fn parse(source: &str) -> Result<File, Vec<Diagnostic>> {
    static LIMIT: Once = Once::new();
    LIMIT.call_once(|| pest::set_call_limit(NonZeroUsize::new(CALL_LIMIT)));

    if source.len() > MAX_SOURCE_BYTES {
        return Err(vec![Diagnostic::error(
            Span::new(0, 0),
            format!("source is {} bytes; the limit is {MAX_SOURCE_BYTES}", source.len()),
        )]);
    }
    check_nesting(source)?;
    let mut pairs = TileParser::parse(Rule::file, source)
        .map_err(|e| vec![syntax_error(source, detailed_error(source).unwrap_or(e))])?;
    let file = pairs.next().expect("the file rule always yields one pair");
    let mut b = Builder;
    let mut items = Vec::new();
    for p in kids(file) {
        match p.as_rule() {
            Rule::kernel => items.push(Item::Kernel(b.fn_def(p))),
            Rule::function => items.push(Item::Function(b.fn_def(p))),
            Rule::run_spec => items.push(Item::Run(b.run_spec(p))),
            _ => {}
        }
    }
    Ok(File { items })
}

/// The error of a source that failed to parse, from a second parse that records the literal
/// tokens tried at the furthest position (`)`, `,`, `"`), which the rule-based error position
/// misses (`syntax_error` uses them). Recording them costs about a third of the parse, so the first
/// parse does without. pest reads the setting when a parse starts; the lock keeps it on for the
/// whole of this parse (a parse elsewhere that starts meanwhile only records too, slower).
fn detailed_error(source: &str) -> Option<pest::error::Error<Rule>> {
    static DETAIL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _held = DETAIL.lock().unwrap_or_else(|e| e.into_inner());
    pest::set_error_detail(true);
    let r = TileParser::parse(Rule::file, source);
    pest::set_error_detail(false);
    r.err()
}

/// Refuses bracket nesting deeper than [`MAX_NESTING`] and statements with more than
/// [`MAX_OPERATORS`] operators (both bound the depth of the tree, so of every recursion over it),
/// skipping comments and strings.
fn check_nesting(source: &str) -> Result<(), Vec<Diagnostic>> {
    let bytes = source.as_bytes();
    // Operators seen in the unfinished statement at each open bracket level.
    let mut ops: Vec<usize> = vec![0];
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 1;
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => {
                ops.push(0);
                if ops.len() > MAX_NESTING {
                    return Err(vec![
                        Diagnostic::error(Span::new(i, i + 1), "brackets nested too deeply")
                            .label(format!("more than {MAX_NESTING} levels open here"))
                            .help("split the expression with `let` bindings"),
                    ]);
                }
            }
            b')' | b']' | b'}' => {
                if ops.len() > 1 {
                    let inner = ops.pop().unwrap_or(0);
                    *ops.last_mut().unwrap() += inner;
                }
                // An item ends with its `}`: the next item starts a new count.
                if bytes[i] == b'}' && ops.len() == 1 {
                    ops[0] = 0;
                }
            }
            b';' => *ops.last_mut().unwrap() = 0,
            b'+' | b'-' | b'*' | b'/' | b'%' | b'&' | b'|' | b'^' | b'<' | b'>' | b'!' | b'.' => {
                *ops.last_mut().unwrap() += 1;
                if ops.iter().sum::<usize>() > MAX_OPERATORS {
                    return Err(vec![
                        Diagnostic::error(Span::new(i, i + 1), "statement too long")
                            .label(format!("more than {MAX_OPERATORS} operators in one statement"))
                            .help("split the expression with `let` bindings"),
                    ]);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

fn syntax_error(source: &str, e: pest::error::Error<Rule>) -> Diagnostic {
    use pest::error::{ErrorVariant, InputLocation};
    let pos = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    let found = token_at(source, pos);
    let end = pos + found.len().max(if pos < source.len() { 1 } else { 0 });
    let span = Span::new(pos, end.min(source.len()));
    let brackets = scan_brackets(source, pos);
    let line_of = |at: usize| source[..at.min(source.len())].matches('\n').count() + 1;
    // A `/*` that is never closed swallows the rest of the file; pest stops at the `/*`.
    if let Some(c) = brackets.open_comment
        && c >= pos
        && source[pos..c].trim().is_empty()
    {
        return Diagnostic::error(Span::new(c, c + 2), "unterminated block comment")
            .label("this comment is never closed")
            .help("close it with `*/`");
    }
    // A string that never ends on its line.
    if source[pos..].starts_with('"') && !string_closed(&source[pos..]) {
        let end = source[pos..].find('\n').map_or(source.len(), |i| pos + i);
        return Diagnostic::error(Span::new(pos, end), "unterminated string")
            .label("this string has no closing `\"`")
            .help("strings end on the line they start");
    }
    // Only punctuation could follow further on than the rules reached (`f(x: *f32 {`):
    // report there, naming that punctuation.
    if let Some(att) = e.parse_attempts()
        && att.max_position > pos
        && att.max_position <= source.len()
    {
        let mut toks: Vec<String> = att
            .expected_tokens()
            .iter()
            .map(|t| t.to_string())
            .filter(|t| !matches!(t.as_str(), " " | "\t" | "\n" | "\r" | "//" | "/*"))
            .collect();
        toks.dedup();
        if !toks.is_empty()
            && toks
                .iter()
                .all(|t| !t.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
            && toks.len() <= 4
        {
            let at = att.max_position;
            let f = token_at(source, at);
            let span = Span::new(at, (at + f.len().max(1)).min(source.len()));
            let names: Vec<String> = toks.iter().map(|t| format!("`{t}`")).collect();
            let expected = match names.len() {
                1 => names[0].clone(),
                n => format!("{} or {}", names[..n - 1].join(", "), names[n - 1]),
            };
            let what = if f.is_empty() {
                "end of file".to_string()
            } else {
                format!("`{f}`")
            };
            return Diagnostic::error(span, format!("expected {expected}, found {what}"))
                .label(format!("expected {expected}"));
        }
    }
    match e.variant {
        ErrorVariant::ParsingError {
            positives,
            negatives: _,
        } => {
            let mut names: Vec<&str> = positives.iter().filter_map(|r| rule_name(*r)).collect();
            names.sort();
            names.dedup();
            // What closes the innermost open bracket is also valid where an expression could end.
            let inner = brackets.open.last().map(|(c, _)| *c);
            let line_start = source[..pos].rfind('\n').map_or(0, |i| i + 1);
            let in_for_header =
                source[line_start..pos].trim_start().starts_with("for ") && !source[line_start..pos].contains("..");
            if names.contains(&"an operator") {
                names.retain(|n| *n != "`.` or `[`");
                if in_for_header {
                    names = vec!["`..`"];
                } else if !names.contains(&"`{`") {
                    let more: &[&str] = match inner {
                        Some(b'(') => &["`,`", "`)`"],
                        Some(b'[') => &["`,`", "`]`"],
                        _ => &["`;`"],
                    };
                    names.splice(0..0, more.iter().copied());
                }
            }
            if names.contains(&"a statement") && inner == Some(b'{') {
                names = vec!["a statement", "`}`"];
            }
            let expected = match names.len() {
                0 => "valid syntax".to_string(),
                1 => names[0].to_string(),
                n => format!("{} or {}", names[..n - 1].join(", "), names[n - 1]),
            };
            let what = if found.is_empty() {
                "end of file".to_string()
            } else {
                format!("`{found}`")
            };
            // End of file inside brackets: name the bracket that is still open.
            if found.is_empty()
                && let Some(&(open, at)) = brackets.open.last()
            {
                let close = match open {
                    b'(' => ')',
                    b'[' => ']',
                    _ => '}',
                };
                let open = open as char;
                let mut d = Diagnostic::error(span, format!("expected `{close}`, found end of file"))
                    .label(format!("expected `{close}`"))
                    .with(Span::new(at, at + 1), format!("this `{open}` is never closed"));
                if let Some((c, o)) = brackets.misindented {
                    d = d.with(
                        Span::new(c, c + 1),
                        format!(
                            "this `{close}` closes the `{open}` on line {}; is a `{close}` missing before it?",
                            line_of(o)
                        ),
                    );
                }
                return d;
            }
            if !found.is_empty()
                && !found.starts_with(|c: char| {
                    c.is_alphanumeric() || c.is_whitespace() || "_+-*/%&|^<>=!.,;:()[]{}#\"".contains(c)
                })
            {
                return Diagnostic::error(span, format!("unexpected character `{found}`"))
                    .label(format!("expected {expected}"))
                    .note(format!("`{found}` is not part of the language"));
            }
            let mut d = Diagnostic::error(span, format!("expected {expected}, found {what}"))
                .label(format!("expected {expected}"));
            let before = source[..pos].trim_end();
            let prev_word = &before[before.trim_end_matches(|c: char| c.is_alphanumeric() || c == '_').len()..];
            if found == "="
                && inner == Some(b'(')
                && !prev_word.is_empty()
                && names.iter().any(|n| n.contains("operator"))
            {
                d = d.help(format!(
                    "named arguments are written with `:`, as in `{prev_word}: value`; `==` compares"
                ));
            } else if found == "=" && names.iter().any(|n| n.contains("operator")) {
                d = d.help("`==` compares; `=` only appears in `let` and assignments");
            }
            if in_for_header {
                d = d.help("a loop runs over a range: `for i in 0..n`, or with a step `for i in (0..n).step_by(s)`");
            }
            if found == "." {
                d = d.help(if prev_word == "tl" {
                    "there is no `tl` module: built-ins and dtypes are used directly, as in `arange(..)` and `f16`"
                } else {
                    "after `.` comes a method call, as in `x.to(f16)`"
                });
            }
            if names == ["`:` or `None`"] {
                d = d.note("tiles cannot be indexed by position: an index keeps an axis with `:` or adds one with `None`, as in `x[:, None]`")
                    .help("to read one element, load it on its own: `load(ptr + i)`");
            }
            if names == ["`{`"] && found == ";" {
                d = d.help("a kernel or function needs a body in braces: `{ ... }`");
            }
            let prev_end = source[..pos].trim_end().len();
            if names.first() == Some(&"`;`") && prev_end > 0 && line_of(prev_end) < line_of(pos) {
                d = d.help(format!("is a `;` missing at the end of line {}?", line_of(prev_end)));
            } else if matches!(found, "kernel" | "fn" | "run") && inner == Some(b'{') {
                let (_, at) = *brackets.open.last().unwrap();
                d = d
                    .with(
                        Span::new(at, at + 1),
                        format!("the `{{` on line {} is still open here", line_of(at)),
                    )
                    .help("is a `}` missing before this item?");
            }
            d
        }
        ErrorVariant::CustomError { message } => {
            Diagnostic::error(span, format!("syntax error: {message}")).label("here")
        }
    }
}

/// Brackets still open at a position, for syntax errors.
struct Brackets {
    /// Unclosed brackets before the position, outermost first: the bracket and its offset.
    open: Vec<(u8, usize)>,
    /// The last closing brace that is first on its line but indented unlike the line of the
    /// brace it closes: (its offset, the opener's offset). Often the brace meant for another block.
    misindented: Option<(usize, usize)>,
    /// The offset of a `/*` never closed, if any (anywhere in the file).
    open_comment: Option<usize>,
}

/// Scans `source` for brackets open at `pos`, skipping comments and strings.
fn scan_brackets(source: &str, pos: usize) -> Brackets {
    let bytes = source.as_bytes();
    let indent = |at: usize| {
        let start = source[..at].rfind('\n').map_or(0, |i| i + 1);
        let line = &source[start..];
        line.len() - line.trim_start_matches([' ', '\t']).len()
    };
    let first_on_line = |at: usize| source[..at].rsplit('\n').next().is_some_and(|l| l.trim().is_empty());
    let mut out = Brackets {
        open: Vec::new(),
        misindented: None,
        open_comment: None,
    };
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => match source[i + 2..].find("*/") {
                Some(k) => i += 2 + k + 1,
                None => {
                    out.open_comment = Some(i);
                    break;
                }
            },
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            c @ (b'(' | b'[' | b'{') if i < pos => out.open.push((c, i)),
            b')' | b']' | b'}' if i < pos => {
                if let Some((o, at)) = out.open.pop()
                    && o == b'{'
                    && bytes[i] == b'}'
                    && first_on_line(i)
                    && indent(i) != indent(at)
                {
                    out.misindented = Some((i, at));
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Whether a string literal starting at the front of `s` ends on its line.
fn string_closed(s: &str) -> bool {
    let mut chars = s.chars().skip(1);
    while let Some(c) = chars.next() {
        match c {
            '"' => return true,
            '\n' => return false,
            '\\' => {
                chars.next();
            }
            _ => {}
        }
    }
    false
}

/// The token starting at `pos`, for "found `...`" in messages.
fn token_at(source: &str, pos: usize) -> &str {
    let Some(rest) = source.get(pos..) else {
        return "";
    };
    let mut chars = rest.char_indices();
    match chars.next() {
        None => "",
        Some((_, c)) if c.is_alphanumeric() || c == '_' => {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        }
        Some((_, c)) => &rest[..c.len_utf8()],
    }
}

/// The name a user reads for a grammar rule; `None` for rules that are noise in a message.
fn rule_name(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::EOI => "end of file",
        Rule::kernel | Rule::kw_kernel => "`kernel`",
        Rule::function | Rule::kw_fn => "`fn`",
        Rule::run_spec | Rule::kw_run => "`run`",
        Rule::attribute => "an attribute",
        Rule::ident => "a name",
        Rule::expr => "an expression",
        Rule::type_expr | Rule::ptr_type => "a type",
        Rule::block => "`{`",
        Rule::params | Rule::param => "a parameter",
        Rule::generics => "`<`",
        Rule::const_param => "`const`",
        Rule::const_default | Rule::const_choices => "`=` or `in`",
        Rule::let_stmt | Rule::for_stmt | Rule::if_stmt | Rule::assign_stmt | Rule::expr_stmt => "a statement",
        Rule::pattern | Rule::binding | Rule::tuple_pat | Rule::wildcard => "a pattern",
        Rule::assign_op => "an assignment operator",
        Rule::range | Rule::plain_range | Rule::stepped_range => "a range `a..b`",
        Rule::lor
        | Rule::land
        | Rule::shl
        | Rule::shr
        | Rule::le
        | Rule::ge
        | Rule::eq
        | Rule::ne
        | Rule::lt
        | Rule::gt
        | Rule::bor
        | Rule::bxor
        | Rule::band
        | Rule::add
        | Rule::sub
        | Rule::mul
        | Rule::div
        | Rule::rem => "an operator",
        Rule::method | Rule::index => "`.` or `[`",
        Rule::index_item | Rule::full_slice | Rule::kw_none => "`:` or `None`",
        Rule::args | Rule::arg => "an argument",
        Rule::float | Rule::int => "a number",
        Rule::string => "a string",
        Rule::kw_mut => "`mut`",
        _ => return None,
    })
}

fn pratt() -> PrattParser<Rule> {
    PrattParser::new()
        .op(Op::infix(Rule::lor, Assoc::Left))
        .op(Op::infix(Rule::land, Assoc::Left))
        .op(Op::infix(Rule::eq, Assoc::Left)
            | Op::infix(Rule::ne, Assoc::Left)
            | Op::infix(Rule::lt, Assoc::Left)
            | Op::infix(Rule::le, Assoc::Left)
            | Op::infix(Rule::gt, Assoc::Left)
            | Op::infix(Rule::ge, Assoc::Left))
        .op(Op::infix(Rule::bor, Assoc::Left))
        .op(Op::infix(Rule::bxor, Assoc::Left))
        .op(Op::infix(Rule::band, Assoc::Left))
        .op(Op::infix(Rule::shl, Assoc::Left) | Op::infix(Rule::shr, Assoc::Left))
        .op(Op::infix(Rule::add, Assoc::Left) | Op::infix(Rule::sub, Assoc::Left))
        .op(Op::infix(Rule::mul, Assoc::Left) | Op::infix(Rule::div, Assoc::Left) | Op::infix(Rule::rem, Assoc::Left))
        .op(Op::prefix(Rule::neg) | Op::prefix(Rule::not))
        .op(Op::postfix(Rule::method) | Op::postfix(Rule::index))
}

/// Keyword tokens carry no information once the rule that holds them has matched.
fn is_keyword(r: Rule) -> bool {
    matches!(
        r,
        Rule::kw_kernel
            | Rule::kw_fn
            | Rule::kw_let
            | Rule::kw_for
            | Rule::kw_in
            | Rule::kw_if
            | Rule::kw_else
            | Rule::kw_const
            | Rule::kw_run
    )
}

/// The children of a pair, keywords left out.
fn kids(p: Pair<'_, Rule>) -> impl Iterator<Item = Pair<'_, Rule>> {
    p.into_inner().filter(|k| !is_keyword(k.as_rule()))
}

fn span_of(p: &Pair<Rule>) -> Span {
    let s = p.as_span();
    Span::new(s.start(), s.end())
}

static PRATT: std::sync::LazyLock<PrattParser<Rule>> = std::sync::LazyLock::new(pratt);

struct Builder;

impl Builder {
    fn ident(&self, p: Pair<Rule>) -> Ident {
        Ident {
            name: p.as_str().to_string(),
            span: span_of(&p),
        }
    }

    fn attribute(&mut self, p: Pair<Rule>) -> Attribute {
        let span = span_of(&p);
        let mut it = kids(p);
        let name = self.ident(it.next().unwrap());
        let args = it.map(|e| self.expr(e)).collect();
        Attribute { name, args, span }
    }

    fn fn_def(&mut self, p: Pair<Rule>) -> FnDef {
        let span = span_of(&p);
        let mut attrs = Vec::new();
        let mut name = None;
        let mut consts = Vec::new();
        let mut params = Vec::new();
        let mut ret = None;
        let mut body = None;
        for c in kids(p) {
            match c.as_rule() {
                Rule::attribute => attrs.push(self.attribute(c)),
                Rule::ident => name = Some(self.ident(c)),
                Rule::generics => consts = kids(c).map(|cp| self.const_param(cp)).collect(),
                Rule::params => params = kids(c).map(|pp| self.param(pp)).collect(),
                Rule::ret_type => ret = Some(self.type_expr(kids(c).next().unwrap())),
                Rule::block => body = Some(self.block(c)),
                _ => {}
            }
        }
        FnDef {
            attrs,
            name: name.unwrap(),
            consts,
            params,
            ret,
            body: body.unwrap(),
            span,
        }
    }

    fn const_param(&mut self, p: Pair<Rule>) -> ConstParam {
        let span = span_of(&p);
        let mut it = kids(p);
        let name = self.ident(it.next().unwrap());
        let ty = self.type_expr(it.next().unwrap());
        let value = match it.next() {
            None => ConstValueSpec::Required,
            Some(v) if v.as_rule() == Rule::const_default => {
                ConstValueSpec::Default(self.expr(kids(v).next().unwrap()))
            }
            Some(v) => ConstValueSpec::Choices(kids(v).map(|e| self.expr(e)).collect()),
        };
        ConstParam { name, ty, value, span }
    }

    fn param(&mut self, p: Pair<Rule>) -> Param {
        let span = span_of(&p);
        let mut it = kids(p);
        let name = self.ident(it.next().unwrap());
        let ty = it.next().map(|t| self.type_expr(t));
        Param { name, ty, span }
    }

    fn type_expr(&mut self, p: Pair<Rule>) -> TypeExpr {
        let inner = kids(p).next().unwrap();
        match inner.as_rule() {
            Rule::ident => TypeExpr::Named(self.ident(inner)),
            _ => {
                let span = span_of(&inner);
                let mut mutable = false;
                let mut pointee = None;
                for c in kids(inner) {
                    match c.as_rule() {
                        Rule::kw_mut => mutable = true,
                        _ => pointee = Some(self.type_expr(c)),
                    }
                }
                TypeExpr::Ptr {
                    mutable,
                    pointee: Box::new(pointee.unwrap()),
                    span,
                }
            }
        }
    }

    fn run_spec(&mut self, p: Pair<Rule>) -> RunSpec {
        let span = span_of(&p);
        let mut it = kids(p);
        let kernel = self.ident(it.next().unwrap());
        let body = self.block(it.next().unwrap());
        RunSpec { kernel, body, span }
    }

    fn block(&mut self, p: Pair<Rule>) -> Block {
        let span = span_of(&p);
        let mut stmts = Vec::new();
        let mut tail = None;
        for c in kids(p) {
            match c.as_rule() {
                Rule::empty_stmt => {}
                _ => stmts.push(self.stmt(c)),
            }
        }
        // A final expression without `;` (an `if`, or any expression before `}`) is the value.
        if tail.is_none()
            && let Some(Stmt::Expr { semi: false, .. }) = stmts.last()
            && let Some(Stmt::Expr { expr, .. }) = stmts.pop()
        {
            tail = Some(Box::new(expr));
        }
        Block { stmts, tail, span }
    }

    fn stmt(&mut self, p: Pair<Rule>) -> Stmt {
        let span = span_of(&p);
        match p.as_rule() {
            Rule::let_stmt => {
                let mut pattern = None;
                let mut ty = None;
                let mut value = None;
                for c in kids(p) {
                    match c.as_rule() {
                        Rule::pattern => pattern = Some(self.pattern(c)),
                        Rule::type_expr => ty = Some(self.type_expr(c)),
                        _ => value = Some(self.expr(c)),
                    }
                }
                Stmt::Let {
                    pattern: pattern.unwrap(),
                    ty,
                    value: value.unwrap(),
                    span,
                }
            }
            Rule::assign_stmt => {
                let mut it = kids(p);
                let target = self.ident(it.next().unwrap());
                let op = match it.next().unwrap().as_str() {
                    "=" => None,
                    "+=" => Some(BinOp::Add),
                    "-=" => Some(BinOp::Sub),
                    "*=" => Some(BinOp::Mul),
                    "/=" => Some(BinOp::Div),
                    "%=" => Some(BinOp::Rem),
                    "&=" => Some(BinOp::BitAnd),
                    "|=" => Some(BinOp::BitOr),
                    "^=" => Some(BinOp::BitXor),
                    "<<=" => Some(BinOp::Shl),
                    ">>=" => Some(BinOp::Shr),
                    other => unreachable!("assign_op matched `{other}`"),
                };
                let value = self.expr(it.next().unwrap());
                Stmt::Assign {
                    target,
                    op,
                    value,
                    span,
                }
            }
            Rule::for_stmt => {
                let mut attrs = Vec::new();
                let mut var = None;
                let mut range = None;
                let mut body = None;
                for c in kids(p) {
                    match c.as_rule() {
                        Rule::attribute => attrs.push(self.attribute(c)),
                        Rule::ident => var = Some(self.ident(c)),
                        Rule::range => range = Some(c),
                        _ => body = Some(self.block(c)),
                    }
                }
                let r = kids(range.unwrap()).next().unwrap();
                let mut e = kids(r).map(|x| self.expr(x));
                let start = e.next().unwrap();
                let end = e.next().unwrap();
                let step = e.next();
                Stmt::For(ForLoop {
                    attrs,
                    var: var.unwrap(),
                    start,
                    end,
                    step,
                    body: body.unwrap(),
                    span,
                })
            }
            Rule::if_stmt => {
                let semi = p.as_str().trim_end().ends_with(';');
                let expr = self.if_expr(kids(p).next().unwrap());
                Stmt::Expr { expr, semi, span }
            }
            _ => {
                // `expr_stmt`: a `;` or, before the block's `}`, none (then it is the tail).
                let semi = p.as_str().trim_end().ends_with(';');
                let expr = self.expr(kids(p).next().unwrap());
                Stmt::Expr { expr, semi, span }
            }
        }
    }

    fn pattern(&mut self, p: Pair<Rule>) -> Pattern {
        let inner = kids(p).next().unwrap();
        let span = span_of(&inner);
        match inner.as_rule() {
            Rule::tuple_pat => Pattern::Tuple {
                items: kids(inner).map(|c| self.pattern(c)).collect(),
                span,
            },
            Rule::wildcard => Pattern::Wildcard(span),
            _ => {
                let mut mutable = false;
                let mut name = None;
                for c in kids(inner) {
                    match c.as_rule() {
                        Rule::kw_mut => mutable = true,
                        _ => name = Some(self.ident(c)),
                    }
                }
                Pattern::Bind {
                    name: name.unwrap(),
                    mutable,
                }
            }
        }
    }

    fn if_expr(&mut self, p: Pair<Rule>) -> Expr {
        let span = span_of(&p);
        let mut it = kids(p);
        let cond = Box::new(self.expr(it.next().unwrap()));
        let then = self.block(it.next().unwrap());
        let els = it.next().map(|e| {
            Box::new(match e.as_rule() {
                Rule::if_expr => self.if_expr(e),
                _ => {
                    let b = self.block(e);
                    Expr {
                        span: b.span,
                        kind: ExprKind::Block(b),
                    }
                }
            })
        });
        Expr {
            kind: ExprKind::If { cond, then, els },
            span,
        }
    }

    fn args(&mut self, p: Pair<Rule>) -> Vec<Arg> {
        kids(p)
            .map(|a| {
                let mut it = kids(a);
                let first = it.next().unwrap();
                match it.next() {
                    Some(v) => Arg {
                        name: Some(self.ident(first)),
                        value: self.expr(v),
                    },
                    None => Arg {
                        name: None,
                        value: self.expr(first),
                    },
                }
            })
            .collect()
    }

    fn expr(&mut self, p: Pair<Rule>) -> Expr {
        let pairs = p.into_inner();
        self.expr_pairs(pairs)
    }

    fn expr_pairs(&mut self, pairs: Pairs<Rule>) -> Expr {
        // The Pratt parser's closures each need the builder; they run one at a time.
        let this = std::cell::RefCell::new(self);
        PRATT
            .map_primary(|p| this.borrow_mut().primary(p))
            .map_prefix(|op, rhs| {
                let span = span_of(&op).to(rhs.span);
                let u = if op.as_rule() == Rule::neg {
                    UnOp::Neg
                } else {
                    UnOp::Not
                };
                Expr {
                    kind: ExprKind::Unary(u, Box::new(rhs)),
                    span,
                }
            })
            .map_postfix(|lhs, op| {
                let span = lhs.span.to(span_of(&op));
                match op.as_rule() {
                    Rule::method => {
                        let mut it = kids(op);
                        let mut b = this.borrow_mut();
                        let name = b.ident(it.next().unwrap());
                        let args = b.args(it.next().unwrap());
                        Expr {
                            kind: ExprKind::Method {
                                recv: Box::new(lhs),
                                name,
                                args,
                            },
                            span,
                        }
                    }
                    _ => {
                        let items = kids(op)
                            .map(|i| {
                                let c = kids(i).next().unwrap();
                                if c.as_rule() == Rule::full_slice {
                                    IndexItem::Full(span_of(&c))
                                } else {
                                    IndexItem::NewAxis(span_of(&c))
                                }
                            })
                            .collect();
                        Expr {
                            kind: ExprKind::Index {
                                base: Box::new(lhs),
                                items,
                            },
                            span,
                        }
                    }
                }
            })
            .map_infix(|lhs, op, rhs| {
                let span = lhs.span.to(rhs.span);
                let b = match op.as_rule() {
                    Rule::lor => BinOp::LogicOr,
                    Rule::land => BinOp::LogicAnd,
                    Rule::shl => BinOp::Shl,
                    Rule::shr => BinOp::Shr,
                    Rule::le => BinOp::Le,
                    Rule::ge => BinOp::Ge,
                    Rule::eq => BinOp::Eq,
                    Rule::ne => BinOp::Ne,
                    Rule::lt => BinOp::Lt,
                    Rule::gt => BinOp::Gt,
                    Rule::bor => BinOp::BitOr,
                    Rule::bxor => BinOp::BitXor,
                    Rule::band => BinOp::BitAnd,
                    Rule::add => BinOp::Add,
                    Rule::sub => BinOp::Sub,
                    Rule::mul => BinOp::Mul,
                    Rule::div => BinOp::Div,
                    _ => BinOp::Rem,
                };
                Expr {
                    kind: ExprKind::Binary(b, Box::new(lhs), Box::new(rhs)),
                    span,
                }
            })
            .parse(pairs)
    }

    fn primary(&mut self, p: Pair<Rule>) -> Expr {
        let span = span_of(&p);
        let kind = match p.as_rule() {
            Rule::int => ExprKind::Int(parse_int(p.as_str())),
            Rule::float => ExprKind::Float(p.as_str().replace('_', "").parse().unwrap_or(f64::NAN)),
            Rule::boolean => ExprKind::Bool(p.as_str() == "true"),
            Rule::string => ExprKind::Str(unescape(p.as_str())),
            Rule::ident => ExprKind::Name(p.as_str().to_string()),
            Rule::call => {
                let mut it = kids(p);
                let func = self.ident(it.next().unwrap());
                let args = self.args(it.next().unwrap());
                ExprKind::Call { func, args }
            }
            Rule::paren => {
                let has_comma = kids(p.clone()).any(|k| k.as_rule() == Rule::comma);
                let mut items: Vec<Expr> = kids(p)
                    .filter(|k| k.as_rule() == Rule::expr)
                    .map(|e| self.expr(e))
                    .collect();
                if has_comma {
                    ExprKind::Tuple(items)
                } else {
                    ExprKind::Paren(Box::new(items.remove(0)))
                }
            }
            Rule::list => ExprKind::List(kids(p).map(|e| self.expr(e)).collect()),
            Rule::if_expr => return self.if_expr(p),
            r => unreachable!("primary rule {r:?}"),
        };
        Expr { kind, span }
    }
}

/// Integer literal value; values beyond u128 saturate (the checker reports them as too large).
fn parse_int(text: &str) -> u128 {
    let t = text.replace('_', "");
    let (digits, radix) = if let Some(h) = t.strip_prefix("0x") {
        (h.to_string(), 16)
    } else if let Some(b) = t.strip_prefix("0b") {
        (b.to_string(), 2)
    } else {
        (t, 10)
    };
    u128::from_str_radix(&digits, radix).unwrap_or(u128::MAX)
}

fn unescape(quoted: &str) -> String {
    let inner = &quoted[1..quoted.len() - 1];
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}
