#!/usr/bin/env bash
# Ping-pong between consumer warpgroups: verify tests/gpu/pingpong.tile, racecheck/synccheck on
# its last sizes, attention_rotated at head dim 128 with and without turns next to torch SDPA
# (A, B, peers, A, B), then persistent attention with heads fastest (the twelfth session's next/run2.sh).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
python3 - <<'PY'
import re
s = open("tests/gpu/pingpong.tile").read()
s = re.sub(r"sizes\(([^)]*)\)", lambda m: "sizes(" + ", ".join(
    p.split(":")[0] + ": [" + p.split("[")[1].rstrip("]").split(",")[-1].strip() + "]" for p in re.findall(r"\w+: \[[^\]]*\]", m.group(1))) + ")", s)
open("/tmp/pp_san.tile", "w").write(s)
# 128-key blocks at head dim 128 (the bench's), on aligned launches only (the fallback spills).
open("/tmp/pp_128.tile", "w").write(open("tests/gpu/pingpong.tile").read() + """
run attention_pingpong {
    sizes(bh: [3, 2], seq: [256, 400]);
    consts(T: bf16, D: 128, CAUSAL: [false, true], BM: 128, BN: 128);
    grid(cdiv(seq, BM), bh);
    args(q: randn([bh, seq, D]), k: randn([bh, seq, D]), v: randn([bh, seq, D]), o: output([bh, seq, D]), seq: seq, rows: bh * seq, scale: 0.088);
    reference(attention);
    tolerance(rtol: 1.6e-2, atol: 1.6e-2);
}
""")
a = open("dsl-examples/attention.tile").read()
i = a.index("#[warps(8, 4)]\n#[stages(2, 3)]\nkernel attention_rotated<")
k = a[i:a.index("\n}\n", i) + 3]
j = a.index("run attention_rotated {\n    // `tilec bench` only")
r = a[j:a.index("\n}\n", j) + 3]
off = (k + "\n" + r).replace("attention_rotated", "attention_nopp").replace(
    "    for start_n in (BN..hi).step_by(BN) {", "    #[pingpong(false)]\n    for start_n in (BN..hi).step_by(BN) {")
assert "#[pingpong(false)]" in off
open("/tmp/att_ab.tile", "w").write(k + "\n" + r + "\n" + off)
PY
timeout 170 $T verify /tmp/pp_128.tile > $OUT/v-pp.log 2>&1; echo "pingpong.tile + BN 128: rc $? $(grep -E '^verify' $OUT/v-pp.log)"; grep -E "FAIL" $OUT/v-pp.log | head -5
date -u +%FT%TZ
B="$T bench /tmp/att_ab.tile --config spec --runs 10"
timeout 60 $B > $OUT/bench-a1.log 2>&1; grep -E "^attention" $OUT/bench-a1.log | cut -c1-96
timeout 90 python3 bench/peers.py --only attention,matmul --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "torch" $OUT/peers.log | head -10
timeout 60 $B > $OUT/bench-a2.log 2>&1; grep -E "^attention" $OUT/bench-a2.log | cut -c1-96
date -u +%FT%TZ
for tool in racecheck synccheck; do timeout 60 compute-sanitizer --tool $tool $T verify /tmp/pp_san.tile > $OUT/san-$tool.log 2>&1; echo "$tool rc $?: $(grep -E '^verify|ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san-$tool.log | tr '\n' ' ')"; done
date -u +%FT%TZ
python3 - <<'PY'
s = open("tests/gpu/persistent.tile").read()
a = s.index("#[warps(8, 4)]\n#[stages(2, 3)]\n#[grid(min(cdiv(seq, BM) * heads, PROGRAMS))]")
k = s[a:]
v = k.replace("kernel attention_persistent<", "kernel attention_heads_first<").replace("run attention_persistent {", "run attention_heads_first {")
v = v.replace("        let bm = tile % blocks;\n", "        let bm = tile / heads;\n").replace("        let row0 = (tile / blocks) * seq;\n", "        let row0 = (tile % heads) * seq;\n")
assert "tile / heads" in v and "tile % heads" in v
open("/tmp/att_heads.tile", "w").write(k + "\n" + v)
PY
timeout 80 $T verify /tmp/att_heads.tile > $OUT/v-heads.log 2>&1; echo "persistent + heads first: rc $? $(grep -E '^verify' $OUT/v-heads.log)"; grep FAIL $OUT/v-heads.log | head -3
timeout 80 $T bench /tmp/att_heads.tile --config spec --runs 10 > $OUT/bench-heads.log 2>&1; grep -E "^attention" $OUT/bench-heads.log | cut -c1-96
date -u +%FT%TZ
