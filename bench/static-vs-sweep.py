#!/usr/bin/env python3
"""Scores the static model against exhaustive sweeps, without a GPU.

    python3 bench/static-vs-sweep.py tune-softmax.json tune-rmsnorm.json ...

Each file is `tilec tune --all-candidates --json` output: every feasible candidate's measured
median for one bench case. For each case this runs `tilec explain --case LABEL` on the same
file and case (its fixed values as -D pins) and looks up the time of the candidate the *current*
model chooses, so a change to the model can be scored on measured data before the next GPU run.
`at sweep` is the ratio of the choice the model made when the sweep ran.
"""
import glob
import json
import re
import subprocess
import sys

TILEC = "./target/release/tilec"

def example_of(kernel):
    """The example or corpus file that defines `kernel` (sweeps are named after runs or
    kernels, not files)."""
    for path in sorted(glob.glob("dsl-examples/*.tile") + glob.glob("bench/corpus/*.tile")):
        if re.search(rf"^kernel {re.escape(kernel)}\b", open(path).read(), re.M):
            return path
    sys.exit(f"no file in dsl-examples/ or bench/corpus/ defines kernel `{kernel}`")

def main():
    worst = 0.0
    for path in sys.argv[1:]:
        doc = json.load(open(path))
        for c in (c for c in doc.get("cases", []) if "candidates" in c):
            times = {x["config"]: x["median_ms"] for x in c["candidates"] if x["median_ms"]}
            # Names whose value differs between candidates were tuned: not pinned here.
            values = {}
            for cfg in times:
                for part in cfg.split():
                    n, v = part.split("=", 1)
                    values.setdefault(n, set()).add(v)
            best = min(times.values())
            # Values every candidate shares (dtypes, D, CAUSAL, values computed from the sizes).
            pins = [a for n, vs in sorted(values.items()) if len(vs) == 1 and n not in ("warps", "stages")
                    for a in ("-D", f"{n}={next(iter(vs))}")]
            args = [TILEC, "explain", example_of(c["kernel"]), "--kernel", c["kernel"], "--case", c["case"]] + pins
            r = subprocess.run(args, capture_output=True, text=True)
            m = re.search(r"^chosen: (.*)$", r.stdout, re.M)
            if not m:
                print(f"{' '.join(args)}: {r.stderr.strip()}")
                continue
            chosen = m.group(1).strip()
            ms = times.get(chosen)
            ratio = ms / best if ms else float("nan")
            worst = max(worst, ratio) if ms else worst
            then = times.get(c.get("static")) if c.get("static") else None
            was = f"{then / best:.3f}" if then else "-"
            print(f"{c['kernel']:<11} {c['case']:<52} static {chosen:<45} "
                  f"{'%.4f' % ms if ms else 'not swept':>9} best {best:.4f} ratio {ratio:.3f} (at sweep {was})")
    print(f"worst ratio {worst:.3f}")

if __name__ == "__main__":
    main()
