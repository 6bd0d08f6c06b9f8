#!/usr/bin/env python3
"""Peer side of tile's benchmark: Triton 3.6 and PyTorch 2.11 on the same cases as tile.

One command measures, on one GPU:
  * two ceilings: device-to-device copy bandwidth and bf16 matmul rate;
  * every case (kernel, dtype, size label) for each peer: Triton (kernels written below, the same
    math as dsl-examples/*.tile), torch eager and, for the normalisations, torch.compile;
  * Triton's host launch overhead (and torch eager's), and Triton's compile time (cold, cached).

Usage (from the repository root, on the GPU host):
    python3 bench/peers.py --json bench/out/peers.json
See bench/README.md for the options and the JSON format.
"""

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import zlib

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.testing import do_bench

DEV = "cuda"
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f8e4m3": torch.float8_e4m3fn}
# Tolerance on ||out - ref|| / ||ref||, ref computed in float64 from the same (upcast) inputs.
REL_TOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2}


# --------------------------------------------------------------------------------------------
# Triton kernels (written for this benchmark; same math as the tile kernels)
# --------------------------------------------------------------------------------------------

@triton.jit
def _tiny_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


@triton.jit
def _vector_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x_ptr + offs, mask=m)
    b = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, a + b, mask=m)


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    # one program per row; the whole row is one BLOCK (BLOCK >= n_cols)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=m, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, n, eps,
                      BLOCK: tl.constexpr):
    # one program per row; three passes over the row in BLOCK chunks (mean, variance, output)
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * stride
    yr = y_ptr + row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(xr + cols, mask=cols < n, other=0.0).to(tl.float32)
    mu = tl.sum(acc, axis=0) / n
    acc_sq = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        m = cols < n
        d = tl.where(m, tl.load(xr + cols, mask=m, other=0.0).to(tl.float32) - mu, 0.0)
        acc_sq += d * d
    var = tl.sum(acc_sq, axis=0) / n
    rs = 1.0 / tl.sqrt(var + eps)
    tl.store(mean_ptr + row, mu)
    tl.store(rstd_ptr + row, rs)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        m = cols < n
        xv = tl.load(xr + cols, mask=m, other=0.0).to(tl.float32)
        wv = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        bv = tl.load(b_ptr + cols, mask=m, other=0.0).to(tl.float32)
        out = (xv - mu) * rs * wv + bv
        tl.store(yr + cols, out.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, stride, n, eps, BLOCK: tl.constexpr):
    # one program per row; the whole row is one BLOCK (BLOCK >= n)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    xv = tl.load(x_ptr + row * stride + cols, mask=m, other=0.0).to(tl.float32)
    rs = 1.0 / tl.sqrt(tl.sum(xv * xv, axis=0) / n + eps)
    wv = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (xv * rs * wv).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _grouped_tile(M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    # grouped ordering of the output tiles: GROUP_M tile-rows per group, down a column first
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    in_group = GROUP_M * num_n
    first_m = (pid // in_group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    return first_m + (pid % in_group) % size_m, (pid % in_group) // size_m


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                   SCALED: tl.constexpr):
    # C = A @ B, times the per-tensor scales sa * sb when SCALED (fp8)
    pm, pn = _grouped_tile(M, N, BM, BN, GROUP_M)

    # rows/cols past the edge wrap around (loads stay in bounds); the store is masked
    ram = tl.max_contiguous(tl.multiple_of((pm * BM + tl.arange(0, BM)) % M, BM), BM)
    rbn = tl.max_contiguous(tl.multiple_of((pn * BN + tl.arange(0, BN)) % N, BN), BN)
    rk = tl.arange(0, BK)
    pa = a_ptr + ram[:, None] * stride_am + rk[None, :] * stride_ak
    pb = b_ptr + rk[:, None] * stride_bk + rbn[None, :] * stride_bn
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        ta = tl.load(pa, mask=rk[None, :] < k_left, other=0.0)
        tb = tl.load(pb, mask=rk[:, None] < k_left, other=0.0)
        acc = tl.dot(ta, tb, acc)
        pa += BK * stride_ak
        pb += BK * stride_bk
    if SCALED:
        acc = acc * (tl.load(sa_ptr) * tl.load(sb_ptr))
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    pc = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(pc, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _attn_block(acc, l_i, m_i, q, kh, vh, rm, rd, lo, hi, qk_scale,
                D: tl.constexpr, BN: tl.constexpr, MASKED: tl.constexpr):
    # stream key/value blocks [lo, hi) past the BM query rows (online softmax, base-2 exponent)
    for start_n in range(lo, hi, BN):
        start_n = tl.multiple_of(start_n, BN)
        rn = start_n + tl.arange(0, BN)
        kt = tl.load(kh + rn[None, :] * D + rd[:, None])          # [D, BN]: K transposed
        s = tl.dot(q, kt) * qk_scale
        if MASKED:
            s = tl.where(rn[None, :] <= rm[:, None], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        vt = tl.load(vh + rn[:, None] * D + rd[None, :])          # [BN, D]
        acc = tl.dot(p.to(vt.dtype), vt, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, qk_scale,
                      D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr):
    # grid (seq / BM, batch*heads); seq must be a multiple of BM and BN (checked by the wrapper)
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * seq * D
    qh = q_ptr + base
    kh = k_ptr + base
    vh = v_ptr + base
    oh = o_ptr + base
    rm = start_m * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(qh + rm[:, None] * D + rd[None, :])
    m_i = tl.full([BM], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, D], dtype=tl.float32)
    if CAUSAL:
        # key blocks wholly below the diagonal need no mask; the diagonal block does
        acc, l_i, m_i = _attn_block(acc, l_i, m_i, q, kh, vh, rm, rd, 0, start_m * BM,
                                    qk_scale, D, BN, False)
        acc, l_i, m_i = _attn_block(acc, l_i, m_i, q, kh, vh, rm, rd, start_m * BM,
                                    (start_m + 1) * BM, qk_scale, D, BN, True)
    else:
        acc, l_i, m_i = _attn_block(acc, l_i, m_i, q, kh, vh, rm, rd, 0, seq,
                                    qk_scale, D, BN, False)
    out = acc / l_i[:, None]
    tl.store(oh + rm[:, None] * D + rd[None, :], out.to(o_ptr.dtype.element_ty))


# --------------------------------------------------------------------------------------------
# Launch wrappers: each returns a no-argument function that launches into preallocated outputs
# --------------------------------------------------------------------------------------------

def tri_vector_add(x, y, out):
    n = x.numel()
    grid = (triton.cdiv(n, 1024),)
    return lambda: _vector_add_kernel[grid](x, y, out, n, BLOCK=1024, num_warps=4)


def _row_warps(block):
    if block >= 4096:
        return 16
    if block >= 2048:
        return 8
    return 4


def tri_softmax(x, out):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    nw = _row_warps(block)
    return lambda: _softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols,
                                            BLOCK=block, num_warps=nw)


def tri_layernorm(x, w, b, y, mean, rstd, eps):
    rows, n = x.shape
    block = min(65536 // x.element_size(), triton.next_power_of_2(n))
    nw = min(max(block // 256, 1), 8)
    return lambda: _layernorm_kernel[(rows,)](x, w, b, y, mean, rstd, x.stride(0), n, eps,
                                              BLOCK=block, num_warps=nw)


def tri_rmsnorm(x, w, y, eps):
    rows, n = x.shape
    block = triton.next_power_of_2(n)
    nw = min(max(block // 256, 1), 8)
    return lambda: _rmsnorm_kernel[(rows,)](x, w, y, x.stride(0), n, eps,
                                            BLOCK=block, num_warps=nw)


def tri_matmul(a, b, c, BM=128, BN=128, BK=64, GROUP_M=8, num_warps=8, num_stages=3):
    M, K = a.shape
    _, N = b.shape
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    return lambda: _matmul_kernel[grid](
        a, b, c, a, a, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M, SCALED=False,
        num_warps=num_warps, num_stages=num_stages)


def tri_matmul_fp8(a, bt, c, sa, sb, BM=128, BN=256, BK=128, GROUP_M=8, num_warps=8, num_stages=3):
    # B = bt.t(): K-major, which fp8 tensor cores need
    M, K = a.shape
    b = bt.t()
    grid = (triton.cdiv(M, BM) * triton.cdiv(b.shape[1], BN),)
    return lambda: _matmul_kernel[grid](
        a, b, c, sa, sb, M, b.shape[1], K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M, SCALED=True,
        num_warps=num_warps, num_stages=num_stages)


def tri_attention(q, k, v, o, scale, causal, BM=128, BN=64, num_warps=8, num_stages=3):
    bh, seq, d = q.shape
    assert seq % BM == 0 and seq % BN == 0 and BM % BN == 0, "attention: seq must divide by BM, BN"
    assert all(t.is_contiguous() for t in (q, k, v, o))
    qk_scale = scale * 1.4426950408889634  # log2(e): the kernel uses exp2
    grid = (seq // BM, bh)
    return lambda: _attention_kernel[grid](q, k, v, o, seq, qk_scale, D=d, BM=BM, BN=BN,
                                           CAUSAL=causal, num_warps=num_warps,
                                           num_stages=num_stages)


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------

class Peer:
    """run() launches and returns the output tensors; poison: outputs to fill with NaN first."""

    def __init__(self, run, poison=()):
        self.run = run
        self.poison = list(poison)


def _as_tuple(r):
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


def _compiled(fn):
    # A fresh compile per case; reset so the recompile limit is never reached and every case
    # gets a static-shape graph.
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False)


def build_case(kernel, dt_name, params, with_compile):
    """Returns (label, bytes, flops, refs, {peer: Peer})."""
    dt = DTYPES[dt_name]
    es = torch.tensor([], dtype=dt).element_size()
    g = torch.Generator(device=DEV)
    g.manual_seed(zlib.crc32(repr((kernel, dt_name, sorted(params.items()))).encode()))

    def randn(*shape):
        return torch.randn(*shape, device=DEV, dtype=torch.float32, generator=g).to(dt)

    peers = {}
    if kernel == "vector_add":
        n = params["n"]
        label = f"n={n}"
        x, y = randn(n), randn(n)
        out = torch.empty_like(x)
        nbytes, flops = 3 * n * es, 0
        refs = [x.double() + y.double()]
        launch = tri_vector_add(x, y, out)
        peers["triton"] = Peer(lambda: (launch(), out)[1], [out])
        peers["torch"] = Peer(lambda: x + y)
    elif kernel == "softmax":
        rows, cols = params["rows"], params["cols"]
        label = f"rows={rows} cols={cols}"
        x = randn(rows, cols)
        out = torch.empty_like(x)
        nbytes, flops = 2 * rows * cols * es, 0
        refs = [torch.softmax(x.double(), dim=-1)]
        launch = tri_softmax(x, out)
        peers["triton"] = Peer(lambda: (launch(), out)[1], [out])
        eager = lambda t: torch.softmax(t, dim=-1)
        peers["torch"] = Peer(lambda: eager(x))
        if with_compile:
            comp = _compiled(eager)
            peers["torch.compile"] = Peer(lambda: comp(x))
    elif kernel == "layernorm":
        rows, n, eps = params["rows"], params["n"], 1e-5
        label = f"rows={rows} n={n}"
        x, w, b = randn(rows, n), randn(n), randn(n)
        y = torch.empty_like(x)
        mean = torch.empty(rows, device=DEV, dtype=torch.float32)
        rstd = torch.empty(rows, device=DEV, dtype=torch.float32)
        nbytes, flops = (2 * rows * n + 2 * n) * es + 2 * rows * 4, 0
        xd = x.double()
        var = xd.var(dim=-1, unbiased=False)
        refs = [F.layer_norm(xd, (n,), w.double(), b.double(), eps), xd.mean(dim=-1),
                torch.rsqrt(var + eps)]
        launch = tri_layernorm(x, w, b, y, mean, rstd, eps)
        peers["triton"] = Peer(lambda: (launch(), (y, mean, rstd))[1], [y, mean, rstd])
        eager = lambda t, ww, bb: F.layer_norm(t, (n,), ww, bb, eps)
        peers["torch"] = Peer(lambda: eager(x, w, b))
        if with_compile:
            comp = _compiled(eager)
            peers["torch.compile"] = Peer(lambda: comp(x, w, b))
    elif kernel == "rmsnorm":
        rows, n, eps = params["rows"], params["n"], 1e-6
        label = f"rows={rows} n={n}"
        x, w = randn(rows, n), randn(n)
        y = torch.empty_like(x)
        nbytes, flops = (2 * rows * n + n) * es, 0
        xd = x.double()
        refs = [xd * torch.rsqrt((xd * xd).mean(dim=-1, keepdim=True) + eps) * w.double()]
        launch = tri_rmsnorm(x, w, y, eps)
        peers["triton"] = Peer(lambda: (launch(), y)[1], [y])
        if hasattr(F, "rms_norm"):
            eager = lambda t, ww: F.rms_norm(t, (n,), ww, eps)
        else:
            def eager(t, ww):
                tf = t.float()
                return (tf * torch.rsqrt(tf.pow(2).mean(-1, keepdim=True) + eps)
                        * ww.float()).to(t.dtype)
        peers["torch"] = Peer(lambda: eager(x, w))
        if with_compile:
            comp = _compiled(eager)
            peers["torch.compile"] = Peer(lambda: comp(x, w))
    elif kernel == "matmul":
        M, N, K = params["M"], params["N"], params["K"]
        label = f"M={M} N={N} K={K}"
        a, b = randn(M, K), randn(K, N)
        c = torch.empty(M, N, device=DEV, dtype=dt)
        nbytes, flops = (M * K + K * N + M * N) * es, 2 * M * N * K
        refs = [a.double() @ b.double()]
        launch = tri_matmul(a, b, c)
        peers["triton"] = Peer(lambda: (launch(), c)[1], [c])
        peers["torch"] = Peer(lambda: torch.matmul(a, b))
    elif kernel == "matmul_fp8":
        # torch._scaled_mm's problem: A [M, K] row-major, B [K, N] column-major (given here as
        # Bt [N, K] row-major), per-tensor f32 scales, bf16 out
        # per-tensor scales, or (rowwise) one per row of A and one per column of B
        M, N, K, rowwise = params["M"], params["N"], params["K"], params.get("rowwise", False)
        label = f"M={M} N={N} K={K}" + (" ROWWISE=true" if rowwise else "")
        a, bt = randn(M, K), randn(N, K)
        if rowwise:
            sa = torch.rand(M, 1, device=DEV, generator=g) * 1.75 + 0.25
            sb = torch.rand(1, N, device=DEV, generator=g) * 1.75 + 0.25
        else:
            sa = torch.full((), 0.5, device=DEV, dtype=torch.float32)
            sb = torch.full((), 1.25, device=DEV, dtype=torch.float32)
        c = torch.empty(M, N, device=DEV, dtype=torch.bfloat16)
        nbytes, flops = M * K + N * K + 2 * M * N, 2 * M * N * K
        refs = [(a.double() @ bt.double().t()) * sa.double() * sb.double()]
        if not rowwise:
            launch = tri_matmul_fp8(a, bt, c, sa, sb)
            peers["triton"] = Peer(lambda: (launch(), c)[1], [c])
        # tile's kernel keeps the sum in the tensor cores, which is cuBLAS's fast accumulation;
        # the default (the sum promoted to f32 on the way) is timed too, as torch.precise
        for name, fast in (("torch", True), ("torch.precise", False)):
            peers[name] = Peer(lambda fast=fast: torch._scaled_mm(
                a, bt.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast))
    elif kernel == "attention":
        bh, seq, d, causal = params["bh"], params["seq"], params["D"], params["causal"]
        label = f"bh={bh} seq={seq} D={d} CAUSAL={'true' if causal else 'false'}"
        scale = 1.0 / math.sqrt(d)
        q, k, v = randn(bh, seq, d), randn(bh, seq, d), randn(bh, seq, d)
        o = torch.empty_like(q)
        nbytes = 4 * bh * seq * d * es
        flops = 4 * bh * seq * seq * d // (2 if causal else 1)
        # float64 reference one head-chunk at a time keeps the seq x seq scores small
        ref = torch.empty(bh, seq, d, device=DEV, dtype=torch.float64)
        for i in range(0, bh, 8):
            ref[i:i + 8] = F.scaled_dot_product_attention(
                q[i:i + 8].double(), k[i:i + 8].double(), v[i:i + 8].double(),
                is_causal=causal, scale=scale)
        refs = [ref]
        launch = tri_attention(q, k, v, o, scale, causal)
        peers["triton"] = Peer(lambda: (launch(), o)[1], [o])
        # SDPA takes [batch, heads, seq, D]: view [bh, seq, D] as batch 1
        q4, k4, v4 = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)
        peers["torch"] = Peer(lambda: F.scaled_dot_product_attention(
            q4, k4, v4, is_causal=causal, scale=scale).squeeze(0))
    else:
        raise ValueError(kernel)
    return label, nbytes, flops, refs, peers


def case_list():
    cases = []
    for e in (24, 26, 28):
        cases.append(("vector_add", "f32", {"n": 2 ** e}))
    for dt in ("f32", "bf16"):
        for cols in (1024, 4096, 16384, 32768):
            cases.append(("softmax", dt, {"rows": 4096, "cols": cols}))
    for dt in ("f32", "bf16"):
        for n in (1024, 4096, 16384):
            cases.append(("layernorm", dt, {"rows": 4096, "n": n}))
    for dt in ("f32", "bf16"):
        for n in (1024, 4096):
            cases.append(("rmsnorm", dt, {"rows": 4096, "n": n}))
    for s in (4096, 8192):
        cases.append(("matmul", "bf16", {"M": s, "N": s, "K": s}))
    for rowwise in (False, True):
        for s in (4096, 8192):
            cases.append(("matmul_fp8", "f8e4m3", {"M": s, "N": s, "K": s, "rowwise": rowwise}))
    for causal in (False, True):
        cases.append(("attention", "bf16", {"bh": 32, "seq": 2048, "D": 64, "causal": causal}))
    for causal in (False, True):
        cases.append(("attention", "bf16", {"bh": 16, "seq": 8192, "D": 128, "causal": causal}))
    # batch 4 x 32 heads: the Hopper issue's attention target
    for causal in (False, True):
        cases.append(("attention", "bf16", {"bh": 128, "seq": 8192, "D": 128, "causal": causal}))
    return cases


def check(peer, refs):
    """Runs the peer once (outputs poisoned with NaN first); returns (ok, message, rel_err)."""
    for t in peer.poison:
        t.fill_(float("nan"))
    outs = _as_tuple(peer.run())
    torch.cuda.synchronize()
    worst = 0.0
    for i, (out, ref) in enumerate(zip(outs, refs)):
        if tuple(out.shape) != tuple(ref.shape):
            return False, f"output {i}: shape {tuple(out.shape)} != {tuple(ref.shape)}", None
        od = out.double()
        if not torch.isfinite(od).all().item():
            return False, f"output {i}: non-finite values (unwritten or overflow)", None
        err = (torch.linalg.vector_norm(od - ref) / torch.linalg.vector_norm(ref)).item()
        worst = max(worst, err)
        tol = REL_TOL.get(out.dtype, 1e-4)
        if not err <= tol:
            return False, f"output {i}: rel err {err:.3g} > {tol:g}", worst
    return True, "ok", worst


def bench_ms(fn, warmup, rep):
    """(median, p10, p90) in ms from triton.testing.do_bench (L2 flushed between runs)."""
    r = do_bench(fn, warmup=warmup, rep=rep, quantiles=[0.5, 0.1, 0.9], return_mode="median")
    if isinstance(r, (list, tuple)):
        return float(r[0]), float(r[1]), float(r[2])
    return float(r), None, None


# --------------------------------------------------------------------------------------------
# Ceilings, launch overhead, compile time
# --------------------------------------------------------------------------------------------

def measure_ceilings(args):
    out = {}
    n = (args.copy_gib << 30) // 4
    src = torch.randn(n, device=DEV, dtype=torch.float32)
    dst = torch.empty_like(src)
    ms, p10, p90 = bench_ms(lambda: dst.copy_(src), args.warmup, args.rep)
    copy_bytes = 2 * n * 4
    out.update(copy_bytes=copy_bytes, copy_ms=ms, copy_gbps=copy_bytes / ms / 1e6)
    del src, dst
    torch.cuda.empty_cache()
    s = args.matmul_ceiling_size
    a = torch.randn(s, s, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(s, s, device=DEV, dtype=torch.bfloat16)
    ms, p10, p90 = bench_ms(lambda: torch.matmul(a, b), args.warmup, args.rep)
    out.update(matmul_size=s, matmul_ms=ms, matmul_tflops=2 * s ** 3 / ms / 1e9)
    del a, b
    torch.cuda.empty_cache()
    return out


def measure_launch(launches=10_000):
    """Host time per launch: `launches` back-to-back launches of a tiny kernel, synchronised
    before and after, wall clock divided by the count (the GPU work is far shorter than the
    host's launch path, so this is the launch path's cost)."""
    x = torch.zeros(1024, device=DEV, dtype=torch.float32)
    res = {}

    def tri():
        _tiny_kernel[(1,)](x, 1024, BLOCK=1024)

    def eager():
        x.add_(1.0)

    for name, fn in (("triton", tri), ("torch", eager)):
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(launches):
            fn()
        torch.cuda.synchronize()
        res[name] = (time.perf_counter() - t0) / launches * 1e6
    return res


def compile_child(name):
    """Runs in a fresh process (TRITON_CACHE_DIR set by the parent): after CUDA and Triton's
    driver are initialised (a different tiny kernel is compiled and run first), times the first
    call of the named kernel, synchronised: JIT compile (or cache load) + launch."""
    torch.cuda.init()
    x = torch.zeros(1024, device=DEV, dtype=torch.float32)
    _tiny_kernel[(1,)](x, 1024, BLOCK=1024)
    torch.cuda.synchronize()
    if name == "softmax":
        a = torch.randn(4096, 4096, device=DEV, dtype=torch.float32)
        o = torch.empty_like(a)
        launch = tri_softmax(a, o)
    elif name == "matmul":
        a = torch.randn(4096, 4096, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(4096, 4096, device=DEV, dtype=torch.bfloat16)
        c = torch.empty_like(a)
        launch = tri_matmul(a, b, c)
    else:
        raise ValueError(name)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    launch()
    torch.cuda.synchronize()
    first = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    launch()
    torch.cuda.synchronize()
    second = (time.perf_counter() - t0) * 1e3
    print(json.dumps({"first_call_ms": first, "second_call_ms": second}))


def measure_compile(names=("softmax", "matmul")):
    """cold: first call in a fresh process with an empty TRITON_CACHE_DIR;
    cached: first call in another fresh process with that (now filled) cache dir."""
    res = {}
    for name in names:
        cache = tempfile.mkdtemp(prefix="triton-cache-")
        env = dict(os.environ, TRITON_CACHE_DIR=cache)
        entry = {}
        try:
            for which in ("cold", "cached"):
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--compile-child",
                                    name], env=env, capture_output=True, text=True, timeout=600)
                if p.returncode != 0:
                    entry[which] = None
                    entry[which + "_error"] = (p.stderr or p.stdout)[-2000:]
                    continue
                line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
                entry[which] = json.loads(line)["first_call_ms"]
        except Exception as e:  # noqa: BLE001 - report, don't crash
            entry["error"] = repr(e)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        res[name] = entry
    return res


# --------------------------------------------------------------------------------------------

def meta():
    m = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "gpu": torch.cuda.get_device_name(0),
        "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "driver": None,
    }
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        if p.returncode == 0:
            m["driver"] = p.stdout.strip().splitlines()[0]
    except Exception:  # noqa: BLE001
        pass
    return m


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", default="bench/out/peers.json", help="where to write the results")
    ap.add_argument("--only", default="", help="comma-separated kernels to run (default: all)")
    ap.add_argument("--warmup", type=float, default=25.0, help="do_bench warm-up, ms")
    ap.add_argument("--rep", type=float, default=200.0, help="do_bench repetition time, ms")
    ap.add_argument("--no-torch-compile", action="store_true", help="skip the torch.compile peer")
    ap.add_argument("--no-compile-time", action="store_true", help="skip Triton compile timing")
    ap.add_argument("--copy-gib", type=int, default=4, help="size of the copy ceiling's buffer")
    ap.add_argument("--matmul-ceiling-size", type=int, default=8192)
    ap.add_argument("--compile-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.compile_child:
        compile_child(args.compile_child)
        return

    assert torch.cuda.is_available(), "no CUDA device"
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    result = {"meta": meta(), "settings": {"warmup_ms": args.warmup, "rep_ms": args.rep,
                                           "timer": "triton.testing.do_bench, median"}}
    result["meta"]["argv"] = sys.argv
    print(f"# {result['meta']['gpu']}, driver {result['meta']['driver']}, "
          f"torch {torch.__version__}, triton {triton.__version__}", flush=True)

    ceil = measure_ceilings(args)
    result["ceilings"] = ceil
    print(f"ceiling: copy {ceil['copy_gbps']:.0f} GB/s, bf16 matmul "
          f"{ceil['matmul_tflops']:.1f} TFLOP/s", flush=True)

    rows = []
    for kernel, dt_name, params in case_list():
        if only and kernel not in only:
            continue
        try:
            label, nbytes, flops, refs, peers = build_case(kernel, dt_name, params,
                                                           not args.no_torch_compile)
        except Exception as e:  # noqa: BLE001
            print(f"{kernel} {dt_name} {params}: setup failed: {e!r}", flush=True)
            traceback.print_exc()
            rows.append({"kernel": kernel, "dtype": dt_name, "label": str(params), "peer": "*",
                         "error": repr(e)})
            continue
        for peer_name, peer in peers.items():
            row = {"kernel": kernel, "dtype": dt_name, "label": label, "peer": peer_name,
                   "bytes": nbytes, "flops": flops, "median_ms": None, "p10_ms": None,
                   "p90_ms": None, "gbps": None, "tflops": None}
            try:
                ok, msg, err = check(peer, refs)  # also the first (compiling) call
                row.update(check=msg, check_ok=ok, rel_err=err)
                ms, p10, p90 = bench_ms(peer.run, args.warmup, args.rep)
                row.update(median_ms=ms, p10_ms=p10, p90_ms=p90, gbps=nbytes / ms / 1e6,
                           tflops=flops / ms / 1e9 if flops else None)
            except Exception as e:  # noqa: BLE001 - report a failure, keep going
                row.update(check_ok=False, error=f"{type(e).__name__}: {e}"[:2000])
                traceback.print_exc()
            rows.append(row)
            print(f"{kernel:10s} {dt_name:4s} {label:34s} {peer_name:13s} "
                  f"{fmt(row['median_ms'], '9.4f')} ms {fmt(row['gbps'], '7.0f')} GB/s "
                  f"{fmt(row['tflops'], '6.1f')} TFLOP/s  {row.get('check', row.get('error'))}",
                  flush=True)
        del refs, peers
        torch.cuda.empty_cache()
    result["cases"] = rows

    result["launch_us"] = measure_launch()
    print(f"launch: triton {result['launch_us']['triton']:.1f} us, "
          f"torch eager {result['launch_us']['torch']:.1f} us per launch", flush=True)
    if not args.no_compile_time:
        result["compile_ms"] = measure_compile()
        for k, v in result["compile_ms"].items():
            print(f"compile {k}: cold {fmt(v.get('cold'), '.0f')} ms, "
                  f"cached {fmt(v.get('cached'), '.0f')} ms"
                  + ("  (errors: see JSON)" if any(x.endswith("error") for x in v) else ""),
                  flush=True)

    d = os.path.dirname(os.path.abspath(args.json))
    os.makedirs(d, exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)

    # short summary table
    print()
    print(f"{'kernel':10s} {'dtype':5s} {'size':34s} {'peer':13s} {'ms':>9s} {'GB/s':>7s} "
          f"{'TFLOP/s':>7s} check")
    for r in rows:
        print(f"{r['kernel']:10s} {r['dtype']:5s} {r['label']:34s} {r['peer']:13s} "
              f"{fmt(r.get('median_ms'), '9.4f')} {fmt(r.get('gbps'), '7.0f')} "
              f"{fmt(r.get('tflops'), '7.1f')} {r.get('check', r.get('error', ''))[:60]}")
    fails = [r for r in rows if not r.get("check_ok")]
    print(f"\nwrote {args.json}: {len(rows)} rows, {len(fails)} failed checks or errors")


if __name__ == "__main__":
    main()
