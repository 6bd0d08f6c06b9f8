//! What a kernel computes from its launch and what it asks of it, both evaluated on the host
//! with the launch's integer arguments:
//!
//! - a compile-time value whose default is an expression of integer scalar parameters
//!   (`const BLOCK: i32 = next_pow2(n_cols)`) is *computed*: each launch evaluates it with its
//!   arguments (the JIT, `verify`, `bench`, the typed launchers), and a launch whose value
//!   differs gets a kernel compiled for that value;
//! - `#[requires(COND)]` or `#[requires(COND, "why")]` states what a launch must satisfy
//!   (`#[requires(n_cols <= BLOCK)]`); a launch that breaks it is an error naming the clause,
//!   before anything runs.
//!
//! Both are in the run-spec expression language (`crate::spec::eval`): numbers, the kernel's
//! integer scalar parameters and integer or bool compile-time values, `+ - * / %`,
//! comparisons, `&& || !`, `cdiv`, `min`, `max`, `next_pow2`. Where no launch is known
//! (`tilec check`, `tilec compile` without `--size`), every integer parameter counts as
//! [`UNLAUNCHED_INT`], the size the static model plans for without a run spec.

use crate::diag::Diagnostic;
use crate::ir::{ConstValue, DType};
use crate::spec::{self, Num};
use crate::syntax::ast::{self, Expr, ExprKind};

use super::Bindings;

/// What an integer parameter counts as where no launch gives it a value.
pub const UNLAUNCHED_INT: i64 = 4096;

/// A launch's integer scalar arguments, by parameter name (what computed compile-time values
/// and `#[requires(..)]` read, and what the static model plans for). A parameter without a
/// value counts as [`UNLAUNCHED_INT`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Sizes(pub Vec<(String, i64)>);

impl Sizes {
    /// The value of parameter `name`, if the launch gives one.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// The value `name` is evaluated with: the launch's, else [`UNLAUNCHED_INT`].
    pub fn value(&self, name: &str) -> i64 {
        self.get(name).unwrap_or(UNLAUNCHED_INT)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each size rounded to its bucket ([`bucket`]): what a plan made for these sizes is keyed by.
    pub fn bucketed(&self) -> Sizes {
        Sizes(self.0.iter().map(|(n, v)| (n.clone(), bucket(*v))).collect())
    }
}

impl std::fmt::Display for Sizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (n, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{n}={v}")?;
        }
        Ok(())
    }
}

/// The bucket of an integer argument: the next power of two, with 0, 1 and negative values
/// their own buckets (a length of 1 folds away; 0 and negatives launch no work or fail).
pub fn bucket(v: i64) -> i64 {
    if v <= 1 {
        v
    } else {
        (v as u64)
            .checked_next_power_of_two()
            .map_or(i64::MAX, |b| b.min(i64::MAX as u64) as i64)
    }
}

/// Whether parameter `p` is an integer scalar (what launch expressions may read).
pub fn is_int_param(p: &ast::Param) -> bool {
    matches!(&p.ty, Some(ast::TypeExpr::Named(t)) if DType::from_name(&t.name).is_some_and(|d| d.is_int()))
}

/// Whether compile-time value `c` is an integer or a bool (what launch expressions may read).
fn is_int_const(c: &ast::ConstParam) -> bool {
    matches!(&c.ty, ast::TypeExpr::Named(t) if t.name == "bool" || DType::from_name(&t.name).is_some_and(|d| d.is_int()))
}

/// Every name `e` reads.
fn names<'e>(e: &'e Expr, out: &mut Vec<&'e str>) {
    match &e.kind {
        ExprKind::Name(n) => out.push(n),
        ExprKind::Paren(x) | ExprKind::Unary(_, x) => names(x, out),
        ExprKind::Binary(_, a, b) => {
            names(a, out);
            names(b, out);
        }
        ExprKind::Call { args, .. } => args.iter().for_each(|a| names(&a.value, out)),
        _ => {}
    }
}

/// Whether `c`'s default is evaluated in the launch expression language rather than by the
/// checker: an expression that reads an integer scalar parameter of `def` (computed from the
/// launch), or one that calls `next_pow2`, which only that language has (`const BD: i32 =
/// next_pow2(D)`).
pub fn is_computed(def: &ast::FnDef, c: &ast::ConstParam) -> bool {
    let ast::ConstValueSpec::Default(e) = &c.value else {
        return false;
    };
    let mut read = Vec::new();
    names(e, &mut read);
    read.iter()
        .any(|n| def.params.iter().any(|p| p.name.name == *n && is_int_param(p)))
        || calls(e, "next_pow2")
}

/// Whether `e` calls function `f`.
fn calls(e: &Expr, f: &str) -> bool {
    match &e.kind {
        ExprKind::Call { func, args } => func.name == f || args.iter().any(|a| calls(&a.value, f)),
        ExprKind::Paren(x) | ExprKind::Unary(_, x) => calls(x, f),
        ExprKind::Binary(_, a, b) => calls(a, f) || calls(b, f),
        _ => false,
    }
}

/// Whether some computed compile-time value of `def` reads parameter `param`.
pub fn computed_read(def: &ast::FnDef, param: &str) -> bool {
    def.consts.iter().filter(|c| is_computed(def, c)).any(|c| {
        let ast::ConstValueSpec::Default(e) = &c.value else {
            return false;
        };
        let mut read = Vec::new();
        names(e, &mut read);
        read.contains(&param)
    })
}

/// The parameters `#[no_specialize(..)]` names (integer scalars, checked by [`check_forms`]):
/// the JIT neither specialises on their values (equal to 1, multiples of 16 or 8) nor plans
/// for their sizes, so that a value that changes at every launch (a decode step's token
/// count) compiles nothing new.
pub fn unspecialized(def: &ast::FnDef) -> Vec<&str> {
    def.attrs
        .iter()
        .filter(|a| a.name.name == "no_specialize")
        .flat_map(|a| &a.args)
        .filter_map(|e| match &e.kind {
            ExprKind::Name(n) => Some(n.as_str()),
            _ => None,
        })
        .collect()
}

/// The names of `def`'s computed compile-time values, in declaration order.
pub fn computed_names(def: &ast::FnDef) -> Vec<String> {
    def.consts
        .iter()
        .filter(|c| is_computed(def, c))
        .map(|c| c.name.name.clone())
        .collect()
}

/// What a launch expression of `def` may read, for the error on anything else.
const READABLE: &str = "an integer scalar parameter or an integer or bool compile-time value of the kernel";

/// Whether `name` is something a launch expression of `def` may read; `before` limits the
/// compile-time values to those declared before the one being defined.
fn readable(def: &ast::FnDef, name: &str, before: Option<usize>) -> bool {
    def.params.iter().any(|p| p.name.name == name && is_int_param(p))
        || def
            .consts
            .iter()
            .take(before.unwrap_or(usize::MAX))
            .any(|c| c.name.name == name && is_int_const(c))
}

/// Checks the form of computed defaults and `#[requires(..)]` clauses (names, operators), not
/// their values, which depend on the launch.
pub fn check_forms(def: &ast::FnDef) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, c) in def.consts.iter().enumerate() {
        if !is_computed(def, c) {
            continue;
        }
        let ast::ConstValueSpec::Default(e) = &c.value else {
            continue;
        };
        if !matches!(&c.ty, ast::TypeExpr::Named(t) if DType::from_name(&t.name).is_some_and(|d| d.is_int())) {
            out.push(
                Diagnostic::error(
                    c.name.span,
                    format!("`{}` is computed from the launch but is not an integer", c.name.name),
                )
                .label("declared here")
                .help("a default that reads integer parameters must give an integer compile-time value"),
            );
            continue;
        }
        match spec::check_expr(e, &|n| readable(def, n, Some(i)), READABLE) {
            Ok(Num::I(_)) => {}
            Ok(Num::F(_)) => out.push(Diagnostic::error(e.span, "a computed compile-time value must be an integer").label("a float")),
            Err(d) => out.push(suggest(def, e, d, Some(i)).note(
                "a default computed from the launch may read integer parameters and compile-time values declared before it",
            )),
        }
    }
    for a in def.attrs.iter().filter(|a| a.name.name == "requires") {
        let (cond, why) = match a.args.as_slice() {
            [cond] => (cond, None),
            [cond, why] => (cond, Some(why)),
            _ => {
                out.push(
                    Diagnostic::error(
                        a.span,
                        format!(
                            "`#[requires]` takes a condition and an optional message, not {} values",
                            a.args.len()
                        ),
                    )
                    .label("here")
                    .help("e.g. `#[requires(n_cols <= BLOCK, \"a row must fit in one block\")]`"),
                );
                continue;
            }
        };
        if let Some(w) = why
            && !matches!(w.kind, ExprKind::Str(_))
        {
            out.push(Diagnostic::error(w.span, "the message of `#[requires]` must be a string").label("not a string"));
        }
        if let Err(d) = spec::check_expr(cond, &|n| readable(def, n, None), READABLE) {
            out.push(suggest(def, cond, d, None));
        }
    }
    let ints: Vec<&str> = def
        .params
        .iter()
        .filter(|p| is_int_param(p))
        .map(|p| p.name.name.as_str())
        .collect();
    for a in def.attrs.iter().filter(|a| a.name.name == "no_specialize") {
        if a.args.is_empty() {
            out.push(
                Diagnostic::error(a.span, "`#[no_specialize]` names no parameter")
                    .label("empty")
                    .help("name the integer parameters whose values change from launch to launch, e.g. `#[no_specialize(seq_len)]`"),
            );
        }
        for e in &a.args {
            let ExprKind::Name(n) = &e.kind else {
                out.push(
                    Diagnostic::error(e.span, "`#[no_specialize]` takes parameter names")
                        .label("not a name")
                        .help("e.g. `#[no_specialize(seq_len, n_tokens)]`"),
                );
                continue;
            };
            if !ints.contains(&n.as_str()) {
                let mut d = Diagnostic::error(
                    e.span,
                    format!("`{n}` is not an integer parameter of `{}`", def.name.name),
                )
                .label("not an integer parameter");
                d = match ints.is_empty() {
                    true => d.help("only integer scalar parameters are specialised on; this kernel has none"),
                    false => d.help(format!("integer parameters: {}", ints.join(", "))),
                };
                out.push(d);
            } else if computed_read(def, n) {
                out.push(
                    Diagnostic::error(e.span, format!("`{n}` is read by a computed compile-time value"))
                        .label("planned from its value at every launch")
                        .help("a compile-time value computed from it needs its value; compute it from another parameter or drop it from `#[no_specialize]`"),
                );
            }
        }
    }
    out
}

/// `d` with a `did you mean` for the first name of `e` it may not read, when one it may read is
/// close to it.
fn suggest(def: &ast::FnDef, e: &Expr, d: Diagnostic, before: Option<usize>) -> Diagnostic {
    let mut read = Vec::new();
    names(e, &mut read);
    let Some(bad) = read.into_iter().find(|n| !readable(def, n, before)) else {
        return d;
    };
    let candidates = def
        .params
        .iter()
        .map(|p| p.name.name.as_str())
        .chain(def.consts.iter().map(|c| c.name.name.as_str()))
        .filter(|n| readable(def, n, before));
    match super::closest_name(bad, candidates) {
        Some(close) => d.help(format!("did you mean `{close}`?")),
        None => d,
    }
}

/// The value of a compile-time value for expressions: integers and bools as integers.
fn as_num(v: &ConstValue) -> Option<Num> {
    match v {
        ConstValue::Int(i) => Some(Num::I(*i)),
        ConstValue::Bool(b) => Some(Num::I(*b as i64)),
        _ => None,
    }
}

/// Evaluates computed default `e` of `def` with `sizes` and the compile-time values bound so far.
pub fn eval_computed(def: &ast::FnDef, e: &Expr, bound: &Bindings, sizes: &Sizes) -> Result<i64, Diagnostic> {
    let env = |name: &str| -> Option<Num> {
        if let Some((_, v)) = bound.iter().find(|(n, _)| n == name) {
            return as_num(v);
        }
        def.params
            .iter()
            .any(|p| p.name.name == name && is_int_param(p))
            .then(|| Num::I(sizes.value(name)))
    };
    match spec::eval(e, &env)? {
        Num::I(v) => Ok(v),
        Num::F(_) => {
            Err(Diagnostic::error(e.span, "a computed compile-time value must be an integer").label("a float"))
        }
    }
}

/// The values `def`'s computed compile-time values take at a launch of `sizes`, given the
/// other compile-time values (`consts`, in declaration order as the checker binds them).
/// Values `consts` already holds are kept.
pub fn computed_consts(def: &ast::FnDef, consts: &Bindings, sizes: &Sizes) -> Result<Bindings, Diagnostic> {
    let mut bound = consts.clone();
    let mut out = Vec::new();
    for c in &def.consts {
        if !is_computed(def, c) || bound.iter().any(|(n, _)| *n == c.name.name) {
            continue;
        }
        let ast::ConstValueSpec::Default(e) = &c.value else {
            continue;
        };
        let v = eval_computed(def, e, &bound, sizes)?;
        bound.push((c.name.name.clone(), ConstValue::Int(v)));
        out.push((c.name.name.clone(), ConstValue::Int(v)));
    }
    Ok(out)
}

/// One `#[requires(..)]` clause of a kernel.
#[derive(Clone, Debug)]
pub struct Requirement {
    pub cond: Expr,
    /// The clause's message, when it has one.
    pub why: Option<String>,
}

/// `def`'s `#[requires(..)]` clauses (those whose form checks; [`check_forms`] reports the rest).
pub fn requirements(def: &ast::FnDef) -> Vec<Requirement> {
    def.attrs
        .iter()
        .filter(|a| a.name.name == "requires")
        .filter_map(|a| match a.args.as_slice() {
            [cond] => Some(Requirement {
                cond: cond.clone(),
                why: None,
            }),
            [cond, w] => Some(Requirement {
                cond: cond.clone(),
                why: match &w.kind {
                    ExprKind::Str(s) => Some(s.clone()),
                    _ => None,
                },
            }),
            _ => None,
        })
        .collect()
}

/// Whether a launch with compile-time values `consts` and integer arguments `int_arg` (by
/// parameter name) satisfies every clause: the first one broken is an error at the clause,
/// naming the values it read.
pub fn check_requirements(
    reqs: &[Requirement],
    consts: &[(String, ConstValue)],
    int_arg: &dyn Fn(&str) -> Option<i64>,
) -> Result<(), Diagnostic> {
    for r in reqs {
        let env = |name: &str| -> Option<Num> {
            if let Some((_, v)) = consts.iter().find(|(n, _)| n == name) {
                return as_num(v);
            }
            int_arg(name).map(Num::I)
        };
        let holds = match spec::eval(&r.cond, &env)? {
            Num::I(v) => v != 0,
            Num::F(f) => f != 0.0,
        };
        if !holds {
            let mut read = Vec::new();
            names(&r.cond, &mut read);
            read.dedup();
            let values: Vec<String> = read
                .iter()
                .filter_map(|n| match env(n)? {
                    Num::I(v) => Some(format!("{n} = {v}")),
                    Num::F(v) => Some(format!("{n} = {v}")),
                })
                .collect();
            let mut d = Diagnostic::error(r.cond.span, "the launch breaks the kernel's `#[requires(..)]`")
                .label(format!("false for {}", values.join(", ")));
            if let Some(w) = &r.why {
                d = d.note(w.clone());
            }
            return Err(d);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(src: &str) -> ast::FnDef {
        let file = crate::syntax::parse(src).unwrap();
        match file.items.into_iter().next() {
            Some(ast::Item::Kernel(k)) => k,
            _ => panic!("no kernel"),
        }
    }

    const K: &str = "#[requires(n <= BLOCK && n % 4 == 0, \"why\")]\n\
        kernel k<const R: i32 = 2, const BLOCK: i32 = next_pow2(n) * R, const F: f32 = 1.5, const D: i32 = 96, \
        const BD: i32 = next_pow2(D)>(x: *f32, n: i32, m: i64, s: f32) {}\n";

    #[test]
    fn buckets_are_powers_of_two_with_small_values_their_own() {
        let b: Vec<i64> = [-3, 0, 1, 2, 3, 1000, 1024, 1025, i64::MAX]
            .into_iter()
            .map(bucket)
            .collect();
        assert_eq!(b, [-3, 0, 1, 2, 4, 1024, 1024, 2048, i64::MAX]);
    }

    #[test]
    fn computed_values_read_the_launch_and_earlier_values() {
        let def = kernel(K);
        assert_eq!(computed_names(&def), ["BLOCK", "BD"]);
        assert!(computed_read(&def, "n") && !computed_read(&def, "m") && !computed_read(&def, "x"));
        assert!(check_forms(&def).is_empty(), "{:?}", check_forms(&def));
        let consts = vec![
            ("R".to_string(), ConstValue::Int(2)),
            ("D".to_string(), ConstValue::Int(96)),
        ];
        let bd = ("BD".to_string(), ConstValue::Int(128));
        let at = |n| computed_consts(&def, &consts, &Sizes(vec![("n".into(), n)])).unwrap();
        assert_eq!(at(1000), [("BLOCK".to_string(), ConstValue::Int(2048)), bd.clone()]);
        assert_eq!(at(1), [("BLOCK".to_string(), ConstValue::Int(2)), bd.clone()]);
        // Without a launch, integers count as 4096; a bound value is kept.
        let none = computed_consts(&def, &consts, &Sizes::default()).unwrap();
        assert_eq!(none, [("BLOCK".to_string(), ConstValue::Int(8192)), bd.clone()]);
        let mut bound = consts.clone();
        bound.push(("BLOCK".to_string(), ConstValue::Int(64)));
        assert_eq!(computed_consts(&def, &bound, &Sizes::default()).unwrap(), [bd]);
    }

    #[test]
    fn requirements_name_the_values_they_read() {
        let def = kernel(K);
        let reqs = requirements(&def);
        assert_eq!(reqs.len(), 1);
        let consts = vec![("BLOCK".to_string(), ConstValue::Int(1024))];
        assert!(check_requirements(&reqs, &consts, &|n| (n == "n").then_some(1000)).is_ok());
        let d = check_requirements(&reqs, &consts, &|n| (n == "n").then_some(1001)).unwrap_err();
        assert!(d.label.contains("n = 1001, BLOCK = 1024"), "{d:?}");
        assert!(check_requirements(&reqs, &consts, &|n| (n == "n").then_some(2048)).is_err());
        // A parameter the launch does not give is an error, not a pass.
        assert!(check_requirements(&reqs, &consts, &|_| None).is_err());
    }
}
