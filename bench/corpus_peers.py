#!/usr/bin/env python3
"""PyTorch peers for the bench corpus (bench/corpus/*.tile), case by case against tile's JSON.

    python3 bench/corpus_peers.py TILE.json [TILE2.json ..] --json OUT.json [--warmup 25 --rep 100]
                                  [--only gemm_epilogue,fp8_gemm] [--no-compile] [--budget 180]
    python3 bench/corpus_peers.py [TILE.json ..] --dry-run      # CPU, tiny shapes, nothing timed

TILE.json is what `tilec bench bench/corpus/FILE.tile --config model --json TILE.json` writes.
For every case in it (kernel, dtype, label such as `M=4096 N=4096 K=4096 ACT=1 RESIDUAL=true`)
this script parses the label, builds the PyTorch ops that solve the same problem on the same
shapes and dtypes (random inputs on the GPU), checks each op once against a float64 reference
computed on a slice of the output (a few rows, one batch entry or two heads), then times it with
`triton.testing.do_bench` (CUDA events, L2 flushed before every run; median, p10, p90).
Two passes: first every case's eager and library peers, then the torch.compile peers (seconds
of compiling each; norms and cross-entropy first). No case or compile starts after --budget
seconds from the start (default 180, for a 240 s step; 0: no limit): those rows are marked
`skipped`, and the table and summary are printed either way.

Peers (a "reference" peer does not solve the same problem; it is shown, never counted as best):
  gemm_epilogue        torch (addmm + activation (+ residual), eager, bf16 intermediates),
                       torch._addmm_activation (cuBLASLt bias + tanh-GELU epilogue; ACT=1 only,
                       residual added after), torch.compile (same function),
                       torch.matmul = the GEMM alone [reference; target: tile >= 0.95x of it]
  batched_gemm(_tma)   torch.bmm
  grouped_gemm         torch._grouped_mm (B [G, K, N] row-major, offs = int32 group ends;
                       retried with B column-major), torch.loop (torch.matmul per group)
  small_m_gemm         torch.matmul(x, W), W [K, N]
  small_m_gemv         torch.nn.functional.linear(x, W), W [N, K]
  fp8_gemm             torch._scaled_mm (rowwise scales, bf16 out), torch._scaled_mm fast
                       (use_fast_accum=True: sums kept in the tensor cores, as tile's kernel)
  gqa_attention(_rotated)  torch.sdpa (enable_gqa, backend chosen by torch), torch.sdpa flash,
                       torch.sdpa cudnn (retried with K/V repeated to Hq heads if refused)
  decode_split(_desc)  [reference] torch.sdpa: one query token per sequence against contiguous
                       K/V [batch, Hkv, seq_len, D] (enable_gqa); torch.sdpa grouped: the G query
                       heads of a kv head folded into G query rows (no GQA expansion). tile's
                       kernel does the split pass over a paged cache only, so these are
                       reference points; the number that matters is the HBM share below.
  decode_combine       torch (softmax of the lse over splits, batched GEMV), torch.compile
  residual_rmsnorm / residual_layernorm  torch (h = x + r in f32, the norm in f32, cast; the new
                       residual returned, not written in place: same bytes), torch.compile (same
                       function), torch.rms_norm / torch.layer_norm (h = x + r rounded to bf16,
                       then F.rms_norm / F.layer_norm)
  cross_entropy(_lanes)  torch (F.cross_entropy(logits, targets, reduction="none"), bf16
                       logits, int64 targets), torch.compile (the same on logits.float())

Rates use tile's own bytes and flops for the case, so GB/s and TFLOP/s compare line by line.
Ratios read peer_ms / tile_ms: above 1 means tile is faster, below 1 the peer is faster.
"% copy" is tile's GB/s over the copy bandwidth that tile's run measured (ceilings.copy_gbps);
for decode it is the HBM share (target >= 85%). A failing peer (error, or a check outside the
tolerance) is recorded with `error` / `check_ok: false` and the script goes on.

OUT.json: {"meta", "settings", "tile_files", "ceilings", "cases": [{kernel, dtype, label, peer,
median_ms, p10_ms, p90_ms, bytes, flops, gbps, tflops, tile_ms, ratio, reference, check,
check_ok, rel_err, error?, tile_hbm_share? (decode)}]}, rewritten after every case. report.py
reads it as a peers file (its columns show the peers named torch and torch.compile). The
printed table has one line per tile case; the summary gives, per category, tile's ratio to its
fastest same-problem peer (geomean, best, worst), gemm_epilogue's ratio to the GEMM alone and
decode_split's HBM share.

--dry-run builds every input on the CPU with small shapes (each size >= 256 divided by 64; head,
group and split counts kept), runs each peer once and checks it, and times nothing: it tests
the label parsing and the input builders without a GPU. Without TILE.json it uses the corpus's
bench labels (EXAMPLE_CASES below). Peers that need CUDA report an error there; torch.compile
peers run their function uncompiled.
"""

import argparse
import datetime
import gc
import json
import math
import os
import platform
import re
import sys
import time
import traceback
import zlib

import torch
import torch.nn.functional as F

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # older torch: the forced-backend peers report an error
    SDPBackend = sdpa_kernel = None

DTYPES = {
    "bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
    "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2,
}
# ||got - want|| / ||want|| allowed, by the peer output's dtype (want: float64 from the same inputs)
REL_TOL = {torch.bfloat16: 2e-2, torch.float16: 1e-2, torch.float32: 1e-4}

CATEGORY = {
    "gemm_epilogue": "gemm", "batched_gemm": "gemm", "batched_gemm_tma": "gemm",
    "grouped_gemm": "gemm", "small_m_gemm": "decode-gemm", "small_m_gemv": "decode-gemm",
    "fp8_gemm": "fp8-gemm", "gqa_attention": "attention", "gqa_attention_rotated": "attention",
    "decode_split": "decode-attention", "decode_split_desc": "decode-attention",
    "decode_combine": "decode-combine", "residual_rmsnorm": "norm",
    "residual_layernorm": "norm", "cross_entropy": "loss", "cross_entropy_lanes": "loss",
}

T0 = time.monotonic()  # the --budget clock starts at import, before CUDA is initialised

# Kernels with torch.compile peers, in the order the second pass compiles them (the
# memory-bound fusions first: there torch.compile is the strongest PyTorch peer).
COMPILE_ORDER = ["residual_rmsnorm", "residual_layernorm", "cross_entropy", "cross_entropy_lanes",
                 "decode_combine", "gemm_epilogue"]

# The `scale` argument of the gqa_attention bench specs, by head dim (else 1/sqrt(D)).
ATTN_SCALE = {64: 0.125, 96: 0.102, 128: 0.088}
DECODE_SCALE = 0.088        # decode_attention.tile's bench specs
DECODE_HKV, DECODE_HQ = 8, 32  # fixed in those specs (not in the label)

# The corpus's bench cases as `tilec bench` labels them (dry runs without a TILE.json).
EXAMPLE_CASES = [
    ("gemm_epilogue", "bf16", "M=4096 N=4096 K=4096 ACT=1 RESIDUAL=true"),
    ("gemm_epilogue", "bf16", "M=2048 N=14336 K=4096 ACT=1 RESIDUAL=true"),
    ("gemm_epilogue", "bf16", "M=4096 N=11008 K=4096 ACT=2 RESIDUAL=false"),
    ("batched_gemm", "bf16", "batch=32 M=1024 N=1024 K=1024"),
    ("batched_gemm_tma", "bf16", "batch=64 M=512 N=512 K=512"),
    ("grouped_gemm", "bf16", "G=8 tokens=8192 K=4096 N=14336 SIZES=true"),
    ("grouped_gemm", "bf16", "G=64 tokens=16384 K=2048 N=1408 SIZES=true"),
    ("small_m_gemm", "bf16", "M=1 K=4096 N=4096"),
    ("small_m_gemv", "bf16", "M=32 K=8192 N=8192"),
    ("fp8_gemm", "f8e4m3", "M=4096 N=4096 K=4096"),
    ("gqa_attention", "bf16", "b=2 hq=32 hkv=8 seq=4096 D=64 CAUSAL=true"),
    ("gqa_attention", "bf16", "b=4 hq=16 hkv=4 seq=2048 D=96 CAUSAL=false"),
    ("gqa_attention_rotated", "bf16", "b=1 hq=64 hkv=8 seq=8192 D=128 CAUSAL=true"),
    ("decode_split", "bf16", "batch=32 seq_len=4096 splits=4 D=128 G=4"),
    ("decode_split_desc", "bf16", "batch=8 seq_len=32768 splits=16 D=128 G=4"),
    ("decode_combine", "bf16", "batch=64 splits=2 D=128"),
    ("residual_rmsnorm", "bf16", "rows=4096 hidden=14336"),
    ("residual_layernorm", "bf16", "rows=16384 hidden=4096"),
    ("cross_entropy", "bf16", "rows=4096 cols=128256"),
    ("cross_entropy_lanes", "bf16", "rows=8192 cols=128256"),
]


# --------------------------------------------------------------------------------------------
# Labels and tile's JSON
# --------------------------------------------------------------------------------------------

def parse_value(text):
    if text in ("true", "false"):
        return text == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_label(label):
    """`M=4096 N=4096 ACT=1 RESIDUAL=true` -> {"M": 4096, "N": 4096, "ACT": 1, "RESIDUAL": True}"""
    out = {}
    for tok in label.split():
        name, sep, value = tok.partition("=")
        if not sep or not name:
            raise ValueError(f"label {label!r}: {tok!r} is not name=value")
        out[name] = parse_value(value)
    return out


def shrink(params):
    """Dry-run sizes: every integer >= 256 divided by 64 (at least 1); smaller ones (heads,
    groups, splits, head dims, decode M) and flags kept, so the problem keeps its structure."""
    return {k: (max(1, v // 64) if isinstance(v, int) and not isinstance(v, bool) and v >= 256
                else v) for k, v in params.items()}


def num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def load_tile(paths):
    """The cases of every tile JSON file, each with its file's copy bandwidth."""
    cases = []
    for i, path in enumerate(paths):
        with open(path) as f:
            data = json.load(f)
        if isinstance(data, list):
            data = {"cases": data}
        copy = num((data.get("ceilings") or {}).get("copy_gbps"))
        for c in data.get("cases", []):
            c = dict(c)
            c["_file"] = i
            c["_copy_gbps"] = copy
            ms, nbytes, flops = num(c.get("median_ms")), num(c.get("bytes")), num(c.get("flops"))
            if num(c.get("gbps")) is None and ms and nbytes:
                c["gbps"] = nbytes / ms / 1e6
            if num(c.get("tflops")) is None and ms and flops:
                c["tflops"] = flops / ms / 1e9
            cases.append(c)
    return cases


# --------------------------------------------------------------------------------------------
# Inputs, peers, checks
# --------------------------------------------------------------------------------------------

class Rand:
    """Seeded random tensors on one device, made in float32 and cast."""

    def __init__(self, device, seed):
        self.device = device
        self.g = torch.Generator(device=device)
        self.g.manual_seed(seed)

    def randn(self, *shape, dtype=torch.bfloat16):
        return torch.randn(*shape, device=self.device, dtype=torch.float32,
                           generator=self.g).to(dtype)

    def uniform(self, *shape, lo=0.0, hi=1.0, dtype=torch.float32):
        t = torch.rand(*shape, device=self.device, dtype=torch.float32, generator=self.g)
        return (t * (hi - lo) + lo).to(dtype)

    def randint(self, lo, hi, *shape, dtype=torch.int64):
        return torch.randint(lo, hi, shape, device=self.device, dtype=dtype, generator=self.g)


class Peer:
    """run(): one call of the peer, returning its output tensor(s).
    expect(outs): [(got, want)] pairs to compare (want in float64), or None for no check.
    reference: not the same problem (shown, not counted as the best peer).
    fallback: a function returning another Peer to use when this one's first call raises."""

    def __init__(self, name, run, expect=None, reference=False, fallback=None, note=None):
        self.name, self.run, self.expect = name, run, expect
        self.reference, self.fallback, self.note = reference, fallback, note


def memo(fn):
    """A float64 reference computed on first use only, then kept for the case's other peers."""
    box = []

    def get():
        if not box:
            box.append(fn())
        return box[0]
    return get


def as_tuple(r):
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


def compiled(fn, opts):
    """torch.compile (default mode, static shapes, dynamo reset first); the plain function in a
    dry run. The compile itself happens in the first (checking) call, before timing."""
    if opts.dry_run:
        return fn
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False)


def forced_sdpa(backend):
    """scaled_dot_product_attention restricted to one backend (raises if it cannot run)."""
    def call(*args, **kw):
        if sdpa_kernel is None:
            raise RuntimeError("torch.nn.attention.sdpa_kernel is not available")
        with sdpa_kernel([getattr(SDPBackend, backend)]):
            return F.scaled_dot_product_attention(*args, **kw)
    return call


def gelu_tanh64(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def attention64(q, k, v, scale, causal):
    """Float64 attention of q [H, S, D] against k, v [S, D] (one kv head)."""
    s = torch.matmul(q.double(), k.double().t()) * scale
    if causal:
        n = s.shape[-1]
        mask = torch.ones(s.shape[-2], n, dtype=torch.bool, device=s.device).tril(n - s.shape[-2])
        s = s.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v.double())


def check(peer):
    """One call of the peer, compared with its float64 reference: (ok, message, rel_err)."""
    outs = as_tuple(peer.run())
    if outs and outs[0].is_cuda:
        torch.cuda.synchronize()
    if peer.expect is None:
        return True, "not checked", None
    worst = 0.0
    for i, (got, want) in enumerate(peer.expect(outs)):
        if tuple(got.shape) != tuple(want.shape):
            return False, f"output {i}: shape {tuple(got.shape)} != {tuple(want.shape)}", None
        gd = got.double()
        if not torch.isfinite(gd).all().item():
            return False, f"output {i}: non-finite values", None
        den = torch.linalg.vector_norm(want).item()
        err = torch.linalg.vector_norm(gd - want).item() / (den if den > 0 else 1.0)
        worst = max(worst, err)
        tol = REL_TOL.get(got.dtype, 2e-2)
        if not err <= tol:
            return False, f"output {i}: rel err {err:.3g} > {tol:g}", worst
    return True, "ok", worst


# --------------------------------------------------------------------------------------------
# One builder per kernel: (params, dtype, Rand, opts) -> [Peer]
# --------------------------------------------------------------------------------------------

def build_gemm_epilogue(p, dt, R, opts):
    M, N, K = p["M"], p["N"], p["K"]
    act, residual = p.get("ACT", 1), p.get("RESIDUAL", False)
    a, b, bias = R.randn(M, K, dtype=dt), R.randn(K, N, dtype=dt), R.randn(N, dtype=dt)
    res = R.randn(M, N, dtype=dt) if residual else None
    r = min(M, 64)  # rows checked

    @memo
    def gemm64():
        return a[:r].double() @ b.double()

    @memo
    def want():
        y = gemm64() + bias.double()
        y = gelu_tanh64(y) if act == 1 else (y * torch.sigmoid(y) if act == 2 else y)
        return y + res[:r].double() if residual else y

    def first_rows(outs):
        return [(outs[0][:r], want())]

    def eager(a, b, bias, res):
        y = torch.addmm(bias, a, b)
        if act == 1:
            y = F.gelu(y, approximate="tanh")
        elif act == 2:
            y = F.silu(y)
        return y + res if residual else y

    peers = [Peer("torch", lambda: eager(a, b, bias, res), first_rows)]
    if act == 1 and hasattr(torch, "_addmm_activation"):
        def fused():
            y = torch._addmm_activation(bias, a, b, use_gelu=True)  # cuBLASLt GELU is tanh form
            return y.add_(res) if residual else y
        peers.append(Peer("torch._addmm_activation", fused, first_rows))
    if not opts.no_compile:
        comp = compiled(eager, opts)
        peers.append(Peer("torch.compile", lambda: comp(a, b, bias, res), first_rows))
    peers.append(Peer("torch.matmul", lambda: torch.matmul(a, b),
                      lambda outs: [(outs[0][:r], gemm64())], reference=True,
                      note="the GEMM alone (target: tile >= 0.95x)"))
    return peers


def build_batched_gemm(p, dt, R, opts):
    B, M, N, K = p["batch"], p["M"], p["N"], p["K"]
    a, b = R.randn(B, M, K, dtype=dt), R.randn(B, K, N, dtype=dt)
    want = memo(lambda: a[0].double() @ b[0].double())
    return [Peer("torch.bmm", lambda: torch.bmm(a, b), lambda outs: [(outs[0][0], want())])]


def build_grouped_gemm(p, dt, R, opts):
    G, tokens, K, N = p["G"], p["tokens"], p["K"], p["N"]
    per = tokens // G  # SIZES=true: G equal groups of tokens / G rows (full([G], tokens / G))
    a, b = R.randn(tokens, K, dtype=dt), R.randn(G, K, N, dtype=dt)
    offs = (torch.arange(1, G + 1, device=a.device, dtype=torch.int32) * per)
    c = torch.empty(tokens, N, device=a.device, dtype=dt)
    r = min(per, 32)
    first, last = 0, (G - 1) * per  # the first rows of the first and the last group

    @memo
    def want():
        return (a[first:first + r].double() @ b[0].double(),
                a[last:last + r].double() @ b[G - 1].double())

    def expect(outs):
        w0, w1 = want()
        return [(outs[0][first:first + r], w0), (outs[0][last:last + r], w1)]

    def loop():
        for g in range(G):
            torch.matmul(a[g * per:(g + 1) * per], b[g], out=c[g * per:(g + 1) * per])
        return c

    peers = []
    if hasattr(torch, "_grouped_mm"):
        def col_major():
            bt = b.transpose(1, 2).contiguous().transpose(1, 2)  # same values, K-major
            return Peer("torch._grouped_mm colB", lambda: torch._grouped_mm(a, bt, offs=offs),
                        expect, note="B [G, K, N] stored column-major")
        peers.append(Peer("torch._grouped_mm", lambda: torch._grouped_mm(a, b, offs=offs),
                          expect, fallback=col_major))
    peers.append(Peer("torch.loop", loop, expect, note="torch.matmul per group"))
    return peers


def build_small_m(p, dt, R, opts, w_nk):
    M, N, K = p["M"], p["N"], p["K"]
    x = R.randn(M, K, dtype=dt)
    if w_nk:  # nn.Linear's weight [N, K]
        w = R.randn(N, K, dtype=dt)
        want = memo(lambda: x.double() @ w.double().t())
        return [Peer("F.linear", lambda: F.linear(x, w), lambda outs: [(outs[0], want())])]
    w = R.randn(K, N, dtype=dt)
    want = memo(lambda: x.double() @ w.double())
    return [Peer("torch.matmul", lambda: torch.matmul(x, w), lambda outs: [(outs[0], want())])]


def build_fp8_gemm(p, dt, R, opts):
    M, N, K = p["M"], p["N"], p["K"]
    a, b = R.randn(M, K, dtype=dt), R.randn(N, K, dtype=dt)   # both K-major (row-major [., K])
    sa = R.uniform(M, 1, lo=0.25, hi=2.0)                      # rand([M], 0.25, 2) per row of A
    sb = R.uniform(1, N, lo=0.25, hi=2.0)                      # per column of B
    r = min(M, 64)
    want = memo(lambda: (a[:r].double() @ b.double().t()) * sa[:r].double() * sb.double())

    def scaled(fast):
        return lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb,
                                        out_dtype=torch.bfloat16, use_fast_accum=fast)
    expect = lambda outs: [(outs[0][:r], want())]  # noqa: E731
    return [Peer("torch._scaled_mm", scaled(False), expect),
            Peer("torch._scaled_mm fast", scaled(True), expect)]


def build_gqa_attention(p, dt, R, opts):
    B, hq, hkv, S = p.get("b", p.get("B")), p["hq"], p["hkv"], p.get("seq", p.get("S"))
    D, causal = p.get("D", 128), p.get("CAUSAL", False)
    G = hq // hkv
    scale = ATTN_SCALE.get(D, 1.0 / math.sqrt(D))
    q = R.randn(B, hq, S, D, dtype=dt)
    k, v = R.randn(B, hkv, S, D, dtype=dt), R.randn(B, hkv, S, D, dtype=dt)
    heads = sorted({0, G - 1})  # q heads of batch 0 that read kv head 0
    want = memo(lambda: attention64(q[0, heads], k[0, 0], v[0, 0], scale, causal))
    expect = lambda outs: [(outs[0][0, heads], want())]  # noqa: E731
    kw = dict(is_causal=causal, scale=scale)

    def cudnn_repeated():
        kr, vr = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
        run = forced_sdpa("CUDNN_ATTENTION")
        return Peer("torch.sdpa cudnn kv-rep", lambda: run(q, kr, vr, **kw), expect,
                    note="K/V repeated to Hq heads before timing")

    sdpa, flash, cudnn = (F.scaled_dot_product_attention, forced_sdpa("FLASH_ATTENTION"),
                          forced_sdpa("CUDNN_ATTENTION"))
    return [Peer("torch.sdpa", lambda: sdpa(q, k, v, enable_gqa=True, **kw), expect),
            Peer("torch.sdpa flash", lambda: flash(q, k, v, enable_gqa=True, **kw), expect),
            Peer("torch.sdpa cudnn", lambda: cudnn(q, k, v, enable_gqa=True, **kw), expect,
                 fallback=cudnn_repeated)]


def build_decode_split(p, dt, R, opts):
    B, L, D, G = p["batch"], p["seq_len"], p.get("D", 128), p.get("G", 4)
    hkv = p.get("hkv", DECODE_HKV)
    hq = hkv * G
    q = R.randn(B, hq, 1, D, dtype=dt)
    k, v = R.randn(B, hkv, L, D, dtype=dt), R.randn(B, hkv, L, D, dtype=dt)
    # batch 0, every head: head h reads kv head h // G
    want = memo(lambda: torch.stack([attention64(q[0, h], k[0, h // G], v[0, h // G],
                                                 DECODE_SCALE, False) for h in range(hq)]))
    qg = q.view(B, hkv, G, D)  # the G query heads of a kv head as G query rows
    return [
        Peer("torch.sdpa", lambda: F.scaled_dot_product_attention(
            q, k, v, scale=DECODE_SCALE, enable_gqa=True),
            lambda outs: [(outs[0][0], want())], reference=True,
            note="whole attention over contiguous K/V"),
        Peer("torch.sdpa grouped", lambda: F.scaled_dot_product_attention(
            qg, k, v, scale=DECODE_SCALE),
            lambda outs: [(outs[0][0].reshape(hq, 1, D), want())], reference=True,
            note="G query heads folded into rows"),
    ]


def build_decode_combine(p, dt, R, opts):
    B, S, D = p["batch"], p["splits"], p.get("D", 128)
    hq = p.get("hq", DECODE_HQ)
    mid_o = R.randn(B, hq, S, D, dtype=torch.float32)
    mid_lse = R.uniform(B, hq, S, lo=-4.0, hi=4.0)

    def combine(o, lse):
        w = torch.softmax(lse, dim=-1)                      # exp(lse - max) / sum
        return torch.matmul(w.unsqueeze(-2), o).squeeze(-2).to(dt)

    want = memo(lambda: torch.einsum("bhs,bhsd->bhd", torch.softmax(mid_lse.double(), -1),
                                     mid_o.double()))
    expect = lambda outs: [(outs[0], want())]  # noqa: E731
    peers = [Peer("torch", lambda: combine(mid_o, mid_lse), expect)]
    if not opts.no_compile:
        comp = compiled(combine, opts)
        peers.append(Peer("torch.compile", lambda: comp(mid_o, mid_lse), expect))
    return peers


def build_residual_norm(p, dt, R, opts, layer):
    rows, n = p["rows"], p["hidden"]
    eps = 1e-5 if layer else 1e-6
    x, res, w = R.randn(rows, n, dtype=dt), R.randn(rows, n, dtype=dt), R.randn(n, dtype=dt)
    bias = R.randn(n, dtype=dt) if layer else None
    r = min(rows, 256)

    def f32_math(x, res, w, bias):
        h = x.float() + res.float()
        if layer:
            y = F.layer_norm(h, (n,), w.float(), bias.float(), eps)
        else:
            y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.float()
        return y.to(x.dtype), h.to(x.dtype)

    def library(x, res, w, bias):
        h = x + res  # rounded to the storage dtype before the norm
        if layer:
            return F.layer_norm(h, (n,), w, bias, eps), h
        return F.rms_norm(h, (n,), w, eps), h

    @memo
    def want():
        h = x[:r].double() + res[:r].double()
        if layer:
            d = h - h.mean(-1, keepdim=True)
            y = d * torch.rsqrt(d.pow(2).mean(-1, keepdim=True) + eps) * w.double() + bias.double()
        else:
            y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.double()
        return y, h

    def expect(outs):
        y, h = want()
        return [(outs[0][:r], y), (outs[1][:r], h)]

    peers = [Peer("torch", lambda: f32_math(x, res, w, bias), expect)]
    if not opts.no_compile:
        comp = compiled(f32_math, opts)
        peers.append(Peer("torch.compile", lambda: comp(x, res, w, bias), expect))
    if layer or hasattr(F, "rms_norm"):
        peers.append(Peer("torch.layer_norm" if layer else "torch.rms_norm",
                          lambda: library(x, res, w, bias), expect))
    return peers


def build_cross_entropy(p, dt, R, opts):
    rows, V = p["rows"], p["cols"]
    logits = R.randn(rows, V, dtype=dt)
    targets = R.randint(0, V, rows)  # int64: what F.cross_entropy takes (tile's are i32)
    r = min(rows, 256)

    @memo
    def want():
        l = logits[:r].double()
        return torch.logsumexp(l, dim=-1) - l.gather(1, targets[:r, None]).squeeze(1)

    expect = lambda outs: [(outs[0][:r], want())]  # noqa: E731
    peers = [Peer("torch", lambda: F.cross_entropy(logits, targets, reduction="none"), expect)]
    if not opts.no_compile:
        comp = compiled(lambda l, t: F.cross_entropy(l.float(), t, reduction="none"), opts)
        peers.append(Peer("torch.compile", lambda: comp(logits, targets), expect))
    return peers


BUILDERS = {
    "gemm_epilogue": build_gemm_epilogue,
    "batched_gemm": build_batched_gemm,
    "batched_gemm_tma": build_batched_gemm,
    "grouped_gemm": build_grouped_gemm,
    "small_m_gemm": lambda p, dt, R, o: build_small_m(p, dt, R, o, w_nk=False),
    "small_m_gemv": lambda p, dt, R, o: build_small_m(p, dt, R, o, w_nk=True),
    "fp8_gemm": build_fp8_gemm,
    "gqa_attention": build_gqa_attention,
    "gqa_attention_rotated": build_gqa_attention,
    "decode_split": build_decode_split,
    "decode_split_desc": build_decode_split,
    "decode_combine": build_decode_combine,
    "residual_rmsnorm": lambda p, dt, R, o: build_residual_norm(p, dt, R, o, layer=False),
    "residual_layernorm": lambda p, dt, R, o: build_residual_norm(p, dt, R, o, layer=True),
    "cross_entropy": build_cross_entropy,
    "cross_entropy_lanes": build_cross_entropy,
}


# --------------------------------------------------------------------------------------------
# Timing and the run
# --------------------------------------------------------------------------------------------

def bench_ms(fn, warmup, rep):
    """(median, p10, p90) in ms: triton.testing.do_bench (CUDA events, L2 flushed each run)."""
    from triton.testing import do_bench
    r = do_bench(fn, warmup=warmup, rep=rep, quantiles=[0.5, 0.1, 0.9])
    if isinstance(r, (list, tuple)):
        return float(r[0]), float(r[1]), float(r[2])
    return float(r), None, None


def free_memory():
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_peer(peer, case, opts):
    """Checks (first call, which also compiles) and times one peer: its output row."""
    row = {"peer": peer.name, "reference": peer.reference, "median_ms": None, "p10_ms": None,
           "p90_ms": None, "gbps": None, "tflops": None}
    try:
        try:
            ok, msg, err = check(peer)
        except Exception as e:  # noqa: BLE001 - a refused layout or backend: try the fallback
            if peer.fallback is None:
                raise
            first = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            peer = peer.fallback()
            row["peer"] = peer.name
            row["fallback_from"] = first
            ok, msg, err = check(peer)
        row.update(check=msg, check_ok=ok, rel_err=err)
        if peer.note:
            row["note"] = peer.note
        if not opts.dry_run:
            ms, p10, p90 = bench_ms(peer.run, opts.warmup, opts.rep)
            nbytes, flops = num(case.get("bytes")), num(case.get("flops"))
            row.update(median_ms=ms, p10_ms=p10, p90_ms=p90,
                       gbps=nbytes / ms / 1e6 if nbytes else None,
                       tflops=flops / ms / 1e9 if flops else None)
    except Exception as e:  # noqa: BLE001 - record it, keep going
        row.update(check_ok=False, error=f"{type(e).__name__}: {e}"[:2000])
        if opts.verbose:
            traceback.print_exc()
    return row


def meta():
    m = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
         "host": platform.node(), "python": platform.python_version(),
         "torch": torch.__version__, "cuda": torch.version.cuda, "argv": sys.argv}
    try:
        import triton
        m["triton"] = triton.__version__
    except ImportError:
        m["triton"] = None
    if torch.cuda.is_available():
        m["gpu"] = torch.cuda.get_device_name(0)
        m["sm_count"] = torch.cuda.get_device_properties(0).multi_processor_count
    return m


def write_json(path, result):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------
# The table and the summary
# --------------------------------------------------------------------------------------------

def fmt(v, spec):
    """format(v, spec), or a dash as wide as spec asks for when v is None."""
    if v is None:
        width = re.match(r"\d*", spec).group()
        return "-".rjust(int(width or 1))
    return format(v, spec)


def short(label, width=44):
    return label if len(label) <= width else label[:width - 1] + "~"


def usable(row):
    return row.get("median_ms") is not None and not row.get("error") and row.get("check_ok", True)


def peer_cell(r, tms):
    """`compile 0.123 (1.05x)`: a peer's ms and ratio; `*` marks a reference peer, `!` a failed
    check, `~` a fallback layout or backend."""
    name = r["peer"]
    for prefix in ("torch._", "torch."):
        if name.startswith(prefix) and name != "torch":
            name = name[len(prefix):]
            break
    name = name.replace(" ", "-") + ("*" if r.get("reference") else "") + (
        "~" if r.get("fallback_from") else "")
    if r.get("skipped"):
        return f"{name} skipped"
    if r.get("error"):
        return f"{name} ERROR"
    ms = r.get("median_ms")
    if ms is None:  # dry run: checked, not timed
        return f"{name} {'ok' if r.get('check_ok', True) else 'CHECK-FAILED'}"
    bad = "" if r.get("check_ok", True) else "!"
    ratio = f" ({ms / tms:.2f}x)" if tms else ""
    return f"{name}{bad} {ms:.4f}{ratio}"


def print_table(cases, rows_by_key, multi_file):
    """One line per tile case: tile's ms, % of copy bandwidth and TFLOP/s, then each peer's ms
    and peer_ms / tile_ms."""
    print()
    print("peer ms (peer_ms / tile_ms: >1 tile faster); * reference peer (not the same problem), "
          "! check failed, ~ fallback")
    print(f"{'kernel':25s} {'dtype':6s} {'label':44s} {'tile ms':>9s} {'%copy':>6s} "
          f"{'TFLOP/s':>7s}  peers")
    for c in cases:
        key = (c.get("kernel"), c.get("dtype"), c.get("label"))
        tms, copy = num(c.get("median_ms")), c.get("_copy_gbps")
        pct = 100 * c["gbps"] / copy if num(c.get("gbps")) and copy else None
        tflops = num(c.get("tflops")) or None  # 0 for memory-bound cases
        name = c["kernel"] + (f" [{c['_file']}]" if multi_file else "")
        rows = rows_by_key.get(key)
        cells = " | ".join(peer_cell(r, tms) for r in rows) if rows else "(no peer here)"
        print(f"{name:25s} {c.get('dtype', '?'):6s} {short(c.get('label', '')):44s} "
              f"{fmt(tms, '9.4f')} {fmt(pct, '5.1f')}% {fmt(tflops, '7.1f')}  {cells}")
    errs = [r for rows in rows_by_key.values() for r in rows if r.get("error")]
    for r in errs[:6]:
        print(f"  error: {r['kernel']} {short(r['label'], 40)} {r['peer']}: "
              f"{r['error'].splitlines()[0][:110]}")
    if len(errs) > 6:
        print(f"  .. {len(errs) - 6} more errors in the JSON")


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def print_summary(cases, rows_by_key, title):
    """Per category: tile's ratio to its fastest same-problem peer (reference peers where a
    category has no other), and for gemm_epilogue the ratio to the GEMM alone."""
    print()
    print(f"summary{title}: best peer ms / tile ms (>1: tile faster than every peer; "
          f"<1: a peer wins)")
    cats = {}
    gemm_alone, hbm = [], {}
    for c in cases:
        key = (c.get("kernel"), c.get("dtype"), c.get("label"))
        tms = num(c.get("median_ms"))
        rows = [r for r in rows_by_key.get(key, []) if usable(r)]
        if not tms or not rows:
            continue
        same = [r for r in rows if not r.get("reference")]
        pool, ref_only = (same, False) if same else (rows, True)
        best = min(pool, key=lambda r: r["median_ms"])
        cat = CATEGORY.get(c["kernel"], c["kernel"])
        cats.setdefault(cat, []).append((best["median_ms"] / tms, best["peer"], c, ref_only))
        if c["kernel"] == "gemm_epilogue":
            mm = [r for r in rows if r["peer"] == "torch.matmul"]
            if mm:
                gemm_alone.append((mm[0]["median_ms"] / tms, c))
        if c["kernel"].startswith("decode_split") and num(c.get("gbps")) and c.get("_copy_gbps"):
            hbm.setdefault(c["kernel"], []).append(c["gbps"] / c["_copy_gbps"])
    for cat, items in cats.items():
        ratios = [x[0] for x in items]
        lo = min(items, key=lambda x: x[0])
        hi = max(items, key=lambda x: x[0])
        ref = " (reference peers only)" if all(x[3] for x in items) else ""
        print(f"  {cat:17s} n={len(items):2d}  geomean {geomean(ratios):5.2f}x  "
              f"best {hi[0]:5.2f}x  worst {lo[0]:5.2f}x ({lo[2]['kernel']} {lo[2]['label']} "
              f"vs {lo[1]}){ref}")
    if gemm_alone:
        worst = min(gemm_alone, key=lambda x: x[0])
        print(f"  gemm_epilogue vs torch.matmul (GEMM alone): geomean "
              f"{geomean([x[0] for x in gemm_alone]):.2f}x, worst {worst[0]:.2f}x "
              f"({worst[1]['label']}); target >= 0.95x")
    for k, shares in hbm.items():
        lo, hi = round(100 * min(shares)), round(100 * max(shares))
        span = f"{lo}%" if lo == hi else f"{lo}-{hi}%"
        print(f"  {k}: tile at {span} of the copy bandwidth (HBM share; target >= 85%)")


# --------------------------------------------------------------------------------------------

def run_case(c, opts, device, compile_pass):
    """The rows of one tile case: the eager peers (first pass) or the torch.compile ones."""
    kernel, dt_name, label = c["kernel"], c.get("dtype"), c.get("label") or ""
    tms = num(c.get("median_ms"))
    base = {"kernel": kernel, "dtype": dt_name, "label": label, "bytes": c.get("bytes"),
            "flops": c.get("flops"), "tile_ms": tms}
    if kernel.startswith("decode") and num(c.get("gbps")) and c.get("_copy_gbps"):
        base["tile_hbm_share"] = c["gbps"] / c["_copy_gbps"]
    rows = []
    peers = None
    try:
        params = parse_label(label)
        if opts.dry_run:
            params = shrink(params)
        seed = zlib.crc32(repr((kernel, dt_name, label)).encode())  # same inputs in both passes
        peers = BUILDERS[kernel](params, DTYPES[dt_name], Rand(device, seed), opts)
        for peer in peers:
            if peer.name.startswith("torch.compile") != compile_pass:
                continue
            row = dict(base)
            if compile_pass and opts.budget and time.monotonic() - T0 > opts.budget:
                row.update(peer=peer.name, reference=peer.reference, median_ms=None,
                           skipped=f"over the time budget ({opts.budget:.0f} s)")
            else:
                row.update(run_peer(peer, c, opts))
            ms = row.get("median_ms")
            row["ratio"] = ms / tms if ms and tms else None
            rows.append(row)
            print(f"{kernel:25s} {dt_name:6s} {short(label, 44):44s} {row['peer']:26s} "
                  f"{fmt(ms, '9.4f')} ms  {fmt(row['ratio'], '5.2f')}x  "
                  f"{(row.get('error') or row.get('skipped') or row.get('check', ''))[:80]}",
                  flush=True)
    except Exception as e:  # noqa: BLE001 - a case that cannot be built: record, go on
        row = dict(base)
        row.update(peer="*", check_ok=False, error=f"{type(e).__name__}: {e}"[:2000])
        rows.append(row)
        print(f"{kernel:25s} {dt_name:6s} {short(label, 44):44s} setup failed: "
              f"{row['error'][:100]}", flush=True)
        if opts.verbose:
            traceback.print_exc()
    peers = None
    free_memory()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tile", nargs="*", help="tile JSON files (tilec bench --json)")
    ap.add_argument("--json", default=None, help="where to write the peers' rows")
    ap.add_argument("--warmup", type=float, default=25.0, help="do_bench warm-up, ms")
    ap.add_argument("--rep", type=float, default=100.0, help="do_bench repetition time, ms")
    ap.add_argument("--only", default="", help="comma-separated kernels (default: all)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile peers")
    ap.add_argument("--budget", type=float, default=180.0,
                    help="seconds from start after which no new case or torch.compile peer "
                         "starts (0: no limit); the table is printed either way")
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU, small shapes, each peer run and checked once, nothing timed")
    ap.add_argument("--verbose", action="store_true", help="print tracebacks of failing peers")
    opts = ap.parse_args()

    if opts.tile:
        cases = load_tile(opts.tile)
    elif opts.dry_run:
        cases = [{"kernel": k, "dtype": d, "label": l, "_file": 0, "_copy_gbps": None}
                 for k, d, l in EXAMPLE_CASES]
    else:
        ap.error("give at least one tile JSON file (or --dry-run)")
    if not opts.dry_run:
        if not opts.json:
            ap.error("--json OUT.json is required (except with --dry-run)")
        if not torch.cuda.is_available():
            sys.exit("no CUDA device (use --dry-run to test the builders on the CPU)")
    only = {s.strip() for s in opts.only.split(",") if s.strip()}
    if only:
        cases = [c for c in cases if c.get("kernel") in only]
    device = "cpu" if opts.dry_run else "cuda"

    result = {"meta": meta(),
              "settings": {"warmup_ms": opts.warmup, "rep_ms": opts.rep, "dry_run": opts.dry_run,
                           "budget_s": opts.budget,
                           "timer": "triton.testing.do_bench, quantiles 0.5/0.1/0.9"},
              "tile_files": [os.path.abspath(p) for p in opts.tile],
              "ceilings": {"copy_gbps": next((c["_copy_gbps"] for c in cases
                                              if c.get("_copy_gbps")), None)},
              "cases": []}
    print(f"# {result['meta'].get('gpu', device)}, torch {torch.__version__}, "
          f"triton {result['meta']['triton']}, {len(cases)} tile cases"
          + (" (dry run: CPU, small shapes, no timing)" if opts.dry_run else ""), flush=True)

    # One entry per (kernel, dtype, label): several tile files share the peers' timings.
    unique = {}
    for c in cases:
        key = (c.get("kernel"), c.get("dtype"), c.get("label"))
        if c.get("kernel") in BUILDERS and key not in unique:
            unique[key] = c
    rows_by_key = {}

    def save():
        result["cases"] = [r for rows in rows_by_key.values() for r in rows]
        if opts.json:
            write_json(opts.json, result)

    # Pass 1: every case's eager and library peers (fast), so a short budget still covers all.
    for key, c in unique.items():
        if opts.budget and time.monotonic() - T0 > opts.budget:
            rows_by_key[key] = [{"kernel": key[0], "dtype": key[1], "label": key[2], "peer": "*",
                                 "median_ms": None,
                                 "skipped": f"over the time budget ({opts.budget:.0f} s)"}]
        else:
            rows_by_key[key] = run_case(c, opts, device, compile_pass=False)
        save()
    # Pass 2: torch.compile peers (each compile takes seconds), the memory-bound fusions first.
    if not opts.no_compile:
        todo = sorted((k for k in unique if k[0] in COMPILE_ORDER and any(
            r.get("peer") != "*" for r in rows_by_key[k])), key=lambda k: COMPILE_ORDER.index(k[0]))
        for key in todo:
            rows_by_key[key].extend(run_case(unique[key], opts, device, compile_pass=True))
            save()

    print_table(cases, rows_by_key, multi_file=len(opts.tile) > 1)
    if len(opts.tile) > 1:  # one summary per tile file: each is its own run of the cases
        for i, path in enumerate(opts.tile):
            print_summary([c for c in cases if c["_file"] == i], rows_by_key, f" [{i}] {path}")
    else:
        print_summary(cases, rows_by_key, "")
    rows = result["cases"]
    bad = [r for r in rows if r.get("error") or not r.get("check_ok", True)]
    skipped = [r for r in rows if r.get("skipped")]
    no_peer = sorted({c.get("kernel") for c in cases if c.get("kernel") not in BUILDERS})
    print(f"\n{len(rows)} peer rows, {len(bad)} with errors or failed checks, "
          f"{len(skipped)} skipped (time budget), {time.monotonic() - T0:.0f} s"
          + (f"; no peer here for: {', '.join(no_peer)}" if no_peer else "")
          + (f"; wrote {opts.json}" if opts.json else ""))


if __name__ == "__main__":
    main()
