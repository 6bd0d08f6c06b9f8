//! What the model knows about a GPU: the codegen's limits plus the per-SM resources and the
//! measured throughputs that occupancy and the roofline need. Data, never literals in the model.

use tile_gir::Target;

/// A target as the cost model sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetDesc {
    /// The codegen target (name and per-block limits).
    pub target: Target,
    pub sms: u32,
    /// Registers are handed out per thread in multiples of this.
    pub reg_granule: u32,
    pub max_threads_per_sm: u32,
    pub max_blocks_per_sm: u32,
    /// Measured device-to-device copy bandwidth (bytes read + written per second).
    pub dram_bytes_per_s: f64,
    /// Measured read bandwidth of loads that hit in L2 (a block every program reads).
    pub l2_bytes_per_s: f64,
    /// L2 bytes: what the resident programs' traffic must fit in for a program's second read
    /// of its own bytes to hit there.
    pub l2_capacity_bytes: f64,
    /// Thread-instructions per second over the whole GPU (f32 FMA rate / 2: one FMA is two
    /// flops); a `dot` without a tensor-core plan runs at this rate.
    pub insts_per_s: f64,
    /// Flops per second of `mma.sync` (bf16/f16 into f32) over the whole GPU, for dots with a
    /// tensor-core plan on it.
    pub mma_flops_per_s: f64,
    /// The same for `wgmma` (targets that have it).
    pub wgmma_flops_per_s: f64,
    /// Resident warps per SM at which the tensor cores are kept busy (one per sub-partition).
    pub mma_saturating_warps: u32,
    /// Shared-memory bandwidth over the whole GPU; `dot` reads both operands from it.
    pub smem_bytes_per_s: f64,
    /// The largest estimate the model trusts not to spill. ptxas spills before the ISA's 255:
    /// on row_reduce (ROWS=8 BLOCK=256, 2 warps) it used 80 registers and spilled where the
    /// model estimated 160, so estimates above this are treated as spilling (docs/optimizer.md).
    pub spill_safe_regs: u32,
    /// The same for kernels whose `dot`s run on tensor cores: most of their registers are the
    /// accumulators, which ptxas allocates without spilling up to the ISA's limit (matmul
    /// 128×128×32 with 4 warps: 246 registers, no spills).
    pub spill_safe_regs_mma: u32,
    /// Resident warps per SM at which memory latency is hidden (below it, bandwidth scales
    /// down), for programs whose loads are not known (no load outside a data-dependent loop).
    pub mem_saturating_warps: u32,
    /// Global-load bytes per SM that must be in flight to keep DRAM busy (bandwidth per SM ×
    /// latency); below it, bandwidth scales down.
    pub mem_bytes_in_flight: f64,
    /// Resident warps per SM at which the ALUs are kept busy.
    pub alu_saturating_warps: u32,
}

impl TargetDesc {
    /// The H200 (sm_90 / sm_90a) of design.md §4 and §7: 132 SMs, 64K registers and 228 KB of
    /// shared memory per SM, ~4.3 TB/s measured copy bandwidth, ~60 TFLOP/s f32 FMA without
    /// tensor cores. Shared-memory bandwidth is the architecture's 128 B/clock/SM at 1.98 GHz
    /// (not measured here). The saturation points are rough: 32 warps (half the SM) in flight
    /// cover HBM latency for streaming kernels; 16 warps (4 per scheduler) cover ALU latency.
    pub fn h200(target: Target) -> TargetDesc {
        let wgmma = target.wgmma;
        TargetDesc {
            target,
            sms: 132,
            reg_granule: 8,
            max_threads_per_sm: 2048,
            max_blocks_per_sm: 32,
            dram_bytes_per_s: 4.3e12,
            // 65536 programs each summing one of 512 blocks of 16 KB (8 MB, resident in the
            // 60 MB L2): 9.42 TB/s; of 256 blocks: 10.35; each its own block: 4.44
            // (docs/bench-2026-12-02/past-sdpa/l2.tile, run 53).
            l2_bytes_per_s: 9.4e12,
            // As PyTorch reports it on the H200 here (60 MB). layernorm_fixed at 4096 x 16384
            // f32 reads each 64 KB row twice: with 16 programs resident per SM (4 warps) it took
            // 0.194 ms, with 4 (16 warps) 0.145 ms (docs/bench-2026-12-03/ln2, run 88).
            l2_capacity_bytes: 60.0 * 1024.0 * 1024.0,
            insts_per_s: 30e12,
            // tile's own pipelined matmul at 8192³ (docs/gpu.md): 398 TFLOP/s on mma.sync, 564 on
            // sm_90a's wgmma (cp.async stages, wait for each dot).
            mma_flops_per_s: 400e12,
            wgmma_flops_per_s: if wgmma { 560e12 } else { 0.0 },
            mma_saturating_warps: 4,
            smem_bytes_per_s: 128.0 * 1.98e9 * 132.0,
            spill_safe_regs: 128,
            spill_safe_regs_mma: 255,
            mem_saturating_warps: 32,
            // 4.3 TB/s over 132 SMs is 33 GB/s per SM; times ~1 µs of loaded latency.
            mem_bytes_in_flight: 32.0 * 1024.0,
            alu_saturating_warps: 16,
        }
    }

    /// The description of a codegen target, when the model has figures for it.
    pub fn for_target(target: &Target) -> Option<TargetDesc> {
        match target.sm {
            "sm_90" | "sm_90a" => Some(TargetDesc::h200(target.clone())),
            _ => None,
        }
    }

    /// The most registers a thread may use in blocks of `threads` without spilling: the ISA's
    /// limit, what one block of that size may take from the SM (ptxas honours `maxntid`), or
    /// the model's own trust limit, whichever is least.
    pub fn reg_budget(&self, threads: u32, tensor_cores: bool) -> u32 {
        let per_block = (self.target.regs_per_sm / threads.max(1)) / self.reg_granule * self.reg_granule;
        let trusted = if tensor_cores {
            self.spill_safe_regs_mma
        } else {
            self.spill_safe_regs
        };
        self.target.max_regs_per_thread.min(per_block).min(trusted)
    }
}
