#!/usr/bin/env bash
# attention_rotated at 128 x 8192, head dim 128, non-causal: 2 against 3 stages, alternated
# (run 64's sweep put 3 stages at 6.75 ms and 2 at 7.54; run 53 had them the other way round),
# with torch SDPA in the middle.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
python3 - <<'PY'
a = open("dsl-examples/attention.tile").read()
i = a.index("#[warps(8, 4)]\n#[stages(2, 3)]\nkernel attention_rotated<")
k = a[i:a.index("\n}\n", i) + 3]
spec = """
run NAME {
    bench(bh: [128], seq: [8192]);
    consts(T: bf16, D: 128, CAUSAL: false, BM: 128, BN: 128);
    grid(cdiv(seq, BM), bh);
    args(q: randn([bh, seq, D]), k: randn([bh, seq, D]), v: randn([bh, seq, D]), o: output([bh, seq, D]), seq: seq, rows: bh * seq, scale: 0.088);
    flops(4 * bh * seq * seq * D);
}
"""
out = ""
for s in (2, 3):
    name = f"rotated_s{s}"
    out += k.replace("#[warps(8, 4)]\n#[stages(2, 3)]", f"#[warps(8)]\n#[stages({s})]").replace("attention_rotated", name) + spec.replace("NAME", name) + "\n"
open("/tmp/rot_stages.tile", "w").write(out)
PY
for r in 1 2 3; do timeout 40 $T bench /tmp/rot_stages.tile --config spec --runs 10 > $OUT/bench-$r.log 2>&1; grep -E "^rotated" $OUT/bench-$r.log | cut -c1-90; done
timeout 90 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "bh=128.*torch" $OUT/peers.log
for r in 4 5 6; do timeout 40 $T bench /tmp/rot_stages.tile --config spec --runs 10 > $OUT/bench-$r.log 2>&1; grep -E "^rotated" $OUT/bench-$r.log | cut -c1-90; done
date -u +%FT%TZ
