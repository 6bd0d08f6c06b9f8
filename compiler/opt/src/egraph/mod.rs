//! Rewrites a kernel into a cheaper equivalent with egg.
//!
//! Each region becomes one e-graph ([`convert`]); the rules ([`rules`], one file per topic)
//! run under node, iteration and time limits; the cheapest form of each value ([`cost`]) is
//! emitted back with the ops that have effects in their original order. Rules that change
//! rounding run only under [`OptOptions::fast_math`]; every other rule gives bit-identical
//! results on the interpreter (tests in each rule file check both sides on random inputs).

mod analysis;
mod convert;
mod cost;
mod fuse;
mod lang;
pub mod rules;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use egg::{Rewrite, Runner};
use tile_lang::ir::{Kernel, KernelParam, Region, ValueId, verify};

pub use analysis::TileAnalysis;
pub use lang::TileLang;

use convert::{Emitter, RegionGraph, constants, new_value};

/// What the e-graph stage may do.
#[derive(Clone, Debug)]
pub struct OptOptions {
    /// Allow rules that change rounding (each documented with its measured error).
    pub fast_math: bool,
    /// Stop growing a region's e-graph beyond this many nodes.
    pub node_limit: usize,
    pub iter_limit: usize,
    /// Per region.
    pub time_limit: Duration,
    /// Run only the rules with these names (tests); `None`: all that the options allow.
    pub only_rules: Option<Vec<String>>,
}

impl Default for OptOptions {
    fn default() -> Self {
        OptOptions {
            fast_math: false,
            node_limit: 10_000,
            iter_limit: 12,
            time_limit: Duration::from_millis(50),
            only_rules: None,
        }
    }
}

/// What the stage did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub regions: usize,
    /// Largest e-graph, in nodes.
    pub max_nodes: usize,
    pub iterations: usize,
    /// How often each rule applied, by name.
    pub applied: BTreeMap<String, usize>,
    /// Why each region's run stopped (`Saturated`, or the limit reached).
    pub stop_reasons: BTreeMap<String, usize>,
    pub ops_before: usize,
    pub ops_after: usize,
    pub time: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum OptError {
    #[error("optimized kernel fails verification: {0}")]
    Verify(String),
    #[error("internal optimizer error: {0}")]
    Internal(String),
}

/// Rewrites `kernel` into a cheaper kernel that computes the same results.
pub fn optimize(kernel: &Kernel, opts: &OptOptions) -> Result<(Kernel, Report), OptError> {
    let started = Instant::now();
    let rules = rules::all(opts);
    let mut st = State {
        old: kernel,
        consts: constants(kernel),
        values: Vec::new(),
        rules,
        opts,
        report: Report::default(),
    };
    let mut env = HashMap::new();
    let params: Vec<KernelParam> = kernel
        .params
        .iter()
        .map(|p| {
            let v = new_value(&mut st.values, kernel.ty(p.value).clone());
            env.insert(p.value, v);
            KernelParam { value: v, ..p.clone() }
        })
        .collect();
    let body = Region {
        args: vec![],
        ops: st.region(&kernel.body, &env)?,
    };
    let mut out = Kernel {
        params,
        body,
        values: st.values,
        ..kernel.clone()
    };
    let mut report = st.report;
    let allowed = |name: &str| opts.only_rules.as_ref().is_none_or(|o| o.iter().any(|n| n == name));
    fuse::fuse(&mut out, &allowed, &mut report.applied);
    verify(&out).map_err(|e| OptError::Verify(format!("{e:?}")))?;
    report.ops_before = count_ops(kernel);
    report.ops_after = count_ops(&out);
    report.time = started.elapsed();
    Ok((out, report))
}

fn count_ops(k: &Kernel) -> usize {
    let mut n = 0;
    k.walk(&mut |_| n += 1);
    n
}

struct State<'k> {
    old: &'k Kernel,
    consts: HashMap<tile_lang::ir::ValueId, tile_lang::ir::ConstValue>,
    values: Vec<tile_lang::ir::Type>,
    rules: Vec<Rewrite<TileLang, TileAnalysis>>,
    opts: &'k OptOptions,
    report: Report,
}

impl State<'_> {
    /// The optimized ops of `r`; `env` maps every value visible in `r` from outside (and
    /// `r`'s arguments) to its new id.
    fn region(&mut self, r: &Region, env: &HashMap<ValueId, ValueId>) -> Result<Vec<tile_lang::ir::Op>, OptError> {
        let g = RegionGraph::build(self.old, r, &self.consts);
        let runner = Runner::default()
            .with_egraph(g.egraph)
            .with_node_limit(self.opts.node_limit)
            .with_iter_limit(self.opts.iter_limit)
            .with_time_limit(self.opts.time_limit)
            .run(&self.rules);
        self.report.regions += 1;
        self.report.iterations += runner.iterations.len();
        self.report.max_nodes = self.report.max_nodes.max(runner.egraph.total_number_of_nodes());
        for it in &runner.iterations {
            for (name, n) in &it.applied {
                *self.report.applied.entry(name.to_string()).or_default() += n;
            }
        }
        let reason = match &runner.stop_reason {
            Some(egg::StopReason::Saturated) => "saturated".to_string(),
            Some(egg::StopReason::IterationLimit(_)) => "iteration limit".into(),
            Some(egg::StopReason::NodeLimit(_)) => "node limit".into(),
            Some(egg::StopReason::TimeLimit(_)) => "time limit".into(),
            Some(egg::StopReason::Other(s)) => s.clone(),
            None => "none".into(),
        };
        *self.report.stop_reasons.entry(reason).or_default() += 1;

        let eg = &runner.egraph;
        let mut em = Emitter::new(eg, &g.locs);
        for (old, id) in &g.outer {
            let new = *env
                .get(old)
                .ok_or_else(|| OptError::Internal(format!("%{} is not visible here", old.0)))?;
            em.bind(*id, new);
        }
        let mut ops = Vec::new();
        for e in &g.effects {
            let src = &r.ops[e.index];
            let mut operands = Vec::new();
            for id in &e.operands {
                operands.push(em.value(*id, &mut self.values, &mut ops)?);
            }
            let mut inner = env.clone();
            for (old, id) in &e.captured {
                let v = em.value(*id, &mut self.values, &mut ops)?;
                inner.insert(*old, v);
            }
            let results: Vec<ValueId> = src
                .results
                .iter()
                .map(|v| new_value(&mut self.values, self.old.ty(*v).clone()))
                .collect();
            let mut regions = Vec::new();
            for sub in &src.regions {
                let mut env2 = inner.clone();
                let args: Vec<ValueId> = sub
                    .args
                    .iter()
                    .map(|a| {
                        let v = new_value(&mut self.values, self.old.ty(*a).clone());
                        env2.insert(*a, v);
                        v
                    })
                    .collect();
                regions.push(Region {
                    args,
                    ops: self.region(sub, &env2)?,
                });
            }
            for (id, v) in e.results.iter().zip(&results) {
                em.bind(*id, *v);
            }
            ops.push(tile_lang::ir::Op {
                kind: src.kind.clone(),
                operands,
                results,
                regions,
                loc: src.loc,
            });
        }
        Ok(ops)
    }
}
