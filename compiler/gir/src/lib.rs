//! The GPU stage's data, with no LLVM inside: the targets and their limits, layouts as linear
//! maps over GF(2) (`linear`), the chunked blocked layout (`layout`), tensor-core plans for `dot`
//! with their fragment, shared-memory and `ldmatrix` layouts (`mma`), which loops copy their
//! tensor-core operands ahead with `cp.async` (`pipeline`), the layout each tile of a
//! kernel gets (`assign`), and the resources a kernel's lowering will need (`estimate`). The
//! optimizer chooses configurations from these; the code generator lowers by them.

pub mod assign;
pub mod cluster;
pub mod estimate;
pub mod layout;
pub mod linear;
pub mod mma;
pub mod pipeline;
pub mod split;
pub mod tma;

/// A fast path the plan did not take, and the rule that refused it: `--emit gir` and `tilec
/// explain` print them, and a refusal of what the source asked for (`#[warp_specialize]`) is a
/// warning at the loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The op the refusal is about (a loop, a load, a dot).
    pub loc: tile_lang::ir::Loc,
    /// What was refused: `TMA`, `producer warpgroup`, `pipelining`.
    pub path: &'static str,
    /// Why, and what would make it apply.
    pub why: String,
    /// Whether the source asked for it (`#[warp_specialize(true)]`).
    pub asked: bool,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: no {}: {}", self.loc.line, self.loc.col, self.path, self.why)
    }
}

/// The GPU stage of one compile, made once per (kernel, warps, stages, target, facts): the
/// kernel with its block accesses decided ([`tma::prepare`]: tensor maps kept, the rest expanded
/// into pointer arithmetic) and the plan ([`assign::GpuPlan`]) made for that kernel. Codegen
/// lowers by it, `--emit gir` and `explain` print it, the model estimates from it; nothing
/// rebuilds it.
#[derive(Clone, Debug)]
pub struct GpuStage {
    pub prepared: tma::Prepared<'static>,
    pub plan: assign::GpuPlan,
    /// Programs run for each program of the grid along axis 0: more than 1 where the kernel's
    /// loop is split over a cluster of that many ([`split`]); the launch multiplies the grid.
    pub split: u32,
}

impl GpuStage {
    /// The stage for `k` compiled with `warps`, `stages` and `split` on `target` for launches
    /// with facts `spec` (those of parameters `#[no_specialize]` names dropped here, for every
    /// reader). A split the kernel or target cannot take is refused (a refusal, split 1).
    pub fn new(
        k: &tile_lang::ir::Kernel,
        warps: u32,
        stages: u32,
        split: u32,
        target: &Target,
        spec: &[ArgSpec],
    ) -> GpuStage {
        let spec = ArgSpec::for_kernel(k, spec);
        let mut refused = None;
        let cut = match split {
            0 | 1 => None,
            _ if !target.clusters => {
                refused = Some(format!("{} has no thread-block clusters", target.sm));
                None
            }
            s => split::split(k, s).map_err(|why| refused = Some(why)).ok(),
        };
        let split = if cut.is_some() { split } else { 1 };
        let source = cut.as_ref().unwrap_or(k);
        let tma::Prepared {
            kernel,
            maps,
            map_of,
            entry_of,
            mut refusals,
        } = tma::prepare(source, warps, stages, target, &spec);
        if let Some(why) = refused {
            let loc = split::top_loop(source).map_or_else(Default::default, |o| o.loc);
            refusals.push(Refusal {
                loc,
                path: "split",
                why,
                asked: false,
            });
        }
        let kernel = std::borrow::Cow::Owned(kernel.into_owned());
        let plan = assign::GpuPlan::new(&kernel, warps, stages, target);
        // A split whose sums' slots do not fit beside the kernel's own shared memory is not
        // taken: the kernel compiles whole, saying why.
        if split > 1 {
            let need = estimate::smem_bytes_in(&kernel, &plan) + split::slot_bytes(&kernel);
            if need > target.max_smem_per_block {
                let mut whole = GpuStage::new(k, warps, stages, 1, target, &spec);
                whole.prepared.refusals.push(Refusal {
                    loc: split::top_loop(k).map_or_else(Default::default, |o| o.loc),
                    path: "split",
                    why: format!(
                        "the sums of a split of {split} take {} B of shared memory, which with the kernel's own {} B pass the {} B {} allows",
                        split::slot_bytes(&kernel),
                        need - split::slot_bytes(&kernel),
                        target.max_smem_per_block,
                        target.sm
                    ),
                    asked: false,
                });
                return whole;
            }
        }
        GpuStage {
            prepared: tma::Prepared {
                kernel,
                maps,
                map_of,
                entry_of,
                refusals,
            },
            plan,
            split,
        }
    }

    /// The kernel the lowering sees.
    pub fn kernel(&self) -> &tile_lang::ir::Kernel {
        &self.prepared.kernel
    }

    /// Every fast path not taken: the TMA choices', then the plan's.
    pub fn refusals(&self) -> impl Iterator<Item = &Refusal> {
        self.prepared.refusals.iter().chain(&self.plan.refusals)
    }
}

/// A target name that is not one of [`TARGETS`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unknown target `{name}`; known targets: {known}")]
pub struct UnknownTarget {
    pub name: String,
    pub known: String,
}

/// A GPU target: its name for LLVM and ptxas, and its limits (data, never literals in codegen).
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// `sm_80`, `sm_86`, `sm_89`, `sm_90`, `sm_90a`.
    pub sm: &'static str,
    /// The PTX ISA LLVM emits, as an LLVM feature (`+ptx80`; sm_89 takes 8.1, the first ISA
    /// with its fp8 conversions).
    pub ptx_feature: &'static str,
    pub max_threads_per_block: u32,
    pub max_regs_per_thread: u32,
    /// Dynamic shared memory a block may use after opting in.
    pub max_smem_per_block: u32,
    /// Registers of one SM (shared by its resident blocks).
    pub regs_per_sm: u32,
    /// Shared memory of one SM, and what the driver reserves of it per resident block.
    pub smem_per_sm: u32,
    pub smem_reserved_per_block: u32,
    pub warp_size: u32,
    /// Whether tensor-core dots may use `wgmma.mma_async` (Hopper's `sm_90a`; `sm_90` without
    /// the `a` keeps `mma.sync`).
    pub wgmma: bool,
    /// Whether the target converts fp8 (e4m3, e5m2) in hardware (`cvt` with `e4m3x2`/`e5m2x2`,
    /// sm_89 and newer); without it the back end converts in integer and f32 arithmetic.
    pub fp8: bool,
    /// Whether blocks form thread-block clusters with distributed shared memory (sm_90 and
    /// newer): what `#[cluster(N)]` kernels need.
    pub clusters: bool,
}

impl Target {
    /// How many blocks of `smem` bytes of dynamic shared memory one SM holds at once (by shared
    /// memory alone; `u32::MAX` for none).
    pub fn blocks_by_smem(&self, smem: u32) -> u32 {
        if smem == 0 {
            u32::MAX
        } else {
            self.smem_per_sm / (smem + self.smem_reserved_per_block)
        }
    }
}

pub const TARGETS: &[Target] = &[
    Target {
        sm: "sm_80",
        ptx_feature: "+ptx80",
        max_threads_per_block: 1024,
        max_regs_per_thread: 255,
        max_smem_per_block: 163 * 1024,
        regs_per_sm: 65536,
        smem_per_sm: 164 * 1024,
        smem_reserved_per_block: 1024,
        warp_size: 32,
        wgmma: false,
        fp8: false,
        clusters: false,
    },
    Target {
        sm: "sm_86",
        ptx_feature: "+ptx80",
        max_threads_per_block: 1024,
        max_regs_per_thread: 255,
        max_smem_per_block: 99 * 1024,
        regs_per_sm: 65536,
        smem_per_sm: 100 * 1024,
        smem_reserved_per_block: 1024,
        warp_size: 32,
        wgmma: false,
        fp8: false,
        clusters: false,
    },
    Target {
        sm: "sm_89",
        ptx_feature: "+ptx81",
        max_threads_per_block: 1024,
        max_regs_per_thread: 255,
        max_smem_per_block: 99 * 1024,
        regs_per_sm: 65536,
        smem_per_sm: 100 * 1024,
        smem_reserved_per_block: 1024,
        warp_size: 32,
        wgmma: false,
        fp8: true,
        clusters: false,
    },
    Target {
        sm: "sm_90",
        ptx_feature: "+ptx80",
        max_threads_per_block: 1024,
        max_regs_per_thread: 255,
        max_smem_per_block: 227 * 1024,
        regs_per_sm: 65536,
        smem_per_sm: 228 * 1024,
        smem_reserved_per_block: 1024,
        warp_size: 32,
        wgmma: false,
        fp8: true,
        clusters: true,
    },
    Target {
        sm: "sm_90a",
        ptx_feature: "+ptx80",
        max_threads_per_block: 1024,
        max_regs_per_thread: 255,
        max_smem_per_block: 227 * 1024,
        regs_per_sm: 65536,
        smem_per_sm: 228 * 1024,
        smem_reserved_per_block: 1024,
        warp_size: 32,
        wgmma: true,
        fp8: true,
        clusters: true,
    },
];

/// The target named `sm` (`90a`, `sm_90a`, `80`, ...).
pub fn target(sm: &str) -> Result<Target, UnknownTarget> {
    let name = if sm.starts_with("sm_") {
        sm.to_string()
    } else {
        format!("sm_{sm}")
    };
    TARGETS
        .iter()
        .find(|t| t.sm == name)
        .cloned()
        .ok_or_else(|| UnknownTarget {
            name: sm.to_string(),
            known: TARGETS.iter().map(|t| t.sm).collect::<Vec<_>>().join(", "),
        })
}

/// What a launch's argument is known to satisfy, as Triton specialises: integers equal to 1 or
/// divisible by 16 (or by 8), pointers aligned to 16 (or 8) bytes. Each fact lets the compiler
/// vectorise or fold (a row stride divisible by 8 is 16 bytes of bf16: enough for TMA); a kernel
/// compiled with a fact may only be launched with arguments that have it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ArgSpec {
    /// An integer argument equal to 1.
    pub equals_one: bool,
    /// An integer divisible by 16, or a pointer whose address is divisible by 16.
    pub divisible_by_16: bool,
    /// An integer divisible by 8, or a pointer whose address is (implied by `divisible_by_16`).
    pub divisible_by_8: bool,
}

impl ArgSpec {
    /// The facts `k` is compiled with for a launch whose arguments have `spec`: none for the
    /// parameters `#[no_specialize(..)]` names (the lowering, the model and the JIT's cache key
    /// all read them through here).
    pub fn for_kernel(k: &tile_lang::ir::Kernel, spec: &[ArgSpec]) -> Vec<ArgSpec> {
        spec.iter()
            .enumerate()
            .map(|(i, s)| match k.params.get(i) {
                Some(p) if !p.specialize => ArgSpec::default(),
                _ => *s,
            })
            .collect()
    }

    /// The facts that hold for an integer argument.
    pub fn of_int(v: i64) -> ArgSpec {
        ArgSpec {
            equals_one: v == 1,
            divisible_by_16: v % 16 == 0,
            divisible_by_8: v % 8 == 0,
        }
    }

    /// The facts that hold for a device address.
    pub fn of_ptr(addr: u64) -> ArgSpec {
        ArgSpec {
            equals_one: false,
            divisible_by_16: addr.is_multiple_of(16),
            divisible_by_8: addr.is_multiple_of(8),
        }
    }

    /// The largest power of two (up to 16) the value is known to be a multiple of.
    pub fn divisibility(&self) -> u64 {
        if self.divisible_by_16 {
            16
        } else if self.divisible_by_8 {
            8
        } else {
            1
        }
    }

    /// A short tag for cache keys and names: `1`, `d` (divisible by 16), `e` (by 8, not 16) or
    /// `-`.
    pub fn tag(&self) -> char {
        if self.equals_one {
            '1'
        } else if self.divisible_by_16 {
            'd'
        } else if self.divisible_by_8 {
            'e'
        } else {
            '-'
        }
    }
}
