//! Parses the IR text form back into a [`Kernel`]. The result is verified before it is returned.

use std::collections::HashMap;

use super::print::attrs;
use super::*;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Value(u32),
    Ident(String),
    Int(i64),
    Float(f64),
    Str(String),
    Punct(char),
    /// `@line:col`
    Loc(u32, u32),
}

struct Lexer;

impl Lexer {
    fn lex(src: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
        let mut out = Vec::new();
        let b = src.as_bytes();
        let mut i = 0;
        let mut line = 1;
        let err = |line, m: String| ParseError { line, message: m };
        while i < b.len() {
            let c = b[i] as char;
            if c == '\n' {
                line += 1;
                i += 1;
            } else if c.is_ascii_whitespace() {
                i += 1;
            } else if c == '%' || (c == '@' && b.get(i + 1).is_some_and(|x| x.is_ascii_digit())) {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && (b[j].is_ascii_digit() || (c == '@' && b[j] == b':')) {
                    j += 1;
                }
                let text = &src[start..j];
                if c == '%' {
                    let v = text
                        .parse()
                        .map_err(|_| err(line, format!("bad value name `%{text}`")))?;
                    out.push((Tok::Value(v), line));
                } else {
                    let (l, col) = text
                        .split_once(':')
                        .and_then(|(l, c)| Some((l.parse().ok()?, c.parse().ok()?)))
                        .ok_or_else(|| err(line, format!("bad location `@{text}`")))?;
                    out.push((Tok::Loc(l, col), line));
                }
                i = j;
            } else if c == '"' {
                let mut s = String::new();
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err(err(line, "unterminated string".into())),
                        Some(b'"') => break,
                        Some(b'\\') => {
                            match b.get(i + 1) {
                                Some(b'n') => s.push('\n'),
                                Some(b't') => s.push('\t'),
                                Some(&o) => s.push(o as char),
                                None => return Err(err(line, "unterminated string".into())),
                            }
                            i += 2;
                        }
                        Some(_) => {
                            let ch = src[i..].chars().next().unwrap();
                            s.push(ch);
                            i += ch.len_utf8();
                        }
                    }
                }
                i += 1;
                out.push((Tok::Str(s), line));
            } else if c.is_ascii_digit() || (c == '-' && b.get(i + 1).is_some_and(|x| x.is_ascii_alphanumeric())) {
                let start = i;
                i += 1;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || b[i] == b'.'
                        || ((b[i] == b'-' || b[i] == b'+') && matches!(b[i - 1], b'e' | b'E')))
                {
                    i += 1;
                }
                let text = &src[start..i];
                if let Ok(v) = text.parse::<i64>() {
                    out.push((Tok::Int(v), line));
                } else if let Some(v) = parse_float(text) {
                    out.push((Tok::Float(v), line));
                } else {
                    return Err(err(line, format!("bad number `{text}`")));
                }
            } else if c.is_ascii_alphabetic() || c == '_' {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                out.push((Tok::Ident(src[start..i].to_string()), line));
            } else {
                out.push((Tok::Punct(c), line));
                i += c.len_utf8();
            }
        }
        Ok(out)
    }
}

fn parse_float(t: &str) -> Option<f64> {
    match t {
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => t.parse().ok(),
    }
}

/// Parses one kernel in the text form printed by `Display for Kernel`.
pub fn parse_kernel(src: &str) -> Result<Kernel, ParseError> {
    let toks = Lexer::lex(src)?;
    let mut p = P {
        toks,
        pos: 0,
        types: HashMap::new(),
    };
    let k = p.kernel()?;
    if p.pos != p.toks.len() {
        return Err(p.err("text after the kernel's closing brace"));
    }
    verify(&k).map_err(|e| ParseError {
        line: 0,
        message: e.to_string(),
    })?;
    Ok(k)
}

struct P {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    types: HashMap<u32, Type>,
}

impl P {
    fn err(&self, m: impl Into<String>) -> ParseError {
        let line = self.toks.get(self.pos).or(self.toks.last()).map_or(0, |t| t.1);
        ParseError {
            line,
            message: m.into(),
        }
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    fn next(&mut self) -> Result<Tok, ParseError> {
        let t = self
            .toks
            .get(self.pos)
            .map(|t| t.0.clone())
            .ok_or_else(|| self.err("unexpected end of text"))?;
        self.pos += 1;
        Ok(t)
    }

    fn is_punct(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Punct(c))
    }

    fn eat_punct(&mut self, c: char) -> bool {
        if self.is_punct(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect_punct(&mut self, c: char) -> Result<(), ParseError> {
        if self.eat_punct(c) {
            Ok(())
        } else {
            Err(self.err(format!("expected `{c}`, found {:?}", self.peek())))
        }
    }

    fn ident(&mut self) -> Result<String, ParseError> {
        match self.next()? {
            Tok::Ident(s) => Ok(s),
            t => Err(self.err(format!("expected a name, found {t:?}"))),
        }
    }

    fn expect_ident(&mut self, want: &str) -> Result<(), ParseError> {
        let s = self.ident()?;
        if s == want {
            Ok(())
        } else {
            Err(self.err(format!("expected `{want}`, found `{s}`")))
        }
    }

    fn int(&mut self) -> Result<i64, ParseError> {
        match self.next()? {
            Tok::Int(v) => Ok(v),
            t => Err(self.err(format!("expected an integer, found {t:?}"))),
        }
    }

    fn value(&mut self) -> Result<ValueId, ParseError> {
        match self.next()? {
            Tok::Value(v) => Ok(ValueId(v)),
            t => Err(self.err(format!("expected a value `%N`, found {t:?}"))),
        }
    }

    fn define(&mut self, v: ValueId, t: Type) -> Result<(), ParseError> {
        if self.types.insert(v.0, t).is_some() {
            return Err(self.err(format!("%{} is defined twice", v.0)));
        }
        Ok(())
    }

    fn elem(&mut self) -> Result<Elem, ParseError> {
        if self.eat_punct('*') {
            let mutable = if self.peek() == Some(&Tok::Ident("mut".into())) {
                self.pos += 1;
                true
            } else {
                false
            };
            let d = self.dtype()?;
            return Ok(Elem::Ptr { pointee: d, mutable });
        }
        Ok(Elem::Scalar(self.dtype()?))
    }

    fn dtype(&mut self) -> Result<DType, ParseError> {
        let n = self.ident()?;
        DType::from_name(&n).ok_or_else(|| self.err(format!("unknown dtype `{n}`")))
    }

    fn ty(&mut self) -> Result<Type, ParseError> {
        let elem = if self.eat_punct('(') {
            let e = self.elem()?;
            self.expect_punct(')')?;
            e
        } else {
            self.elem()?
        };
        let mut shape = Vec::new();
        if self.eat_punct('[') {
            loop {
                let d = self.int()?;
                shape.push(usize::try_from(d).map_err(|_| self.err("negative dimension"))?);
                if !self.eat_punct(',') {
                    break;
                }
            }
            self.expect_punct(']')?;
        }
        Ok(Type { elem, shape })
    }

    fn u32_list(&mut self) -> Result<Vec<u32>, ParseError> {
        self.expect_punct('(')?;
        let mut v = Vec::new();
        while !self.eat_punct(')') {
            v.push(u32::try_from(self.int()?).map_err(|_| self.err("value out of range"))?);
            self.eat_punct(',');
        }
        Ok(v)
    }

    fn kernel(&mut self) -> Result<Kernel, ParseError> {
        self.expect_ident("kernel")?;
        self.expect_punct('@')?;
        let name = self.ident()?;
        self.expect_punct('(')?;
        let mut params = Vec::new();
        while !self.eat_punct(')') {
            let pname = self.ident()?;
            let v = self.value()?;
            self.expect_punct(':')?;
            let elem = self.elem()?;
            self.define(v, Type { elem, shape: vec![] })?;
            params.push(KernelParam {
                name: pname,
                elem,
                value: v,
                specialize: true,
            });
            self.eat_punct(',');
        }
        let mut consts = Vec::new();
        let mut warps = Vec::new();
        let mut stages = Vec::new();
        let mut cluster = 1;
        while let Some(Tok::Ident(word)) = self.peek().cloned() {
            self.pos += 1;
            match word.as_str() {
                "consts" => {
                    self.expect_punct('(')?;
                    while !self.eat_punct(')') {
                        let n = self.ident()?;
                        self.expect_punct('=')?;
                        consts.push((n, self.const_value(None)?));
                        self.eat_punct(',');
                    }
                }
                "warps" => warps = self.u32_list()?,
                "stages" => stages = self.u32_list()?,
                "cluster" => match self.u32_list()?.as_slice() {
                    [n] => cluster = *n,
                    _ => return Err(self.err("`cluster` takes one size".to_string())),
                },
                "no_specialize" => {
                    self.expect_punct('(')?;
                    while !self.eat_punct(')') {
                        let n = self.ident()?;
                        let p = params.iter_mut().find(|p| p.name == n).ok_or_else(|| {
                            self.err(format!("`no_specialize` names `{n}`, which is not a parameter"))
                        })?;
                        p.specialize = false;
                        self.eat_punct(',');
                    }
                }
                w => return Err(self.err(format!("unexpected `{w}` in the kernel header"))),
            }
        }
        let body = self.region_body(vec![])?;
        let n = self.types.keys().max().map_or(0, |m| m + 1);
        let mut values = Vec::with_capacity(n as usize);
        for i in 0..n {
            let t = self
                .types
                .remove(&i)
                .ok_or_else(|| self.err(format!("%{i} is never defined")))?;
            values.push(t);
        }
        Ok(Kernel {
            name,
            params,
            consts,
            warps,
            stages,
            cluster,
            body,
            values,
        })
    }

    /// A constant: an int, float, bool or dtype; `ty` disambiguates ints from floats.
    fn const_value(&mut self, ty: Option<DType>) -> Result<ConstValue, ParseError> {
        Ok(match self.next()? {
            Tok::Int(v) if ty.is_some_and(|d| d.is_float()) => ConstValue::Float(v as f64),
            Tok::Int(v) => ConstValue::Int(v),
            Tok::Float(v) => ConstValue::Float(v),
            Tok::Ident(s) if s == "true" || s == "false" => ConstValue::Bool(s == "true"),
            Tok::Ident(s) => match parse_float(&s) {
                Some(f) => ConstValue::Float(f),
                None => ConstValue::DType(DType::from_name(&s).ok_or_else(|| self.err(format!("bad constant `{s}`")))?),
            },
            t => return Err(self.err(format!("expected a constant, found {t:?}"))),
        })
    }

    /// `{` ops `}` where the opening brace is next.
    fn region_body(&mut self, args: Vec<ValueId>) -> Result<Region, ParseError> {
        self.expect_punct('{')?;
        let mut ops = Vec::new();
        while !self.eat_punct('}') {
            ops.push(self.op()?);
        }
        Ok(Region { args, ops })
    }

    /// A nested region: `{ ^(%a: T, ...): ops }`.
    fn region(&mut self) -> Result<Region, ParseError> {
        self.expect_punct('{')?;
        self.expect_punct('^')?;
        self.expect_punct('(')?;
        let mut args = Vec::new();
        while !self.eat_punct(')') {
            let v = self.value()?;
            self.expect_punct(':')?;
            let t = self.ty()?;
            self.define(v, t)?;
            args.push(v);
            self.eat_punct(',');
        }
        self.expect_punct(':')?;
        let mut ops = Vec::new();
        while !self.eat_punct('}') {
            ops.push(self.op()?);
        }
        Ok(Region { args, ops })
    }

    fn op(&mut self) -> Result<Op, ParseError> {
        let mut results = Vec::new();
        if matches!(self.peek(), Some(Tok::Value(_))) {
            loop {
                results.push(self.value()?);
                if !self.eat_punct(',') {
                    break;
                }
            }
            self.expect_punct('=')?;
        }
        let name = self.ident()?;
        let mut attr_toks: Vec<Tok> = Vec::new();
        if self.eat_punct('<') {
            let mut depth = 0;
            loop {
                let t = self.next()?;
                if t == Tok::Punct('>') && depth == 0 {
                    break;
                }
                if t == Tok::Punct('<') {
                    depth += 1;
                }
                if t == Tok::Punct('>') {
                    depth -= 1;
                }
                attr_toks.push(t);
            }
        }
        let mut operands = Vec::new();
        while matches!(self.peek(), Some(Tok::Value(_))) {
            operands.push(self.value()?);
            if !self.eat_punct(',') {
                break;
            }
        }
        let mut types = Vec::new();
        if self.eat_punct(':') {
            loop {
                types.push(self.ty()?);
                if !self.eat_punct(',') {
                    break;
                }
            }
        }
        if types.len() != results.len() {
            return Err(self.err(format!("{} results but {} types", results.len(), types.len())));
        }
        let first_dtype = types.first().and_then(|t| t.dtype());
        let kind = self.kind(&name, &attr_toks, first_dtype)?;
        for (v, t) in results.iter().zip(types) {
            self.define(*v, t)?;
        }
        let mut loc = Loc::default();
        if let Some(Tok::Loc(l, c)) = self.peek().cloned() {
            self.pos += 1;
            loc = Loc { line: l, col: c };
        }
        let mut regions = Vec::new();
        while self.is_punct('{') {
            regions.push(self.region()?);
        }
        Ok(Op {
            kind,
            operands,
            results,
            regions,
            loc,
        })
    }

    /// Rebuilds an op kind from its name and `<..>` attribute tokens.
    fn kind(&self, name: &str, a: &[Tok], dtype: Option<DType>) -> Result<OpKind, ParseError> {
        let words: Vec<String> = a
            .iter()
            .filter(|t| **t != Tok::Punct(','))
            .map(|t| match t {
                Tok::Ident(s) | Tok::Str(s) => s.clone(),
                Tok::Int(v) => v.to_string(),
                Tok::Float(v) => fmt_float(*v),
                Tok::Punct(c) => c.to_string(),
                Tok::Value(v) => format!("%{v}"),
                Tok::Loc(l, c) => format!("@{l}:{c}"),
            })
            .collect();
        let bad = || self.err(format!("bad attributes <{}> for `{name}`", words.join(", ")));
        let num = |i: usize| -> Result<i64, ParseError> { words.get(i).and_then(|w| w.parse().ok()).ok_or_else(bad) };
        let has = |w: &str| words.iter().any(|x| x == w);
        // `evict_first` / `evict_last` among a load's or store's words; none is the default.
        let evict = || match words.iter().find_map(|w| w.strip_prefix("evict_")) {
            None => Ok(Evict::Normal),
            Some(e) => Evict::from_name(e).filter(|e| *e != Evict::Normal).ok_or_else(bad),
        };
        let string = || match a.first() {
            Some(Tok::Str(s)) => Ok(s.clone()),
            _ => Err(bad()),
        };
        let kind = match name {
            "const" => {
                let mut p = P {
                    toks: a.iter().map(|t| (t.clone(), 0)).collect(),
                    pos: 0,
                    types: HashMap::new(),
                };
                OpKind::Const(p.const_value(dtype)?)
            }
            "program_id" => OpKind::ProgramId(num(0)? as u8),
            "num_programs" => OpKind::NumPrograms(num(0)? as u8),
            "arange" => OpKind::Arange {
                start: num(0)?,
                end: num(1)?,
            },
            "broadcast" => OpKind::Broadcast,
            "expand_dims" => OpKind::ExpandDims(num(0)? as usize),
            "reshape" => OpKind::Reshape,
            "permute" => OpKind::Permute(
                (0..words.len())
                    .map(|i| num(i).map(|v| v as usize))
                    .collect::<Result<_, _>>()?,
            ),
            "join" => OpKind::Join,
            "split" => OpKind::Split,
            "fma" => OpKind::Fma,
            "select" => OpKind::Select,
            "cast" => OpKind::Cast(Rounding::from_name(words.first().ok_or_else(bad)?).ok_or_else(bad)?),
            "bitcast" => OpKind::Bitcast,
            "ptr_add" => OpKind::PtrAdd,
            "load" => OpKind::Load {
                mask: has("mask"),
                other: has("other"),
                evict: evict()?,
            },
            "store" => OpKind::Store {
                mask: has("mask"),
                evict: evict()?,
            },
            "load_block" => OpKind::LoadBlock { rank: num(0)? as usize },
            "store_block" => OpKind::StoreBlock { rank: num(0)? as usize },
            "atomic" => OpKind::Atomic {
                op: AtomicOp::from_name(words.first().ok_or_else(bad)?).ok_or_else(bad)?,
                mask: has("mask"),
            },
            "atomic_cas" => OpKind::AtomicCas { mask: has("mask") },
            "dot" => OpKind::Dot(Precision::from_name(words.first().ok_or_else(bad)?).ok_or_else(bad)?),
            "reduce" => OpKind::Reduce {
                op: ReduceOp::from_name(words.first().ok_or_else(bad)?).ok_or_else(bad)?,
                axis: num(1)? as usize,
            },
            "argmax" | "argmin" => OpKind::ArgReduce {
                max: name == "argmax",
                axis: num(0)? as usize,
            },
            "cluster_reduce" => {
                OpKind::ClusterReduce(ReduceOp::from_name(words.first().ok_or_else(bad)?).ok_or_else(bad)?)
            }
            "cluster_reduce_with" => OpKind::ClusterReduceWith,
            "split_sum" => OpKind::SplitSum,
            "reduce_with" => OpKind::ReduceWith { axis: num(0)? as usize },
            "scan" => OpKind::Scan {
                op: ReduceOp::from_name(words.first().ok_or_else(bad)?).ok_or_else(bad)?,
                axis: num(1)? as usize,
                reverse: has("reverse"),
            },
            "scan_with" => OpKind::ScanWith {
                axis: num(0)? as usize,
                reverse: has("reverse"),
            },
            "for" => {
                // `key = value` pairs
                let value = |key: &str| {
                    words
                        .iter()
                        .position(|w| w == key)
                        .map(|i| words.get(i + 2).ok_or_else(bad))
                };
                let stages = value("stages")
                    .transpose()?
                    .map(|w| w.parse::<u32>().map_err(|_| bad()))
                    .transpose()?;
                let flag = |key: &str| match value(key).transpose()? {
                    None => Ok(None),
                    Some(w) if w == "true" => Ok(Some(true)),
                    Some(w) if w == "false" => Ok(Some(false)),
                    Some(_) => Err(bad()),
                };
                OpKind::For {
                    stages,
                    warp_specialize: flag("warp_specialize")?,
                    pingpong: flag("pingpong")?,
                }
            }
            "if" => OpKind::If,
            "yield" => OpKind::Yield,
            "multiple_of" => OpKind::MultipleOf(num(0)? as u64),
            "max_contiguous" => OpKind::MaxContiguous(num(0)? as u64),
            "print" => OpKind::Print(string()?),
            "assert" => OpKind::Assert(string()?),
            n => {
                if let Some(u) = UnaryOp::from_name(n) {
                    OpKind::Unary(u)
                } else if let Some(b) = BinaryOp::from_name(n) {
                    OpKind::Binary(b)
                } else if let Some(c) = CmpOp::from_name(n) {
                    OpKind::Cmp(c)
                } else {
                    return Err(self.err(format!("unknown op `{n}`")));
                }
            }
        };
        // Attributes must print back exactly as read.
        if attrs(&kind).len() != words.len()
            && !matches!(
                kind,
                OpKind::For { .. } | OpKind::Const(_) | OpKind::Print(_) | OpKind::Assert(_)
            )
        {
            return Err(bad());
        }
        Ok(kind)
    }
}
