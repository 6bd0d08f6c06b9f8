#!/usr/bin/env python3
"""Joins tile's results with the peers' (bench/peers.py) and prints one markdown table.

    python3 bench/report.py TILE.json PEERS.json [--launch LAUNCH.json] [--out report.md]

Standard library only. The plot is drawn by the Rust side: `cargo run --release -p
tile-bench-plot -- TILE.json PEERS.json --out bandwidth.png`. LAUNCH.json is what
`launch_overhead --json` writes: tile's launch overhead and its JIT's disk-cache hit time.
Speedups are peer time / tile time: above 1 means tile is faster.
"""

import argparse
import json
import sys

PEER_COLS = ("triton", "torch", "torch.compile")
# The tile case whose compile time stands next to each of Triton's compile timings.
COMPILE_CASES = {
    "softmax": ("softmax", "f32", "rows=4096 cols=4096"),
    "matmul": ("matmul", "bf16", "M=4096 N=4096 K=4096"),
}


def load(path):
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, list):  # a bare list of cases is accepted too
        data = {"cases": data}
    data.setdefault("cases", [])
    data.setdefault("ceilings", {})
    return data


def num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def f_ms(v):
    v = num(v)
    if v is None:
        return "—"
    return f"{v:.4f}" if v < 1 else f"{v:.3f}"


def f_cms(v):
    v = num(v)
    if v is None:
        return "—"
    return f"{v:.0f} ms" if v >= 100 else f"{v:.1f} ms"


def f_x(peer_ms, tile_ms):
    p, t = num(peer_ms), num(tile_ms)
    if p is None or t is None or t <= 0:
        return "—"
    return f"{p / t:.2f}×"


def rate(case):
    """(value, unit) of the case's headline rate: TFLOP/s when it has flops, else GB/s."""
    flops = num(case.get("flops"))
    ms = num(case.get("median_ms"))
    if flops:
        v = num(case.get("tflops"))
        if v is None and ms:
            v = flops / ms / 1e9
        return v, "TFLOP/s"
    v = num(case.get("gbps"))
    if v is None and ms and num(case.get("bytes")):
        v = case["bytes"] / ms / 1e6
    return v, "GB/s"


def main():
    ap = argparse.ArgumentParser(description="tile vs Triton vs torch: one markdown table")
    ap.add_argument("tile", help="tile's results JSON")
    ap.add_argument("peers", help="bench/peers.py's JSON")
    ap.add_argument("--launch", default=None, help="launch_overhead --json output")
    ap.add_argument("--no-plot", action="store_true", help="accepted for old scripts; plots are drawn by tile-plot")
    ap.add_argument("--out", default=None, help="also write the markdown to this file")
    args = ap.parse_args()

    tile = load(args.tile)
    peers = load(args.peers)
    tcase = {(c.get("kernel"), c.get("dtype"), c.get("label")): c for c in tile["cases"]}
    pcase = {}
    order = []
    for c in peers["cases"]:
        key = (c.get("kernel"), c.get("dtype"), c.get("label"))
        if key not in pcase:
            pcase[key] = {}
            order.append(key)
        pcase[key][c.get("peer")] = c
    for key in tcase:
        if key not in pcase:
            order.append(key)

    # ceilings: tile's own run first (same run as its numbers), else the peers' run
    tc, pc = tile["ceilings"], peers["ceilings"]
    copy_gbps = num(tc.get("copy_gbps")) or num(pc.get("copy_gbps"))
    mm_tflops = num(tc.get("matmul_tflops")) or num(pc.get("matmul_tflops"))

    lines = []
    m = peers.get("meta", {})
    tm = tile.get("meta", {})
    lines.append(f"# tile vs Triton vs PyTorch — {m.get('date', '?')}")
    lines.append("")
    lines.append(f"GPU: {m.get('gpu', tm.get('gpu', '?'))}, driver {m.get('driver', '?')}, "
                 f"CUDA {m.get('cuda', '?')}, torch {m.get('torch', '?')}, "
                 f"triton {m.get('triton', '?')}"
                 + (f"; tile run: {tm.get('date')}" if tm.get("date") else ""))
    cl = []
    if num(tc.get("copy_gbps")):
        cl.append(f"copy {tc['copy_gbps']:.0f} GB/s (tile run)")
    if num(pc.get("copy_gbps")):
        cl.append(f"copy {pc['copy_gbps']:.0f} GB/s (peer run)")
    if num(tc.get("matmul_tflops")):
        cl.append(f"bf16 matmul {tc['matmul_tflops']:.0f} TFLOP/s (tile run)")
    if num(pc.get("matmul_tflops")):
        cl.append(f"bf16 matmul {pc['matmul_tflops']:.0f} TFLOP/s "
                  f"(torch.matmul {pc.get('matmul_size', '?')}³, peer run)")
    lines.append("Ceilings: " + ("; ".join(cl) if cl else "none recorded"))
    lines.append("")
    lines.append("Times are medians in ms. Speedup = peer ms / tile ms (>1: tile is faster). "
                 "% ceiling: GB/s over the copy ceiling, or TFLOP/s over the bf16 matmul ceiling. "
                 "A peer whose correctness check failed is marked ✗.")
    lines.append("")
    lines.append("| kernel | dtype | size | tile ms | tile rate | % ceiling | Triton ms | "
                 "torch ms | torch.compile ms | vs Triton | vs torch | vs torch.compile |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in order:
        kernel, dtype, label = key
        t = tcase.get(key, {})
        ps = pcase.get(key, {})
        tms = num(t.get("median_ms"))
        v, unit = rate(t) if t else (None, "")
        if v is None and ps:  # unit from the peers when tile has no row
            unit = "TFLOP/s" if any(num(p.get("flops")) for p in ps.values()) else "GB/s"
        ceil = mm_tflops if unit == "TFLOP/s" else copy_gbps
        pct = f"{100 * v / ceil:.0f}%" if v is not None and ceil else "—"
        rate_s = f"{v:.1f} {unit}" if v is not None and unit == "TFLOP/s" else (
            f"{v:.0f} {unit}" if v is not None else "—")

        def pms(name):
            p = ps.get(name)
            if p is None:
                return "", None
            ms = num(p.get("median_ms"))
            mark = "" if p.get("check_ok", True) else " ✗"
            return (f_ms(ms) + mark if ms is not None else ("error" if p.get("error") else "—")
                    + mark), ms

        cells = [pms(n) for n in PEER_COLS]
        lines.append("| " + " | ".join([
            kernel, dtype, label, f_ms(tms), rate_s, pct,
            cells[0][0] or "—", cells[1][0] or "—", cells[2][0] or "—",
            f_x(cells[0][1], tms), f_x(cells[1][1], tms), f_x(cells[2][1], tms)]) + " |")

    # launch overhead and compile time, as rows of the same table
    launch = {}
    if args.launch:
        with open(args.launch) as f:
            launch = json.load(f)
        tile["launch_us"] = launch.get("jit_us")
    # tile cold = `tilec bench`'s own compile of that case (check, LLVM, ptxas, load);
    # cached = the JIT's disk-cache hit (launch_overhead, vector_add).
    tile.setdefault("compile_ms", {})
    for name, key in COMPILE_CASES.items():
        c = tcase.get(key)
        if c and num(c.get("compile_ms")) is not None:
            tile["compile_ms"][name] = {"cold": c["compile_ms"], "cached": num(launch.get("disk_ms"))}
    tl_us = tile.get("launch_us")
    pl = peers.get("launch_us") or {}
    if isinstance(tl_us, dict):  # tolerate {"tile": x} or similar
        tl_us = next((num(x) for x in tl_us.values() if num(x) is not None), None)
    tl_us = num(tl_us)
    if tl_us is not None or pl:
        tr, to = num(pl.get("triton")), num(pl.get("torch"))
        lines.append("| " + " | ".join([
            "launch overhead", "—", "µs per launch (host)",
            f"{tl_us:.1f} µs" if tl_us is not None else "—",
            f"raw driver {launch['raw_us']:.1f} µs" if num(launch.get("raw_us")) is not None else "—", "—",
            f"{tr:.1f} µs" if tr is not None else "—",
            f"{to:.1f} µs (eager)" if to is not None else "—", "—",
            f_x(tr, tl_us), f_x(to, tl_us), "—"]) + " |")
    tcomp = tile.get("compile_ms") or {}
    pcomp = peers.get("compile_ms") or {}
    for name in list(dict.fromkeys(list(tcomp) + list(pcomp))):
        tv, pv = tcomp.get(name), pcomp.get(name) or {}
        for which in ("cold", "cached"):
            t_ms = num(tv.get(which)) if isinstance(tv, dict) else (num(tv) if which == "cold"
                                                                    else None)
            p_ms = num(pv.get(which))
            if t_ms is None and p_ms is None:
                continue
            lines.append("| " + " | ".join([
                f"compile {name}", "—", which,
                f_cms(t_ms), "—", "—", f_cms(p_ms), "—", "—",
                f_x(p_ms, t_ms), "—", "—"]) + " |")

    missing_t = [k for k in order if k not in tcase]
    missing_p = [k for k in order if k not in pcase]
    if missing_t or missing_p:
        lines.append("")
        if missing_t:
            lines.append(f"No tile result for {len(missing_t)} case(s): "
                         + "; ".join(" ".join(k) for k in missing_t))
        if missing_p:
            lines.append(f"No peer result for {len(missing_p)} case(s): "
                         + "; ".join(" ".join(k) for k in missing_p))
    bad = [(k, n, p) for k, ps in pcase.items() for n, p in ps.items() if not p.get("check_ok", True)]
    if bad:
        lines.append("")
        lines.append("Failed peer checks / errors:")
        for k, n, p in bad:
            lines.append(f"- {' '.join(k)} {n}: {p.get('check') or p.get('error')}")

    if tcomp:
        lines.append("")
        lines.append("tile's compile times: cold = source → loaded cubin for that case in `tilec bench` "
                     "(parse, check, LLVM, ptxas, driver load; LLVM already initialised, as Triton's "
                     "child process initialises its driver first); cached = the JIT's disk-cache hit "
                     "(read, check, driver load) measured on vector_add by launch_overhead.")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")



if __name__ == "__main__":
    main()
