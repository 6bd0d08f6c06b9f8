//! AST to tile IR: names, dtypes and shapes resolved for one binding of a kernel's compile-time
//! parameters. Helpers are inlined, `#[unroll]` loops unrolled, constant `if`s folded, and
//! broadcasts and casts made explicit, so that the IR's elementwise ops see operands of one type.
//!
//! Errors are collected, not thrown: a failed statement poisons the names it would bind, and uses
//! of a poisoned name report nothing more, so one mistake gives one diagnostic.

mod builtins;
pub use builtins::builtin_names;
mod cluster;
mod expr;
pub mod launch;
mod stmt;
pub use launch::Sizes;

use std::collections::HashMap;

use crate::diag::{Diagnostic, Span};
use crate::ir::{self, ConstValue, DType, Elem, Kernel, KernelParam, Loc, Op, OpKind, Region, Type, ValueId};
use crate::syntax::ast;

/// Values for compile-time parameters, by name (`-D NAME=VALUE`, a run spec, the JIT).
pub type Bindings = Vec<(String, ConstValue)>;

/// Limits that keep the checker's work bounded on any input.
pub const MAX_TILE_ELEMENTS: usize = 1 << 20;
pub const MAX_INLINE_DEPTH: usize = 32;
pub const MAX_UNROLL: i64 = 1024;
const MAX_OPS: usize = 200_000;
/// The most parameters a kernel may have: what the JIT takes (its launch keys pack two bits per
/// parameter into a `u128`), and far below where ptxas refuses a kernel without saying where.
pub const MAX_PARAMS: usize = 64;

/// The compile-time parameters of a kernel and the values they take by default.
pub fn kernel_consts(def: &ast::FnDef) -> Vec<&ast::ConstParam> {
    def.consts.iter().collect()
}

/// The candidate closest to `name`, if close enough to be a likely typo.
pub fn closest_name<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    expr::closest(name, candidates)
}

/// Finds a kernel by name.
pub fn find_kernel<'a>(file: &'a ast::File, name: &str) -> Option<&'a ast::FnDef> {
    file.items.iter().find_map(|i| match i {
        ast::Item::Kernel(k) if k.name.name == name => Some(k),
        _ => None,
    })
}

/// The names of the kernels in a file, in order.
pub fn kernel_names(file: &ast::File) -> Vec<String> {
    file.items
        .iter()
        .filter_map(|i| match i {
            ast::Item::Kernel(k) => Some(k.name.name.clone()),
            _ => None,
        })
        .collect()
}

/// Checks the file's items (duplicate names) and every kernel with its default bindings.
pub fn check_file(src: &str, file: &ast::File, bindings: &Bindings) -> (Vec<Kernel>, Vec<Diagnostic>) {
    let mut diags = item_diagnostics(file);
    let mut kernels = Vec::new();
    // Built once for the file: per kernel, they made checking quadratic in the number of
    // kernels (25k kernels took a minute). A name defined twice means its first definition,
    // as `find_kernel` has it.
    let lines = crate::diag::LineIndex::new(src);
    let mut defs: HashMap<&str, &ast::FnDef> = HashMap::new();
    for item in &file.items {
        if let ast::Item::Kernel(k) = item {
            defs.entry(&k.name.name).or_insert(k);
        }
    }
    for item in &file.items {
        if let ast::Item::Kernel(k) = item {
            match check_def(
                src,
                &lines,
                file,
                defs[k.name.name.as_str()],
                bindings,
                &Sizes::default(),
            ) {
                Ok(ir) => kernels.push(ir),
                Err(d) => diags.extend(d),
            }
        }
    }
    (kernels, diags)
}

/// The checks of a file as a whole, before any kernel: names defined twice (kernels and helpers
/// share one namespace), attributes on helpers. Every path that compiles a file runs them.
pub fn item_diagnostics(file: &ast::File) -> Vec<Diagnostic> {
    let mut seen: HashMap<&str, Span> = HashMap::new();
    let mut diags = Vec::new();
    for item in &file.items {
        let name = match item {
            ast::Item::Kernel(k) | ast::Item::Function(k) => &k.name,
            ast::Item::Run(_) => continue,
        };
        if let ast::Item::Function(f) = item
            && let Some(a) = f.attrs.first()
        {
            diags.push(Diagnostic::error(a.span, format!("helper `{}` cannot take attributes", f.name.name))
                .label("attribute on a helper")
                .note("helpers are inlined into the kernel that calls them; `#[warps(..)]` and `#[stages(..)]` belong on the kernel"));
        }
        if let Some(prev) = seen.insert(&name.name, name.span) {
            diags.push(
                Diagnostic::error(name.span, format!("`{}` is defined twice", name.name))
                    .label("second definition")
                    .with(prev, "first defined here"),
            );
        }
    }
    diags
}

/// Checks one kernel of `file` with the given compile-time values and returns its IR; computed
/// compile-time values ([`launch`]) not among `bindings` are evaluated as for a launch of no
/// known sizes.
pub fn check_kernel(src: &str, file: &ast::File, name: &str, bindings: &Bindings) -> Result<Kernel, Vec<Diagnostic>> {
    check_kernel_at(src, file, name, bindings, &Sizes::default())
}

/// [`check_kernel`] for a launch of `sizes`: computed compile-time values not among `bindings`
/// are evaluated with them.
pub fn check_kernel_at(
    src: &str,
    file: &ast::File,
    name: &str,
    bindings: &Bindings,
    sizes: &Sizes,
) -> Result<Kernel, Vec<Diagnostic>> {
    let Some(def) = find_kernel(file, name) else {
        let names = kernel_names(file);
        return Err(vec![Diagnostic::error(
            Span::default(),
            format!(
                "no kernel named `{name}`; this file has {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    crate::diag::list(&names)
                }
            ),
        )]);
    };
    check_def(src, &crate::diag::LineIndex::new(src), file, def, bindings, sizes)
}

/// [`check_kernel_at`] of the kernel `def`, with `lines` the line index of `src`.
fn check_def(
    src: &str,
    lines: &crate::diag::LineIndex,
    file: &ast::File,
    def: &ast::FnDef,
    bindings: &Bindings,
    sizes: &Sizes,
) -> Result<Kernel, Vec<Diagnostic>> {
    let mut cx = Cx::new(src, lines, file);
    cx.sizes = sizes.clone();
    let kernel = cx.kernel(def, bindings);
    if !cx.diags.is_empty() {
        return Err(cx.diags);
    }
    let kernel = kernel.expect("a kernel is built whenever no diagnostic was reported");
    if let Err(e) = ir::verify(&kernel) {
        return Err(vec![
            Diagnostic::error(def.name.span, format!("internal error: {e}"))
                .note("the checker produced IR that fails verification; please report this"),
        ]);
    }
    Ok(kernel)
}

/// Marks that a diagnostic has been reported (or that a poisoned value was used).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reported;
pub(crate) type R<T> = Result<T, Reported>;

/// A literal whose dtype is decided by what it meets (`x * 2` keeps x's dtype).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Lit {
    Int(i128),
    Float(f64),
    Bool(bool),
}

/// What an expression evaluates to while checking.
#[derive(Clone, Debug)]
pub(crate) enum Val {
    V(ValueId),
    Lit(Lit),
    DType(DType),
    Str(String),
    Tuple(Vec<Val>),
    List(Vec<Val>),
    /// A helper function, passed as `combine:` to `reduce`/`scan`.
    Func(String),
    /// A tensor descriptor from `make_tensor_descriptor`: it exists only in the checker, and its
    /// loads and stores become block ops on its parts.
    Desc(std::rc::Rc<Desc>),
    Unit,
    /// The result of an expression that already reported an error.
    Poison,
}

/// The parts of a tensor descriptor: a base pointer, the tensor's shape and strides (scalar
/// integers of one dtype, i32 or i64), and the block shape its loads and stores move.
#[derive(Clone, Debug)]
pub(crate) struct Desc {
    pub ptr: ValueId,
    pub pointee: DType,
    pub mutable: bool,
    pub shape: Vec<ValueId>,
    pub strides: Vec<ValueId>,
    pub block: Vec<usize>,
    pub index: DType,
}

#[derive(Clone, Debug)]
pub(crate) struct Binding {
    pub val: Val,
    pub mutable: bool,
}

/// One lexical scope; `frame` scopes stop name lookup (a helper does not see its caller).
#[derive(Default)]
pub(crate) struct Scope {
    pub names: HashMap<String, Binding>,
    pub frame: bool,
}

pub(crate) struct Cx<'a> {
    pub src: &'a str,
    /// Line starts of `src`, for the location of every op (shared by the kernels of a file).
    lines: &'a crate::diag::LineIndex,
    pub file: &'a ast::File,
    pub values: Vec<Type>,
    /// Ops of the regions being built, innermost last; the entry region is `regions[0]`.
    pub regions: Vec<Vec<Op>>,
    pub scopes: Vec<Scope>,
    pub diags: Vec<Diagnostic>,
    /// Known values of scalar SSA values (constants and folds of constants).
    pub known: HashMap<ValueId, ConstValue>,
    /// Hoisted constants in the entry region, by value and dtype.
    pub const_cache: HashMap<(String, DType), ValueId>,
    pub inline_depth: usize,
    pub op_count: usize,
    /// Kernel parameters by value: name and the span of the declared type (for "declared here").
    pub param_decls: HashMap<ValueId, (String, Span)>,
    /// Programs per cluster (`#[cluster(N)]`; 1 without it).
    pub cluster: u32,
    /// The result of every cluster reduction and the call that made it (for the uniformity check).
    pub cluster_sites: Vec<(ValueId, Span)>,
    /// The launch computed compile-time values are evaluated for.
    pub sizes: Sizes,
}

impl<'a> Cx<'a> {
    fn new(src: &'a str, lines: &'a crate::diag::LineIndex, file: &'a ast::File) -> Cx<'a> {
        Cx {
            src,
            lines,
            file,
            values: Vec::new(),
            regions: vec![Vec::new()],
            scopes: vec![Scope {
                frame: true,
                ..Default::default()
            }],
            diags: Vec::new(),
            known: HashMap::new(),
            const_cache: HashMap::new(),
            inline_depth: 0,
            op_count: 0,
            param_decls: HashMap::new(),
            cluster: 1,
            cluster_sites: Vec::new(),
            sizes: Sizes::default(),
        }
    }

    // ---- diagnostics --------------------------------------------------------------------------

    pub fn error(&mut self, d: Diagnostic) -> Reported {
        self.diags.push(d);
        Reported
    }

    pub fn fail<T>(&mut self, d: Diagnostic) -> R<T> {
        Err(self.error(d))
    }

    pub fn loc(&self, span: Span) -> Loc {
        let (l, c) = self.lines.line_col(self.src, span.start as usize);
        Loc {
            line: l as u32,
            col: c as u32,
        }
    }

    // ---- values and ops -----------------------------------------------------------------------

    pub fn new_value(&mut self, t: Type) -> ValueId {
        self.values.push(t);
        ValueId(self.values.len() as u32 - 1)
    }

    pub fn ty(&self, v: ValueId) -> &Type {
        &self.values[v.0 as usize]
    }

    /// Counts one operation (or one unrolled iteration, which costs at least its loop
    /// variable, even when everything in it folds to constants) against [`MAX_OPS`].
    pub fn count_op(&mut self, span: Span) -> R<()> {
        self.op_count += 1;
        if self.op_count > MAX_OPS + 1 {
            // Reported once: everything after it is over the limit too.
            return Err(Reported);
        }
        if self.op_count > MAX_OPS {
            return self.fail(
                Diagnostic::error(span, "kernel too large")
                    .label(format!("more than {MAX_OPS} operations after inlining and unrolling"))
                    .help("unroll fewer iterations or inline fewer helper calls"),
            );
        }
        Ok(())
    }

    /// Appends an op with the given result types to the innermost region.
    pub fn emit(
        &mut self,
        kind: OpKind,
        operands: Vec<ValueId>,
        results: Vec<Type>,
        regions: Vec<Region>,
        span: Span,
    ) -> R<Vec<ValueId>> {
        for t in &results {
            self.check_tile_size(t, span)?;
        }
        self.count_op(span)?;
        let results: Vec<ValueId> = results.into_iter().map(|t| self.new_value(t)).collect();
        let loc = self.loc(span);
        self.regions.last_mut().unwrap().push(Op {
            kind,
            operands,
            results: results.clone(),
            regions,
            loc,
        });
        Ok(results)
    }

    /// Emits a single-result op.
    pub fn emit1(&mut self, kind: OpKind, operands: Vec<ValueId>, result: Type, span: Span) -> R<ValueId> {
        Ok(self.emit(kind, operands, vec![result], vec![], span)?[0])
    }

    pub fn check_tile_size(&mut self, t: &Type, span: Span) -> R<()> {
        if let Some(d) = t.shape.iter().find(|d| !d.is_power_of_two()) {
            let d = *d;
            return self.fail(
                Diagnostic::error(span, format!("tile dimension {d} is not a power of two"))
                    .label(format!("this has shape {:?}", t.shape))
                    .help(format!(
                        "round {d} up to {} and mask the extra elements",
                        d.next_power_of_two()
                    )),
            );
        }
        let n = t.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if n.is_none_or(|n| n > MAX_TILE_ELEMENTS) {
            let count = n.map_or("too many".to_string(), |n| n.to_string());
            return self.fail(
                Diagnostic::error(span, "tile too large")
                    .label(format!(
                        "shape {:?} has {count} elements; the limit is {MAX_TILE_ELEMENTS} (2^20)",
                        t.shape
                    ))
                    .help("split the work over more programs or a loop"),
            );
        }
        Ok(())
    }

    /// A scalar constant of the given dtype, hoisted to the entry region and shared.
    pub fn constant(&mut self, c: ConstValue, d: DType) -> ValueId {
        let key = (format!("{c:?}"), d);
        if let Some(v) = self.const_cache.get(&key) {
            return *v;
        }
        let v = self.new_value(Type::scalar(d));
        self.regions[0].push(Op {
            kind: OpKind::Const(c),
            operands: vec![],
            results: vec![v],
            regions: vec![],
            loc: Loc::default(),
        });
        self.known.insert(v, c);
        self.const_cache.insert(key, v);
        v
    }

    // ---- scopes -------------------------------------------------------------------------------

    pub fn push_scope(&mut self, frame: bool) {
        self.scopes.push(Scope {
            frame,
            ..Default::default()
        });
    }

    pub fn pop_scope(&mut self) {
        self.scopes.pop();
    }

    pub fn bind(&mut self, name: &str, val: Val, mutable: bool) {
        self.scopes
            .last_mut()
            .unwrap()
            .names
            .insert(name.to_string(), Binding { val, mutable });
    }

    /// The binding of `name` visible here, and the index of its scope.
    pub fn lookup(&self, name: &str) -> Option<(usize, &Binding)> {
        for (i, s) in self.scopes.iter().enumerate().rev() {
            if let Some(b) = s.names.get(name) {
                return Some((i, b));
            }
            if s.frame {
                break;
            }
        }
        None
    }

    /// Index of the innermost frame scope (the current kernel or helper body).
    pub fn frame_base(&self) -> usize {
        self.scopes.iter().rposition(|s| s.frame).unwrap_or(0)
    }

    pub fn helper(&self, name: &str) -> Option<&'a ast::FnDef> {
        self.file.items.iter().find_map(|i| match i {
            ast::Item::Function(f) if f.name.name == name => Some(f),
            _ => None,
        })
    }

    // ---- the kernel ---------------------------------------------------------------------------

    fn kernel(&mut self, def: &ast::FnDef, bindings: &Bindings) -> Option<Kernel> {
        for d in launch::check_forms(def) {
            self.error(d);
        }
        let consts = self.bind_consts(def, bindings);
        let (mut warps, mut stages) = (Vec::new(), Vec::new());
        let mut given: HashMap<&str, Span> = HashMap::new();
        for a in &def.attrs {
            if self.attr_twice(a, &mut given) {
                continue;
            }
            match a.name.name.as_str() {
                // Checked by `launch::check_forms`; evaluated for each launch / read by the JIT.
                "requires" | "no_specialize" => {}
                "warps" => warps = self.attr_ints(a, |n| n.is_power_of_two() && n <= 32, "powers of two up to 32"),
                "stages" => {
                    let valid = format!("between 1 and {}", crate::ir::MAX_STAGES);
                    stages = self.attr_ints(a, |n| (1..=crate::ir::MAX_STAGES).contains(&n), &valid)
                }
                "grid" => self.grid_attr(def, a),
                "cluster" => {
                    let sizes = self.attr_ints(
                        a,
                        |n| n.is_power_of_two() && n <= 8,
                        "1, 2, 4 or 8 (programs per cluster)",
                    );
                    match sizes.as_slice() {
                        [n] => self.cluster = *n,
                        [] => {}
                        _ => {
                            self.error(
                                Diagnostic::error(a.span, "`#[cluster]` takes one size")
                                    .label("several sizes")
                                    .help("write e.g. `#[cluster(2)]`: programs 2c and 2c + 1 form cluster c"),
                            );
                        }
                    }
                }
                other => {
                    let known = ["warps", "stages", "grid", "cluster", "requires", "no_specialize"]
                        .into_iter()
                        .find(|k| other.ends_with(k));
                    self.error(
                        Diagnostic::error(a.name.span, format!("unknown kernel attribute `{other}`"))
                            .label("not a kernel attribute")
                            .help(match known {
                                Some(k) => format!("write `#[{k}(..)]`"),
                                None => {
                                    "kernels take `#[warps(..)]`, `#[stages(..)]`, `#[grid(..)]`, `#[cluster(..)]`, \
                                     `#[requires(..)]` and `#[no_specialize(..)]`"
                                        .to_string()
                                }
                            }),
                    );
                }
            }
        }
        self.check_param_count(def);
        let mut params = Vec::new();
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for c in &def.consts {
            seen.insert(&c.name.name, c.name.span);
        }
        for p in &def.params {
            if let Some(prev) = seen.insert(&p.name.name, p.name.span) {
                self.error(
                    Diagnostic::error(p.name.span, format!("parameter `{}` is declared twice", p.name.name))
                        .label("second declaration")
                        .with(prev, "first declared here"),
                );
                continue;
            }
            // A parameter without a usable type is bound as poisoned, so its uses report nothing more.
            let Some(te) = &p.ty else {
                self.error(
                    Diagnostic::error(p.span, format!("kernel parameter `{}` needs a type", p.name.name))
                        .label("no type")
                        .help(
                            "write `name: f32` for a scalar, `name: *f32` to read memory, `name: *mut f32` to write it",
                        ),
                );
                self.bind(&p.name.name, Val::Poison, false);
                continue;
            };
            let Ok(elem) = self.resolve_type(te) else {
                self.bind(&p.name.name, Val::Poison, false);
                continue;
            };
            let v = self.new_value(Type { elem, shape: vec![] });
            self.param_decls.insert(v, (p.name.name.clone(), te.span()));
            params.push(KernelParam {
                name: p.name.name.clone(),
                elem,
                value: v,
                specialize: !launch::unspecialized(def).contains(&p.name.name.as_str()),
            });
            self.bind(&p.name.name, Val::V(v), false);
        }
        let tail = self.block(&def.body);
        if let Ok(v) = tail
            && !matches!(v, Val::Unit | Val::Poison)
            && let Some(t) = &def.body.tail
        {
            self.error(
                Diagnostic::error(t.span, "a kernel returns nothing")
                    .label("this value is unused")
                    .help("write results with `store`; end the statement with `;`"),
            );
        }
        if !self.diags.is_empty() {
            return None;
        }
        let mut body = Region {
            args: vec![],
            ops: std::mem::take(&mut self.regions[0]),
        };
        cluster::check_uniform(self, &body);
        if !self.diags.is_empty() {
            return None;
        }
        dce(&mut body);
        let mut k = Kernel {
            name: def.name.name.clone(),
            params,
            consts,
            warps,
            stages,
            cluster: self.cluster,
            body,
            values: std::mem::take(&mut self.values),
        };
        renumber(&mut k);
        Some(k)
    }

    /// Whether `a` is an attribute given earlier in `given` (which records it otherwise): the
    /// launch takes one grid, one cluster size and one list of candidates, and which of two
    /// the IR and the JIT would keep differs. `#[requires(..)]` clauses may be many.
    fn attr_twice<'d>(&mut self, a: &'d ast::Attribute, given: &mut HashMap<&'d str, Span>) -> bool {
        let name = a.name.name.as_str();
        if !["warps", "stages", "grid", "cluster"].contains(&name) {
            return false;
        }
        let Some(first) = given.get(name).copied() else {
            given.insert(name, a.span);
            return false;
        };
        self.error(
            Diagnostic::error(a.span, format!("`#[{name}]` is given twice"))
                .label(format!("second `#[{name}]`"))
                .with(first, "first given here")
                .help(format!("give `#[{name}(..)]` once, with every value it takes")),
        );
        true
    }

    /// A kernel of more than [`MAX_PARAMS`] parameters is refused at its parameter list.
    fn check_param_count(&mut self, def: &ast::FnDef) {
        let (Some(first), Some(last)) = (def.params.first(), def.params.get(MAX_PARAMS..).and_then(|p| p.last()))
        else {
            return;
        };
        let n = def.params.len();
        self.error(
            Diagnostic::error(
                first.span.to(last.span),
                format!(
                    "kernel `{}` has {n} parameters; at most {MAX_PARAMS} are allowed",
                    def.name.name
                ),
            )
            .label(format!("{n} parameters"))
            .with(
                def.params[MAX_PARAMS].span,
                format!("parameter {} is past the limit", MAX_PARAMS + 1),
            )
            .help("pass related values together in one buffer"),
        );
    }

    /// `#[grid(x[, y[, z]])]`: the launch grid as expressions of the kernel's integer scalar
    /// parameters and integer constants, in the run-spec expression language ([`crate::spec::eval`]);
    /// the JIT evaluates it at each launch of a typed launcher or `JitKernel::grid_for`.
    fn grid_attr(&mut self, def: &ast::FnDef, a: &ast::Attribute) {
        if a.args.is_empty() || a.args.len() > 3 {
            self.error(
                Diagnostic::error(
                    a.span,
                    format!("`#[grid]` takes one to three extents, not {}", a.args.len()),
                )
                .label("here")
                .help("e.g. `#[grid(cdiv(n, BLOCK))]` or `#[grid(cdiv(M, BM), cdiv(N, BN))]`"),
            );
            return;
        }
        let known = |n: &str| {
            let param = def.params.iter().any(|p| {
                p.name.name == n
                    && matches!(&p.ty, Some(ast::TypeExpr::Named(t)) if DType::from_name(&t.name).is_some_and(|d| d.is_int()))
            });
            let konst = def.consts.iter().any(|c| {
                c.name.name == n && matches!(&c.ty, ast::TypeExpr::Named(t) if t.name == "bool" || DType::from_name(&t.name).is_some_and(|d| d.is_int()))
            });
            param || konst
        };
        for (axis, e) in a.args.iter().enumerate() {
            match crate::spec::check_expr(
                e,
                &known,
                "an integer scalar parameter or integer constant of the kernel",
            ) {
                Ok(crate::spec::Num::I(_)) => self.constant_extent(axis, e),
                Ok(crate::spec::Num::F(_)) => {
                    self.error(Diagnostic::error(e.span, "a grid extent must be an integer").label("a float"));
                }
                Err(d) => {
                    self.error(d.help(
                        "`#[grid(..)]` takes the kernel's integer scalar parameters and integer constants, \
                         numbers, + - * / %, cdiv, min, max and next_pow2",
                    ));
                }
            }
        }
    }

    /// A grid extent that names nothing is known now: it must be one a GPU launch takes.
    fn constant_extent(&mut self, axis: usize, e: &ast::Expr) {
        if crate::spec::mentions_name(e) {
            return;
        }
        let max = crate::spec::MAX_GRID[axis];
        match crate::spec::eval(e, &|_| None) {
            Ok(crate::spec::Num::I(v)) if v >= 1 && v <= max as i64 => {}
            Ok(v) => {
                let shown = match v {
                    crate::spec::Num::I(i) => i.to_string(),
                    crate::spec::Num::F(f) => f.to_string(),
                };
                self.error(
                    Diagnostic::error(
                        e.span,
                        format!("grid extent {shown} along {} is out of range", ["x", "y", "z"][axis]),
                    )
                    .label(format!("expected 1 to {max}"))
                    .note("a GPU grid has 1 to 2^31 - 1 programs along x, and 1 to 65535 along y and z"),
                );
            }
            // `check_expr` evaluated what names nothing, and reported what failed.
            Err(_) => {}
        }
    }

    fn attr_ints(&mut self, a: &ast::Attribute, ok: fn(u32) -> bool, valid: &str) -> Vec<u32> {
        let mut out = Vec::new();
        for e in &a.args {
            match self.expr(e).ok().and_then(|v| self.const_int(&v)) {
                Some(n) if n >= 0 && n <= u32::MAX as i64 && ok(n as u32) => out.push(n as u32),
                _ => {
                    self.error(
                        Diagnostic::error(e.span, format!("invalid value in `#[{}]`", a.name.name))
                            .label(format!("expected integers {valid}")),
                    );
                }
            }
        }
        if a.args.is_empty() {
            self.error(
                Diagnostic::error(a.span, format!("`#[{}]` needs at least one value", a.name.name)).label("empty"),
            );
        }
        out
    }

    /// Binds each compile-time parameter to its value: the caller's, else its default, else the
    /// first of its choices.
    fn bind_consts(&mut self, def: &ast::FnDef, bindings: &Bindings) -> Vec<(String, ConstValue)> {
        let mut out = Vec::new();
        for (name, _) in bindings {
            if !def.consts.iter().any(|c| &c.name.name == name) {
                let names: Vec<&str> = def.consts.iter().map(|c| c.name.name.as_str()).collect();
                self.error(
                    Diagnostic::error(
                        def.name.span,
                        format!("kernel `{}` has no compile-time parameter `{name}`", def.name.name),
                    )
                    .label("given a value for it")
                    .note(format!(
                        "its compile-time parameters are: {}",
                        if names.is_empty() {
                            "none".into()
                        } else {
                            crate::diag::list(&names)
                        }
                    )),
                );
            }
        }
        for c in &def.consts {
            let kind = match &c.ty {
                ast::TypeExpr::Named(n) if n.name == "dtype" => None,
                ast::TypeExpr::Named(n) => match DType::from_name(&n.name) {
                    Some(d) if d.is_int() || d.is_bool() || d == DType::F32 => Some(d),
                    _ => {
                        self.error(
                            Diagnostic::error(
                                n.span,
                                format!("a compile-time parameter cannot have type `{}`", n.name),
                            )
                            .label("not allowed here")
                            .help("use an integer type, `bool`, `f32`, or `dtype`"),
                        );
                        continue;
                    }
                },
                ast::TypeExpr::Ptr { span, .. } => {
                    self.error(
                        Diagnostic::error(*span, "a compile-time parameter cannot be a pointer").label("pointer type"),
                    );
                    continue;
                }
            };
            let given = bindings.iter().find(|(n, _)| n == &c.name.name).map(|(_, v)| *v);
            let value = match (given, &c.value) {
                (Some(v), _) => Some(v),
                // Computed from the launch (`launch::check_forms` reported a wrong form).
                (None, ast::ConstValueSpec::Default(e)) if launch::is_computed(def, c) => {
                    match launch::eval_computed(def, e, &out, &self.sizes) {
                        Ok(v) => Some(ConstValue::Int(v)),
                        Err(d) => {
                            if self.diags.is_empty() {
                                self.error(d.note(format!(
                                    "`{}` is computed from the launch's arguments{}",
                                    c.name.name,
                                    if self.sizes.is_empty() {
                                        format!(" (each counted as {} without a launch)", launch::UNLAUNCHED_INT)
                                    } else {
                                        format!(" ({})", self.sizes)
                                    }
                                )));
                            }
                            None
                        }
                    }
                }
                (None, ast::ConstValueSpec::Default(e)) => self.const_param_value(e, kind),
                (None, ast::ConstValueSpec::Choices(list)) => {
                    for e in list.iter().skip(1) {
                        self.const_param_value(e, kind);
                    }
                    match list.first() {
                        Some(e) => self.const_param_value(e, kind),
                        None => {
                            self.error(
                                Diagnostic::error(c.span, format!("`{}` has an empty list of choices", c.name.name))
                                    .label("no candidates"),
                            );
                            None
                        }
                    }
                }
                (None, ast::ConstValueSpec::Required) => {
                    self.error(
                        Diagnostic::error(
                            c.name.span,
                            format!("no value for compile-time parameter `{}`", c.name.name),
                        )
                        .label("has no default")
                        .help(format!(
                            "pass one with `-D {}=VALUE`, or give it a default: `const {}: .. = VALUE`",
                            c.name.name, c.name.name
                        )),
                    );
                    None
                }
            };
            let Some(value) = value else {
                self.bind(&c.name.name, Val::Poison, false);
                continue;
            };
            let value = match (kind, value) {
                (None, ConstValue::DType(d)) => ConstValue::DType(d),
                (Some(d), ConstValue::Int(i)) if d.is_int() => {
                    let (lo, hi) = crate::ir::scalar::int_range(d);
                    if (i as i128) < lo || (i as i128) > hi {
                        self.error(
                            Diagnostic::error(c.name.span, format!("`{}` = {i} does not fit in {d}", c.name.name))
                                .label(format!("declared as {d}, which holds {lo}..={hi}")),
                        );
                        self.bind(&c.name.name, Val::Poison, false);
                        continue;
                    }
                    ConstValue::Int(i)
                }
                (Some(DType::Bool), ConstValue::Bool(b)) => ConstValue::Bool(b),
                (Some(DType::F32), ConstValue::Float(f)) => ConstValue::Float(f),
                (Some(DType::F32), ConstValue::Int(i)) => ConstValue::Float(i as f64),
                (_, v) => {
                    self.error(
                        Diagnostic::error(c.name.span, format!("`{}` cannot be {v}", c.name.name)).label(format!(
                            "declared as {}",
                            kind.map_or("dtype".to_string(), |d| d.to_string())
                        )),
                    );
                    self.bind(&c.name.name, Val::Poison, false);
                    continue;
                }
            };
            let val = match (value, kind) {
                (ConstValue::DType(d), _) => Val::DType(d),
                (c2, Some(d)) => Val::V(self.constant(c2, d)),
                _ => Val::Poison,
            };
            self.bind(&c.name.name, val, false);
            out.push((c.name.name.clone(), value));
        }
        out
    }

    fn const_param_value(&mut self, e: &ast::Expr, kind: Option<DType>) -> Option<ConstValue> {
        let v = self.expr(e).ok()?;
        let c = match (&v, kind) {
            (Val::DType(d), None) => Some(ConstValue::DType(*d)),
            (_, Some(d)) if d.is_int() => self.const_int(&v).map(ConstValue::Int),
            (_, Some(DType::Bool)) => self.const_bool(&v).map(ConstValue::Bool),
            (_, Some(_)) => self.const_float(&v).map(ConstValue::Float),
            _ => None,
        };
        if c.is_none() {
            self.error(Diagnostic::error(e.span, "expected a constant").label(format!(
                "expected {}",
                kind.map_or("a dtype".to_string(), |d| format!("a constant {d}"))
            )));
        }
        c
    }

    /// Resolves a type written in the source (dtype names and `dtype` parameters).
    pub fn resolve_type(&mut self, t: &ast::TypeExpr) -> R<Elem> {
        match t {
            ast::TypeExpr::Named(n) => Ok(Elem::Scalar(self.resolve_dtype(n)?)),
            ast::TypeExpr::Ptr { mutable, pointee, span } => match self.resolve_type(pointee)? {
                Elem::Scalar(d) => Ok(Elem::Ptr {
                    pointee: d,
                    mutable: *mutable,
                }),
                Elem::Ptr { .. } => self
                    .fail(Diagnostic::error(*span, "pointers to pointers are not supported").label("nested pointer")),
            },
        }
    }

    pub fn resolve_dtype(&mut self, n: &ast::Ident) -> R<DType> {
        if let Some(d) = DType::from_name(&n.name) {
            return Ok(d);
        }
        match self.lookup(&n.name).map(|(_, b)| b.val.clone()) {
            Some(Val::DType(d)) => Ok(d),
            Some(Val::Poison) => Err(Reported),
            _ => {
                let mut d = Diagnostic::error(n.span, format!("unknown type `{}`", n.name)).label("not a type");
                if let Some(s) = suggest_dtype(&n.name) {
                    d = d.help(format!("did you mean `{s}`?"));
                } else {
                    d = d.note("types are bool, i8..i64, u8..u64, f16, bf16, f32, f64, f8e4m3, f8e5m2");
                }
                self.fail(d)
            }
        }
    }
}

fn suggest_dtype(name: &str) -> Option<&'static str> {
    Some(match name {
        "float" | "float32" | "f" => "f32",
        "float16" | "half" => "f16",
        "bfloat16" => "bf16",
        "double" | "float64" => "f64",
        "int" | "int32" | "i" => "i32",
        "int64" | "long" => "i64",
        "uint32" | "unsigned" => "u32",
        "boolean" | "int1" => "bool",
        "fp8" | "float8" | "e4m3" | "fp8e4m3" => "f8e4m3",
        "e5m2" | "fp8e5m2" => "f8e5m2",
        _ => return None,
    })
}

/// Removes ops whose results are unused and which have no effect.
fn dce(r: &mut Region) {
    use std::collections::HashSet;
    fn uses(r: &Region, used: &mut HashSet<ValueId>) {
        for op in &r.ops {
            used.extend(op.operands.iter().copied());
            for s in &op.regions {
                uses(s, used);
            }
        }
    }
    fn effectful(op: &Op) -> bool {
        op.kind.has_effects() || op.regions.iter().any(|r| r.ops.iter().any(effectful))
    }
    fn sweep(r: &mut Region, used: &HashSet<ValueId>) -> bool {
        let before = r.ops.len();
        r.ops
            .retain(|op| effectful(op) || op.results.iter().any(|v| used.contains(v)));
        let mut changed = r.ops.len() != before;
        for op in &mut r.ops {
            for s in &mut op.regions {
                changed |= sweep(s, used);
            }
        }
        changed
    }
    loop {
        let mut used = HashSet::new();
        uses(r, &mut used);
        if !sweep(r, &used) {
            break;
        }
    }
}

/// Renumbers values densely in program order (parameters first), so the text form is stable.
fn renumber(k: &mut Kernel) {
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    let mut types = Vec::new();
    let add = |v: ValueId, map: &mut HashMap<ValueId, ValueId>, types: &mut Vec<Type>, old: &[Type]| {
        map.insert(v, ValueId(types.len() as u32));
        types.push(old[v.0 as usize].clone());
    };
    for p in &k.params {
        add(p.value, &mut map, &mut types, &k.values);
    }
    fn visit(r: &Region, f: &mut dyn FnMut(ValueId)) {
        for a in &r.args {
            f(*a);
        }
        for op in &r.ops {
            for v in &op.results {
                f(*v);
            }
            for s in &op.regions {
                visit(s, f);
            }
        }
    }
    let old = std::mem::take(&mut k.values);
    visit(&k.body, &mut |v| add(v, &mut map, &mut types, &old));
    fn apply(r: &mut Region, map: &HashMap<ValueId, ValueId>) {
        for a in &mut r.args {
            *a = map[a];
        }
        for op in &mut r.ops {
            for v in op.operands.iter_mut().chain(op.results.iter_mut()) {
                *v = map[v];
            }
            for s in &mut op.regions {
                apply(s, map);
            }
        }
    }
    apply(&mut k.body, &map);
    for p in &mut k.params {
        p.value = map[&p.value];
    }
    k.values = types;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The diagnostics of checking kernel `k` of `src`, and the text each points at.
    fn errors(src: &str) -> Vec<(Diagnostic, String)> {
        let ast = crate::syntax::parse(src).unwrap();
        let diags = check_kernel(src, &ast, "k", &vec![]).unwrap_err();
        diags
            .into_iter()
            .map(|d| {
                let at = src[d.span.range()].to_string();
                (d, at)
            })
            .collect()
    }

    /// Checking a file builds its line index once, not once per kernel.
    #[test]
    fn checking_many_kernels_is_linear() {
        let src: String = (0..25_000)
            .map(|i| format!("kernel k{i}(x:*mut f32){{store(x,1.0);}}\n"))
            .collect();
        let ast = crate::syntax::parse(&src).unwrap();
        let t = std::time::Instant::now();
        let (kernels, diags) = check_file(&src, &ast, &vec![]);
        assert!(diags.is_empty() && kernels.len() == 25_000);
        // A line index per kernel took about a minute here; sharing it takes a second or two.
        assert!(t.elapsed().as_secs() < 8, "{:?}", t.elapsed());
        // Ops still carry their source lines.
        assert_eq!(kernels[24_999].body.ops.last().unwrap().loc.line, 25_000);
    }

    /// An attribute the launch takes one of is an error when given twice.
    #[test]
    fn attributes_given_twice_are_errors() {
        for attr in ["grid(1)", "cluster(2)", "warps(4)", "stages(2)"] {
            let name = &attr[..attr.find('(').unwrap()];
            let src = format!("#[{attr}]\n#[{attr}]\nkernel k(n: i32) {{}}");
            let e = errors(&src);
            assert_eq!(e.len(), 1, "{e:?}");
            assert_eq!(e[0].0.message, format!("`#[{name}]` is given twice"));
            assert_eq!(e[0].1, format!("#[{attr}]"));
            assert_eq!(e[0].0.secondary[0].0.start, 0);
        }
        // `#[requires]` clauses may be many.
        let src = "#[requires(n > 0)]\n#[requires(n < 9)]\nkernel k(n: i32) {}";
        let ast = crate::syntax::parse(src).unwrap();
        assert!(check_kernel(src, &ast, "k", &vec![]).is_ok());
    }

    /// Grid extents that name nothing are evaluated strictly when the kernel is checked.
    #[test]
    fn constant_grid_extents_are_checked() {
        let e = errors("#[grid(1 / 0, -5, 2^63)]\nkernel k(n: i32) {}");
        let found: Vec<(&str, &str)> = e.iter().map(|(d, at)| (d.message.as_str(), at.as_str())).collect();
        assert_eq!(
            found,
            [
                ("integer division by zero", "1 / 0"),
                ("grid extent -5 along y is out of range", "-5"),
                ("unsupported operator", "2^63"),
            ]
        );
        for (grid, at) in [
            ("2147483648", "2147483648"),
            ("1, 65536", "65536"),
            ("1, 1, 0", "0"),
            ("n, 9223372036854775807 + 1", "9223372036854775807 + 1"),
            ("cdiv(n, 1 - 1)", "cdiv(n, 1 - 1)"),
            ("n % 0", "n % 0"),
        ] {
            let e = errors(&format!("#[grid({grid})]\nkernel k(n: i32) {{}}"));
            assert_eq!(e.len(), 1, "{grid}: {e:?}");
            assert_eq!(e[0].1, at, "{grid}: {e:?}");
        }
        // What depends on names is left to the launch.
        let src = "#[grid(2147483647, 65535, n / (n - 1))]\nkernel k(n: i32) {}";
        let ast = crate::syntax::parse(src).unwrap();
        assert!(check_kernel(src, &ast, "k", &vec![]).is_ok());
    }

    /// A descriptor of no dimensions is the caller's mistake, not an internal error.
    #[test]
    fn a_rank_0_descriptor_is_refused_at_the_call() {
        let e = errors(
            "kernel k(x: *f32, y: *mut f32) {\n    let d = make_tensor_descriptor(x, [], [], []);\n    store(y, load(d, []));\n}",
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].0.message.contains("needs 1 to 5 dimensions"), "{e:?}");
        assert_eq!(e[0].1, "[]");
    }

    /// Kernels take at most MAX_PARAMS parameters.
    #[test]
    fn too_many_parameters_are_refused_at_the_list() {
        let params = |n: usize| (0..n).map(|i| format!("p{i}: i32")).collect::<Vec<_>>().join(", ");
        let src = format!("kernel k({}) {{}}", params(10_000));
        let e = errors(&src);
        assert_eq!(e.len(), 1);
        assert_eq!(
            e[0].0.message,
            "kernel `k` has 10000 parameters; at most 64 are allowed"
        );
        assert!(e[0].1.starts_with("p0: i32") && e[0].1.ends_with("p9999: i32"));
        let src = format!("kernel k({}) {{}}", params(MAX_PARAMS));
        let ast = crate::syntax::parse(&src).unwrap();
        assert!(check_kernel(&src, &ast, "k", &vec![]).is_ok());
    }
}
