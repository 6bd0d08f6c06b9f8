//! `dot` on tensor cores with `mma.sync.m16n8k16` (bf16 or f16 inputs, f32 accumulator).
//!
//! A [`MmaPlan`] is everything the lowering of one `dot` decides, as data:
//! - the warp grid: `warps_m × warps_n` warps, each owning a `wm × wn` block of the result;
//! - the accumulator layout ([`MmaPlan::acc`]): per m16n8 instruction tile, thread `lane` holds
//!   rows `g`, `g+8` and columns `2t`, `2t+1` (`g = lane / 4`, `t = lane % 4`), register
//!   `c + 4·(ni + NT·mi)` for instruction tile `(mi, ni)` of its warp block;
//! - the shared-memory layout of both operands ([`Swizzle`]): row-major tiles whose 16-byte
//!   chunks are XOR-swizzled by row, so that `ldmatrix` reads 8 rows without bank conflicts;
//! - the `ldmatrix` addresses: which row each lane gives ([`MmaPlan::a_rows`], `b_rows`), as
//!   layouts over (instruction index, lane, warp) composed with the swizzle.
//!
//! The operand fragment layouts ([`MmaPlan::a_fragment`], `b_fragment`) are what `mma` expects in
//! registers; the tests check that `ldmatrix` from these addresses produces exactly them.
//!
//! On Hopper (`sm_90a`) a plan may use `wgmma.mma_async.m64nNk16` instead ([`Instr::Wgmma`];
//! `k32` for fp8 inputs, which it alone takes): warpgroups of 4 warps each own an
//! `(m / groups_m) × (n / groups_n)` block, both operands are read straight from shared memory
//! through 64-bit descriptors ([`WgmmaOperand`]), and the shared-memory layouts are the ones the
//! descriptors' swizzle modes name: A (and B stored `[n, k]`) K-major with rows of 32, 64 or 128
//! bytes, B stored `[k, n]` MN-major in blocks of up to 128 bytes ([`Swizzle::block`]; 16-bit
//! inputs only: fp8 B must be K-major).

use tile_lang::ir::DType;

use crate::linear::{LinearLayout, LinearMap};

/// The instruction shape.
pub const MMA_M: usize = 16;
pub const MMA_N: usize = 8;
pub const MMA_K: usize = 16;

/// How one `dot` of `[m, k] × [k, n]` runs on tensor cores in a block of `warps` warps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmaPlan {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub input: DType,
    /// Warps along M and N for `mma.sync`; warpgroups (4 warps each) for `wgmma`.
    pub warps_m: usize,
    pub warps_n: usize,
    pub instr: Instr,
}

/// The tensor-core instruction a plan runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Instr {
    /// `mma.sync.m16n8k16`, fragments loaded with `ldmatrix` (sm_80 and later).
    MmaSync,
    /// `wgmma.mma_async.m64nNk16` (`k32` for fp8), operands read from shared memory by
    /// descriptors (sm_90a).
    Wgmma,
}

/// The `wgmma` instruction's K for `input`: 32 bytes of a row (16 16-bit, 32 8-bit elements).
pub fn wgmma_k(input: DType) -> usize {
    32 / input.bytes()
}

/// The `wgmma` instruction's M.
pub const WGMMA_M: usize = 64;
/// The largest `wgmma` N.
pub const WGMMA_MAX_N: usize = 256;

/// How one operand of a `wgmma` is described to the hardware: the fields of its shared-memory
/// descriptor, and the byte steps from its start for each instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgmmaOperand {
    /// Swizzle mode field: 1 = 128-byte, 2 = 64-byte, 3 = 32-byte.
    pub mode: u64,
    /// Leading-dimension byte offset (MN-major: the stride between column blocks).
    pub lbo: u32,
    /// Stride-dimension byte offset (the stride between groups of 8 rows).
    pub sbo: u32,
    /// Bytes added to the start for each instruction's K step (k16, k32 for fp8) inside a K
    /// block.
    pub k_step: u32,
    /// K steps per K block (K-major operands with rows wider than 128 bytes are stored as
    /// blocks of 128-byte columns; MN-major ones have a single block).
    pub k_steps_per_block: u32,
    /// Bytes between K blocks.
    pub k_block: u32,
    /// Bytes added for each m64 instruction tile (A only).
    pub tile_step: u32,
    /// Bytes added for each warpgroup along this operand's non-K dimension.
    pub group_step: u32,
    /// Whether the operand is MN-major (the instruction's transpose bit).
    pub mn_major: bool,
}

impl WgmmaOperand {
    /// Bytes from the operand's start to K step `kk`'s.
    pub fn k_offset(&self, kk: u32) -> u32 {
        (kk / self.k_steps_per_block) * self.k_block + (kk % self.k_steps_per_block) * self.k_step
    }

    /// The descriptor's constant bits (everything but the start address).
    pub fn bits(&self) -> u64 {
        ((self.lbo as u64 >> 4) << 16) | ((self.sbo as u64 >> 4) << 32) | (self.mode << 62)
    }

    /// The 8-row atom's byte size: buffers start at a multiple of it (the hardware swizzles
    /// absolute address bits).
    pub fn align(&self) -> u32 {
        1024
    }
}

/// Tensor cores take bf16 or f16 inputs into an f32 accumulator, and with `wgmma` fp8 (e4m3,
/// e5m2) too.
fn tensor_core_dtypes(input: DType, acc: DType, wgmma: bool) -> Result<(), NoMma> {
    if (matches!(input, DType::BF16 | DType::F16) || input.is_fp8() && wgmma) && acc == DType::F32 {
        Ok(())
    } else {
        Err(NoMma::Dtypes { input, acc })
    }
}

/// Swizzle mode of rows of `bytes` bytes (32, 64 or 128).
fn swizzle_mode(bytes: usize) -> Option<u64> {
    match bytes {
        128 => Some(1),
        64 => Some(2),
        32 => Some(3),
        _ => None,
    }
}

/// Why a `dot` stays on the FMA loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoMma {
    Dtypes {
        input: DType,
        acc: DType,
    },
    Shape {
        m: usize,
        n: usize,
        k: usize,
        warps: u32,
    },
    /// Why `wgmma` does not fit (the plan then uses `mma.sync`).
    Wgmma(String),
}

impl std::fmt::Display for NoMma {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoMma::Dtypes { input, acc } => write!(
                f,
                "{input} inputs with a {acc} accumulator (tensor cores take bf16/f16 into f32, and fp8 into f32 with wgmma on sm_90a)"
            ),
            NoMma::Shape { m, n, k, warps } => write!(
                f,
                "[{m}, {k}] x [{k}, {n}] on {warps} warps (tensor cores need k >= 16 and a 16x16 block per warp)"
            ),
            NoMma::Wgmma(why) => write!(f, "{why}"),
        }
    }
}

impl MmaPlan {
    /// The plan for a dot of these shapes and dtypes, or why there is none.
    pub fn new(m: usize, n: usize, k: usize, input: DType, acc: DType, warps: u32) -> Result<MmaPlan, NoMma> {
        MmaPlan::with_rows(m, n, k, input, acc, warps, false)
    }

    /// [`new`](Self::new), with every warp on its own rows when `rows_per_warp` asks for it and
    /// the rows allow (16 or more each): a result reduced along its rows, or feeding another
    /// dot, then stays within each warp (no exchange between warps).
    pub fn with_rows(
        m: usize,
        n: usize,
        k: usize,
        input: DType,
        acc: DType,
        warps: u32,
        rows_per_warp: bool,
    ) -> Result<MmaPlan, NoMma> {
        tensor_core_dtypes(input, acc, false)?;
        let shape_err = NoMma::Shape { m, n, k, warps };
        if k < MMA_K || m < 16 || n < 16 {
            return Err(shape_err);
        }
        if rows_per_warp && m / warps as usize >= MMA_M && n >= 16 {
            return Ok(MmaPlan {
                m,
                n,
                k,
                input,
                warps_m: warps as usize,
                warps_n: 1,
                instr: Instr::MmaSync,
            });
        }
        // Grow the warp grid along the dimension whose warp block is larger (M first on ties),
        // keeping each warp's block at least 16 × 16 (one ldmatrix.x4 of each operand).
        let (mut wm, mut wn) = (1usize, 1usize);
        while wm * wn < warps as usize {
            let (bm, bn) = (m / wm, n / wn);
            if bm >= bn && bm >= 32 {
                wm *= 2;
            } else if bn >= 32 {
                wn *= 2;
            } else if bm >= 32 {
                wm *= 2;
            } else {
                return Err(shape_err);
            }
        }
        Ok(MmaPlan {
            m,
            n,
            k,
            input,
            warps_m: wm,
            warps_n: wn,
            instr: Instr::MmaSync,
        })
    }

    /// The `wgmma` plan for a dot of these shapes on `warps` warps (a multiple of 4), or why
    /// there is none: each warpgroup's rows a multiple of 64, its columns at most 256 and whole
    /// column blocks of B, and K rows of A (and of B stored `[n, k]`) 32, 64 or 128 bytes long.
    pub fn wgmma(m: usize, n: usize, k: usize, input: DType, acc: DType, warps: u32) -> Result<MmaPlan, NoMma> {
        MmaPlan::wgmma_with_rows(m, n, k, input, acc, warps, false)
    }

    /// [`wgmma`](Self::wgmma), with every warpgroup on its own rows when `rows_per_group` asks
    /// for it (chained dots: each warp then holds whole rows of 16, as with mma.sync).
    pub fn wgmma_with_rows(
        m: usize,
        n: usize,
        k: usize,
        input: DType,
        acc: DType,
        warps: u32,
        rows_per_group: bool,
    ) -> Result<MmaPlan, NoMma> {
        tensor_core_dtypes(input, acc, true)?;
        let no = |why: String| Err(NoMma::Wgmma(why));
        if warps % 4 != 0 {
            return no(format!("{warps} warps are not whole warpgroups of 4"));
        }
        let esz = input.bytes();
        let kb = Swizzle::k_block(k, esz);
        if k % wgmma_k(input) != 0 || k % kb != 0 || swizzle_mode(kb * esz).is_none() {
            return no(format!(
                "k = {k}: wgmma here takes K tiles of {}, {} or a multiple of {} {input} elements",
                32 / esz,
                64 / esz,
                128 / esz
            ));
        }
        let groups = warps as usize / 4;
        let (mut gm, mut gn) = (1usize, 1usize);
        while gm * gn < groups {
            if m / gm >= 2 * WGMMA_M || rows_per_group {
                gm *= 2;
            } else if n / gn >= 32 {
                gn *= 2;
            } else {
                return no(format!("[{m}, {n}] is too small for {groups} warpgroups"));
            }
        }
        let (bm, bn) = (m / gm, n / gn);
        if bm % WGMMA_M != 0 || bm == 0 {
            return no(format!("{bm} rows per warpgroup: wgmma needs a multiple of 64"));
        }
        // (8-bit B is read K-major: no column blocks to keep whole.)
        let whole_blocks = esz == 1 || bn % Swizzle::mn_block(n, esz) == 0;
        if bn > WGMMA_MAX_N || bn < 16 || !whole_blocks {
            return no(format!(
                "{bn} columns per warpgroup: wgmma here takes 16 to 256 in whole blocks of B"
            ));
        }
        Ok(MmaPlan {
            m,
            n,
            k,
            input,
            warps_m: gm,
            warps_n: gn,
            instr: Instr::Wgmma,
        })
    }

    /// The instruction's K: 16, or 32 for a wgmma of 8-bit inputs (32 bytes of a row either way).
    pub fn instr_k(&self) -> usize {
        match self.instr {
            Instr::MmaSync => MMA_K,
            Instr::Wgmma => wgmma_k(self.input),
        }
    }

    /// The instruction's M (16 for mma.sync, 64 for wgmma).
    pub fn instr_m(&self) -> usize {
        match self.instr {
            Instr::MmaSync => MMA_M,
            Instr::Wgmma => WGMMA_M,
        }
    }

    /// The instruction's N (8 for mma.sync; a warpgroup's whole block for wgmma).
    pub fn instr_n(&self) -> usize {
        match self.instr {
            Instr::MmaSync => MMA_N,
            Instr::Wgmma => self.wn(),
        }
    }

    /// Warps in the block.
    pub fn warps(&self) -> usize {
        self.warps_m * self.warps_n * if self.instr == Instr::Wgmma { 4 } else { 1 }
    }

    /// How `wgmma` reads A (`[m, k]`, K-major).
    pub fn wgmma_a(&self) -> WgmmaOperand {
        self.k_major(self.m, self.wm())
    }

    /// A K-major operand of `rows` rows (`group_rows` per warpgroup), stored in K blocks of up
    /// to 128 bytes ([`Swizzle::k_block`]).
    fn k_major(&self, rows: usize, group_rows: usize) -> WgmmaOperand {
        let kb = Swizzle::k_block(self.k, self.input.bytes());
        let row = (kb * self.input.bytes()) as u32;
        WgmmaOperand {
            mode: swizzle_mode(row as usize).expect("checked by MmaPlan::wgmma"),
            lbo: 16,
            sbo: 8 * row,
            k_step: (self.instr_k() * self.input.bytes()) as u32,
            k_steps_per_block: (kb / self.instr_k()) as u32,
            k_block: rows as u32 * row,
            tile_step: WGMMA_M as u32 * row,
            group_step: group_rows as u32 * row,
            mn_major: false,
        }
    }

    /// How `wgmma` reads B: stored `[k, n]` (MN-major, `transposed = false`) or `[n, k]`
    /// (K-major).
    pub fn wgmma_b(&self, transposed: bool) -> WgmmaOperand {
        let esz = self.input.bytes();
        if transposed {
            return WgmmaOperand {
                tile_step: 0,
                ..self.k_major(self.n, self.wn())
            };
        }
        let block = Swizzle::mn_block(self.n, esz);
        let row = (block * esz) as u32;
        let lbo = self.k as u32 * row;
        WgmmaOperand {
            mode: swizzle_mode(row as usize).expect("checked by MmaPlan::wgmma"),
            lbo,
            sbo: 8 * row,
            k_step: self.instr_k() as u32 * row,
            k_steps_per_block: u32::MAX,
            k_block: 0,
            tile_step: 0,
            group_step: (self.wn() / block) as u32 * lbo,
            mn_major: true,
        }
    }

    /// Rows of the result each warp (mma.sync) or warpgroup (wgmma) owns.
    pub fn wm(&self) -> usize {
        self.m / self.warps_m
    }

    /// Columns of the result each warp (mma.sync) or warpgroup (wgmma) owns.
    pub fn wn(&self) -> usize {
        self.n / self.warps_n
    }

    /// Instruction tiles along M per warp (mma.sync, m16) or per warpgroup (wgmma, m64).
    pub fn tiles_m(&self) -> usize {
        self.wm() / self.instr_m()
    }

    /// Instruction tiles along N per warp (mma.sync, n8) or per warpgroup (wgmma: one).
    pub fn tiles_n(&self) -> usize {
        self.wn() / self.instr_n()
    }

    /// Instruction steps along K (of [`instr_k`](Self::instr_k)).
    pub fn steps_k(&self) -> usize {
        self.k / self.instr_k()
    }

    /// Instructions per `dot`.
    pub fn mma_count(&self) -> usize {
        self.tiles_m() * self.tiles_n() * self.steps_k()
    }

    /// Warp bits: the first `log2(warps_m)` move down the rows, the rest across the columns.
    fn warp_bases(&self, row: usize, col: usize) -> Vec<usize> {
        let mut w = Vec::new();
        for i in 0..self.warps_m.trailing_zeros() {
            w.push(row * (self.wm() << i));
        }
        for i in 0..self.warps_n.trailing_zeros() {
            w.push(col * (self.wn() << i));
        }
        w
    }

    /// The accumulator (and result) layout of `[m, n]`.
    pub fn acc(&self) -> LinearLayout {
        let n = self.n;
        let (row, col) = (n, 1);
        if self.instr == Instr::Wgmma {
            // Per m64 instruction: warp w of the group holds rows 16w.., each like an m16n8
            // tile repeated along the group's N; then the m64 tiles, then the groups.
            let mut reg = vec![col, 8 * row];
            reg.extend((0..(self.wn() / 8).trailing_zeros()).map(|i| (8 << i) * col));
            reg.extend((0..self.tiles_m().trailing_zeros()).map(|i| (64 << i) * row));
            let mut warp = vec![16 * row, 32 * row];
            warp.extend(self.warp_bases(row, col));
            return LinearLayout {
                shape: vec![self.m, n],
                reg,
                lane: vec![2 * col, 4 * col, row, 2 * row, 4 * row],
                warp,
            };
        }
        let mut reg = vec![col, 8 * row];
        reg.extend((0..self.tiles_n().trailing_zeros()).map(|i| (8 << i) * col));
        reg.extend((0..self.tiles_m().trailing_zeros()).map(|i| (16 << i) * row));
        let lane = vec![2 * col, 4 * col, row, 2 * row, 4 * row];
        LinearLayout {
            shape: vec![self.m, n],
            reg,
            lane,
            warp: self.warp_bases(row, col),
        }
    }

    /// A's fragments `[m, k]` in registers as mma wants them: per (k16 step, m16 tile), 8 elements
    /// `(g, 2t+h)`, `(g+8, 2t+h)`, `(g, 8+2t+h)`, `(g+8, 8+2t+h)`; warps along N hold copies.
    /// With wgmma (A from registers), the same per warp's 16 rows of each m64 tile.
    pub fn a_fragment(&self) -> LinearLayout {
        let (row, col) = (self.k, 1);
        let mut reg = vec![col, 8 * row, 8 * col];
        reg.extend((0..self.tiles_m().trailing_zeros()).map(|i| (self.instr_m() << i) * row));
        reg.extend((0..self.steps_k().trailing_zeros()).map(|i| (16 << i) * col));
        let lane = vec![2 * col, 4 * col, row, 2 * row, 4 * row];
        let mut warp = match self.instr {
            Instr::MmaSync => Vec::new(),
            Instr::Wgmma => vec![16 * row, 32 * row],
        };
        warp.extend(self.warp_bases(row, 0));
        LinearLayout {
            shape: vec![self.m, self.k],
            reg,
            lane,
            warp,
        }
    }

    /// B's fragments `[k, n]`: per (k16 step, pair of n8 tiles), 8 elements `(2t+h, g)`,
    /// `(8+2t+h, g)`, then the same 8 columns to the right; warps along M hold copies.
    pub fn b_fragment(&self) -> LinearLayout {
        let (row, col) = (self.n, 1);
        let mut reg = vec![row, 8 * row, 8 * col];
        reg.extend((0..(self.tiles_n() / 2).trailing_zeros()).map(|i| (16 << i) * col));
        reg.extend((0..self.steps_k().trailing_zeros()).map(|i| (16 << i) * row));
        let lane = vec![2 * row, 4 * row, col, 2 * col, 4 * col];
        LinearLayout {
            shape: vec![self.k, self.n],
            reg,
            lane,
            warp: self.warp_bases(0, col),
        }
    }

    /// Shared-memory layout of A (`[m, k]`, row-major, swizzled; for wgmma in K blocks of up
    /// to 128 bytes).
    pub fn a_smem(&self) -> Swizzle {
        self.stored(self.m, self.k, Swizzle::k_block(self.k, self.input.bytes()))
    }

    /// Shared-memory layout of B (`[k, n]`, row-major, swizzled; read with `ldmatrix.trans`;
    /// for wgmma in column blocks, MN-major).
    pub fn b_smem(&self) -> Swizzle {
        self.stored(self.k, self.n, Swizzle::mn_block(self.n, self.input.bytes()))
    }

    /// An operand tile `[rows, cols]` as this plan's instruction reads it: whole swizzled rows
    /// for mma.sync, column blocks of `wgmma_block` for wgmma.
    fn stored(&self, rows: usize, cols: usize, wgmma_block: usize) -> Swizzle {
        let esz = self.input.bytes();
        match self.instr {
            Instr::MmaSync => Swizzle::for_rows(rows, cols, esz),
            Instr::Wgmma => Swizzle::in_blocks(rows, cols, wgmma_block, esz),
        }
    }

    /// Shared-memory layout of operand `operand` (0: A, 1: B; B given as `trans(x)` is stored as
    /// `x`, `[n, k]`, when `transposed_b`).
    pub fn operand_smem(&self, operand: usize, transposed_b: bool) -> Swizzle {
        match operand {
            0 => self.a_smem(),
            _ if transposed_b => self.bt_smem(),
            _ => self.b_smem(),
        }
    }

    /// Where B starts in a buffer holding both operands (wgmma operands start on a 1024-byte
    /// boundary).
    pub fn b_offset(&self) -> usize {
        let a = self.m * self.k * self.input.bytes();
        match self.instr {
            Instr::MmaSync => a,
            Instr::Wgmma => a.next_multiple_of(1024),
        }
    }

    /// Bytes of shared memory both operands take.
    pub fn smem_bytes(&self) -> usize {
        self.b_offset() + self.k * self.n * self.input.bytes()
    }

    /// The alignment each operand buffer needs.
    pub fn smem_align(&self) -> u32 {
        match self.instr {
            Instr::MmaSync => 16,
            Instr::Wgmma => 1024,
        }
    }

    /// The logical start of the 8-element row each lane gives `ldmatrix.x4` for A, over
    /// (instruction `mi + tiles_m·kk`, lane, warp): lane `l` points at row `l % 16`, column
    /// `8·(l / 16)` of the m16k16 block `(mi, kk)`.
    pub fn a_rows(&self) -> LinearLayout {
        let (row, col) = (self.k, 1);
        let mut reg: Vec<usize> = (0..self.tiles_m().trailing_zeros()).map(|i| (16 << i) * row).collect();
        reg.extend((0..self.steps_k().trailing_zeros()).map(|i| (16 << i) * col));
        let lane = vec![row, 2 * row, 4 * row, 8 * row, 8 * col];
        LinearLayout {
            shape: vec![self.m, self.k],
            reg,
            lane,
            warp: self.warp_bases(row, 0),
        }
    }

    /// The same for B with `ldmatrix.x4.trans`, over (instruction `nj + tiles_n/2·kk`, lane, warp):
    /// lane `l` points at row `l % 8 + 8·((l / 8) % 2)`, column `8·(l / 16)` of the k16n16 block
    /// `(kk, nj)`; matrices 0–1 are the n8 tile `2nj`, matrices 2–3 the tile `2nj + 1`.
    pub fn b_rows(&self) -> LinearLayout {
        let (row, col) = (self.n, 1);
        let mut reg: Vec<usize> = (0..(self.tiles_n() / 2).trailing_zeros())
            .map(|i| (16 << i) * col)
            .collect();
        reg.extend((0..self.steps_k().trailing_zeros()).map(|i| (16 << i) * row));
        let lane = vec![row, 2 * row, 4 * row, 8 * row, 8 * col];
        LinearLayout {
            shape: vec![self.k, self.n],
            reg,
            lane,
            warp: self.warp_bases(0, col),
        }
    }

    /// Shared-memory layout of B stored transposed, as `[n, k]` (for `dot(a, trans(b))` with
    /// `b: [n, k]` row-major: the tile is copied as it is and read with `ldmatrix` without
    /// `.trans`).
    pub fn bt_smem(&self) -> Swizzle {
        self.stored(self.n, self.k, Swizzle::k_block(self.k, self.input.bytes()))
    }

    /// The rows each lane gives `ldmatrix.x4` (no `.trans`) for B stored as `[n, k]`, over
    /// (instruction `nj + tiles_n/2·kk`, lane, warp): lane `l` points at row (n)
    /// `l % 8 + 8·(l / 16)`, column (k) `8·((l / 8) % 2)` of the n16k16 block `(nj, kk)`.
    pub fn bt_rows(&self) -> LinearLayout {
        let (row, col) = (self.k, 1);
        let mut reg: Vec<usize> = (0..(self.tiles_n() / 2).trailing_zeros())
            .map(|i| (16 << i) * row)
            .collect();
        reg.extend((0..self.steps_k().trailing_zeros()).map(|i| (16 << i) * col));
        let lane = vec![row, 2 * row, 4 * row, 8 * col, 8 * row];
        let mut warp = Vec::new();
        for _ in 0..self.warps_m.trailing_zeros() {
            warp.push(0);
        }
        for i in 0..self.warps_n.trailing_zeros() {
            warp.push(row * (self.wn() << i));
        }
        LinearLayout {
            shape: vec![self.n, self.k],
            reg,
            lane,
            warp,
        }
    }

    /// Whether a warp's N block holds a whole number of `ldmatrix.x4.trans` (16 columns).
    pub fn b_pairs(&self) -> usize {
        self.tiles_n() / 2
    }
}

/// A row-major `[rows, cols]` tile in shared memory whose 16-byte chunks (8 16-bit or 16 8-bit
/// elements) are
/// permuted within each row: chunk `c` of row `r` is stored at chunk
/// `c ^ ((r / per_phase) % max_phase)`. Rows of 128 bytes or more change phase every row; a
/// shorter row shares its phase with the next `per_phase - 1` rows, so 8 consecutive rows of one
/// chunk column always fall in 8 different 16-byte bank groups.
///
/// With [`block`](Self::block) narrower than the row, the tile is stored as `cols / block`
/// tiles of `[rows, block]` one after the other, each swizzled as above: the MN-major layout
/// `wgmma` reads B `[k, n]` in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Swizzle {
    pub rows: usize,
    pub cols: usize,
    /// Elements per chunk.
    pub vec: usize,
    pub per_phase: usize,
    pub max_phase: usize,
    /// Columns per stored block (`cols` for a plain row-major tile).
    pub block: usize,
}

impl Swizzle {
    /// `[rows, cols]` of `esz`-byte elements as one block.
    pub fn for_rows(rows: usize, cols: usize, esz: usize) -> Swizzle {
        Swizzle::in_blocks(rows, cols, cols, esz)
    }

    /// `[rows, cols]` of `esz`-byte elements stored as column blocks of `block` columns.
    pub fn in_blocks(rows: usize, cols: usize, block: usize, esz: usize) -> Swizzle {
        let vec = 16 / esz;
        let chunks = (block / vec).max(1);
        let max_phase = chunks.min(8);
        Swizzle {
            rows,
            cols,
            vec,
            per_phase: 8 / max_phase,
            max_phase,
            block,
        }
    }

    /// The column block of a K-major wgmma operand with `k` columns of `esz`-byte elements:
    /// one 128-byte swizzle row (64 16-bit or 128 8-bit elements), or the whole row when
    /// narrower.
    pub fn k_block(k: usize, esz: usize) -> usize {
        k.min(128 / esz)
    }

    /// The column block of an MN-major wgmma operand with `cols` columns: 128 bytes, or the
    /// whole row when narrower.
    pub fn mn_block(cols: usize, esz: usize) -> usize {
        cols.min(128 / esz)
    }

    /// The physical element offset of logical flat index `flat`.
    pub fn apply(&self, flat: usize) -> usize {
        let (r, c) = (flat / self.cols, flat % self.cols);
        let (blk, c) = (c / self.block, c % self.block);
        let chunk = (c / self.vec) ^ ((r / self.per_phase) % self.max_phase);
        (blk * self.rows + r) * self.block + chunk * self.vec + c % self.vec
    }

    /// The swizzle as a linear map of flat-index bits.
    pub fn map(&self) -> LinearMap {
        let bits = (self.rows * self.cols).trailing_zeros() as usize;
        LinearMap {
            images: (0..bits).map(|i| self.apply(1 << i)).collect(),
        }
    }
}

#[cfg(test)]
mod tests;
