//! The reference interpreter: runs a kernel's IR on the CPU, one program after another (the
//! programs of a cluster, `#[cluster(N)]`, side by side on threads that meet at each cluster
//! reduction), with the semantics the GPU has (masks and `other`, rounding after every op in
//! the op's dtype, dot accumulating in its result dtype). It is the reference every GPU result is compared with, so
//! it is written to be obviously right rather than fast.
//!
//! It never exhibits undefined behaviour: an unmasked out-of-bounds access, an integer division
//! by zero, a failed `assert` or a wrong hint is an [`InterpError`] naming the op, its source
//! location, the program and the element.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::rc::Rc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, mpsc};

pub use crate::ir::scalar::{self, Scalar};
use crate::ir::*;

/// A host buffer a kernel's pointer parameters point into.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub name: String,
    pub dtype: DType,
    pub data: Vec<Scalar>,
}

impl Buffer {
    pub fn new(name: impl Into<String>, dtype: DType, data: Vec<Scalar>) -> Buffer {
        Buffer {
            name: name.into(),
            dtype,
            data,
        }
    }

    pub fn from_f64(name: impl Into<String>, dtype: DType, values: &[f64]) -> Buffer {
        let data = values
            .iter()
            .map(|v| scalar::cast(DType::F64, dtype, Scalar::F(*v), false))
            .collect();
        Buffer::new(name, dtype, data)
    }

    pub fn to_f64(&self) -> Vec<f64> {
        self.data.iter().map(|e| e.as_f64(self.dtype)).collect()
    }
}

/// A kernel argument: a buffer (by index into the buffer list) or a scalar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    Buffer(usize),
    Scalar(Scalar),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct InterpError {
    pub message: String,
    pub op: String,
    pub loc: Loc,
    pub program: [u32; 3],
}

impl fmt::Display for InterpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)?;
        if !self.op.is_empty() {
            write!(f, " (in `{}`", self.op)?;
            if self.loc != Loc::default() {
                write!(f, " at {}:{}", self.loc.line, self.loc.col)?;
            }
            write!(f, ", program {:?})", self.program)?;
        }
        Ok(())
    }
}

/// What a run printed (`print` ops), one line per program and op; past [`MAX_PRINTED_BYTES`],
/// lines are dropped and one last line says how many bytes were.
pub type Output = Vec<String>;

/// The most bytes of printed lines one run keeps: a printing loop would otherwise hold
/// gigabytes, and nobody reads past the first megabyte.
pub const MAX_PRINTED_BYTES: usize = 1 << 20;

/// The most elements of one tile a `print` shows: a 2^20-element tile would be one 21 MB line.
pub const MAX_PRINTED_ELEMENTS: usize = 256;

/// What starting one program costs against the step budget, so that a grid of programs that do
/// nothing still spends it (a grid of (2^32 - 1)^3 empty programs never ended). Starting one
/// takes as long as two or three element operations; it is charged more so that a grid of
/// empty programs ends within 20 s at the default budget, while a grid of a million programs
/// spends 0.4% of it.
pub const PROGRAM_STEPS: u64 = 16;

/// What each program of a cluster that exchanges values costs to start: its thread wakes up
/// for it and meets the cluster's others, which takes as long as a thousand element operations.
pub const CLUSTER_PROGRAM_STEPS: u64 = 1 << 12;

/// What starting the thread of one rank of a cluster costs (once per run): a thread start takes
/// as long as ten thousand element operations.
pub const THREAD_STEPS: u64 = 1 << 14;

/// The lines a run keeps, and the bytes of those it dropped past [`MAX_PRINTED_BYTES`].
#[derive(Debug, Default)]
struct Printed {
    lines: Output,
    /// Bytes kept (each line's length plus its newline).
    kept: usize,
    dropped: u64,
}

impl Printed {
    /// Printed lines limited to the bytes left of `kept` already taken elsewhere in the run.
    fn after(kept: usize) -> Printed {
        Printed {
            lines: Vec::new(),
            kept,
            dropped: 0,
        }
    }

    fn push(&mut self, line: String) {
        let n = line.len() + 1;
        if self.dropped == 0 && self.kept + n <= MAX_PRINTED_BYTES {
            self.kept += n;
            self.lines.push(line);
        } else {
            // Once one line is dropped all later ones are, so that what is kept has no gaps.
            self.dropped += n as u64;
        }
    }

    /// Takes in the lines of another machine that started from this one's `kept`.
    fn append(&mut self, other: Printed) {
        for line in other.lines {
            self.push(line);
        }
        self.dropped += other.dropped;
    }

    fn finish(mut self) -> Output {
        if self.dropped > 0 {
            self.lines.push(format!(
                "... {} more bytes of printed output dropped (the first {MAX_PRINTED_BYTES} bytes are kept)",
                self.dropped
            ));
        }
        self.lines
    }
}

/// The error when the step budget is spent (the message every budget error begins with).
fn budget_spent(max_steps: u64) -> String {
    format!("stopped after {max_steps} element operations, the budget (--max-steps raises it)")
}

/// How much work one run may do before it stops with an error, so that a kernel whose loop
/// bound is huge (by mistake or by a fuzzer) ends with a message instead of running for hours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Element operations over the whole grid: each op executed costs one plus the elements of
    /// its largest operand or result, a `dot` `m * n * k` more, each loop iteration one plus
    /// the elements it carries, and each program [`PROGRAM_STEPS`] (a cluster's programs and
    /// threads more: [`CLUSTER_PROGRAM_STEPS`], [`THREAD_STEPS`]). The interpreter does 2e7 to
    /// 4e7 of them per second.
    pub max_steps: u64,
}

impl Limits {
    /// Two to four minutes of interpreting. The largest case among the examples (a 512×512×1024
    /// matmul) takes about 3e8.
    pub const DEFAULT_MAX_STEPS: u64 = 1 << 32;
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_steps: Limits::DEFAULT_MAX_STEPS,
        }
    }
}

/// Runs `kernel` over `grid` programs with the default [`Limits`]. Pointer parameters take
/// `Arg::Buffer` and are bound to `buffers`; the kernel's stores land there.
pub fn run(kernel: &Kernel, grid: [u32; 3], args: &[Arg], buffers: &mut [Buffer]) -> Result<Output, InterpError> {
    run_limited(kernel, grid, args, buffers, &Limits::default())
}

/// [`run`], stopping with an error once the run has done `limits.max_steps` element operations.
pub fn run_limited(
    kernel: &Kernel,
    grid: [u32; 3],
    args: &[Arg],
    buffers: &mut [Buffer],
    limits: &Limits,
) -> Result<Output, InterpError> {
    let top = |m: String| InterpError {
        message: m,
        op: String::new(),
        loc: Loc::default(),
        program: [0; 3],
    };
    if args.len() != kernel.params.len() {
        return Err(top(format!(
            "`{}` takes {} arguments, {} given",
            kernel.name,
            kernel.params.len(),
            args.len()
        )));
    }
    if grid.contains(&0) {
        return Err(top(format!("grid {grid:?} has no programs")));
    }
    let mut env: Vec<Option<Tile>> = vec![None; kernel.values.len()];
    for (p, a) in kernel.params.iter().zip(args) {
        let tile = match (p.elem, a) {
            (Elem::Ptr { pointee, .. }, Arg::Buffer(i)) => {
                let b = buffers
                    .get(*i)
                    .ok_or_else(|| top(format!("parameter `{}`: no buffer {i}", p.name)))?;
                if b.dtype != pointee {
                    return Err(top(format!(
                        "parameter `{}` points to {pointee} but buffer `{}` holds {}",
                        p.name, b.name, b.dtype
                    )));
                }
                Tile {
                    shape: vec![],
                    data: Data::P(vec![Ptr { buf: *i as u32, off: 0 }]),
                }
            }
            (Elem::Scalar(d), Arg::Scalar(e)) => {
                let ok = matches!(
                    (e, d.is_float(), d.is_bool()),
                    (Scalar::F(_), true, _) | (Scalar::B(_), _, true) | (Scalar::I(_), false, false)
                );
                if !ok {
                    return Err(top(format!("parameter `{}` is {d}; the argument {e:?} is not", p.name)));
                }
                Tile::scalar(*e)
            }
            _ => {
                return Err(top(format!(
                    "parameter `{}` is {}; the argument does not match",
                    p.name, p.elem
                )));
            }
        };
        env[p.value.0 as usize] = Some(tile);
    }
    kernel
        .check_cluster_grid(grid[0])
        .map_err(|m| top(format!("`{}` {m}", kernel.name)))?;
    let size = kernel.cluster.max(1);
    // Programs of a cluster run side by side only where they exchange values.
    let mut exchanges = false;
    kernel.walk(&mut |op| {
        exchanges |= matches!(
            op.kind,
            OpKind::ClusterReduce(_) | OpKind::ClusterReduceWith | OpKind::SplitSum
        )
    });
    let cluster = if exchanges { size } else { 1 };
    let buffers = Mutex::new(buffers);
    let max = limits.max_steps;
    if cluster > 1 {
        return run_clusters(kernel, &env, &buffers, grid, cluster as usize, max);
    }
    // One machine runs every program: a program's values are all redefined before use.
    let mut m = machine(kernel, &env, &buffers, (grid, [0, 0, 0]), (0, max), None);
    for z in 0..grid[2] {
        for y in 0..grid[1] {
            for x in 0..grid[0] {
                m.pid = [x, y, z];
                m.start_program(PROGRAM_STEPS)?;
                m.region(&kernel.body)?;
            }
        }
    }
    Ok(std::mem::take(&mut m.out).finish())
}

fn machine<'a, 'b>(
    k: &'a Kernel,
    env: &[Option<Tile>],
    buffers: &'a Mutex<&'b mut [Buffer]>,
    (grid, pid): ([u32; 3], [u32; 3]),
    (steps, max_steps): (u64, u64),
    cluster: Option<(&'a Exchange, usize)>,
) -> Machine<'a, 'b> {
    Machine {
        k,
        env: env.to_vec(),
        buffers,
        grid,
        pid,
        out: Printed::default(),
        dead: HashMap::new(),
        steps,
        max_steps,
        loops: Vec::new(),
        cluster,
    }
}

/// One program of a cluster for a worker thread to run: its id, the steps spent before its
/// cluster and what it may reach, the printed bytes kept so far, and its cluster's exchange.
struct Job {
    pid: [u32; 3],
    steps: u64,
    share: u64,
    kept: usize,
    ex: Arc<Exchange>,
}

/// What one program of a cluster printed and the steps it spent, or its error.
type ProgramRun = Result<(Printed, u64), InterpError>;

/// Runs a cluster kernel whose programs exchange values: one thread per rank of a cluster,
/// started once for the run (a thread start takes as long as thousands of element operations,
/// so one per program made a large grid take hours), each running its rank's program of one
/// cluster after another, the clusters in order.
fn run_clusters(
    kernel: &Kernel,
    env: &[Option<Tile>],
    buffers: &Mutex<&mut [Buffer]>,
    grid: [u32; 3],
    size: usize,
    max: u64,
) -> Result<Output, InterpError> {
    let top = |message: String, program: [u32; 3]| InterpError {
        message,
        op: String::new(),
        loc: Loc::default(),
        program,
    };
    // The threads count before they start.
    let mut steps = (size as u64).saturating_mul(THREAD_STEPS);
    if steps > max {
        let m = format!("{}; the threads of a cluster were about to start", budget_spent(max));
        return Err(top(m, [0; 3]));
    }
    std::thread::scope(|s| {
        let mut workers = Vec::new();
        for rank in 0..size {
            let (jobs, queue) = mpsc::channel::<Job>();
            let (report, done) = mpsc::channel::<ProgramRun>();
            let spawned = std::thread::Builder::new()
                .stack_size(CLUSTER_STACK_BYTES)
                .spawn_scoped(s, move || {
                    for job in queue {
                        if report
                            .send(run_program(kernel, env, buffers, grid, rank, &job))
                            .is_err()
                        {
                            break;
                        }
                    }
                });
            match spawned {
                Ok(h) => workers.push((jobs, done, Some(h))),
                Err(e) => {
                    return Err(top(
                        format!("cannot start a thread for a program of a cluster: {e}"),
                        [0; 3],
                    ));
                }
            }
        }
        let mut out = Printed::default();
        for z in 0..grid[2] {
            for y in 0..grid[1] {
                for first in (0..grid[0]).step_by(size) {
                    // Every program counts before its cluster starts, so that a grid of
                    // clusters that do nothing still ends within the budget.
                    steps = steps.saturating_add(size as u64 * CLUSTER_PROGRAM_STEPS);
                    if steps > max {
                        let pid = [first, y, z];
                        let m = format!(
                            "{}; the cluster of program {pid:?} was about to start",
                            budget_spent(max)
                        );
                        return Err(top(m, pid));
                    }
                    let ex = Arc::new(Exchange::new(size));
                    // Each program may spend its share of what is left of the budget.
                    let share = steps + (max - steps.min(max)) / size as u64;
                    for (rank, (jobs, ..)) in workers.iter().enumerate() {
                        let job = Job {
                            pid: [first + rank as u32, y, z],
                            steps,
                            share,
                            kept: out.kept,
                            ex: ex.clone(),
                        };
                        if jobs.send(job).is_err() {
                            // Its thread is gone (its last program panicked): the others
                            // must not wait for this one.
                            ex.finish();
                        }
                    }
                    // The first error in program order; a program that waited for a failed one
                    // reports that it was left waiting, which says less.
                    let mut first_err = None;
                    for (_, done, handle) in &mut workers {
                        let run = match done.recv() {
                            Ok(run) => run,
                            // The thread ended: its program panicked, and so does the run.
                            Err(_) => match handle.take().map(|h| h.join()) {
                                Some(Err(panic)) => std::panic::resume_unwind(panic),
                                _ => Err(top(
                                    "a program of a cluster ended without a result".into(),
                                    [first, y, z],
                                )),
                            },
                        };
                        match run {
                            Ok((o, n)) => {
                                out.append(o);
                                steps = steps.saturating_add(n);
                            }
                            Err(e) => {
                                if first_err
                                    .as_ref()
                                    .is_none_or(|f: &InterpError| f.message.starts_with(LEFT_WAITING))
                                {
                                    first_err = Some(e);
                                }
                            }
                        }
                    }
                    if let Some(e) = first_err {
                        return Err(e);
                    }
                    if steps > max {
                        return Err(top(budget_spent(max), [0; 3]));
                    }
                }
            }
        }
        Ok(out.finish())
    })
}

/// Runs `job`, the program of rank `rank` of its cluster, on this thread.
fn run_program(
    kernel: &Kernel,
    env: &[Option<Tile>],
    buffers: &Mutex<&mut [Buffer]>,
    grid: [u32; 3],
    rank: usize,
    job: &Job,
) -> ProgramRun {
    // Ends this program in the exchange even if it panics, so that the others stop waiting for it.
    struct Finish<'e>(&'e Exchange);
    impl Drop for Finish<'_> {
        fn drop(&mut self) {
            self.0.finish();
        }
    }
    let _finish = Finish(&job.ex);
    let mut m = machine(
        kernel,
        env,
        buffers,
        (grid, job.pid),
        (job.steps, job.share),
        Some((&job.ex, rank)),
    );
    m.out = Printed::after(job.kept);
    m.region(&kernel.body)?;
    Ok((std::mem::take(&mut m.out), m.steps - job.steps))
}

/// The stack of each thread running a program of a cluster (`tilec` runs the interpreter on a
/// thread with a large stack too: regions nest).
const CLUSTER_STACK_BYTES: usize = 256 << 20;

/// How an error of a program left waiting at a cluster reduction begins.
const LEFT_WAITING: &str = "left waiting at a cluster reduction";

/// Where the programs of one cluster meet at each cluster reduction: each posts its values and
/// its site, and once all have, each takes every program's values, in program order, to fold.
struct Exchange {
    state: Mutex<ExchangeState>,
    arrived: Condvar,
}

/// One program's values at a cluster reduction.
type Posted = Vec<Scalar>;

struct ExchangeState {
    /// Each program's values and reduction site in the round under way.
    posted: Vec<Option<(Loc, Posted)>>,
    /// Rounds completed so far, and the last one's values (`Err`: the sites differed).
    rounds: u64,
    result: Result<Vec<Posted>, String>,
    /// Programs that have ended (finished or failed).
    ended: usize,
}

impl Exchange {
    fn new(size: usize) -> Exchange {
        Exchange {
            state: Mutex::new(ExchangeState {
                posted: vec![None; size],
                rounds: 0,
                result: Ok(Vec::new()),
                ended: 0,
            }),
            arrived: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ExchangeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Posts program `rank`'s values `x` at reduction `site`, waits for the cluster's other
    /// programs and returns every program's values, in program order.
    fn gather(&self, rank: usize, site: Loc, x: Posted) -> Result<Vec<Posted>, String> {
        let mut st = self.lock();
        st.posted[rank] = Some((site, x));
        if st.posted.iter().all(Option::is_some) {
            let posted: Vec<(Loc, Posted)> = st.posted.iter_mut().map(|p| p.take().unwrap()).collect();
            st.result = if let Some((p, (other, _))) = posted.iter().enumerate().find(|(_, (l, _))| *l != site) {
                Err(format!(
                    "the programs of a cluster reached different cluster reductions: program rank {p} of the \
                     cluster is at {}:{}",
                    other.line, other.col
                ))
            } else {
                Ok(posted.into_iter().map(|(_, v)| v).collect())
            };
            st.rounds += 1;
            self.arrived.notify_all();
            return st.result.clone();
        }
        let round = st.rounds;
        while st.rounds == round {
            if st.ended > 0 {
                st.posted[rank] = None;
                return Err(format!(
                    "{LEFT_WAITING}: another program of the cluster ended without reaching it (every program \
                     of a cluster must reach each cluster reduction)"
                ));
            }
            st = self.arrived.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.result.clone()
    }

    /// Program of the cluster has ended: the others stop waiting for it.
    fn finish(&self) {
        self.lock().ended += 1;
        self.arrived.notify_all();
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Ptr {
    buf: u32,
    /// Offset in elements of the buffer's dtype.
    off: i64,
}

#[derive(Clone, Debug, PartialEq)]
enum Data {
    E(Vec<Scalar>),
    P(Vec<Ptr>),
}

#[derive(Clone, Debug, PartialEq)]
struct Tile {
    shape: Vec<usize>,
    data: Data,
}

impl Tile {
    fn scalar(e: Scalar) -> Tile {
        Tile {
            shape: vec![],
            data: Data::E(vec![e]),
        }
    }
    fn elems(&self) -> &[Scalar] {
        match &self.data {
            Data::E(v) => v,
            Data::P(_) => &[],
        }
    }
    /// The same elements in a new order: element `i` of the result is element `src(i)`.
    fn gather(&self, shape: Vec<usize>, src: impl Fn(usize) -> usize) -> Tile {
        let n: usize = shape.iter().product();
        let data = match &self.data {
            Data::E(v) => Data::E((0..n).map(|i| v[src(i)]).collect()),
            Data::P(v) => Data::P((0..n).map(|i| v[src(i)]).collect()),
        };
        Tile { shape, data }
    }
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Multi-index of flat index `i` in `shape` (row-major).
fn unflatten(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

struct Machine<'a, 'b> {
    k: &'a Kernel,
    env: Vec<Option<Tile>>,
    /// The buffers, shared by the programs of a cluster running side by side.
    buffers: &'a Mutex<&'b mut [Buffer]>,
    grid: [u32; 3],
    pid: [u32; 3],
    out: Printed,
    /// Per region (by address), the values each op is the last to read: dropped after it, so
    /// that a program holds only the tiles still to be used, not every value it computed.
    dead: HashMap<*const Region, Rc<Vec<Vec<ValueId>>>>,
    /// Element operations done so far, and the budget ([`Limits::max_steps`]).
    steps: u64,
    max_steps: u64,
    /// The loops running now, outermost first: where each is, its iteration (from 0) and its
    /// trip count.
    loops: Vec<(Loc, u64, u64)>,
    /// The cluster's exchange and this program's rank in it (kernels with `#[cluster(N)]`).
    cluster: Option<(&'a Exchange, usize)>,
}

/// For each op of `r`, the values defined in `r` (its arguments and its ops' results) that no
/// later op of `r` reads (reads inside an op's regions count at that op). Values defined
/// outside `r` are never listed: a loop body runs again and reads them again.
fn last_uses(r: &Region) -> Vec<Vec<ValueId>> {
    let mut defined: HashSet<ValueId> = r.args.iter().copied().collect();
    let mut last: HashMap<ValueId, usize> = HashMap::new();
    for (i, op) in r.ops.iter().enumerate() {
        let mut used = Vec::new();
        op.each_read(&mut |_, v| used.push(v));
        for v in used {
            if defined.contains(&v) {
                last.insert(v, i);
            }
        }
        for res in &op.results {
            defined.insert(*res);
            last.entry(*res).or_insert(i);
        }
    }
    for a in &r.args {
        last.entry(*a).or_insert(0);
    }
    let mut out = vec![Vec::new(); r.ops.len()];
    for (v, i) in last {
        if i < out.len() {
            out[i].push(v);
        }
    }
    out
}

impl<'a, 'b> Machine<'a, 'b> {
    fn buffers(&self) -> MutexGuard<'a, &'b mut [Buffer]> {
        self.buffers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `op` costs against the step budget: one, plus the elements of its largest operand or
    /// result, plus `m * n * k` for a `dot`, plus for a `print` the bytes of its message and four
    /// per element it writes (formatting a number takes as long as a few element operations).
    fn cost(&self, op: &Op) -> u64 {
        let numel = |v: &ValueId| self.k.ty(*v).numel() as u64;
        let widest = op.operands.iter().chain(&op.results).map(numel).max().unwrap_or(0);
        let product = match &op.kind {
            OpKind::Print(msg) => {
                let shown = op
                    .operands
                    .iter()
                    .map(|v| 4 * numel(v).min(MAX_PRINTED_ELEMENTS as u64));
                msg.len() as u64 + shown.sum::<u64>()
            }
            OpKind::Dot(_) => {
                let (a, b) = (self.k.ty(op.operands[0]), self.k.ty(op.operands[1]));
                match (a.shape.as_slice(), b.shape.last()) {
                    ([m, k], Some(n)) => (*m as u64) * (*k as u64) * (*n as u64),
                    _ => 0,
                }
            }
            _ => 0,
        };
        1 + widest + product
    }

    /// Charges the start of program `self.pid`, `cost` steps, against the step budget.
    fn start_program(&mut self, cost: u64) -> Result<(), InterpError> {
        self.steps = self.steps.saturating_add(cost);
        if self.steps > self.max_steps {
            return Err(InterpError {
                message: format!(
                    "{}; program {:?} was about to start",
                    budget_spent(self.max_steps),
                    self.pid
                ),
                op: String::new(),
                loc: Loc::default(),
                program: self.pid,
            });
        }
        Ok(())
    }

    /// The error when the step budget is spent, saying where the run was.
    fn over_budget(&self, op: &Op) -> InterpError {
        let mut message = budget_spent(self.max_steps);
        if let Some((loc, i, trips)) = self.loops.last() {
            message += &format!(
                "; the loop at {}:{} was in iteration {} of {}",
                loc.line,
                loc.col,
                i + 1,
                trips
            );
        }
        self.err(op, message)
    }

    fn get(&self, v: ValueId) -> &Tile {
        self.env[v.0 as usize]
            .as_ref()
            .expect("a verified kernel defines every value before its uses")
    }

    fn set(&mut self, v: ValueId, t: Tile) {
        self.env[v.0 as usize] = Some(t);
    }

    fn dtype(&self, v: ValueId) -> DType {
        self.k.ty(v).dtype().unwrap_or(DType::I64)
    }

    fn err(&self, op: &Op, message: String) -> InterpError {
        InterpError {
            message,
            op: op.kind.name().to_string(),
            loc: op.loc,
            program: self.pid,
        }
    }

    /// Runs a region's ops; returns the values of its final `yield`. Each value is dropped
    /// after its last read in the region.
    fn region(&mut self, r: &Region) -> Result<Vec<Tile>, InterpError> {
        let dead = self
            .dead
            .entry(r as *const Region)
            .or_insert_with(|| Rc::new(last_uses(r)))
            .clone();
        for (i, op) in r.ops.iter().enumerate() {
            if let OpKind::Yield = op.kind {
                return Ok(op.operands.iter().map(|v| self.get(*v).clone()).collect());
            }
            self.steps = self.steps.saturating_add(self.cost(op));
            if self.steps > self.max_steps {
                return Err(self.over_budget(op));
            }
            self.op(op)?;
            for v in &dead[i] {
                self.env[v.0 as usize] = None;
            }
        }
        Ok(vec![])
    }

    fn elementwise(&self, op: &Op, f: impl Fn(&[Scalar]) -> Result<Scalar, &'static str>) -> Result<Tile, InterpError> {
        let ins: Vec<&[Scalar]> = op.operands.iter().map(|v| self.get(*v).elems()).collect();
        let n = ins.first().map_or(0, |x| x.len());
        let mut out = Vec::with_capacity(n);
        let mut args = vec![Scalar::B(false); ins.len()];
        for i in 0..n {
            for (a, x) in args.iter_mut().zip(&ins) {
                *a = x[i];
            }
            out.push(f(&args).map_err(|m| {
                self.err(
                    op,
                    format!("{m} at element {:?}", unflatten(i, &self.get(op.operands[0]).shape)),
                )
            })?);
        }
        Ok(Tile {
            shape: self.get(op.operands[0]).shape.clone(),
            data: Data::E(out),
        })
    }

    fn op(&mut self, op: &Op) -> Result<(), InterpError> {
        let rt = op.results.first().map(|r| self.k.ty(*r).clone());
        let res = |i: usize| op.results[i];
        match &op.kind {
            OpKind::Const(c) => {
                let d = rt.unwrap().dtype().unwrap();
                let e = match *c {
                    ConstValue::Float(f) => Scalar::F(scalar::round_float(d, f)),
                    c => Scalar::from_const(c),
                };
                self.set(res(0), Tile::scalar(e));
            }
            OpKind::ProgramId(a) => self.set(res(0), Tile::scalar(Scalar::I(self.pid[*a as usize] as i64))),
            OpKind::NumPrograms(a) => self.set(res(0), Tile::scalar(Scalar::I(self.grid[*a as usize] as i64))),
            OpKind::Arange { start, end } => {
                let data = (*start..*end).map(Scalar::I).collect();
                self.set(
                    res(0),
                    Tile {
                        shape: vec![(end - start) as usize],
                        data: Data::E(data),
                    },
                );
            }
            OpKind::Broadcast => {
                let x = self.get(op.operands[0]);
                let to = rt.unwrap().shape;
                let off = to.len() - x.shape.len();
                let xs = strides(&x.shape);
                let from = x.shape.clone();
                let t = x.gather(to.clone(), |i| {
                    let idx = unflatten(i, &to);
                    (0..from.len())
                        .map(|d| if from[d] == 1 { 0 } else { idx[d + off] * xs[d] })
                        .sum()
                });
                self.set(res(0), t);
            }
            OpKind::ExpandDims(_) | OpKind::Reshape => {
                let mut t = self.get(op.operands[0]).clone();
                t.shape = rt.unwrap().shape;
                self.set(res(0), t);
            }
            OpKind::Permute(p) => {
                let x = self.get(op.operands[0]);
                let to = rt.unwrap().shape;
                let xs = strides(&x.shape);
                let t = x.gather(to.clone(), |i| {
                    let idx = unflatten(i, &to);
                    p.iter().enumerate().map(|(r, &src_axis)| idx[r] * xs[src_axis]).sum()
                });
                self.set(res(0), t);
            }
            OpKind::Join => {
                let (a, b) = (self.get(op.operands[0]), self.get(op.operands[1]));
                let data = match (&a.data, &b.data) {
                    (Data::E(x), Data::E(y)) => Data::E(x.iter().zip(y).flat_map(|(p, q)| [*p, *q]).collect()),
                    (Data::P(x), Data::P(y)) => Data::P(x.iter().zip(y).flat_map(|(p, q)| [*p, *q]).collect()),
                    _ => unreachable!("verified: join of one type"),
                };
                self.set(
                    res(0),
                    Tile {
                        shape: rt.unwrap().shape,
                        data,
                    },
                );
            }
            OpKind::Split => {
                let x = self.get(op.operands[0]);
                let shape = self.k.ty(res(0)).shape.clone();
                let a = x.gather(shape.clone(), |i| 2 * i);
                let b = x.gather(shape, |i| 2 * i + 1);
                self.set(res(0), a);
                self.set(res(1), b);
            }
            OpKind::Unary(u) => {
                let d = self.dtype(op.operands[0]);
                let t = self.elementwise(op, |a| Ok(scalar::unary(*u, d, a[0])))?;
                self.set(res(0), t);
            }
            OpKind::Binary(b) => {
                let d = self.dtype(op.operands[0]);
                let t = self.elementwise(op, |a| scalar::binary(*b, d, a[0], a[1]))?;
                self.set(res(0), t);
            }
            OpKind::Cmp(c) => {
                let d = self.dtype(op.operands[0]);
                let t = self.elementwise(op, |a| Ok(Scalar::B(scalar::compare(*c, d, a[0], a[1]))))?;
                self.set(res(0), t);
            }
            OpKind::Fma => {
                let d = self.dtype(op.operands[0]);
                let t = self.elementwise(op, |a| match (a[0], a[1], a[2]) {
                    (Scalar::F(x), Scalar::F(y), Scalar::F(z)) => {
                        Ok(Scalar::F(scalar::round_float(d, x.mul_add(y, z))))
                    }
                    _ => Err("fma on non-floats"),
                })?;
                self.set(res(0), t);
            }
            OpKind::Select => {
                let (c, a, b) = (
                    self.get(op.operands[0]),
                    self.get(op.operands[1]),
                    self.get(op.operands[2]),
                );
                let mask: Vec<bool> = c.elems().iter().map(|e| matches!(e, Scalar::B(true))).collect();
                let data = match (&a.data, &b.data) {
                    (Data::E(x), Data::E(y)) => {
                        Data::E((0..x.len()).map(|i| if mask[i] { x[i] } else { y[i] }).collect())
                    }
                    (Data::P(x), Data::P(y)) => {
                        Data::P((0..x.len()).map(|i| if mask[i] { x[i] } else { y[i] }).collect())
                    }
                    _ => unreachable!("verified: select of one type"),
                };
                self.set(
                    res(0),
                    Tile {
                        shape: a.shape.clone(),
                        data,
                    },
                );
            }
            OpKind::Cast(r) => {
                let (from, to) = (self.dtype(op.operands[0]), rt.unwrap().dtype().unwrap());
                let rtz = *r == Rounding::Rtz;
                let t = self.elementwise(op, |a| Ok(scalar::cast(from, to, a[0], rtz)))?;
                self.set(res(0), t);
            }
            OpKind::Bitcast => {
                let (from, to) = (self.dtype(op.operands[0]), rt.unwrap().dtype().unwrap());
                let t = self.elementwise(op, |a| Ok(scalar::from_bits(to, scalar::to_bits(from, a[0]))))?;
                self.set(res(0), t);
            }
            OpKind::PtrAdd => {
                let (p, o) = (self.get(op.operands[0]), self.get(op.operands[1]));
                let Data::P(ps) = &p.data else {
                    unreachable!("verified: pointer operand")
                };
                let data = ps.iter().zip(o.elems()).map(|(p, e)| {
                    let Scalar::I(i) = e else {
                        unreachable!("verified: integer offset")
                    };
                    Ptr {
                        buf: p.buf,
                        off: p.off.wrapping_add(*i),
                    }
                });
                self.set(
                    res(0),
                    Tile {
                        shape: p.shape.clone(),
                        data: Data::P(data.collect()),
                    },
                );
            }
            OpKind::Load { mask, other, .. } => {
                let t = self.load(op, *mask, *other)?;
                self.set(res(0), t);
            }
            OpKind::Store { mask, .. } => self.store(op, *mask)?,
            OpKind::LoadBlock { .. } => {
                let t = self.load_block(op)?;
                self.set(res(0), t);
            }
            OpKind::StoreBlock { .. } => self.store_block(op)?,
            OpKind::Atomic { op: a, mask } => {
                let t = self.atomic(op, Some(*a), *mask)?;
                self.set(res(0), t);
            }
            OpKind::AtomicCas { mask } => {
                let t = self.atomic(op, None, *mask)?;
                self.set(res(0), t);
            }
            OpKind::Dot(p) => {
                let t = self.dot(op, *p);
                self.set(res(0), t);
            }
            OpKind::Reduce { op: r, axis } => {
                let d = self.dtype(op.operands[0]);
                let b = r.combine();
                let t = self.reduce(op, *axis, &mut |acc, x| {
                    scalar::binary(b, d, acc, x).map_err(String::from)
                })?;
                self.set(res(0), t);
            }
            OpKind::ClusterReduce(r) => {
                let d = self.dtype(op.operands[0]);
                let all = self.cluster_gather(op)?;
                let b = r.combine();
                let v = all[1..]
                    .iter()
                    .try_fold(all[0][0], |acc, x| scalar::binary(b, d, acc, x[0]))
                    .map_err(|m| self.err(op, m.to_string()))?;
                self.set(res(0), Tile::scalar(v));
            }
            OpKind::SplitSum => {
                // Every element of every program's tile, added in rank order (the GPU's order);
                // each program gets the sum (the GPU defines it in rank 0 only).
                let x = self.get(op.operands[0]).clone();
                let (ex, rank) = self
                    .cluster
                    .expect("the GPU stage splits loops in cluster kernels only");
                let all = ex
                    .gather(rank, op.loc, x.elems().to_vec())
                    .map_err(|m| self.err(op, m))?;
                let mut sum = all[0].clone();
                for next in &all[1..] {
                    for (a, b) in sum.iter_mut().zip(next) {
                        *a = scalar::binary(BinaryOp::Add, DType::F32, *a, *b)
                            .map_err(|m| self.err(op, m.to_string()))?;
                    }
                }
                self.set(
                    res(0),
                    Tile {
                        shape: x.shape.clone(),
                        data: Data::E(sum),
                    },
                );
            }
            OpKind::ClusterReduceWith => {
                let all = self.cluster_gather(op)?;
                let mut acc = all[0].clone();
                for next in &all[1..] {
                    acc = self
                        .combine_all(&op.regions[0], &acc, next)
                        .map_err(|m| self.err(op, m))?;
                }
                for (i, v) in acc.into_iter().enumerate() {
                    self.set(res(i), Tile::scalar(v));
                }
            }
            OpKind::ArgReduce { max, axis } => {
                let d = self.dtype(op.operands[0]);
                let x = self.get(op.operands[0]).clone();
                let shape = x.shape.clone();
                let (outer, n, inner) = split_axis(&shape, *axis);
                let xs = x.elems();
                let mut out = Vec::with_capacity(outer * inner);
                for o in 0..outer {
                    for i in 0..inner {
                        let mut best: Option<(usize, Scalar)> = None;
                        for k in 0..n {
                            let v = xs[(o * n + k) * inner + i];
                            if matches!(v, Scalar::F(f) if f.is_nan()) {
                                continue;
                            }
                            let better = match best {
                                None => true,
                                Some((_, b)) => scalar::compare(if *max { CmpOp::Gt } else { CmpOp::Lt }, d, v, b),
                            };
                            if better {
                                best = Some((k, v));
                            }
                        }
                        out.push(Scalar::I(best.map_or(0, |b| b.0) as i64));
                    }
                }
                self.set(
                    res(0),
                    Tile {
                        shape: rt.unwrap().shape,
                        data: Data::E(out),
                    },
                );
            }
            OpKind::ReduceWith { axis } => {
                let ts = self.reduce_with_region(op, *axis, &op.regions[0])?;
                for (i, t) in ts.into_iter().enumerate() {
                    self.set(res(i), t);
                }
            }
            OpKind::Scan { op: r, axis, reverse } => {
                let d = self.dtype(op.operands[0]);
                let b = r.combine();
                let t = self.scan(op, *axis, *reverse, &mut |_, acc, x| {
                    scalar::binary(b, d, acc, x).map_err(String::from)
                })?;
                self.set(res(0), t);
            }
            OpKind::ScanWith { axis, reverse } => {
                let region = op.regions[0].clone();
                let t = self.scan(op, *axis, *reverse, &mut |m, acc, x| m.combine(&region, acc, x))?;
                self.set(res(0), t);
            }
            OpKind::For { .. } => {
                let get_int = |m: &Self, v: ValueId| match m.get(v).elems()[0] {
                    Scalar::I(i) => i,
                    _ => 0,
                };
                let d = self.dtype(op.operands[0]);
                let (start, end, step) = (
                    get_int(self, op.operands[0]),
                    get_int(self, op.operands[1]),
                    get_int(self, op.operands[2]),
                );
                if step <= 0 {
                    return Err(self.err(op, format!("loop step is {step}; it must be positive")));
                }
                let mut carried: Vec<Tile> = op.operands[3..].iter().map(|v| self.get(*v).clone()).collect();
                let body = &op.regions[0];
                let lt = |a: i64, b: i64| {
                    if d.is_unsigned() {
                        (a as u64) < (b as u64)
                    } else {
                        a < b
                    }
                };
                let trips = if !lt(start, end) {
                    0
                } else if d.is_unsigned() {
                    ((end as u64) - (start as u64)).div_ceil(step as u64)
                } else {
                    ((end as i128 - start as i128) as u128).div_ceil(step as u128) as u64
                };
                self.loops.push((op.loc, 0, trips));
                // Each iteration costs one plus its carried elements, so that a loop whose body
                // does nothing (or only passes values on) still spends the budget.
                let per_iteration = 1 + op.operands[3..]
                    .iter()
                    .map(|v| self.k.ty(*v).numel() as u64)
                    .sum::<u64>();
                let mut i = start;
                while lt(i, end) {
                    self.steps = self.steps.saturating_add(per_iteration);
                    if self.steps > self.max_steps {
                        return Err(self.over_budget(op));
                    }
                    self.set(body.args[0], Tile::scalar(Scalar::I(i)));
                    for (a, t) in body.args[1..].iter().zip(carried) {
                        self.set(*a, t);
                    }
                    carried = self.region(body)?;
                    let next = scalar::wrap(d, i.wrapping_add(step));
                    if !lt(i, next) {
                        break; // the induction variable would wrap around
                    }
                    i = next;
                    if let Some(l) = self.loops.last_mut() {
                        l.1 += 1;
                    }
                }
                self.loops.pop();
                for (r, t) in op.results.iter().zip(carried) {
                    self.set(*r, t);
                }
            }
            OpKind::If => {
                let c = matches!(self.get(op.operands[0]).elems()[0], Scalar::B(true));
                let vals = self.region(&op.regions[if c { 0 } else { 1 }])?;
                for (r, t) in op.results.iter().zip(vals) {
                    self.set(*r, t);
                }
            }
            OpKind::Yield => {}
            OpKind::MultipleOf(n) => {
                // As in Triton, the hint is about where runs of consecutive values start: each
                // element that does not continue its left neighbour (+1, along the last axis)
                // must be a multiple of n. A scalar must be a multiple itself.
                let x = self.get(op.operands[0]);
                let xs = x.elems();
                let last = x.shape.last().copied().unwrap_or(1);
                let starts_run = |i: usize| {
                    i.is_multiple_of(last)
                        || !matches!((xs[i - 1], xs[i]), (Scalar::I(a), Scalar::I(b)) if b == a.wrapping_add(1))
                };
                if let Some(i) = (0..xs.len())
                    .find(|&i| starts_run(i) && matches!(xs[i], Scalar::I(v) if v.rem_euclid(*n as i64) != 0))
                {
                    return Err(self.err(op, format!("the hint is wrong: element {:?} is {:?}, which starts a run of consecutive values but is not a multiple of {n}", unflatten(i, &x.shape), xs[i])));
                }
                let t = x.clone();
                self.set(res(0), t);
            }
            OpKind::MaxContiguous(n) => {
                let x = self.get(op.operands[0]);
                let last = x.shape.last().copied().unwrap_or(1);
                let run = (*n as usize).min(last).max(1);
                let xs = x.elems();
                for (i, pair) in xs.windows(2).enumerate() {
                    if (i + 1) % last % run != 0
                        && let (Scalar::I(a), Scalar::I(b)) = (pair[0], pair[1])
                        && b != a.wrapping_add(1)
                    {
                        return Err(self.err(
                            op,
                            format!(
                                "the hint is wrong: elements {:?} and {:?} are {a} and {b}, not consecutive",
                                unflatten(i, &x.shape),
                                unflatten(i + 1, &x.shape)
                            ),
                        ));
                    }
                }
                let t = x.clone();
                self.set(res(0), t);
            }
            OpKind::Print(msg) => {
                let mut line = format!("pid {:?} {msg}", self.pid);
                for v in &op.operands {
                    line.push_str(&format!(" [{}]", fmt_elems(self.get(*v).elems(), self.dtype(*v))));
                }
                self.out.push(line);
            }
            OpKind::Assert(msg) => {
                let c = self.get(op.operands[0]);
                if let Some(i) = c.elems().iter().position(|e| matches!(e, Scalar::B(false))) {
                    return Err(self.err(
                        op,
                        format!("assertion failed: {msg} (element {:?})", unflatten(i, &c.shape)),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The operands of cluster reduction `op` in every program of this program's cluster, in
    /// program order.
    fn cluster_gather(&mut self, op: &Op) -> Result<Vec<Posted>, InterpError> {
        let x: Posted = op.operands.iter().map(|v| self.get(*v).elems()[0]).collect();
        let (ex, rank) = self
            .cluster
            .expect("the checker allows cluster reductions in cluster kernels only");
        ex.gather(rank, op.loc, x).map_err(|m| self.err(op, m))
    }

    fn combine(&mut self, region: &Region, a: Scalar, b: Scalar) -> Result<Scalar, String> {
        self.set(region.args[0], Tile::scalar(a));
        self.set(region.args[1], Tile::scalar(b));
        let out = self.region(region).map_err(|e| e.to_string())?;
        Ok(out[0].elems()[0])
    }

    fn reduce(
        &mut self,
        op: &Op,
        axis: usize,
        f: &mut dyn FnMut(Scalar, Scalar) -> Result<Scalar, String>,
    ) -> Result<Tile, InterpError> {
        let x = self.get(op.operands[0]).clone();
        let (outer, n, inner) = split_axis(&x.shape, axis);
        let xs = x.elems();
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                let mut acc = xs[o * n * inner + i];
                for k in 1..n {
                    acc = f(acc, xs[(o * n + k) * inner + i]).map_err(|m| self.err(op, m))?;
                }
                out.push(acc);
            }
        }
        let mut shape = x.shape.clone();
        shape.remove(axis);
        Ok(Tile {
            shape,
            data: Data::E(out),
        })
    }

    /// Folds the operands' rows together, left to right, through the combine region (the
    /// accumulated values then the next ones as its arguments); one result per operand.
    fn reduce_with_region(&mut self, op: &Op, axis: usize, region: &Region) -> Result<Vec<Tile>, InterpError> {
        let xs: Vec<Tile> = op.operands.iter().map(|v| self.get(*v).clone()).collect();
        let (outer, n, inner) = split_axis(&xs[0].shape, axis);
        let elems: Vec<&[Scalar]> = xs.iter().map(|x| x.elems()).collect();
        let mut out = vec![Vec::with_capacity(outer * inner); xs.len()];
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| (o * n + k) * inner + i;
                let mut acc: Vec<Scalar> = elems.iter().map(|e| e[at(0)]).collect();
                for k in 1..n {
                    let next: Vec<Scalar> = elems.iter().map(|e| e[at(k)]).collect();
                    acc = self.combine_all(region, &acc, &next).map_err(|m| self.err(op, m))?;
                }
                for (j, a) in acc.into_iter().enumerate() {
                    out[j].push(a);
                }
            }
        }
        let mut shape = xs[0].shape.clone();
        shape.remove(axis);
        Ok(out
            .into_iter()
            .map(|data| Tile {
                shape: shape.clone(),
                data: Data::E(data),
            })
            .collect())
    }

    /// The combine region on several accumulated values and the next ones.
    fn combine_all(&mut self, region: &Region, acc: &[Scalar], next: &[Scalar]) -> Result<Vec<Scalar>, String> {
        for (a, x) in region.args.iter().zip(acc.iter().chain(next)) {
            self.set(*a, Tile::scalar(*x));
        }
        let out = self.region(region).map_err(|e| e.to_string())?;
        Ok(out.iter().map(|t| t.elems()[0]).collect())
    }

    fn scan(
        &mut self,
        op: &Op,
        axis: usize,
        reverse: bool,
        f: &mut dyn FnMut(&mut Self, Scalar, Scalar) -> Result<Scalar, String>,
    ) -> Result<Tile, InterpError> {
        let x = self.get(op.operands[0]).clone();
        let (outer, n, inner) = split_axis(&x.shape, axis);
        let mut out = x.elems().to_vec();
        for o in 0..outer {
            for i in 0..inner {
                let idx = |k: usize| (o * n + if reverse { n - 1 - k } else { k }) * inner + i;
                let mut acc = out[idx(0)];
                for k in 1..n {
                    acc = f(self, acc, out[idx(k)]).map_err(|m| self.err(op, m))?;
                    out[idx(k)] = acc;
                }
            }
        }
        Ok(Tile {
            shape: x.shape.clone(),
            data: Data::E(out),
        })
    }

    fn dot(&self, op: &Op, p: Precision) -> Tile {
        let (a, b, c) = (
            self.get(op.operands[0]),
            self.get(op.operands[1]),
            self.get(op.operands[2]),
        );
        let (m, k, n) = (a.shape[0], a.shape[1], b.shape[1]);
        let din = self.dtype(op.operands[0]);
        let dacc = self.dtype(op.operands[2]);
        let conv = |e: Scalar| {
            let x = e.as_f64(din);
            if p == Precision::Tf32 { round_tf32(x) } else { x }
        };
        let av: Vec<f64> = a.elems().iter().map(|e| conv(*e)).collect();
        let bv: Vec<f64> = b.elems().iter().map(|e| conv(*e)).collect();
        let mut out = c.elems().to_vec();
        for i in 0..m {
            for j in 0..n {
                let cell = &mut out[i * n + j];
                if dacc.is_int() {
                    let mut s = if let Scalar::I(v) = *cell { v } else { 0 };
                    for kk in 0..k {
                        s = scalar::wrap(
                            dacc,
                            s.wrapping_add((av[i * k + kk] as i64).wrapping_mul(bv[kk * n + j] as i64)),
                        );
                    }
                    *cell = Scalar::I(s);
                } else {
                    let mut s = cell.as_f64(dacc);
                    for kk in 0..k {
                        s = scalar::round_float(dacc, av[i * k + kk].mul_add(bv[kk * n + j], s));
                    }
                    *cell = Scalar::F(s);
                }
            }
        }
        Tile {
            shape: vec![m, n],
            data: Data::E(out),
        }
    }

    /// The buffer element a pointer designates, or an error naming the access.
    fn locate(
        &self,
        bufs: &[Buffer],
        op: &Op,
        p: Ptr,
        lane: usize,
        shape: &[usize],
        verb: &str,
    ) -> Result<(usize, usize), InterpError> {
        let b = &bufs[p.buf as usize];
        if p.off < 0 || p.off as u64 >= b.data.len() as u64 {
            let at = if shape.is_empty() {
                String::new()
            } else {
                format!(" element {:?}", unflatten(lane, shape))
            };
            return Err(self.err(op, format!(
                "out-of-bounds {verb}:{at} addresses index {} of `{}`, which has {} elements (and no mask covers it)",
                p.off, b.name, b.data.len()
            )));
        }
        Ok((p.buf as usize, p.off as usize))
    }

    fn load(&self, op: &Op, mask: bool, other: bool) -> Result<Tile, InterpError> {
        let p = self.get(op.operands[0]);
        let Data::P(ps) = &p.data else {
            unreachable!("verified: pointer operand")
        };
        let m = mask.then(|| self.get(op.operands[1]).elems());
        let o = other.then(|| self.get(op.operands[1 + mask as usize]).elems());
        let d = self.k.ty(op.results[0]).dtype().unwrap();
        let zero = Scalar::zero(d);
        let mut out = Vec::with_capacity(ps.len());
        let bufs = self.buffers();
        for (i, ptr) in ps.iter().enumerate() {
            if m.is_some_and(|m| m[i] == Scalar::B(false)) {
                out.push(o.map_or(zero, |o| o[i]));
                continue;
            }
            let (b, j) = self.locate(&bufs, op, *ptr, i, &p.shape, "load")?;
            out.push(bufs[b].data[j]);
        }
        Ok(Tile {
            shape: p.shape.clone(),
            data: Data::E(out),
        })
    }

    /// The pointer of each element of a block op's block (`None`: out of bounds), and its shape.
    fn block_elements(&self, op: &Op) -> (Vec<Option<Ptr>>, Vec<usize>) {
        let o = crate::ir::block::operands(op);
        let int = |v: &ValueId| match self.get(*v).elems()[0] {
            Scalar::I(i) => i,
            _ => unreachable!("verified: integer operands"),
        };
        let index = self.dtype(o.shape[0]);
        let (shape, strides, coords): (Vec<i64>, Vec<i64>, Vec<i64>) = (
            o.shape.iter().map(int).collect(),
            o.strides.iter().map(int).collect(),
            o.coords.iter().map(int).collect(),
        );
        let Data::P(base) = &self.get(o.ptr).data else {
            unreachable!("verified: pointer base")
        };
        let base = base[0];
        let block = match o.value {
            Some(v) => self.get(v).shape.clone(),
            None => self.k.ty(op.results[0]).shape.clone(),
        };
        let n: usize = block.iter().product();
        let ptrs = (0..n)
            .map(|i| {
                crate::ir::block::position(index, &shape, &strides, &coords, &unflatten(i, &block)).map(|off| Ptr {
                    buf: base.buf,
                    off: base.off.wrapping_add(off),
                })
            })
            .collect();
        (ptrs, block)
    }

    fn load_block(&self, op: &Op) -> Result<Tile, InterpError> {
        let (ptrs, shape) = self.block_elements(op);
        let d = self.k.ty(op.results[0]).dtype().unwrap();
        let zero = Scalar::zero(d);
        let mut out = Vec::with_capacity(ptrs.len());
        let bufs = self.buffers();
        for (i, p) in ptrs.iter().enumerate() {
            out.push(match p {
                None => zero,
                Some(p) => {
                    let (b, j) = self.locate(&bufs, op, *p, i, &shape, "load")?;
                    bufs[b].data[j]
                }
            });
        }
        Ok(Tile {
            shape,
            data: Data::E(out),
        })
    }

    fn store_block(&mut self, op: &Op) -> Result<(), InterpError> {
        let (ptrs, shape) = self.block_elements(op);
        let v = crate::ir::block::operands(op).value.unwrap();
        let vals = self.get(v).elems().to_vec();
        let mut bufs = self.buffers();
        for (i, p) in ptrs.iter().enumerate() {
            if let Some(p) = p {
                let (b, j) = self.locate(&bufs, op, *p, i, &shape, "store")?;
                bufs[b].data[j] = vals[i];
            }
        }
        Ok(())
    }

    fn store(&mut self, op: &Op, mask: bool) -> Result<(), InterpError> {
        let p = self.get(op.operands[0]).clone();
        let Data::P(ps) = &p.data else {
            unreachable!("verified: pointer operand")
        };
        let v = self.get(op.operands[1]).elems().to_vec();
        let m = mask.then(|| self.get(op.operands[2]).elems().to_vec());
        let mut bufs = self.buffers();
        for (i, ptr) in ps.iter().enumerate() {
            if m.as_ref().is_some_and(|m| m[i] == Scalar::B(false)) {
                continue;
            }
            let (b, j) = self.locate(&bufs, op, *ptr, i, &p.shape, "store")?;
            bufs[b].data[j] = v[i];
        }
        Ok(())
    }

    fn atomic(&mut self, op: &Op, kind: Option<AtomicOp>, mask: bool) -> Result<Tile, InterpError> {
        let p = self.get(op.operands[0]).clone();
        let Data::P(ps) = &p.data else {
            unreachable!("verified: pointer operand")
        };
        let d = self.k.ty(op.results[0]).dtype().unwrap();
        let vals: Vec<Vec<Scalar>> = op.operands[1..].iter().map(|v| self.get(*v).elems().to_vec()).collect();
        let nvals = if kind.is_some() { 1 } else { 2 };
        let m = mask.then(|| vals[nvals].clone());
        let zero = if d.is_float() { Scalar::F(0.0) } else { Scalar::I(0) };
        let mut out = Vec::with_capacity(ps.len());
        let mut bufs = self.buffers();
        for (i, ptr) in ps.iter().enumerate() {
            if m.as_ref().is_some_and(|m| m[i] == Scalar::B(false)) {
                out.push(zero);
                continue;
            }
            let (b, j) = self.locate(&bufs, op, *ptr, i, &p.shape, "atomic update")?;
            let old = bufs[b].data[j];
            let new = match kind {
                Some(AtomicOp::Xchg) => vals[0][i],
                Some(k) => {
                    let bop = match k {
                        AtomicOp::Add => BinaryOp::Add,
                        AtomicOp::Max => BinaryOp::Max,
                        AtomicOp::Min => BinaryOp::Min,
                        AtomicOp::And => BinaryOp::And,
                        AtomicOp::Or => BinaryOp::Or,
                        _ => BinaryOp::Xor,
                    };
                    scalar::binary(bop, d, old, vals[0][i]).map_err(|e| self.err(op, e.to_string()))?
                }
                None => {
                    if scalar::compare(CmpOp::Eq, d, old, vals[0][i]) {
                        vals[1][i]
                    } else {
                        old
                    }
                }
            };
            bufs[b].data[j] = new;
            out.push(old);
        }
        Ok(Tile {
            shape: p.shape.clone(),
            data: Data::E(out),
        })
    }
}

/// `(product of dims before axis, dim, product of dims after axis)`.
fn split_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

/// Rounds an f32 value to tf32 (10 explicit mantissa bits) to nearest, ties away from zero: the
/// GPU's `cvt.rna.tf32.f32`, which the lowering applies to each operand (so 1 + 2^-11 becomes
/// 1 + 2^-10, where ties to even would give 1). Past the largest tf32 value it rounds to infinity.
fn round_tf32(x: f64) -> f64 {
    let b = (x as f32).to_bits();
    if !(x as f32).is_finite() {
        return x;
    }
    // Adding half of the dropped range to the magnitude bits carries into the kept bits exactly
    // when the dropped part is at least half: a tie goes up in magnitude, whatever the sign.
    f32::from_bits(b.wrapping_add(0x1000) & !0x1fff) as f64
}

/// A tile's elements as `print` shows them: the first [`MAX_PRINTED_ELEMENTS`], then how many
/// there are.
fn fmt_elems(elems: &[Scalar], d: DType) -> String {
    let mut vals: Vec<String> = elems
        .iter()
        .take(MAX_PRINTED_ELEMENTS)
        .map(|e| fmt_elem(*e, d))
        .collect();
    if elems.len() > MAX_PRINTED_ELEMENTS {
        vals.push(format!("... ({} elements)", elems.len()));
    }
    vals.join(", ")
}

fn fmt_elem(e: Scalar, d: DType) -> String {
    match e {
        Scalar::B(b) => b.to_string(),
        Scalar::I(i) if d == DType::U64 => (i as u64).to_string(),
        Scalar::I(i) => i.to_string(),
        Scalar::F(f) => format!("{f}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tf32_rounds_to_nearest_ties_away_from_zero() {
        let tie = 1.0 + 2f64.powi(-11);
        // Ties away from zero in both signs (ties to even would give 1 and -1).
        assert_eq!(super::round_tf32(tie), 1.0 + 2f64.powi(-10));
        assert_eq!(super::round_tf32(-tie), -(1.0 + 2f64.powi(-10)));
        // A tie whose lower neighbour is odd goes up too; below and above a tie, to nearest.
        assert_eq!(super::round_tf32(1.0 + 3.0 * 2f64.powi(-11)), 1.0 + 2f64.powi(-9));
        assert_eq!(super::round_tf32(1.0 + 2f64.powi(-11) - 2f64.powi(-23)), 1.0);
        assert_eq!(
            super::round_tf32(1.0 + 2f64.powi(-11) + 2f64.powi(-23)),
            1.0 + 2f64.powi(-10)
        );
        // Exact tf32 values, zeros, infinities and NaN stay; the largest f32 rounds to infinity.
        for x in [0.0, -0.0, 1.5, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(super::round_tf32(x).to_bits(), x.to_bits());
        }
        assert!(super::round_tf32(f64::NAN).is_nan());
        assert_eq!(super::round_tf32(f32::MAX as f64), f64::INFINITY);
    }

    use super::*;

    fn f32s(name: &str, v: &[f64]) -> Buffer {
        Buffer::from_f64(name, DType::F32, v)
    }

    /// The programs of a cluster combine in program order; programs that reach different
    /// reductions, or a program that ends while the others wait, are errors (the checker keeps
    /// such kernels out; the IR's text form does not).
    #[test]
    fn clusters_meet_at_each_reduction() {
        let sum = "kernel @k(x %0: *f32, y %1: *mut f32) cluster(2) {
  %2 = program_id<0> : i32
  %3 = ptr_add %0, %2 : *f32
  %4 = load %3 : f32
  %5 = cluster_reduce<sum> %4 : f32
  %6 = ptr_add %1, %2 : *mut f32
  store %6, %5
}
";
        let k = crate::ir::parse_kernel(sum).unwrap();
        let mut bufs = vec![f32s("x", &[1.0, 2.0, 30.0, 40.0]), f32s("y", &[0.0; 4])];
        run(&k, [4, 1, 1], &[Arg::Buffer(0), Arg::Buffer(1)], &mut bufs).unwrap();
        assert_eq!(bufs[1].to_f64(), [3.0, 3.0, 70.0, 70.0]);
        let e = run(&k, [3, 1, 1], &[Arg::Buffer(0), Arg::Buffer(1)], &mut bufs).unwrap_err();
        assert!(
            e.message.contains("the grid's first extent 3 is not a multiple of 2"),
            "{e}"
        );
        // Only program 0 of each cluster reaches the reduction.
        let lopsided = "kernel @k(x %0: *f32, y %1: *mut f32) cluster(2) {
  %2 = program_id<0> : i32
  %3 = const<2> : i32
  %4 = rem %2, %3 : i32
  %5 = const<0> : i32
  %6 = eq %4, %5 : bool
  if %6 {
  ^():
    %7 = ptr_add %0, %2 : *f32
    %8 = load %7 : f32
    %9 = cluster_reduce<max> %8 : f32
    %10 = ptr_add %1, %2 : *mut f32
    store %10, %9
    yield
  } {
  ^():
    yield
  }
}
";
        let k = crate::ir::parse_kernel(lopsided).unwrap();
        let e = run(&k, [2, 1, 1], &[Arg::Buffer(0), Arg::Buffer(1)], &mut bufs).unwrap_err();
        assert!(e.message.starts_with(LEFT_WAITING), "{e}");
        assert_eq!(e.program, [0, 0, 0]);
    }

    fn checked(src: &str) -> Kernel {
        let ast = crate::syntax::parse(src).unwrap();
        crate::check::check_kernel(src, &ast, "k", &vec![]).unwrap()
    }

    /// Every program counts against the budget, so a grid of programs that do nothing ends.
    #[test]
    fn empty_programs_spend_the_step_budget() {
        let k = checked("kernel k() {}");
        let limits = Limits {
            max_steps: 1000 * PROGRAM_STEPS,
        };
        let e = run_limited(&k, [u32::MAX; 3], &[], &mut [], &limits).unwrap_err();
        assert!(e.message.starts_with("stopped after 16000 element operations"), "{e}");
        assert_eq!(e.program, [1000, 0, 0]);
        // Along every axis, not only the first.
        let e = run_limited(&k, [1, u32::MAX, u32::MAX], &[], &mut [], &limits).unwrap_err();
        assert_eq!(e.program, [0, 1000, 0]);
        assert!(run_limited(&k, [10, 10, 10], &[], &mut [], &limits).is_ok());
    }

    /// The programs of a cluster and the threads they start on count before they start.
    #[test]
    fn cluster_threads_spend_the_step_budget() {
        let sum = "kernel @k(x %0: *f32) cluster(2) {
  %1 = const<1.0> : f32
  %2 = cluster_reduce<sum> %1 : f32
}
";
        let k = crate::ir::parse_kernel(sum).unwrap();
        let limits = Limits { max_steps: 100_000 };
        let mut bufs = vec![f32s("x", &[0.0])];
        let e = run_limited(
            &k,
            [u32::MAX - 1, u32::MAX, u32::MAX],
            &[Arg::Buffer(0)],
            &mut bufs,
            &limits,
        )
        .unwrap_err();
        assert!(e.message.starts_with("stopped after 100000 element operations"), "{e}");
        let clusters = (100_000 - 2 * THREAD_STEPS) / (2 * CLUSTER_PROGRAM_STEPS);
        assert!(e.program[0] as u64 <= 2 * (clusters + 1), "{e:?}");
        // The threads' own starts count too.
        let few = Limits {
            max_steps: THREAD_STEPS,
        };
        let e = run_limited(&k, [2, 1, 1], &[Arg::Buffer(0)], &mut bufs, &few).unwrap_err();
        assert!(
            e.message.contains("the threads of a cluster were about to start"),
            "{e}"
        );
    }

    /// What a run keeps of its printed lines is bounded, and so is each line.
    #[test]
    fn printing_is_bounded() {
        let k = checked(
            "kernel k() { let x = arange(0, 1048576); print(\"x\", x); for i in 0..20000 { print(\"y\", arange(0, 1024)); } }",
        );
        let out = run(&k, [1, 1, 1], &[], &mut []).unwrap();
        let bytes: usize = out.iter().map(|l| l.len() + 1).sum();
        assert!(bytes <= MAX_PRINTED_BYTES + 200, "{bytes}");
        assert!(
            out[0].ends_with("254, 255, ... (1048576 elements)]"),
            "{}",
            &out[0][out[0].len() - 60..]
        );
        let last = out.last().unwrap();
        assert!(
            last.starts_with("... ") && last.contains("bytes of printed output dropped"),
            "{last}"
        );
        // Short output is kept whole, with no note.
        let k = checked("kernel k() { print(\"x\", arange(0, 4)); }");
        assert_eq!(
            run(&k, [2, 1, 1], &[], &mut []).unwrap(),
            ["pid [0, 0, 0] x [0, 1, 2, 3]", "pid [1, 0, 0] x [0, 1, 2, 3]"]
        );
    }

    /// Each value is dropped after its last read in its own region; values from outside a loop
    /// body are never dropped inside it; what a loop body reads stays until that read.
    #[test]
    fn values_die_after_their_last_read() {
        let src = "kernel k(x: *f32, y: *mut f32) {
            let o = arange(0, 4);
            let a = load(x + o);
            let b = a * 2.0;
            let mut c = b;
            for i in 0..3 { c = c + a; }
            store(y + o, c);
        }";
        let ast = crate::syntax::parse(src).unwrap();
        let k = crate::check::check_kernel(src, &ast, "k", &vec![]).unwrap();
        let dead = last_uses(&k.body);
        let at = |v: ValueId| dead.iter().position(|d| d.contains(&v));
        let def = |v: ValueId| k.body.ops.iter().position(|op| op.results.contains(&v)).unwrap();
        let for_at = k
            .body
            .ops
            .iter()
            .position(|op| matches!(op.kind, OpKind::For { .. }))
            .unwrap();
        let load = k
            .body
            .ops
            .iter()
            .find(|op| matches!(op.kind, OpKind::Load { .. }))
            .unwrap();
        // `a` is read inside the loop: it lives until the loop is done, then dies there.
        assert_eq!(at(load.results[0]), Some(for_at));
        // Every value of the body dies somewhere at or after its definition.
        for op in &k.body.ops {
            for r in &op.results {
                assert!(at(*r).is_some_and(|i| i >= def(*r)), "{r:?}");
            }
        }
        // Inside the loop, values from outside are never listed.
        let body = &k.body.ops[for_at].regions[0];
        let inner: Vec<ValueId> = last_uses(body).into_iter().flatten().collect();
        assert!(!inner.contains(&load.results[0]));
    }
}
