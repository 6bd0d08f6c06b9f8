"""Base build against the new one, and both peers, per case: python3 table.py DIR."""
import json
import sys

d = sys.argv[1]
base = {(c["kernel"], c["dtype"], c["label"]): c for c in json.load(open(f"{d}/bench-base.json"))["cases"]}
new = json.load(open(f"{d}/bench-new.json"))["cases"]
peers = {}
for c in json.load(open(f"{d}/peers.json"))["cases"]:
    peers[(c["kernel"], c["dtype"], c["label"], c["peer"])] = c["median_ms"]
print(f"{'kernel':16} {'dt':5} {'case':24} {'base':>7} {'new':>7} {'b/n':>5} {'%copy':>6} {'triton':>7} {'t/n':>5} {'tcomp':>7} {'tc/n':>5}  config")
for c in new:
    k = (c["kernel"], c["dtype"], c["label"])
    b = base.get(k, {}).get("median_ms")
    fam = c["kernel"].split("_")[0]
    lab = " ".join(w for w in c["label"].split() if not w.startswith("N="))
    tri = peers.get((fam, c["dtype"], lab, "triton"))
    tc = peers.get((fam, c["dtype"], lab, "torch.compile"))
    n = c["median_ms"]
    pct = 100 * c["same_size_copy_gbps"] and 100 * c["gbps"] / c["same_size_copy_gbps"]
    f = lambda v: f"{v:7.4f}" if v else "      -"
    r = lambda a: f"{a / n:5.2f}" if a else "    -"
    print(f"{c['kernel']:16} {c['dtype']:5} {lab:24} {f(b)} {f(n)} {r(b)} {pct:5.1f}% {f(tri)} {r(tri)} {f(tc)} {r(tc)}  {c['config']}")
