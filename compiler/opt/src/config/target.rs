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
            // (bench/records/2026-12-02/past-sdpa/l2.tile, run 53).
            l2_bytes_per_s: 9.4e12,
            // As PyTorch reports it on the H200 here (60 MB). layernorm_fixed at 4096 x 16384
            // f32 reads each 64 KB row twice: with 16 programs resident per SM (4 warps) it took
            // 0.194 ms, with 4 (16 warps) 0.145 ms (bench/records/2026-12-03/ln2, run 88).
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

    /// A GPU described from its published figures only (nothing measured here): `sms`
    /// multiprocessors at `clock_hz`, `dram` bytes/s of memory bandwidth (the copy rate is taken
    /// as 85% of it, as the H200 measures 4.3 of 4.8 TB/s), `l2_mb` of L2, `fp32` FLOP/s without
    /// tensor cores, `mma` dense bf16 FLOP/s of `mma.sync` into f32, the per-SM thread and block
    /// limits. The rest follows the H200's measured ratios: L2 reads at twice the copy rate,
    /// `mma.sync` at 80% of the datasheet (the native path on these GPUs), load bytes in flight
    /// per SM to cover ~1 µs of latency.
    #[allow(clippy::too_many_arguments)]
    fn published(
        target: Target,
        sms: u32,
        clock_hz: f64,
        dram: f64,
        l2_mb: f64,
        fp32: f64,
        mma: f64,
        (max_threads_per_sm, max_blocks_per_sm): (u32, u32),
    ) -> TargetDesc {
        let copy = 0.85 * dram;
        TargetDesc {
            target,
            sms,
            reg_granule: 8,
            max_threads_per_sm,
            max_blocks_per_sm,
            dram_bytes_per_s: copy,
            l2_bytes_per_s: 2.0 * copy,
            l2_capacity_bytes: l2_mb * 1024.0 * 1024.0,
            insts_per_s: fp32 / 2.0,
            mma_flops_per_s: 0.8 * mma,
            wgmma_flops_per_s: 0.0,
            mma_saturating_warps: 4,
            smem_bytes_per_s: 128.0 * clock_hz * sms as f64,
            spill_safe_regs: 128,
            spill_safe_regs_mma: 255,
            mem_saturating_warps: (max_threads_per_sm / 64).max(16),
            mem_bytes_in_flight: (copy / sms as f64 * 1e-6).max(4096.0),
            alu_saturating_warps: 16,
        }
    }

    /// sm_80 as the A100 SXM 80 GB publishes it: 108 SMs at 1.41 GHz, 2.04 TB/s HBM2e, 40 MB of
    /// L2, 19.5 TFLOP/s f32, 312 TFLOP/s dense bf16 tensor cores, 2048 threads and 32 blocks
    /// per SM (164 KB of shared memory per SM, in the codegen target).
    pub fn a100(target: Target) -> TargetDesc {
        TargetDesc::published(target, 108, 1.41e9, 2.039e12, 40.0, 19.5e12, 312e12, (2048, 32))
    }

    /// sm_86 as the A10 publishes it: 72 SMs at 1.695 GHz, 600 GB/s GDDR6, 6 MB of L2, 31.2
    /// TFLOP/s f32, 125 TFLOP/s dense bf16 tensor cores, 1536 threads and 16 blocks per SM
    /// (100 KB of shared memory per SM).
    pub fn a10(target: Target) -> TargetDesc {
        TargetDesc::published(target, 72, 1.695e9, 600e9, 6.0, 31.2e12, 125e12, (1536, 16))
    }

    /// sm_89 as the L40S publishes it: 142 SMs at 2.52 GHz, 864 GB/s GDDR6, 96 MB of L2, 91.6
    /// TFLOP/s f32, 362 TFLOP/s dense bf16 tensor cores, 1536 threads and 24 blocks per SM
    /// (100 KB of shared memory per SM).
    pub fn l40s(target: Target) -> TargetDesc {
        TargetDesc::published(target, 142, 2.52e9, 864e9, 96.0, 91.6e12, 362e12, (1536, 24))
    }

    /// The description of a codegen target: the H200's measured figures for sm_90/sm_90a, and
    /// one representative GPU's published figures for each earlier target (a kernel planned for
    /// sm_80 is planned for an A100; other GPUs of the same target share its limits per SM,
    /// which decide feasibility, and differ in rates, which scale every candidate alike).
    pub fn for_target(target: &Target) -> Option<TargetDesc> {
        match target.sm {
            "sm_90" | "sm_90a" => Some(TargetDesc::h200(target.clone())),
            "sm_80" => Some(TargetDesc::a100(target.clone())),
            "sm_86" => Some(TargetDesc::a10(target.clone())),
            "sm_89" => Some(TargetDesc::l40s(target.clone())),
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
