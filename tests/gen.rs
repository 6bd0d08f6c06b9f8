//! Random well-formed kernels for differential testing: [`random_kernel_file`] gives the text of
//! a whole `.tile` file, one kernel and a `run` spec without `reference(..)`, so that
//! `tilec verify` on a GPU compares the GPU's results with the interpreter's, and
//! `rewritten_generated_kernels_compute_the_same_bits` (tests/suite/gen.rs) compares each kernel
//! rewritten by the e-graph optimizer with the original on the interpreter, bit for bit.
//!
//! Every kernel is well formed and runs on the interpreter without an error by construction:
//! every load and store is masked with the bounds of the run spec's ragged sizes, integer
//! divisors are forced odd (`b | 1`), and shift amounts need no care (the language defines every
//! amount, negative and too wide included).
//!
//! Exactness decides the tolerance. Most kernels use only operations whose result the language
//! defines to the bit and which the GPU computes the same way whatever it reorders: integer
//! arithmetic, casts, `+ - * /` and `sqrt` on floats, `abs`, `floor`, `ceil`, `maximum`,
//! `minimum`, `where`, max/min reductions, integer sums and scans. They are compared exactly.
//! The others may also use approximate math (`exp`, `exp2`, `log`, `log2`, `rsqrt`, `fma`) and
//! float sums and scans (whose order the GPU may change); they are compared with rtol and atol
//! 1e-3 and store only to an f32 output. Their approximate values stay in f32 and flow only into
//! continuous operations — never into a comparison, a cast to an integer or a narrower float,
//! `floor` or `ceil` — where a last-bit difference would become a large one.

use tile_lang::ir::DType;

use crate::Rng;

/// The complete text of a `.tile` file: one kernel and one `run` spec without a reference.
/// The same seed always gives the same text.
pub fn random_kernel_file(seed: u64) -> String {
    Generator::new(seed).file(&format!("gen_{seed}"))
}

/// The dtypes kernels compute in: what the GPU back end supports everywhere (fp8 conversions
/// and some f64 math are not lowered).
const INTS: [DType; 7] = [
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
];
const FLOATS: [DType; 3] = [DType::F16, DType::BF16, DType::F32];

/// How a kernel maps its data onto programs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    /// A 1-D array, one block of `BLOCK` elements per program.
    Flat { block: u32 },
    /// A 2-D array, one `[BR, BC]` tile per program on a 2-D grid.
    Tiles { rows: u32, cols: u32 },
    /// A 2-D array, one program per row walking it `BLOCK` elements at a time, with a
    /// loop-carried scalar.
    RowLoop { block: u32 },
}

impl Layout {
    /// The shape of the kernel's tiles, as written in `zeros(..)`.
    fn shape(self) -> &'static str {
        match self {
            Layout::Tiles { .. } => "[BR, BC]",
            _ => "[BLOCK]",
        }
    }

    fn is_1d(self) -> bool {
        !matches!(self, Layout::Tiles { .. })
    }
}

/// A value the kernel has bound with `let`.
struct Var {
    /// What refers to it: a name, or `name[:, None]` for a row vector.
    text: String,
    dtype: DType,
    /// Computed with an approximate operation (see the module docs).
    approx: bool,
    /// Read straight from an input (so never -0.0, the one exact float divisor allowed).
    loaded: bool,
    uses: usize,
}

/// An expression and what it computes.
struct Value {
    text: String,
    dtype: DType,
    approx: bool,
}

/// A pointer parameter read by the kernel, and the run spec's generator for it.
struct Input {
    name: String,
    dtype: DType,
    /// A `[rows]` vector (2-D layouts only) rather than a whole array.
    row_vector: bool,
}

struct Generator {
    rng: Rng,
    layout: Layout,
    /// Whether approximate operations may be used; the kernel is then compared with a tolerance.
    approx_allowed: bool,
    approx_used: bool,
    /// The dtypes this kernel favours (a few of the supported ones).
    dtypes: Vec<DType>,
    inputs: Vec<Input>,
    vars: Vec<Var>,
    /// The kernel's statements at the point where its work happens (inside the row loop for
    /// `RowLoop`), each indented relative to that point.
    body: Vec<String>,
    /// The integer output, if the kernel has one (only exactly compared kernels do).
    int_output: Option<DType>,
    /// A scalar parameter `reps` bounds some loops (its value in the run spec may be 0).
    uses_reps: bool,
    next_name: usize,
}

impl Generator {
    fn new(seed: u64) -> Generator {
        let mut rng = Rng(splitmix(seed) | 1);
        let layout = match rng.below(3) {
            0 => Layout::Flat {
                block: [16, 32, 64, 128][rng.below(4)],
            },
            1 => Layout::Tiles {
                rows: [2, 4, 8, 16][rng.below(4)],
                cols: [8, 16, 32][rng.below(3)],
            },
            _ => Layout::RowLoop {
                block: [16, 32, 64][rng.below(3)],
            },
        };
        Generator {
            rng,
            layout,
            approx_allowed: false,
            approx_used: false,
            dtypes: vec![],
            inputs: vec![],
            vars: vec![],
            body: vec![],
            int_output: None,
            uses_reps: false,
            next_name: 0,
        }
    }

    // ---- randomness --------------------------------------------------------------------------

    fn chance(&mut self, percent: usize) -> bool {
        self.rng.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.rng.below(xs.len())]
    }

    /// A number in `lo..=hi`.
    fn between(&mut self, lo: u32, hi: u32) -> u32 {
        lo + self.rng.below((hi - lo + 1) as usize) as u32
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next_name += 1;
        format!("{prefix}{}", self.next_name)
    }

    // ---- the file ----------------------------------------------------------------------------

    fn file(mut self, name: &str) -> String {
        self.approx_allowed = self.chance(40);
        self.choose_dtypes();
        self.choose_inputs();
        if !self.approx_allowed && self.chance(70) {
            self.int_output = Some(self.pick(&INTS));
        }
        // At most 30 statements in all: the prologue, stores and carry take up to 9.
        let target = self.between(5, 19);
        loop {
            self.statement();
            if self.body_statements() >= target {
                break;
            }
        }
        let stores = self.stores();
        let kernel = self.kernel(name, stores);
        let spec = self.spec(name);
        let exactness = if self.is_approximate() { "approximate" } else { "exact" };
        format!(
            "// Generated by tests/gen.rs: {:?}, {exactness}.\n\n{kernel}\n{spec}",
            self.layout
        )
    }

    /// Statements in the body so far (a loop counts its header and its update).
    fn body_statements(&self) -> u32 {
        self.body
            .iter()
            .filter(|l| l.ends_with(';') || l.starts_with("for "))
            .count() as u32
    }

    /// Two to four dtypes, floats and integers mixed, sometimes bool; f32 when approximate
    /// operations are allowed (they compute in f32 only).
    fn choose_dtypes(&mut self) {
        if self.approx_allowed {
            self.dtypes.push(DType::F32);
        }
        let count = self.between(2, 4);
        while self.dtypes.len() < count as usize {
            let d = match self.rng.below(10) {
                0..=3 => self.pick(&FLOATS),
                4..=8 => self.pick(&INTS),
                _ => DType::Bool,
            };
            if !self.dtypes.contains(&d) {
                self.dtypes.push(d);
            }
        }
    }

    /// One to four inputs of the kernel's dtypes; in 2-D layouts sometimes a row vector too.
    fn choose_inputs(&mut self) {
        let count = self.between(1, 4);
        for i in 0..count {
            let dtype = self.dtypes[i as usize % self.dtypes.len()];
            self.inputs.push(Input {
                name: format!("x{i}"),
                dtype,
                row_vector: false,
            });
        }
        if !self.layout.is_1d() && self.chance(50) {
            let dtype = self.pick(&self.dtypes.clone());
            self.inputs.push(Input {
                name: "w".into(),
                dtype,
                row_vector: true,
            });
        }
        for i in 0..self.inputs.len() {
            let line = self.load(i);
            self.body.push(line);
        }
    }

    /// `let a0 = load(x0 + offs, mask);`, which binds a variable.
    fn load(&mut self, i: usize) -> String {
        let (input, dtype) = (self.inputs[i].name.clone(), self.inputs[i].dtype);
        let other = match dtype {
            _ if !self.chance(25) => String::new(),
            DType::Bool => ", other: true".into(),
            d if d.is_float() => ", other: 1.0".into(),
            _ => ", other: 1".into(),
        };
        let var = format!("a{i}");
        let (pointer, mask, text) = if self.inputs[i].row_vector {
            ("rows", "rows < n_rows", format!("{var}[:, None]"))
        } else {
            ("offs", "mask", var.clone())
        };
        self.vars.push(Var {
            text,
            dtype,
            approx: false,
            loaded: true,
            uses: 0,
        });
        format!("let {var} = load({input} + {pointer}, {mask}{other});")
    }

    // ---- statements --------------------------------------------------------------------------

    fn statement(&mut self) {
        if self.chance(20) {
            self.accumulating_loop();
        } else {
            let d = self.pick(&self.dtypes.clone());
            let depth = self.between(1, 3);
            let v = self.operation(d, depth, true);
            let name = self.fresh("v");
            self.body.push(format!("let {name} = {};", v.text));
            self.bind(name, v);
        }
    }

    fn bind(&mut self, name: String, v: Value) {
        self.vars.push(Var {
            text: name,
            dtype: v.dtype,
            approx: v.approx,
            loaded: false,
            uses: 0,
        });
    }

    /// A `let mut` accumulator updated in a `for` loop (constant, `#[unroll]`ed, or bounded by
    /// the run-time `reps`), using the loop variable.
    fn accumulating_loop(&mut self) {
        let d = self.pick(&self.dtypes.clone());
        if d.is_bool() {
            return;
        }
        let name = self.fresh("acc");
        let bound = if self.chance(30) {
            self.uses_reps = true;
            "reps".to_string()
        } else {
            self.between(1, 4).to_string()
        };
        let step = self.value(d, 2, true);
        let k = format!("k.to({})", d.name());
        let term = match self.rng.below(3) {
            0 => format!("({} + {k})", step.text),
            1 => format!("({} * {k})", step.text),
            _ => step.text.clone(),
        };
        let update = match (d.is_float(), self.rng.below(3)) {
            (_, 0) => format!("{name} += {term};"),
            (true, 1) => format!("{name} = maximum({name}, {term});"),
            (true, _) => format!("{name} = ({name} - {term});"),
            (false, 1) => format!("{name} ^= {term};"),
            (false, _) => format!("{name} = (({name} * 3) + {term});"),
        };
        self.body.push(format!(
            "let mut {name} = zeros({}, {});",
            self.layout.shape(),
            d.name()
        ));
        if bound != "reps" && self.chance(30) {
            self.body.push("#[unroll]".into());
        }
        self.body.push(format!("for k in 0..{bound} {{"));
        self.body.push(format!("    {update}"));
        self.body.push("}".into());
        self.bind(name, step);
    }

    /// The stores of every variable nothing else used (so that no statement is dead code):
    /// approximate values and, when the kernel has an `out_i`, some of the others, converted to
    /// f32 and summed into `out` (plus the carry in `RowLoop`); the rest converted and xor-ed
    /// into `out_i`.
    fn stores(&mut self) -> Vec<String> {
        let unused: Vec<usize> = (0..self.vars.len()).filter(|&i| self.vars[i].uses == 0).collect();
        let (mut float_terms, mut int_terms) = (vec![], vec![]);
        for i in unused {
            let to_int = self.int_output.is_some() && !self.vars[i].approx && self.chance(60);
            if to_int {
                int_terms.push(i);
            } else {
                float_terms.push(i);
            }
        }
        if float_terms.is_empty() {
            float_terms.push(self.vars.len() - 1);
        }
        let mut out = self.terms(&float_terms, DType::F32, "+");
        if matches!(self.layout, Layout::RowLoop { .. }) {
            out = format!("{out} + {}", convert("carry", self.carry_dtype(), DType::F32));
        }
        let mut lines = vec![format!("store(out + offs, {out}, mask);")];
        if let Some(d) = self.int_output {
            if int_terms.is_empty() {
                let exact: Vec<usize> = (0..self.vars.len()).filter(|&i| !self.vars[i].approx).collect();
                int_terms.push(self.pick(&exact));
            }
            let value = self.terms(&int_terms, d, "^");
            lines.push(format!("store(out_i + offs, {value}, mask);"));
        }
        lines
    }

    /// `t1 op t2 op ..`, each variable converted to `d`.
    fn terms(&mut self, vars: &[usize], d: DType, op: &str) -> String {
        let texts: Vec<String> = vars
            .iter()
            .map(|&i| {
                self.vars[i].uses += 1;
                let v = &self.vars[i];
                convert(&v.text, v.dtype, d)
            })
            .collect();
        texts.join(&format!(" {op} "))
    }

    // ---- expressions -------------------------------------------------------------------------

    /// An expression of dtype `d` at most `depth` operations deep, whose shape broadcasts to the
    /// kernel's tile shape. `approx_ok`: the caller accepts an approximate value.
    fn value(&mut self, d: DType, depth: u32, approx_ok: bool) -> Value {
        if depth == 0 || self.chance(20) {
            let approx_ok = approx_ok && self.approx_allowed && d == DType::F32;
            return self.leaf(d, approx_ok);
        }
        self.operation(d, depth, approx_ok)
    }

    /// Like [`Generator::value`], but an operation rather than a variable (`depth` >= 1).
    fn operation(&mut self, d: DType, depth: u32, approx_ok: bool) -> Value {
        let approx_ok = approx_ok && self.approx_allowed && d == DType::F32;
        let v = if d.is_bool() {
            self.bool_value(depth - 1)
        } else if d.is_float() {
            self.float_value(d, depth - 1, approx_ok)
        } else {
            self.int_value(d, depth - 1)
        };
        debug_assert_eq!(v.dtype, d);
        self.approx_used |= v.approx;
        v
    }

    /// A variable of dtype `d`, or a conversion of an exact one of another dtype.
    fn leaf(&mut self, d: DType, approx_ok: bool) -> Value {
        let same: Vec<usize> = (0..self.vars.len())
            .filter(|&i| self.vars[i].dtype == d && (approx_ok || !self.vars[i].approx))
            .collect();
        let exact_other: Vec<usize> = (0..self.vars.len())
            .filter(|&i| self.vars[i].dtype != d && !self.vars[i].approx)
            .collect();
        let i = if !same.is_empty() && (exact_other.is_empty() || !self.chance(25)) {
            self.prefer_unused(&same)
        } else {
            self.prefer_unused(&exact_other)
        };
        self.vars[i].uses += 1;
        let v = &self.vars[i];
        let (text, from, approx) = (v.text.clone(), v.dtype, v.approx);
        let rtz = from == DType::F32 && matches!(d, DType::F16 | DType::BF16) && self.chance(15);
        Value {
            text: if rtz {
                format!("{text}.to({}, rounding: \"rtz\")", d.name())
            } else {
                convert(&text, from, d)
            },
            dtype: d,
            approx,
        }
    }

    /// Half the time the least used candidate, so that most variables end up used.
    fn prefer_unused(&mut self, candidates: &[usize]) -> usize {
        if self.chance(50) {
            *candidates.iter().min_by_key(|&&i| self.vars[i].uses).unwrap()
        } else {
            self.pick(candidates)
        }
    }

    fn float_value(&mut self, d: DType, depth: u32, approx_ok: bool) -> Value {
        let f = |text: String, approx: bool| Value { text, dtype: d, approx };
        match self.rng.below(if approx_ok { 13 } else { 10 }) {
            0 | 1 => {
                let (a, b) = (self.value(d, depth, approx_ok), self.operand(d, depth, approx_ok));
                let op = self.pick(&["+", "-", "*"]);
                f(format!("({} {op} {})", a.text, b.text), a.approx || b.approx)
            }
            2 => self.float_division(d, depth, approx_ok),
            3 => {
                let (a, b) = (self.value(d, depth, approx_ok), self.operand(d, depth, approx_ok));
                let func = self.pick(&["maximum", "minimum"]);
                f(format!("{func}({}, {})", a.text, b.text), a.approx || b.approx)
            }
            4 => {
                let a = self.value(d, depth, approx_ok);
                let text = match self.rng.below(3) {
                    0 => format!("abs({})", a.text),
                    1 => format!("(-{})", a.text),
                    _ => format!("sqrt(abs({}))", a.text),
                };
                f(text, a.approx)
            }
            5 => {
                // Exact operand only: a last-bit difference could move it across an integer.
                let a = self.value(d, depth, false);
                let func = self.pick(&["floor", "ceil"]);
                f(format!("{func}({})", a.text), false)
            }
            6 => self.choice(d, depth, approx_ok),
            7 => self.with_reduction(d, depth, approx_ok),
            8 => self.conversion(d, depth),
            9 if self.layout.is_1d() => self.outer_reduction(d, approx_ok),
            9 => self.with_reduction(d, depth, approx_ok),
            10 => self.approximate_math(depth),
            11 => {
                let (a, b, c) = (
                    self.value(d, depth, true),
                    self.operand(d, depth, true),
                    self.value(d, depth, true),
                );
                f(format!("fma({}, {}, {})", a.text, b.text, c.text), true)
            }
            _ => {
                let a = self.value(d, depth, true);
                let scan = self.scan_text("cumsum", &a.text);
                f(scan, true)
            }
        }
    }

    /// `a / b` where `b` is an input (exact kernels only: it is never -0.0, whose sign a
    /// maximum of zeros may choose differently on the GPU), else `a / (abs(b) + 1.0)`, which
    /// neither divides by zero nor magnifies an approximate numerator's error.
    fn float_division(&mut self, d: DType, depth: u32, approx_ok: bool) -> Value {
        let a = self.value(d, depth, approx_ok);
        let inputs: Vec<usize> = (0..self.vars.len())
            .filter(|&i| self.vars[i].loaded && self.vars[i].dtype == d)
            .collect();
        if !self.approx_allowed && !inputs.is_empty() && self.chance(50) {
            let i = self.pick(&inputs);
            self.vars[i].uses += 1;
            return Value {
                text: format!("({} / {})", a.text, self.vars[i].text),
                ..a
            };
        }
        let b = self.value(d, depth, approx_ok);
        Value {
            text: format!("({} / (abs({}) + 1.0))", a.text, b.text),
            dtype: d,
            approx: a.approx || b.approx,
        }
    }

    /// exp, exp2, log, log2 or rsqrt of an f32 value, bounded so that nothing overflows.
    fn approximate_math(&mut self, depth: u32) -> Value {
        let a = self.value(DType::F32, depth, true).text;
        let text = match self.rng.below(5) {
            0 => format!("exp(minimum({a}, 4.0))"),
            1 => format!("exp2(minimum({a}, 4.0))"),
            2 => format!("log(abs({a}) + 1.0)"),
            3 => format!("log2(abs({a}) + 1.0)"),
            _ => format!("rsqrt(abs({a}) + 1.0)"),
        };
        Value {
            text,
            dtype: DType::F32,
            approx: true,
        }
    }

    fn int_value(&mut self, d: DType, depth: u32) -> Value {
        let f = |text: String| Value {
            text,
            dtype: d,
            approx: false,
        };
        match self.rng.below(11) {
            0 | 1 => {
                let (a, b) = (self.value(d, depth, false), self.operand(d, depth, false));
                let op = self.pick(&["+", "-", "*"]);
                f(format!("({} {op} {})", a.text, b.text))
            }
            2 => {
                // `b | 1` is odd, so never zero.
                let (a, b) = (self.value(d, depth, false), self.value(d, depth, false));
                let op = self.pick(&["/", "%"]);
                f(format!("({} {op} ({} | 1))", a.text, b.text))
            }
            3 => {
                let (a, b) = (self.value(d, depth, false), self.operand(d, depth, false));
                let op = self.pick(&["&", "|", "^"]);
                f(format!("({} {op} {})", a.text, b.text))
            }
            4 => {
                let a = self.value(d, depth, false);
                let op = self.pick(&["<<", ">>"]);
                let amount = match self.rng.below(3) {
                    0 => self.between(0, 9).to_string(),
                    1 => format!("({} & 15)", self.value(d, depth, false).text),
                    // Any amount: negative and too wide ones are defined too.
                    _ => self.value(d, depth, false).text,
                };
                f(format!("({} {op} {amount})", a.text))
            }
            5 => {
                let (a, b) = (self.value(d, depth, false), self.operand(d, depth, false));
                let func = self.pick(&["maximum", "minimum"]);
                f(format!("{func}({}, {})", a.text, b.text))
            }
            6 => {
                let a = self.value(d, depth, false).text;
                f(match self.rng.below(3) {
                    0 => format!("(-{a})"),
                    1 => format!("abs({a})"),
                    _ => format!("(!{a})"),
                })
            }
            7 => self.choice(d, depth, false),
            8 => self.with_reduction(d, depth, false),
            9 if self.layout.is_1d() && self.chance(50) => self.outer_reduction(d, false),
            9 => {
                let a = self.value(d, depth, false);
                let scan = if self.chance(80) { "cumsum" } else { "cumprod" };
                let text = self.scan_text(scan, &a.text);
                f(convert(&text, accumulated(d), d))
            }
            _ => self.conversion(d, depth),
        }
    }

    fn bool_value(&mut self, depth: u32) -> Value {
        let text = match self.rng.below(4) {
            0 | 1 => {
                let numeric: Vec<DType> = self.dtypes.iter().copied().filter(|d| !d.is_bool()).collect();
                let d = if numeric.is_empty() {
                    DType::I32
                } else {
                    self.pick(&numeric)
                };
                let (a, b) = (self.value(d, depth, false), self.operand(d, depth, false));
                let op = self.pick(&["<", "<=", ">", ">=", "==", "!="]);
                format!("({} {op} {})", a.text, b.text)
            }
            2 => {
                let (a, b) = (
                    self.value(DType::Bool, depth, false),
                    self.value(DType::Bool, depth, false),
                );
                let op = self.pick(&["&&", "||", "^", "&", "!="]);
                format!("({} {op} {})", a.text, b.text)
            }
            _ if self.chance(50) => format!("(!{})", self.value(DType::Bool, depth, false).text),
            _ => return self.conversion(DType::Bool, depth),
        };
        Value {
            text,
            dtype: DType::Bool,
            approx: false,
        }
    }

    /// The second operand of a binary operation: a value, or sometimes a literal that fits
    /// every dtype of its kind.
    fn operand(&mut self, d: DType, depth: u32, approx_ok: bool) -> Value {
        if !self.chance(25) {
            return self.value(d, depth, approx_ok);
        }
        let text = if d.is_float() {
            self.pick(&["0.5", "2.0", "1.5", "0.25", "3.0", "-1.0"]).to_string()
        } else {
            self.between(1, 7).to_string()
        };
        Value {
            text,
            dtype: d,
            approx: false,
        }
    }

    /// `where(cond, a, b)` with an exact condition.
    fn choice(&mut self, d: DType, depth: u32, approx_ok: bool) -> Value {
        let c = self.value(DType::Bool, depth, false);
        let (a, b) = (self.value(d, depth, approx_ok), self.operand(d, depth, approx_ok));
        Value {
            text: format!("where({}, {}, {})", c.text, a.text, b.text),
            dtype: d,
            approx: a.approx || b.approx,
        }
    }

    /// A value of another dtype converted to `d` (exact: approximate values keep their dtype).
    fn conversion(&mut self, d: DType, depth: u32) -> Value {
        let from = self.pick(&[&INTS[..], &FLOATS[..], &[DType::Bool]].concat());
        let v = self.value(from, depth, false);
        let text = if from == DType::F32 && matches!(d, DType::F16 | DType::BF16) && self.chance(30) {
            format!("{}.to({}, rounding: \"rtz\")", v.text, d.name())
        } else {
            convert(&v.text, from, d)
        };
        Value {
            text,
            dtype: d,
            approx: false,
        }
    }

    /// `a op reduce(b)`, the reduction broadcast back over the tile. Float sums are
    /// approximate (the GPU may add in another order); max and min are exact.
    fn with_reduction(&mut self, d: DType, depth: u32, approx_ok: bool) -> Value {
        let a = self.value(d, depth, approx_ok);
        let b = self.value(d, depth, approx_ok);
        let (reduction, approx) = self.reduction(d, approx_ok);
        let reduced = convert(
            &self.reduction_text(reduction, &b.text),
            accumulated_by(reduction, d),
            d,
        );
        let op = if d.is_float() {
            self.pick(&["+", "-", "*", "max"])
        } else {
            self.pick(&["+", "-", "^", "max"])
        };
        let text = match op {
            "max" => format!("maximum({}, {reduced})", a.text),
            _ => format!("({} {op} {reduced})", a.text),
        };
        Value {
            text,
            dtype: d,
            approx: a.approx || b.approx || approx,
        }
    }

    /// A reduction usable on `d` and whether its result is approximate.
    fn reduction(&mut self, d: DType, approx_ok: bool) -> (&'static str, bool) {
        if d.is_float() {
            match self.rng.below(3) {
                0 if approx_ok => ("sum", true),
                0 | 1 => ("max", false),
                _ => ("min", false),
            }
        } else {
            (self.pick(&["sum", "max", "min", "xor_sum"]), false)
        }
    }

    /// `sum(t, axis: 0)` in 1-D (a scalar, which broadcasts); in 2-D along either axis with
    /// the axis put back (`[:, None]`, `[None, :]` or `keep_dims`), or over the whole tile.
    fn reduction_text(&mut self, reduction: &str, t: &str) -> String {
        if self.layout.is_1d() {
            return match self.rng.below(2) {
                0 => format!("{reduction}({t}, axis: 0)"),
                _ => format!("{reduction}({t})"),
            };
        }
        match self.rng.below(6) {
            0 => format!("{reduction}({t}, axis: 1)[:, None]"),
            1 => format!("{reduction}({t}, axis: -1)[:, None]"),
            2 => format!("{reduction}({t}, axis: 0)[None, :]"),
            3 => format!("{reduction}({t}, axis: 1, keep_dims: true)"),
            4 => format!("{reduction}({t}, axis: 0, keep_dims: true)"),
            _ => format!("{reduction}({t})"),
        }
    }

    /// `cumsum(t, ..)` (or another scan) along a random axis, sometimes reversed.
    fn scan_text(&mut self, scan: &str, t: &str) -> String {
        let axis = if self.layout.is_1d() { 0 } else { self.rng.below(2) };
        let reverse = if self.chance(30) { ", reverse: true" } else { "" };
        format!("{scan}({t}, axis: {axis}{reverse})")
    }

    /// In 1-D: a reduction of the outer combination of two variables, `[BLOCK, BLOCK]` through
    /// `x[:, None]` and `y[None, :]`, back to `[BLOCK]`.
    fn outer_reduction(&mut self, d: DType, approx_ok: bool) -> Value {
        let (a, b) = (self.leaf(d, approx_ok), self.leaf(d, approx_ok));
        let (reduction, approx) = self.reduction(d, approx_ok);
        let op = if d.is_float() {
            self.pick(&["+", "-", "*"])
        } else {
            self.pick(&["+", "*", "^"])
        };
        let axis = self.rng.below(2);
        let text = format!(
            "{reduction}(({}[:, None] {op} {}[None, :]), axis: {axis})",
            a.text, b.text
        );
        Value {
            text: convert(&text, accumulated_by(reduction, d), d),
            dtype: d,
            approx: a.approx || b.approx || approx,
        }
    }

    // ---- the kernel and its run spec ---------------------------------------------------------

    fn kernel(&self, name: &str, stores: Vec<String>) -> String {
        let consts = match self.layout {
            Layout::Flat { block } | Layout::RowLoop { block } => format!("const BLOCK: i32 = {block}"),
            Layout::Tiles { rows, cols } => format!("const BR: i32 = {rows}, const BC: i32 = {cols}"),
        };
        let mut params: Vec<String> = self
            .inputs
            .iter()
            .map(|i| format!("{}: *{}", i.name, i.dtype.name()))
            .collect();
        params.push("out: *mut f32".into());
        if let Some(d) = self.int_output {
            params.push(format!("out_i: *mut {}", d.name()));
        }
        params.extend(match self.layout {
            Layout::Tiles { .. } => ["n_rows: i32", "n_cols: i32"].map(String::from).to_vec(),
            _ => vec!["n: i32".into()],
        });
        if self.uses_reps {
            params.push("reps: i32".into());
        }
        let mut lines = vec![format!("kernel {name}<{consts}>({}) {{", params.join(", "))];
        let (prologue, indent) = self.prologue();
        lines.extend(prologue.iter().map(|l| format!("    {l}")));
        let work = self.body.iter().chain(&stores);
        lines.extend(work.map(|l| format!("{indent}{l}")));
        if let Layout::RowLoop { .. } = self.layout {
            lines.push(format!("{indent}{}", self.carry_update()));
            lines.push("    }".into());
        }
        lines.push("}".into());
        lines.join("\n") + "\n"
    }

    /// The statements before the work (offsets, mask; the row loop's header) and the work's
    /// indentation.
    fn prologue(&self) -> (Vec<String>, &'static str) {
        match self.layout {
            Layout::Flat { .. } => (
                vec![
                    "let offs = program_id(0) * BLOCK + arange(0, BLOCK);".into(),
                    "let mask = offs < n;".into(),
                ],
                "    ",
            ),
            Layout::Tiles { .. } => (
                vec![
                    "let rows = program_id(0) * BR + arange(0, BR);".into(),
                    "let cols = program_id(1) * BC + arange(0, BC);".into(),
                    "let mask = (rows < n_rows)[:, None] && (cols < n_cols)[None, :];".into(),
                    "let offs = rows[:, None] * n_cols + cols[None, :];".into(),
                ],
                "    ",
            ),
            Layout::RowLoop { .. } => (
                vec![
                    "let row = program_id(0);".into(),
                    format!("let mut carry = zeros([], {});", self.carry_dtype().name()),
                    "for off in (0..n).step_by(BLOCK) {".into(),
                    "    let cols = off + arange(0, BLOCK);".into(),
                    "    let mask = cols < n;".into(),
                    "    let offs = row * n + cols;".into(),
                ],
                "        ",
            ),
        }
    }

    /// The row loop's carry: f32 in approximate kernels, else an integer (exact in any order).
    fn carry_dtype(&self) -> DType {
        if self.approx_allowed { DType::F32 } else { DType::I64 }
    }

    /// `carry = carry op reduce(v);` with the first variable of the chunk (always exact: a load).
    fn carry_update(&self) -> String {
        let v = &self.vars[0];
        let d = self.carry_dtype();
        let t = convert(&v.text, v.dtype, d);
        if d.is_float() {
            format!("carry = (carry + sum({t}, axis: 0));")
        } else {
            format!("carry = (carry ^ sum({t}, axis: 0)) + max({t}, axis: 0);")
        }
    }

    fn spec(&mut self, name: &str) -> String {
        let mut lines = vec![format!("run {name} {{")];
        let (sizes, grid, shape) = self.sizes_and_grid();
        lines.push(format!("    sizes({sizes});"));
        if let Layout::Flat { block } = self.layout {
            if block > 16 && self.chance(25) {
                lines.push(format!("    consts(BLOCK: [{block}, {}]);", block / 2));
            }
        }
        lines.push(format!("    grid({grid});"));
        let mut args: Vec<String> = vec![];
        for i in 0..self.inputs.len() {
            let input_shape = if self.inputs[i].row_vector { "[rows]" } else { shape };
            let generator = self.generator(self.inputs[i].dtype, input_shape);
            args.push(format!("{}: {generator}", self.inputs[i].name));
        }
        args.push(format!("out: output({shape})"));
        if self.int_output.is_some() {
            args.push(format!("out_i: output({shape})"));
        }
        args.extend(match self.layout {
            Layout::Tiles { .. } => vec!["n_rows: rows".into(), "n_cols: cols".into()],
            _ => vec!["n: n".to_string()],
        });
        if self.uses_reps {
            args.push(format!("reps: {}", self.pick(&[0, 1, 2, 3])));
        }
        lines.push(format!("    args({});", args.join(", ")));
        lines.push(if self.is_approximate() {
            "    tolerance(rtol: 1e-3, atol: 1e-3);".into()
        } else {
            "    tolerance(rtol: 0, atol: 0);".into()
        });
        lines.push("}".into());
        lines.join("\n") + "\n"
    }

    /// Whether the kernel is compared with a tolerance: it used an approximate operation, or it
    /// has an f32 carry (which adds in the row loop's order, as the GPU does, but adds float sums
    /// over a chunk, which are approximate).
    fn is_approximate(&self) -> bool {
        self.approx_used || matches!(self.layout, Layout::RowLoop { .. }) && self.carry_dtype().is_float()
    }

    /// The run spec's sizes (ragged: not multiples of the block), grid and array shape.
    fn sizes_and_grid(&mut self) -> (String, &'static str, &'static str) {
        match self.layout {
            Layout::Flat { block } => {
                let n = [
                    1,
                    self.between(2, block - 1),
                    block * self.between(1, 3) + self.between(1, block - 1),
                ];
                (format!("n: {n:?}"), "cdiv(n, BLOCK)", "[n]")
            }
            Layout::Tiles { rows, cols } => {
                let r = [1, rows * self.between(1, 2) + self.between(1, rows.max(2) - 1)];
                let c = [
                    self.between(1, cols - 1),
                    cols * self.between(1, 2) + self.between(1, cols - 1),
                ];
                (
                    format!("rows: {r:?}, cols: {c:?}"),
                    "cdiv(rows, BR), cdiv(cols, BC)",
                    "[rows, cols]",
                )
            }
            Layout::RowLoop { block } => {
                let rows = [1, self.between(2, 3)];
                let n = [
                    self.between(1, block - 1),
                    block * self.between(1, 2) + self.between(1, block - 1),
                ];
                (format!("rows: {rows:?}, n: {n:?}"), "rows", "[rows, n]")
            }
        }
    }

    /// The generator of an input: normal samples for floats, integers over the dtype's whole
    /// range or a small one (small values make divisions, shifts and comparisons interesting).
    fn generator(&mut self, d: DType, shape: &str) -> String {
        if d.is_float() {
            return format!("randn({shape})");
        }
        let small = self.chance(50);
        let (lo, hi): (i64, i64) = match d {
            DType::Bool => (0, 2),
            _ if small && d.is_signed() => (-9, 10),
            _ if small => (0, 10),
            DType::I8 => (-128, 128),
            DType::I16 => (-32768, 32768),
            DType::I32 => (-2147483648, 2147483648),
            DType::I64 => (-1_000_000_000_000_000, 1_000_000_000_000_000),
            DType::U8 => (0, 256),
            DType::U16 => (0, 65536),
            _ => (0, 4294967296),
        };
        format!("randint({shape}, {lo}, {hi})")
    }
}

/// `text.to(to)`, or `text` when it already has that dtype.
fn convert(text: &str, from: DType, to: DType) -> String {
    if from == to {
        text.to_string()
    } else {
        format!("{text}.to({})", to.name())
    }
}

/// The dtype `sum`, `cumsum` and `cumprod` return for `d`: narrow integers widen to 32 bits.
fn accumulated(d: DType) -> DType {
    match d {
        DType::Bool | DType::I8 | DType::I16 => DType::I32,
        DType::U8 | DType::U16 => DType::U32,
        d => d,
    }
}

/// The dtype a reduction returns for `d` (`max`, `min` and `xor_sum` never widen).
fn accumulated_by(reduction: &str, d: DType) -> DType {
    if reduction == "sum" { accumulated(d) } else { d }
}

/// SplitMix64's finaliser: nearby seeds give unrelated xorshift states (and never 0).
fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
