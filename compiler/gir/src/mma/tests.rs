//! The tensor-core layouts against the PTX ISA's fragment tables, and `ldmatrix` simulated on
//! indices through the swizzled shared memory.

use super::*;

fn plans() -> Vec<MmaPlan> {
    let mut v = Vec::new();
    for m in [16, 32, 64, 128, 256] {
        for n in [16, 32, 64, 128] {
            for k in [16, 32, 64] {
                for warps in [1, 2, 4, 8] {
                    if let Ok(p) = MmaPlan::new(m, n, k, DType::BF16, DType::F32, warps) {
                        v.push(p);
                    }
                }
            }
        }
    }
    assert!(v.len() > 100);
    v
}

fn lanes_warps(p: &MmaPlan) -> impl Iterator<Item = (usize, usize)> {
    let warps = p.warps_m * p.warps_n;
    (0..warps).flat_map(|w| (0..32).map(move |l| (l, w)))
}

#[test]
fn warp_grids_fit_the_tile() {
    for p in plans() {
        assert!(p.wm() >= 16 && p.wn() >= 16, "{p:?}");
        assert_eq!(p.wm() * p.warps_m, p.m);
        assert_eq!(p.wn() * p.warps_n, p.n);
    }
    assert!(MmaPlan::new(16, 16, 16, DType::BF16, DType::F32, 4).is_err());
    assert!(MmaPlan::new(64, 64, 8, DType::F16, DType::F32, 4).is_err());
    assert!(MmaPlan::new(64, 64, 32, DType::F32, DType::F32, 4).is_err());
    let p = MmaPlan::new(128, 128, 32, DType::BF16, DType::F32, 4).unwrap();
    assert_eq!((p.warps_m, p.warps_n), (2, 2));
}

/// The accumulator holds `c0..c3` at `(g, 2t)`, `(g, 2t+1)`, `(g+8, 2t)`, `(g+8, 2t+1)` of each
/// instruction tile, every element exactly once.
#[test]
fn accumulator_matches_the_ptx_table() {
    for p in plans() {
        let acc = p.acc();
        assert!(acc.is_bijective_on_owners(), "{p:?}");
        assert_eq!(acc.regs(), 4 * p.tiles_m() * p.tiles_n());
        for (l, w) in lanes_warps(&p) {
            let (g, t) = (l / 4, l % 4);
            let (wr, wc) = ((w % p.warps_m) * p.wm(), (w / p.warps_m) * p.wn());
            for mi in 0..p.tiles_m() {
                for ni in 0..p.tiles_n() {
                    for c in 0..4 {
                        let row = wr + 16 * mi + g + 8 * (c / 2);
                        let col = wc + 8 * ni + 2 * t + c % 2;
                        let reg = c + 4 * (ni + p.tiles_n() * mi);
                        assert_eq!(acc.apply(reg, l, w), row * p.n + col, "{p:?} l{l} w{w} reg{reg}");
                    }
                }
            }
        }
    }
}

#[test]
fn swizzle_is_a_bijection_that_keeps_chunks_whole() {
    for (rows, cols, esz) in [16, 32, 64, 128].into_iter().flat_map(|r| {
        [8, 16, 32, 64, 128]
            .map(|c| (r, c, 2))
            .into_iter()
            .chain([16, 32, 64, 128, 256].map(|c| (r, c, 1)))
    }) {
        {
            let s = Swizzle::for_rows(rows, cols, esz);
            assert_eq!(s.vec * esz, 16, "chunks of 16 bytes");
            let mut seen = vec![false; rows * cols];
            for f in 0..rows * cols {
                let p = s.apply(f);
                assert!(!seen[p], "{s:?}");
                seen[p] = true;
                assert_eq!(p % s.vec, f % s.vec, "a chunk stays contiguous");
                assert_eq!(s.map().apply(f), p, "the swizzle is linear");
                assert_eq!(s.apply(p), f, "the swizzle is its own inverse");
            }
        }
    }
}

/// The 8 rows one `ldmatrix` matrix reads (one per lane of an 8-lane phase) are 16-byte chunks
/// in 8 different bank groups.
#[test]
fn ldmatrix_rows_are_conflict_free() {
    for p in plans() {
        for (rows, swz, instrs) in [
            (p.a_rows(), p.a_smem(), p.tiles_m() * p.steps_k()),
            (p.b_rows(), p.b_smem(), p.b_pairs() * p.steps_k()),
        ] {
            let phys = rows.then(&swz.map());
            for w in 0..p.warps_m * p.warps_n {
                for i in 0..instrs {
                    for j in 0..4 {
                        let mut groups: Vec<usize> =
                            (0..8).map(|r| (phys.apply(i, 8 * j + r, w) * 2 / 16) % 8).collect();
                        groups.sort();
                        groups.dedup();
                        assert_eq!(groups.len(), 8, "{p:?} instr {i} matrix {j}");
                    }
                }
            }
        }
    }
}

/// `ldmatrix.x4` from the A addresses gives lane `l` register `j` = row `l/4`, elements
/// `2(l%4)`, `2(l%4)+1` of matrix `j` (the rows lanes `8j..8j+7` point at): exactly A's fragment.
#[test]
fn ldmatrix_gives_the_a_fragment() {
    for p in plans() {
        let (rows, swz, frag) = (p.a_rows(), p.a_smem(), p.a_fragment());
        for (l, w) in lanes_warps(&p) {
            for i in 0..p.tiles_m() * p.steps_k() {
                for j in 0..4 {
                    for h in 0..2 {
                        let start = swz.apply(rows.apply(i, 8 * j + l / 4, w));
                        let logical = swz.apply(start + 2 * (l % 4) + h);
                        assert_eq!(logical, frag.apply(h + 2 * j + 8 * i, l, w), "{p:?}");
                    }
                }
            }
        }
    }
}

/// `ldmatrix.x4.trans` gives lane `l` register `j` = column `l/4`, rows `2(l%4)`, `2(l%4)+1` of
/// matrix `j`: exactly B's fragment (`b0 b1` of n8 tile `2nj`, then of `2nj+1`).
#[test]
fn ldmatrix_trans_gives_the_b_fragment() {
    for p in plans() {
        let (rows, swz, frag) = (p.b_rows(), p.b_smem(), p.b_fragment());
        for (l, w) in lanes_warps(&p) {
            for i in 0..p.b_pairs() * p.steps_k() {
                for j in 0..4 {
                    for h in 0..2 {
                        let start = swz.apply(rows.apply(i, 8 * j + 2 * (l % 4) + h, w));
                        let logical = swz.apply(start + l / 4);
                        assert_eq!(logical, frag.apply(h + 2 * j + 8 * i, l, w), "{p:?}");
                    }
                }
            }
        }
    }
}

/// The fragments are the PTX ISA's tables: A `a0..a7` at `(g, 2t..)`, `(g+8, 2t..)`,
/// `(g, 2t+8..)`, `(g+8, 2t+8..)`; B `b0..b3` at `(k = 2t.., g)`, `(k = 2t+8.., g)`.
#[test]
fn fragments_match_the_ptx_table() {
    let p = MmaPlan::new(16, 16, 16, DType::F16, DType::F32, 1).unwrap();
    let (a, b) = (p.a_fragment(), p.b_fragment());
    for l in 0..32 {
        let (g, t) = (l / 4, l % 4);
        let a_want = [(g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8)];
        let b_want = [(2 * t, g), (2 * t + 8, g)];
        for e in 0..8 {
            let (r, c) = a_want[e / 2];
            assert_eq!(a.apply(e, l, 0), r * 16 + c + e % 2);
        }
        for e in 0..4 {
            let (k, n) = b_want[e / 2];
            assert_eq!(b.apply(e, l, 0), (k + e % 2) * 16 + n);
        }
    }
}

/// `ldmatrix.x4` without `.trans` from B stored as `[n, k]` gives lane `l` register `j` = row
/// (n) `l/4`, columns (k) `2(l%4)`, `2(l%4)+1` of matrix `j`: exactly B's fragment.
#[test]
fn ldmatrix_of_transposed_b_gives_the_b_fragment() {
    for p in plans() {
        let (rows, swz, frag) = (p.bt_rows(), p.bt_smem(), p.b_fragment());
        let phys = rows.then(&swz.map());
        for (l, w) in lanes_warps(&p) {
            for i in 0..p.b_pairs() * p.steps_k() {
                for j in 0..4 {
                    for h in 0..2 {
                        let start = swz.apply(rows.apply(i, 8 * j + l / 4, w));
                        let nk = swz.apply(start + 2 * (l % 4) + h);
                        let (n, k) = (nk / p.k, nk % p.k);
                        assert_eq!(k * p.n + n, frag.apply(h + 2 * j + 8 * i, l, w), "{p:?}");
                    }
                }
                // 8 rows of one matrix in 8 different bank groups.
                for j in 0..4 {
                    let mut g: Vec<usize> = (0..8).map(|r| (phys.apply(i, 8 * j + r, w) * 2 / 16) % 8).collect();
                    g.sort();
                    g.dedup();
                    assert_eq!(g.len(), 8, "{p:?}");
                }
            }
        }
    }
}

fn wgmma_plans() -> Vec<MmaPlan> {
    let mut v = Vec::new();
    for input in [DType::BF16, DType::F8E4M3] {
        for m in [64, 128, 256] {
            for n in [16, 32, 64, 128, 256] {
                for k in [16, 32, 64, 128, 256] {
                    for warps in [4, 8, 16] {
                        if let Ok(p) = MmaPlan::wgmma(m, n, k, input, DType::F32, warps) {
                            v.push(p);
                        }
                    }
                }
            }
        }
    }
    assert!(v.iter().filter(|p| p.input == DType::F8E4M3).count() > 40);
    assert!(v.len() > 80);
    v
}

#[test]
fn wgmma_plans_fit_the_tile() {
    for p in wgmma_plans() {
        assert_eq!(p.wm() % WGMMA_M, 0, "{p:?}");
        assert!(p.wn() <= WGMMA_MAX_N && p.wn() >= 16, "{p:?}");
        assert_eq!(p.warps(), 4 * p.warps_m * p.warps_n);
    }
    assert!(MmaPlan::wgmma(32, 64, 32, DType::BF16, DType::F32, 4).is_err());
    assert!(MmaPlan::wgmma(64, 64, 48, DType::BF16, DType::F32, 4).is_err());
    assert!(MmaPlan::wgmma(64, 64, 96, DType::BF16, DType::F32, 4).is_err());
    assert!(MmaPlan::wgmma(64, 512, 32, DType::BF16, DType::F32, 4).is_err());
    assert!(MmaPlan::wgmma(128, 128, 32, DType::BF16, DType::F32, 2).is_err());
    let p = MmaPlan::wgmma(128, 128, 32, DType::BF16, DType::F32, 8).unwrap();
    assert_eq!((p.warps_m, p.warps_n, p.tiles_m(), p.instr_n()), (2, 1, 1, 128));
    // fp8: K steps of 32, K blocks of 128 elements (one 128-byte row); K = 16 is too short.
    let p = MmaPlan::wgmma(128, 256, 256, DType::F8E4M3, DType::F32, 8).unwrap();
    assert_eq!((p.instr_k(), p.steps_k(), p.wgmma_a().k_steps_per_block), (32, 8, 4));
    assert!(MmaPlan::wgmma(64, 64, 16, DType::F8E5M2, DType::F32, 4).is_err());
    assert!(MmaPlan::wgmma(64, 64, 96, DType::F8E4M3, DType::F32, 4).is_err());
    // mma.sync takes no fp8 here.
    assert!(MmaPlan::new(64, 64, 64, DType::F8E4M3, DType::F32, 4).is_err());
}

/// wgmma's accumulator: in warp `w` of a warpgroup, `d[i]` of thread `l` is row
/// `16w + l/4 + 8·((i/2)%2)`, column `8·(i/4) + 2·(l%4) + i%2` of each m64 instruction tile.
#[test]
fn wgmma_accumulator_matches_the_ptx_table() {
    for p in wgmma_plans() {
        let acc = p.acc();
        assert!(acc.is_bijective_on_owners(), "{p:?}");
        let per = p.wn() / 2;
        assert_eq!(acc.regs(), per * p.tiles_m());
        for w in 0..p.warps() {
            let (g, wg) = (w / 4, w % 4);
            let (gr, gc) = ((g % p.warps_m) * p.wm(), (g / p.warps_m) * p.wn());
            for l in 0..32 {
                for mi in 0..p.tiles_m() {
                    for i in 0..per {
                        let row = gr + 64 * mi + 16 * wg + l / 4 + 8 * ((i / 2) % 2);
                        let col = gc + 8 * (i / 4) + 2 * (l % 4) + i % 2;
                        assert_eq!(acc.apply(i + per * mi, l, w), row * p.n + col, "{p:?} l{l} w{w} i{i}");
                    }
                }
            }
        }
    }
}

/// The hardware's swizzle of a shared-memory byte address: bits 4.. XORed with bits 7.. (3 bits
/// for 128-byte rows, 2 for 64, 1 for 32).
fn hw_swizzle(mode: u64, addr: usize) -> usize {
    let mask = match mode {
        1 => 7,
        2 => 3,
        3 => 1,
        _ => unreachable!(),
    };
    addr ^ (((addr >> 7) & mask) << 4)
}

/// Where the hardware reads element `(mn, k)` of one instruction's operand of `esz`-byte
/// elements (rows of the MN dimension, `mn < 64` for A, `< N` for B; `k` below the
/// instruction's K) from a descriptor starting at byte `start`: K-major, rows of `row` bytes in
/// 8-row groups `sbo` apart; MN-major (16-bit only), 8-row groups of K `sbo` apart inside column
/// blocks `lbo` apart.
fn hw_address(d: &WgmmaOperand, esz: usize, start: usize, mn: usize, k: usize) -> usize {
    let row = match d.mode {
        1 => 128,
        2 => 64,
        _ => 32,
    };
    let addr = if d.mn_major {
        let block = row / 2;
        start + (mn / block) * d.lbo as usize + (k / 8) * d.sbo as usize + (k % 8) * row + 2 * (mn % block)
    } else {
        start + (mn / 8) * d.sbo as usize + (mn % 8) * row + esz * k
    };
    hw_swizzle(d.mode, addr)
}

/// Every element each wgmma instruction reads through its descriptors is where the operand's
/// shared-memory layout put it.
#[test]
fn wgmma_descriptors_address_the_stored_operands() {
    for p in wgmma_plans() {
        let a = p.wgmma_a();
        let swz = p.a_smem();
        let (esz, ik) = (p.input.bytes(), p.instr_k());
        for g in 0..p.warps_m {
            for mi in 0..p.tiles_m() {
                for kk in 0..p.steps_k() {
                    let start = g * a.group_step as usize + mi * a.tile_step as usize + a.k_offset(kk as u32) as usize;
                    for r in 0..WGMMA_M {
                        for c in 0..ik {
                            let (row, col) = (g * p.wm() + 64 * mi + r, ik * kk + c);
                            let want = esz * swz.apply(row * p.k + col);
                            assert_eq!(hw_address(&a, esz, start, r, c), want, "A {p:?}");
                        }
                    }
                }
            }
        }
        // 8-bit B is read K-major only (stored [n, k]).
        for bt in [false, true].into_iter().filter(|bt| *bt || esz == 2) {
            let b = p.wgmma_b(bt);
            let swz = if bt { p.bt_smem() } else { p.b_smem() };
            assert_eq!(b.mn_major, !bt);
            for g in 0..p.warps_n {
                for kk in 0..p.steps_k() {
                    let start = g * b.group_step as usize + b.k_offset(kk as u32) as usize;
                    for nn in 0..p.wn() {
                        for c in 0..ik {
                            let (n, k) = (g * p.wn() + nn, ik * kk + c);
                            let flat = if bt { n * p.k + k } else { k * p.n + n };
                            let want = esz * swz.apply(flat);
                            assert_eq!(hw_address(&b, esz, start, nn, c), want, "B (transposed {bt}) {p:?}");
                        }
                    }
                }
            }
        }
    }
}

/// wgmma with A from registers: in warp `w` of a warpgroup, for each m64 tile and k16 step,
/// registers `a0..a7` of thread `l` hold row `16w + l/4 (+8 for a2, a3, a6, a7)`, column
/// `2·(l%4) + j%2 (+8 for a4..a7)`, as the PTX ISA's table for the register A fragment.
#[test]
fn wgmma_a_fragment_matches_the_ptx_table() {
    // (8-bit A is never read from registers: `GpuPlan::a_in_registers`.)
    for p in wgmma_plans().into_iter().filter(|p| p.input.bytes() == 2) {
        let frag = p.a_fragment();
        for w in 0..p.warps() {
            let (g, wg) = (w / 4, w % 4);
            let gr = (g % p.warps_m) * p.wm();
            for l in 0..32 {
                for kk in 0..p.steps_k() {
                    for mi in 0..p.tiles_m() {
                        for j in 0..8 {
                            let row = gr + 64 * mi + 16 * wg + l / 4 + 8 * ((j / 2) % 2);
                            let col = 16 * kk + 2 * (l % 4) + j % 2 + 8 * (j / 4);
                            let reg = j + 8 * (mi + p.tiles_m() * kk);
                            assert_eq!(frag.apply(reg, l, w), row * p.k + col, "{p:?} l{l} w{w} reg{reg}");
                        }
                    }
                }
            }
        }
    }
}
