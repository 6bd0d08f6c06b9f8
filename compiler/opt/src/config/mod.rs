//! The static choice of a kernel's configuration: its tunable compile-time values
//! (`const X: i32 in [..]`), `num_warps` and `num_stages`, under the target's register and
//! shared-memory limits, without running anything.
//!
//! Candidates are the product of every unpinned tunable's list with the warps and stages lists.
//! Each is checked with its bindings and estimated (registers per thread, shared memory,
//! occupancy, a roofline time over the grid of the file's largest run-spec case); one over the
//! register budget or the shared-memory limit is infeasible; the cheapest feasible one wins,
//! ties (estimates within [`TIE`] of the cheapest, or equal where DRAM binds it) going to fewer
//! warps, then to a wgmma kept in flight across a pipelined loop's iterations, then to larger
//! TMA stages, then fewer stages (more where a wgmma stays in flight or a producer warpgroup
//! feeds the loop), then the cheaper estimate, then the earlier candidate.
//!
//! `dtype` parameters are not tuned: the element type is part of the problem, not of the
//! schedule. They come from the pins, else the run spec's case, else their first choice.

mod model;
mod target;

use std::collections::HashMap;
use std::fmt;

use rayon::prelude::*;

pub use model::{BASE_REGS, Launch, NARROW_ACCESS_COST, Work, registers, work};
pub use target::TargetDesc;
use tile_lang::check::{self, Bindings, Sizes};
use tile_lang::ir::Scalar;
use tile_lang::ir::{ConstValue, DType, Kernel, ValueId};
use tile_lang::spec;
use tile_lang::syntax::ast;

/// `num_warps` candidates when a kernel has no `#[warps(..)]`.
pub const DEFAULT_WARPS: &[u32] = &[1, 2, 4, 8];
/// `num_stages` candidates when a kernel has no `#[stages(..)]`: no pipelining unless asked.
pub const DEFAULT_STAGES: &[u32] = &[1];
/// `num_stages` candidates when a kernel has no `#[stages(..)]` but a loop loads what a `dot`
/// in it multiplies.
pub const DOT_LOOP_STAGES: &[u32] = &[2, 3, 4];

/// Whether some loop of `k` loads an operand of a `dot` in its body.
fn feeds_dots(k: &Kernel) -> bool {
    use tile_lang::ir::OpKind;
    let mut found = false;
    k.walk(&mut |op| {
        if !matches!(op.kind, OpKind::For { .. }) || found {
            return;
        }
        let body = &op.regions[0];
        // Loaded values, and what a transposition, reshape or cast makes of them (`trans(b)`).
        let mut loaded: std::collections::HashSet<ValueId> = std::collections::HashSet::new();
        for o in &body.ops {
            let from_load = match o.kind {
                OpKind::Load { .. } | OpKind::LoadBlock { .. } => true,
                OpKind::Permute(_) | OpKind::Reshape | OpKind::Cast(_) => loaded.contains(&o.operands[0]),
                _ => false,
            };
            if from_load {
                loaded.insert(o.results[0]);
            }
        }
        found = body
            .ops
            .iter()
            .any(|o| matches!(o.kind, OpKind::Dot(_)) && o.operands[..2].iter().any(|v| loaded.contains(v)));
    });
    found
}

/// Without a run spec: every integer argument is this, and the grid has this many programs.
pub const DEFAULT_INT_ARG: i64 = 4096;
pub const DEFAULT_GRID: u32 = 4096;
/// Estimates within this fraction of the cheapest are ties: the model cannot tell them apart, so
/// the tie-break decides among them (`choose_on`; not where DRAM binds the cheapest, whose
/// small differences are bytes in flight), and the tuner's shortlist never cuts between them
/// (`tile_jit::tune`).
pub const TIE: f64 = 0.01;

/// The share of its register budget above which a tied candidate without tensor cores is taken
/// only when no tied one stays under it (the tie-break in `choose_with`).
pub const CROWDED_REGS: f64 = 0.8;

/// How far above its even share of DRAM bandwidth one SM can stream when the grid leaves others
/// idle: a decode-shaped GEMM's 64 programs on the H100's 132 SMs streamed W as fast as 128
/// did (M = 1, K = N = 4096: 0.0200 against 0.0205 ms, bench/records/2026-12-07h-h100).
pub const DRAM_SM_SHARE: f64 = 4.0;

/// The largest split the model offers (`tile_gir::split`; larger ones are pinned with
/// `--split`): on the H100 a split of 2 took M = 64, K = N = 4096 from 0.0281 to 0.0225 ms,
/// where 4 took 0.0296 and 8 (at M = 1) 0.0277 against 0.0200 unsplit
/// (bench/records/2026-12-07h-h100).
pub const MODEL_MAX_SPLIT: u32 = 2;

/// What the user fixed (`-D NAME=VALUE`, `--num-warps`, `--num-stages`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pins {
    pub consts: Bindings,
    pub num_warps: Option<u32>,
    pub num_stages: Option<u32>,
    /// A pinned split (`--split`, the tuner's winner): the model offers no other.
    pub split: Option<u32>,
}

/// One configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Every compile-time value the kernel was checked with (pinned, fixed and tuned).
    pub consts: Bindings,
    pub num_warps: u32,
    pub num_stages: u32,
    /// Programs of a thread-block cluster that share the kernel's loop (`tile_gir::split`; 1:
    /// none). The model offers more than 1 where the grid leaves SMs idle.
    pub split: u32,
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, v) in &self.consts {
            write!(f, "{n}={v} ")?;
        }
        write!(f, "warps={} stages={}", self.num_warps, self.num_stages)?;
        if self.split > 1 {
            write!(f, " split={}", self.split)?;
        }
        Ok(())
    }
}

/// The model's figures for one candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub registers: u32,
    /// Registers a thread may use at this block size without spilling.
    pub reg_budget: u32,
    pub smem_bytes: u32,
    pub threads: u32,
    pub blocks_per_sm: u32,
    /// Programs an SM runs at once: `blocks_per_sm`, or fewer when the grid has fewer programs
    /// per SM (a persistent grid of one program per SM).
    pub resident: u32,
    /// Resident warps per SM over the SM's maximum.
    pub occupancy: f64,
    pub programs: u64,
    pub work: Work,
    /// Roofline seconds over the whole grid: the largest of the three below.
    pub time_s: f64,
    pub dram_s: f64,
    pub alu_s: f64,
    /// The two parts of `alu_s`: the tensor cores' time and the other instructions'.
    pub tensor_s: f64,
    pub insts_s: f64,
    pub smem_s: f64,
    /// Iterations a pipelined loop copies ahead (the most over its loops; 0: none).
    pub copies_ahead: u32,
    /// The share of a program's re-read bytes ([`Work::reread_bytes`]) that L2 still holds
    /// when they are read again (`None`: the program reads nothing twice).
    pub l2_keeps: Option<f64>,
    /// Whether a pipelined loop keeps a wgmma in flight across iterations (4 stages or more).
    pub wgmma_in_flight: bool,
    /// Bytes the TMA engine copies into one stage (the most over the kernel's loops; 0: no TMA).
    pub tma_stage_bytes: u32,
    /// Bytes of one pipeline stage, copied by the TMA engine or by cp.async (the most over the
    /// kernel's loops; 0: nothing pipelined).
    pub stage_bytes: u32,
    /// Whether a producer warpgroup issues a loop's copies (counted in `threads`).
    pub producer: bool,
    /// Whether that producer runs the tile loop around its loop too (a persistent kernel).
    pub producer_runs_tiles: bool,
    /// Whether the consumer warpgroups take turns issuing the loop's wgmma (`#[pingpong]`).
    pub pingpong: bool,
    /// Programs per thread-block cluster (`#[cluster(N)]`; 1: none).
    pub cluster: u32,
    /// Programs that share the loop (a split over a cluster of that many; 1: none).
    pub split: u32,
    /// Bytes of one stage that the programs of a cluster copy once for all (TMA multicast,
    /// `tile_gir::pipeline::multicast`; the most over the kernel's loops; 0: none). The memory
    /// term still counts them in every program.
    pub multicast_bytes: u32,
    /// The integer arguments of the launch estimated, by parameter (what a JIT launch of that
    /// case specialises on).
    pub int_args: HashMap<ValueId, i64>,
    /// Fast paths this candidate's plan does not take, and why (`explain` prints the chosen
    /// one's).
    pub refusals: Vec<tile_gir::Refusal>,
}

impl Estimate {
    /// Which roofline term bounds the time.
    pub fn bound(&self) -> &'static str {
        if self.time_s == self.dram_s {
            "memory"
        } else if self.time_s == self.smem_s {
            "shared memory"
        } else {
            "ALU"
        }
    }
}

/// Why a candidate was or was not chosen.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Chosen,
    /// Over the register budget: ptxas would spill.
    Spills {
        registers: u32,
        budget: u32,
    },
    SharedMemory {
        need: u32,
        limit: u32,
    },
    /// Feasible, but the model says it is slower than the chosen one by this factor.
    Slower(f64),
    /// Feasible and estimated within the tie band of the cheapest (its time over the chosen
    /// one's): the tie-break took the chosen one.
    Tie(f64),
    /// The kernel does not check with these values (its message).
    Invalid(String),
    /// The problem breaks one of the kernel's `#[requires(..)]` clauses with these values
    /// (what the clause read), where other candidates satisfy them all: the launch would be
    /// refused.
    Breaks(String),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Chosen => write!(f, "chosen"),
            Verdict::Spills { registers, budget } => {
                write!(f, "spills: ~{registers} registers over the budget of {budget}")
            }
            Verdict::SharedMemory { need, limit } => {
                write!(f, "shared memory: {need} B over the limit of {limit} B")
            }
            Verdict::Slower(x) => write!(f, "slower by the model: x{x:.2}"),
            Verdict::Tie(x) => write!(f, "tied by the model (x{x:.2}); the tie-break took the chosen one"),
            Verdict::Invalid(m) => write!(f, "does not check: {m}"),
            Verdict::Breaks(m) => write!(f, "breaks the kernel's #[requires]: {m}"),
        }
    }
}

/// One candidate, its estimate (absent when it does not check) and its verdict.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub config: Config,
    pub estimate: Option<Estimate>,
    pub verdict: Verdict,
    /// The checked kernel (absent when it does not check).
    pub kernel: Option<Kernel>,
}

impl Candidate {
    pub fn feasible(&self) -> bool {
        matches!(self.verdict, Verdict::Chosen | Verdict::Slower(_) | Verdict::Tie(_))
    }

    /// Chosen only because every candidate is over the register budget (the one estimated to
    /// need the fewest registers; see `choose_on`'s fallback).
    pub fn fallback(&self) -> bool {
        matches!(self.verdict, Verdict::Chosen) && self.estimate.as_ref().is_some_and(|e| e.registers > e.reg_budget)
    }
}

/// The outcome: every candidate in enumeration order, and which one won.
#[derive(Clone, Debug)]
pub struct Choice {
    pub kernel: String,
    /// The names of the tuned parameters (unpinned `in [..]` lists that are not dtypes).
    pub tuned: Vec<String>,
    /// Where the roofline's problem size came from.
    pub problem: String,
    /// The pins the candidates were enumerated with: the caller's, plus the values the run
    /// spec computes from the problem's sizes.
    pub pins: Pins,
    pub candidates: Vec<Candidate>,
    pub chosen: usize,
}

impl Choice {
    pub fn best(&self) -> &Candidate {
        &self.candidates[self.chosen]
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("no kernel named `{0}`")]
    NoKernel(String),
    #[error("`{name}`: a choice must be a literal (an integer, float, bool or dtype)")]
    BadChoice { name: String },
    #[error("the kernel does not check with its default values: {0}")]
    Check(String),
    #[error("the run spec's largest case cannot be prepared: {0}")]
    Spec(String),
    #[error("no candidate is feasible on {target} (first: {first})")]
    NoneFeasible { target: String, first: String },
    #[error("{0} is not a candidate: pin one of {1}")]
    BadPin(String, String),
}

/// The literal value of a choice.
fn literal(e: &ast::Expr) -> Option<ConstValue> {
    use ast::ExprKind as K;
    match &e.kind {
        K::Int(i) => Some(ConstValue::Int(i64::try_from(*i).ok()?)),
        K::Float(f) => Some(ConstValue::Float(*f)),
        K::Bool(b) => Some(ConstValue::Bool(*b)),
        K::Name(n) => DType::from_name(n).map(ConstValue::DType),
        K::Paren(e) => literal(e),
        K::Unary(ast::UnOp::Neg, e) => match literal(e)? {
            ConstValue::Int(i) => Some(ConstValue::Int(-i)),
            ConstValue::Float(f) => Some(ConstValue::Float(-f)),
            _ => None,
        },
        _ => None,
    }
}

fn is_dtype(c: &ast::ConstParam) -> bool {
    matches!(&c.ty, ast::TypeExpr::Named(n) if n.name == "dtype")
}

fn first_message(d: &[tile_lang::diag::Diagnostic]) -> String {
    d.first().map(|d| d.message.clone()).unwrap_or_default()
}

/// The problem the roofline is evaluated on: the largest `bench(..)` case (by the product of its
/// sizes) of the kernel's run specs — the size it is meant to run at — else their largest
/// verification case, else `DEFAULT_INT_ARG` / `DEFAULT_GRID` without a run spec.
struct Problem {
    spec: Option<(spec::RunSpec, spec::Case)>,
    /// A launch's integer arguments and grid, when the problem is a launch (`On::Launch`).
    launch: Option<LaunchProblem>,
    /// The integer arguments the kernel is checked for (computed compile-time values read them).
    sizes: Sizes,
    /// The kernel's `#[grid(..)]`, for a launch's grid.
    grid_attr: Vec<ast::Expr>,
    /// What the launch's arguments are known to satisfy, one per parameter (empty: integers
    /// by their value, pointers 16-byte aligned).
    facts: Vec<tile_gir::ArgSpec>,
    label: String,
}

/// What the static model estimates the candidates on.
#[derive(Clone, Copy, Debug)]
pub enum On<'a> {
    /// The kernel's largest `bench(..)` case, else its run specs' largest case, else
    /// [`DEFAULT_INT_ARG`] for every integer argument and [`DEFAULT_GRID`] programs.
    File,
    /// A run spec's case: its sizes, and the values its spec computes from them.
    Case(&'a spec::RunSpec, &'a spec::Case),
    /// A launch: its integer arguments (the JIT's shape bucket, `tilec compile --size`).
    Launch(&'a LaunchProblem),
}

/// A launch the model plans for: integer arguments by parameter name (others count as
/// [`DEFAULT_INT_ARG`]), and the grid the kernel's `#[grid(..)]` gives for each candidate (else
/// `grid`, else [`DEFAULT_GRID`] programs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaunchProblem {
    pub sizes: Sizes,
    pub grid: Option<[u32; 3]>,
}

fn problem(file: &ast::File, kernel: &str, pins: &Bindings) -> Result<Problem, ConfigError> {
    let (specs, _) = spec::parse_specs(file);
    let specs: Vec<spec::RunSpec> = specs.into_iter().filter(|s| s.kernel == kernel).collect();
    let grid_attr = grid_attr(file, kernel);
    if specs.is_empty() {
        return Ok(Problem {
            spec: None,
            launch: None,
            sizes: Sizes::default(),
            facts: Vec::new(),
            label: if grid_attr.is_empty() {
                format!("no run spec: integer arguments {DEFAULT_INT_ARG}, {DEFAULT_GRID} programs")
            } else {
                format!("no run spec: integer arguments {DEFAULT_INT_ARG}, the grid of `#[grid(..)]`")
            },
            grid_attr,
        });
    }
    // The values the kernel is compiled with: the pins, else the kernel's literal defaults. A
    // case that binds one of them to another value describes another kernel (attention's head
    // dim 128 bench when compiling for 64), so the bench cases that agree come first; then
    // the other bench cases (their sizes, the pins' values), which stand for a real launch
    // better than a small verification case; then the run specs' cases alike.
    let mut wanted: Bindings = pins.clone();
    if let Some(def) = check::find_kernel(file, kernel) {
        for c in &def.consts {
            if let ast::ConstValueSpec::Default(e) = &c.value
                && !pins.iter().any(|(n, _)| *n == c.name.name)
                && let Some(v) = literal(e)
            {
                wanted.push((c.name.name.clone(), v));
            }
        }
    }
    let agrees = |c: &spec::Case| {
        wanted
            .iter()
            .all(|(n, v)| c.consts.iter().find(|(m, _)| m == n).is_none_or(|(_, w)| w == v))
    };
    let size = |c: &spec::Case| c.sizes.iter().map(|(_, v)| (*v).max(1) as f64).product::<f64>();
    let largest = |bench: bool, strict: bool| -> Result<Option<(spec::RunSpec, spec::Case)>, ConfigError> {
        let mut best: Option<(spec::RunSpec, spec::Case)> = None;
        for s in &specs {
            let cases = if bench { spec::bench_cases(s) } else { spec::cases(s) };
            for c in cases.map_err(|d| ConfigError::Spec(d.message))? {
                if (!strict || agrees(&c)) && best.as_ref().is_none_or(|(_, b)| size(&c) > size(b)) {
                    best = Some((s.clone(), c));
                }
            }
        }
        Ok(best)
    };
    let found = [(true, true), (true, false), (false, true), (false, false)]
        .into_iter()
        .map(|(bench, strict)| Ok(largest(bench, strict)?.map(|f| (bench, f))))
        .find_map(|r: Result<_, ConfigError>| r.transpose())
        .transpose()?;
    let (kind, found) = match found {
        Some((true, b)) => ("bench case", b),
        Some((false, b)) => ("run spec, largest case", b),
        None => return Err(ConfigError::Spec("no cases".into())),
    };
    let mut label = format!(
        "{kind}: {}",
        found
            .1
            .sizes
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let replaced: Vec<String> = found
        .1
        .consts
        .iter()
        .filter(|(n, v)| wanted.iter().any(|(m, w)| m == n && w != v))
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    if !replaced.is_empty() {
        label += &format!(" (its sizes; the kernel's values replace its {})", replaced.join(" "));
    }
    Ok(Problem {
        sizes: spec::case_sizes(&found.0, &found.1),
        spec: Some(found),
        launch: None,
        grid_attr,
        facts: Vec::new(),
        label,
    })
}

/// The `#[grid(..)]` extents of `kernel` (empty without one).
fn grid_attr(file: &ast::File, kernel: &str) -> Vec<ast::Expr> {
    check::find_kernel(file, kernel)
        .and_then(|def| def.attrs.iter().find(|a| a.name.name == "grid"))
        .map_or_else(Vec::new, |a| a.args.clone())
}

/// The grid `#[grid(..)]` gives for kernel `k` (checked with a candidate's values) at a launch
/// of `sizes` (parameters it does not give count as [`DEFAULT_INT_ARG`]).
pub fn launch_grid(grid: &[ast::Expr], k: &Kernel, sizes: &Sizes) -> Result<[u32; 3], String> {
    let env = |name: &str| -> Option<spec::Num> {
        match k.consts.iter().find(|(n, _)| n == name).map(|(_, v)| *v) {
            Some(ConstValue::Int(i)) => return Some(spec::Num::I(i)),
            Some(ConstValue::Bool(b)) => return Some(spec::Num::I(b as i64)),
            _ => {}
        }
        k.params
            .iter()
            .any(|p| p.name == name && p.elem.dtype().is_some_and(|d| d.is_int()))
            .then(|| spec::Num::I(sizes.get(name).unwrap_or(DEFAULT_INT_ARG)))
    };
    let mut out = [1u32; 3];
    for (axis, e) in grid.iter().enumerate().take(3) {
        match spec::eval(e, &env) {
            Ok(spec::Num::I(v)) if v >= 1 && v <= u32::MAX as i64 => out[axis] = v as u32,
            Ok(spec::Num::I(v)) if v <= 0 => out[axis] = 1,
            Ok(v) => return Err(format!("grid extent {axis} is {v:?}")),
            Err(d) => return Err(d.message),
        }
    }
    Ok(out)
}

impl Problem {
    /// Compile-time values the run spec computes from the sizes (`BLOCK: next_pow2(cols)`) are
    /// what the kernel needs at that size (a row that must fit one block), not choices: they are
    /// pinned, unless the caller pinned them already.
    fn constraint_pins(&self, pins: &Pins) -> Pins {
        let mut out = pins.clone();
        if let Some((s, case)) = &self.spec {
            for (name, specs) in &s.consts {
                let computed = specs.iter().any(|c| matches!(c, spec::ConstSpec::Expr(_)));
                if computed
                    && !out.consts.iter().any(|(n, _)| n == name)
                    && let Some((_, v)) = case.consts.iter().find(|(n, _)| n == name)
                {
                    out.consts.push((name.clone(), *v));
                }
            }
        }
        out
    }

    /// The facts the caller gave, when there is one per parameter of `k`.
    fn facts(&self, k: &Kernel) -> Option<Vec<tile_gir::ArgSpec>> {
        (!self.facts.is_empty() && self.facts.len() == k.params.len()).then(|| self.facts.clone())
    }

    /// The launch of `k` (checked with a candidate's values) on this problem.
    fn launch(&self, k: &Kernel) -> Result<Launch, ConfigError> {
        if let Some(l) = &self.launch {
            let scalars = k
                .params
                .iter()
                .filter(|p| p.elem.dtype().is_some_and(|d| d.is_int()))
                .map(|p| (p.value, l.sizes.get(&p.name).unwrap_or(DEFAULT_INT_ARG)))
                .collect();
            let grid = if !self.grid_attr.is_empty() {
                launch_grid(&self.grid_attr, k, &l.sizes).map_err(ConfigError::Spec)?
            } else {
                l.grid.unwrap_or([DEFAULT_GRID, 1, 1])
            };
            return Ok(Launch {
                scalars,
                grid,
                specialization: self.facts(k),
            });
        }
        let Some((s, case)) = &self.spec else {
            let scalars = k
                .params
                .iter()
                .filter(|p| p.elem.dtype().is_some_and(|d| d.is_int()))
                .map(|p| (p.value, DEFAULT_INT_ARG))
                .collect();
            let grid = if self.grid_attr.is_empty() {
                [DEFAULT_GRID, 1, 1]
            } else {
                launch_grid(&self.grid_attr, k, &self.sizes).map_err(ConfigError::Spec)?
            };
            return Ok(Launch {
                scalars,
                grid,
                specialization: self.facts(k),
            });
        };
        let mut case = case.clone();
        case.consts = k.consts.clone();
        // The plan, not the data: bench cases hold gigabytes.
        let p = spec::plan(s, &case, k).map_err(|d| ConfigError::Spec(d.message))?;
        let scalars: HashMap<_, _> = k
            .params
            .iter()
            .zip(&p.args)
            .filter_map(|(param, a)| match a {
                spec::PlanArg::Scalar {
                    value: Scalar::I(i), ..
                } => Some((param.value, *i)),
                _ => None,
            })
            .collect();
        Ok(Launch {
            scalars,
            grid: p.grid,
            specialization: self.facts(k),
        })
    }
}

/// A candidate's verdict by its estimate alone: over the register budget, over the shared
/// memory limit, else feasible (`Slower(1.0)` until compared).
fn verdict_of(e: &Estimate, t: &TargetDesc) -> Verdict {
    if e.registers > e.reg_budget {
        Verdict::Spills {
            registers: e.registers,
            budget: e.reg_budget,
        }
    } else if e.smem_bytes > t.target.max_smem_per_block {
        Verdict::SharedMemory {
            need: e.smem_bytes,
            limit: t.target.max_smem_per_block,
        }
    } else {
        Verdict::Slower(1.0)
    }
}

/// Estimates one checked candidate (`split`: its loop split over clusters of that many
/// programs, where the kernel allows it; the launch is the kernel's own).
pub fn estimate(k: &Kernel, num_warps: u32, num_stages: u32, split: u32, launch: &Launch, t: &TargetDesc) -> Estimate {
    // The kernel the lowering will see for this launch: buffers aligned, integers by value.
    let specialization: Vec<_> = match &launch.specialization {
        Some(s) => s.clone(),
        None => k
            .params
            .iter()
            .map(|p| match launch.scalars.get(&p.value) {
                Some(v) => tile_gir::ArgSpec::of_int(*v),
                None if p.elem.is_ptr() => tile_gir::ArgSpec::of_ptr(0),
                None => tile_gir::ArgSpec::default(),
            })
            .collect(),
    };
    let stage = tile_gir::GpuStage::new(k, num_warps, num_stages, split, &t.target, &specialization);
    let (k, plan) = (stage.kernel(), &stage.plan);
    // A split kernel runs `split` programs for each of the launch's along axis 0.
    let scaled;
    let launch = match stage.split {
        1 => launch,
        s => {
            scaled = Launch {
                scalars: launch.scalars.clone(),
                grid: [launch.grid[0].saturating_mul(s), launch.grid[1], launch.grid[2]],
                specialization: launch.specialization.clone(),
            };
            &scaled
        }
    };
    let regs = registers(k, &plan);
    // The dynamic window and, for a cluster kernel, its static exchange array or a split's
    // slots.
    let smem = tile_gir::estimate::smem_bytes_in(k, &plan)
        + tile_gir::cluster::ClusterSlots::of(k).map_or(0, |c| c.bytes())
        + tile_gir::split::slot_bytes(k);
    // A producer warpgroup is part of the block; when it gives its registers to the kernel's
    // warps (setmaxnreg), the block takes the SM's registers and theirs is the split's count.
    let threads = plan.block_threads();
    let w = work(k, &plan, launch);
    let (alloc, reg_budget) = match plan.producer().and_then(|p| p.regs) {
        Some((_, consumer)) => (t.target.regs_per_sm, consumer),
        None => (
            regs.next_multiple_of(t.reg_granule) * threads,
            t.reg_budget(threads, w.mma_flops + w.wgmma_flops > 0.0),
        ),
    };
    let by_regs = t.target.regs_per_sm / alloc.max(1);
    let by_smem = t.target.blocks_by_smem(smem);
    let by_threads = t.max_threads_per_sm / threads;
    let blocks = by_regs.min(by_smem).min(by_threads).min(t.max_blocks_per_sm);
    let programs = launch.grid.iter().map(|g| *g as u64).product::<u64>();
    // Programs spread over the SMs; each SM runs its share in waves of `resident` blocks, at a
    // rate scaled down when too few load bytes (DRAM) or warps (ALU, shared memory) are in
    // flight to hide latency.
    let per_sm = programs.div_ceil(t.sms as u64).max(1) as f64;
    let resident = (blocks.max(1) as f64).min(per_sm);
    let warps = resident * num_warps as f64;
    let waves = (per_sm / resident).ceil();
    let sms = t.sms as f64;
    let term =
        |per_program: f64, rate: f64, efficiency: f64| waves * resident * per_program / (rate / sms * efficiency);
    let by_warps = |saturating: u32| (warps / saturating as f64).min(1.0);
    // DRAM stays busy when enough load bytes are in flight per SM: the resident programs' loads
    // issued together (a whole row, or one loop iteration's tiles; a pipelined loop has that
    // many iterations' copies in flight).
    let copies_ahead = plan.pipelines.values().map(|p| p.ahead).max().unwrap_or(0);
    let mem_efficiency = if w.burst_bytes > 0.0 {
        (resident * w.burst_bytes * copies_ahead.max(1) as f64 / t.mem_bytes_in_flight).min(1.0)
    } else {
        by_warps(t.mem_saturating_warps)
    };
    // A program's second read of its own bytes finds them in L2 if the traffic of every program
    // resident meanwhile fits there; beyond that, the share L2 keeps falls with the traffic.
    let l2_keeps =
        (w.reread_bytes > 0.0).then(|| (t.l2_capacity_bytes / (resident * sms * w.dram_bytes).max(1.0)).min(1.0));
    let dram_bytes = w.dram_bytes + w.reread_bytes * (1.0 - l2_keeps.unwrap_or(1.0));
    // DRAM moves the bytes no other program loaded first; L2 moves them all. DRAM is the
    // chip's: where the grid leaves SMs idle, the busy ones share it, each up to
    // `DRAM_SM_SHARE` times its even share.
    let busy = (programs as f64).clamp(1.0, sms);
    let dram_per_sm = (t.dram_bytes_per_s / busy).min(DRAM_SM_SHARE * t.dram_bytes_per_s / sms);
    let dram_s = (waves * resident * dram_bytes / (dram_per_sm * mem_efficiency)).max(term(
        w.l2_bytes,
        t.l2_bytes_per_s,
        mem_efficiency,
    ));
    // Both kinds of tensor-core instruction share the same units: their times add.
    let tensor_s = term(w.mma_flops, t.mma_flops_per_s, by_warps(t.mma_saturating_warps))
        + if w.wgmma_flops > 0.0 {
            term(w.wgmma_flops, t.wgmma_flops_per_s, by_warps(t.mma_saturating_warps))
        } else {
            0.0
        };
    let insts_s = term(w.insts, t.insts_per_s, by_warps(t.alu_saturating_warps));
    let alu_s = insts_s.max(tensor_s);
    let smem_s = term(w.smem_bytes, t.smem_bytes_per_s, by_warps(t.alu_saturating_warps));
    Estimate {
        registers: regs,
        reg_budget,
        smem_bytes: smem,
        threads,
        blocks_per_sm: blocks,
        resident: resident as u32,
        occupancy: (blocks * threads) as f64 / t.max_threads_per_sm as f64,
        programs,
        work: w,
        time_s: dram_s.max(alu_s).max(smem_s),
        dram_s,
        alu_s,
        tensor_s,
        insts_s,
        smem_s,
        copies_ahead,
        l2_keeps,
        wgmma_in_flight: plan.pipelines.values().any(|p| !p.async_dots.is_empty()),
        tma_stage_bytes: plan.pipelines.values().map(|p| p.tma_bytes()).max().unwrap_or(0),
        stage_bytes: plan.pipelines.values().map(|p| p.stage_bytes).max().unwrap_or(0),
        producer: plan.producer().is_some(),
        producer_runs_tiles: plan.pipelines.values().any(|p| p.tile_loop().is_some()),
        pingpong: plan.pipelines.values().any(|p| p.takes_turns()),
        cluster: k.cluster,
        split: stage.split,
        multicast_bytes: plan
            .pipelines
            .values()
            .map(|p| {
                p.loads
                    .iter()
                    .filter(|l| l.multicast)
                    .filter_map(|l| l.tma)
                    .map(|b| b.bytes())
                    .sum()
            })
            .max()
            .unwrap_or(0),
        int_args: launch.scalars.clone(),
        refusals: stage.refusals().cloned().collect(),
    }
}

/// Every candidate configuration of `kernel` with the pins applied, in enumeration order (the
/// last tuned parameter varies fastest, then stages, warps outermost).
pub fn candidates(
    src: &str,
    file: &ast::File,
    kernel: &str,
    pins: &Pins,
) -> Result<(Vec<Config>, Vec<String>), ConfigError> {
    let prob = problem(file, kernel, &pins.consts)?;
    candidates_on(src, file, kernel, pins, &prob)
}

fn candidates_on(
    src: &str,
    file: &ast::File,
    kernel: &str,
    pins: &Pins,
    prob: &Problem,
) -> Result<(Vec<Config>, Vec<String>), ConfigError> {
    let def = check::find_kernel(file, kernel).ok_or_else(|| ConfigError::NoKernel(kernel.into()))?;
    let case_value = |name: &str| {
        prob.spec
            .as_ref()
            .and_then(|(_, c)| c.consts.iter().find(|(n, _)| n == name).map(|(_, v)| *v))
    };
    let mut fixed: Bindings = Vec::new();
    let mut tuned: Vec<(String, Vec<ConstValue>)> = Vec::new();
    for c in &def.consts {
        let name = &c.name.name;
        if let Some((_, v)) = pins.consts.iter().find(|(n, _)| n == name) {
            fixed.push((name.clone(), *v));
            continue;
        }
        match &c.value {
            ast::ConstValueSpec::Choices(list) if !is_dtype(c) => {
                let vals = list
                    .iter()
                    .map(literal)
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| ConfigError::BadChoice { name: name.clone() })?;
                tuned.push((name.clone(), vals));
            }
            ast::ConstValueSpec::Choices(_) | ast::ConstValueSpec::Required => {
                if let Some(v) = case_value(name) {
                    fixed.push((name.clone(), v));
                }
            }
            ast::ConstValueSpec::Default(_) => {}
        }
    }
    // Pins for names the kernel lacks go through, so that the checker reports them.
    for (n, v) in &pins.consts {
        if !def.consts.iter().any(|c| &c.name.name == n) {
            fixed.push((n.clone(), *v));
        }
    }
    let base = check::check_kernel_at(src, file, kernel, &fixed, &prob.sizes)
        .map_err(|d| ConfigError::Check(first_message(&d)))?;
    let warps = match pins.num_warps {
        Some(w) => vec![w],
        None if base.warps.is_empty() => DEFAULT_WARPS.to_vec(),
        None => base.warps.clone(),
    };
    let stages = match pins.num_stages {
        Some(s) => vec![s],
        // A loop that feeds tensor-core dots from loads is pipelined, as Triton pipelines
        // `tl.dot` loops by default: its stage counts are candidates even when the kernel
        // names none.
        None if base.stages.is_empty() && feeds_dots(&base) => DOT_LOOP_STAGES.to_vec(),
        None if base.stages.is_empty() => DEFAULT_STAGES.to_vec(),
        None => base.stages.clone(),
    };
    let mut combos: Vec<Bindings> = vec![Vec::new()];
    for (name, vals) in &tuned {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                vals.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((name.clone(), *v));
                    c
                })
            })
            .collect();
    }
    let mut out = Vec::new();
    for &w in &warps {
        for &s in &stages {
            for combo in &combos {
                // Declaration order, as the IR lists them.
                let mut consts: Bindings = Vec::new();
                for c in &def.consts {
                    if let Some(b) = fixed.iter().chain(combo).find(|(n, _)| n == &c.name.name) {
                        consts.push(b.clone());
                    }
                }
                out.push(Config {
                    consts,
                    num_warps: w,
                    num_stages: s,
                    split: pins.split.unwrap_or(1),
                });
            }
        }
    }
    Ok((out, tuned.into_iter().map(|(n, _)| n).collect()))
}

/// Chooses the configuration of `kernel` for target `t`, estimated on the largest `bench(..)`
/// case of its run specs (see [`choose_on`] for a given case).
pub fn choose(src: &str, file: &ast::File, kernel: &str, pins: &Pins, t: &TargetDesc) -> Result<Choice, ConfigError> {
    choose_on(src, file, kernel, pins, t, On::File)
}

/// [`choose`] on a given problem ([`On`]): a run spec's case (the roofline uses its sizes, and
/// the values its spec computes from them, `BLOCK: next_pow2(cols)`, are pinned) or a launch (its
/// integer arguments; the kernel's computed compile-time values follow from them).
pub fn choose_on(
    src: &str,
    file: &ast::File,
    kernel: &str,
    pins: &Pins,
    t: &TargetDesc,
    on: On<'_>,
) -> Result<Choice, ConfigError> {
    choose_with(src, file, kernel, pins, t, on, &[])
}

/// [`choose_on`] for launches whose arguments are known to satisfy `facts` (one per parameter,
/// as the code generator will be told; empty: integers by their value, pointers 16-byte
/// aligned): the candidates are estimated as the lowering will see them (TMA or not, vector
/// widths).
pub fn choose_with(
    src: &str,
    file: &ast::File,
    kernel: &str,
    pins: &Pins,
    t: &TargetDesc,
    on: On<'_>,
    facts: &[tile_gir::ArgSpec],
) -> Result<Choice, ConfigError> {
    let mut prob = match on {
        On::Case(s, c) => Problem {
            label: format!(
                "case: {}",
                c.sizes
                    .iter()
                    .map(|(n, v)| format!("{n}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            sizes: spec::case_sizes(s, c),
            spec: Some((s.clone(), c.clone())),
            launch: None,
            grid_attr: grid_attr(file, kernel),
            facts: Vec::new(),
        },
        On::Launch(l) => Problem {
            label: format!(
                "launch: {}{}",
                if l.sizes.is_empty() {
                    format!("integer arguments {DEFAULT_INT_ARG}")
                } else {
                    l.sizes.to_string()
                },
                match l.grid {
                    Some(g) if grid_attr(file, kernel).is_empty() => format!(", grid {}x{}x{}", g[0], g[1], g[2]),
                    _ => String::new(),
                }
            ),
            sizes: l.sizes.clone(),
            spec: None,
            launch: Some(l.clone()),
            grid_attr: grid_attr(file, kernel),
            facts: Vec::new(),
        },
        On::File => problem(file, kernel, &pins.consts)?,
    };
    prob.facts = facts.to_vec();
    let pins = prob.constraint_pins(pins);
    let (configs, tuned) = candidates_on(src, file, kernel, &pins, &prob)?;
    let max_warps = t.target.max_threads_per_block / t.target.warp_size;
    let def = check::find_kernel(file, kernel);
    let computed = def.map_or_else(Vec::new, check::launch::computed_names);
    let requires = def.map_or_else(Vec::new, check::launch::requirements);
    let mut cands = Vec::new();
    let mut splittable = Vec::new();
    let mut checked: Vec<(Bindings, Result<Kernel, String>)> = Vec::new();
    // The candidates that check, with their launches, estimated together below.
    let mut pending = Vec::new();
    for config in configs {
        if !config.num_warps.is_power_of_two() || config.num_warps > max_warps {
            cands.push(Candidate {
                verdict: Verdict::Invalid(format!("num_warps must be a power of two up to {max_warps}")),
                config,
                estimate: None,
                kernel: None,
            });
            continue;
        }
        // Warps and stages do not change the checked kernel: one check per binding of the
        // compile-time values.
        let i = match checked.iter().position(|(c, _)| *c == config.consts) {
            Some(i) => i,
            None => {
                let k = check::check_kernel_at(src, file, kernel, &config.consts, &prob.sizes)
                    .map_err(|d| first_message(&d));
                checked.push((config.consts.clone(), k));
                checked.len() - 1
            }
        };
        let k = match &checked[i].1 {
            Ok(k) => k.clone(),
            Err(message) => {
                cands.push(Candidate {
                    verdict: Verdict::Invalid(message.clone()),
                    config,
                    estimate: None,
                    kernel: None,
                });
                continue;
            }
        };
        // Computed compile-time values (`const BLOCK: i32 = next_pow2(n)`) are part of the
        // configuration the kernel is compiled with.
        let config = Config {
            consts: k
                .consts
                .iter()
                .filter(|(n, _)| config.consts.iter().any(|(m, _)| m == n) || computed.contains(n))
                .cloned()
                .collect(),
            ..config
        };
        let launch = match prob.launch(&k) {
            Ok(l) => l,
            Err(e) => {
                cands.push(Candidate {
                    verdict: Verdict::Invalid(e.to_string()),
                    config,
                    estimate: None,
                    kernel: None,
                });
                continue;
            }
        };
        // A clause the problem breaks with these values (and, below, satisfies with others).
        let int_arg = |name: &str| {
            k.params
                .iter()
                .find(|p| p.name == name)
                .and_then(|p| launch.scalars.get(&p.value))
                .copied()
        };
        let broken = check::launch::check_requirements(&requires, &k.consts, &int_arg)
            .err()
            .map(|d| d.label);
        pending.push((cands.len(), launch, broken));
        cands.push(Candidate {
            config,
            verdict: Verdict::Slower(1.0),
            estimate: None,
            kernel: Some(k),
        });
    }
    // Clauses that every candidate breaks say nothing about the choice (the launch, or the
    // default problem, breaks them whatever the values): the launch's own check reports them.
    let requires_choose = pending.iter().any(|(_, _, broken)| broken.is_none());
    // The estimates are independent: rayon's pool shares them out.
    let estimates: Vec<Estimate> = pending
        .par_iter()
        .map(|(i, launch, _)| {
            let (c, k) = (&cands[*i], cands[*i].kernel.as_ref().expect("a checked candidate"));
            estimate(k, c.config.num_warps, c.config.num_stages, c.config.split, launch, t)
        })
        .collect();
    for ((i, launch, broken), e) in pending.into_iter().zip(estimates) {
        let c = &mut cands[i];
        c.verdict = match broken {
            Some(m) if requires_choose => Verdict::Breaks(m),
            _ => verdict_of(&e, t),
        };
        // A grid that leaves SMs idle may split its loop over a cluster (`tile_gir::split`):
        // the most programs that still run in one wave, 2 to 8. Pinned splits are kept.
        let split = (t.sms as u64 / e.programs.max(1)).min(MODEL_MAX_SPLIT as u64) as u32;
        if pins.split.is_none()
            && split >= 2
            && t.target.clusters
            && c.verdict == Verdict::Slower(1.0)
            && c.kernel
                .as_ref()
                .is_some_and(|k| tile_gir::split::splittable(k).is_ok())
        {
            splittable.push((i, 1 << split.ilog2(), launch));
        }
        c.estimate = Some(e);
    }
    // The splits, estimated where they may win: a split of `s` takes at least `1 / s` of the
    // time (the loop's share); those whose bound is not faster than the fastest so far are
    // not estimated (most of them, once the best splits are in).
    let time_of = |c: &Candidate| c.estimate.as_ref().map_or(f64::INFINITY, |e| e.time_s);
    let mut fastest = cands
        .iter()
        .filter(|c| c.feasible())
        .map(time_of)
        .fold(f64::INFINITY, f64::min);
    splittable.sort_by(|a, b| (time_of(&cands[a.0]) / a.1 as f64).total_cmp(&(time_of(&cands[b.0]) / b.1 as f64)));
    for (i, s, launch) in splittable {
        if time_of(&cands[i]) / s as f64 > fastest * (1.0 + TIE) {
            break;
        }
        let c = &cands[i];
        let config = Config {
            split: s,
            ..c.config.clone()
        };
        let k = c.kernel.clone().expect("an estimated candidate keeps its kernel");
        let e = estimate(&k, config.num_warps, config.num_stages, s, &launch, t);
        let verdict = verdict_of(&e, t);
        if verdict == Verdict::Slower(1.0) {
            fastest = fastest.min(e.time_s);
        }
        cands.push(Candidate {
            config,
            verdict,
            estimate: Some(e),
            kernel: Some(k),
        });
    }
    // Cheapest feasible; estimates within `TIE` of the cheapest are ties (the pointer attention
    // at head dim 64, causal: 4 warps on 64-row blocks estimated 0.6% over 8 warps on 128 rows,
    // measured 0.0798 against 0.0921 ms, run 107), which go to fewer warps, then to a wgmma
    // kept in flight across iterations (matmul: 596 against 564 TFLOP/s), then to larger
    // stages where the loop feeds tensor-core products (fewer barriers and mbarrier round trips
    // per byte, more bytes in flight: matmul_tma with 48 KB TMA stages 743 against 575 TFLOP/s
    // with 24 KB at 4096³; cp.async, H100 sweeps of 2026-12-07 in bench/records/2026-12-07d-h100:
    // batched_gemm BK 64 0.2432 ms against BK 32 0.2712, small_m_gemm M = 1 BK 256 0.0214
    // against BK 64 0.0271, M = 64 0.0259 against 0.0294, fp8_gemm and gemm_epilogue's best
    // the larger of their tied stages too; a cp.async stage only where the estimate stays
    // under the registers ptxas never spills at, as its copy addresses are what the walk
    // estimates least well: matmul.tile's pointer kernel with BK 64, estimated 216, spills 896 B
    // compiled without facts; elsewhere TMA stages only), then fewer stages (attention with
    // several blocks per SM: 2 stages measured faster than 3) except under a wgmma kept in flight or a producer warpgroup, where
    // the deeper ring wins (matmul_tma at 8192³ with a producer: 4 stages 1.4223 ms, 3 stages
    // 1.4485, 2 stages 1.6971; attention_rotated at 128 x 8192, head dim 128, two sweeps: causal
    // 3 stages 3.7287 / 3.6406 ms against 3.9520 / 3.8188, not causal 7.4450 / 7.6324 against
    // 7.2806 / 7.6185, run 92), and with one program per SM at a time, whose copies in flight
    // are the SM's only ones and whose warps all wait at each iteration's barrier for the
    // slowest copy (the pointer attention at head dim 128, 16 x 8192, not causal: 3 stages
    // 1.0307 / 1.0375 ms against 1.1710 / 1.1778, causal 2 stages 0.9% and 1.3% faster, run 111;
    // softmax_staged's grid of one program per SM at bf16 4096 x 16384: 3 stages 0.0797 ms, 1
    // stage 0.1106, runs 97 and 113; at 32768 columns 0.1448 against 0.1721, runs 97 and 74),
    // then the cheaper estimate, then enumeration order (docs/gpu.md).
    // A candidate without any of these keeps the fewer-stages key, which sorts first.
    let tensor = |e: &Estimate| e.work.mma_flops + e.work.wgmma_flops > 0.0;
    // Before all of these: a candidate without tensor cores whose estimate is near its register
    // budget loses to one comfortably under it (the walk misses some of ptxas's registers:
    // softmax_online bf16 at 16384 columns, 8 warps, estimated 108 of 128, took 128 and spilled
    // 4 B on the H100, 2026-12-08; 16 warps, estimated 66, tied with it).
    let crowded = |e: &Estimate| !tensor(e) && e.registers as f64 > CROWDED_REGS * e.reg_budget as f64;
    let key = |c: &Candidate| {
        let e = c.estimate.as_ref().unwrap();
        (
            crowded(e),
            c.config.num_warps,
            c.config.split,
            !e.wgmma_in_flight,
            std::cmp::Reverse(
                match e.tma_stage_bytes == 0 && tensor(e) && e.registers <= t.spill_safe_regs {
                    true => e.stage_bytes,
                    false => e.tma_stage_bytes,
                },
            ),
            if e.wgmma_in_flight || e.producer || e.resident == 1 {
                u32::MAX - c.config.num_stages
            } else {
                c.config.num_stages
            },
        )
    };
    let time = |c: &Candidate| c.estimate.as_ref().unwrap().time_s;
    let fastest = cands
        .iter()
        .filter(|c| c.feasible() && !time(c).is_nan())
        .min_by(|a, b| time(a).total_cmp(&time(b)));
    // Where DRAM binds the cheapest, the memory term's small differences are the bytes each
    // candidate keeps in flight, which the model measures (vector_add's 1-warp blocks, within
    // 0.2% of the cheapest, ran 1% slower): only equal estimates tie there.
    let band = match fastest.and_then(|c| c.estimate.as_ref()) {
        Some(e) if e.dram_s >= e.alu_s.max(e.smem_s) => 1e-9,
        _ => TIE,
    };
    let fastest = fastest.map_or(f64::INFINITY, time);
    let best = cands
        .iter()
        .enumerate()
        .filter(|(_, c)| c.feasible() && time(c) <= fastest * (1.0 + band))
        .min_by(|(i, a), (j, b)| key(a).cmp(&key(b)).then(time(a).total_cmp(&time(b))).then(i.cmp(j)))
        .map(|(i, _)| i);
    // When the register model rejects everything (it leans high), the candidate it thinks needs
    // the fewest registers is the best bet; its verdict says so in `explain`.
    let fallback = || {
        cands
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c.verdict, Verdict::Spills { .. }))
            .min_by_key(|(_, c)| c.estimate.as_ref().map_or(u32::MAX, |e| e.registers))
            .map(|(i, _)| i)
    };
    let Some(chosen) = best.or_else(fallback) else {
        return Err(ConfigError::NoneFeasible {
            target: t.target.sm.into(),
            first: cands
                .first()
                .map(|c| c.verdict.to_string())
                .unwrap_or_else(|| "no candidates".into()),
        });
    };
    let best_time = cands[chosen].estimate.as_ref().unwrap().time_s;
    for (i, c) in cands.iter_mut().enumerate() {
        if i == chosen {
            c.verdict = Verdict::Chosen;
        } else if let (Verdict::Slower(_), Some(e)) = (&c.verdict, &c.estimate) {
            let ratio = if best_time > 0.0 { e.time_s / best_time } else { 1.0 };
            c.verdict = if e.time_s <= fastest * (1.0 + band) {
                Verdict::Tie(ratio)
            } else {
                Verdict::Slower(ratio)
            };
        }
    }
    Ok(Choice {
        kernel: kernel.into(),
        tuned,
        problem: prob.label,
        pins,
        candidates: cands,
        chosen,
    })
}
