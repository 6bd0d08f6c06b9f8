#!/usr/bin/env bash
# attention_tma (one key block per iteration, no overlap within a warpgroup) at head dim 128
# with and without `#[pingpong]` (A, B, A, B), verified first; then the tests/gpu files run 61's
# cap cut short (TMA stores in warp_specialize.tile and persistent.tile).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
python3 - <<'PY'
a = open("dsl-examples/attention.tile").read()
i = a.index("#[warps(8, 4)]\n#[stages(2, 3)]\nkernel attention_tma<")
k = a[i:a.index("\n}\n", i) + 3].replace("#[warps(8, 4)]", "#[warps(8)]")
loop = "    for start_n in (0..hi).step_by(BN) {"
assert loop in k
bench = """
run NAME {
    bench(bh: [16], seq: [8192]);
    consts(T: bf16, D: 128, CAUSAL: [false, true], BM: 128, BN: [64, 128]);
    grid(cdiv(seq, BM), bh);
    args(q: randn([bh, seq, D]), k: randn([bh, seq, D]), v: randn([bh, seq, D]), o: output([bh, seq, D]), seq: seq, rows: bh * seq, scale: 0.088);
    flops(4 * bh * seq * seq * D / (1 + CAUSAL));
}
run NAME {
    sizes(bh: [3], seq: [400]);
    consts(T: bf16, D: 128, CAUSAL: [false, true], BM: 128, BN: [64, 128]);
    grid(cdiv(seq, BM), bh);
    args(q: randn([bh, seq, D]), k: randn([bh, seq, D]), v: randn([bh, seq, D]), o: output([bh, seq, D]), seq: seq, rows: bh * seq, scale: 0.088);
    reference(attention);
    tolerance(rtol: 1.6e-2, atol: 1.6e-2);
}
"""
ws = k.replace(loop, "    #[warp_specialize]\n" + loop).replace("attention_tma", "attention_ws")
pp = k.replace(loop, "    #[warp_specialize]\n    #[pingpong]\n" + loop).replace("attention_tma", "attention_pp")
open("/tmp/tma_ab.tile", "w").write(ws + bench.replace("NAME", "attention_ws") + "\n" + pp + bench.replace("NAME", "attention_pp"))
m = open("dsl-examples/matmul.tile").read()
i = m.index("#[warps(8, 4)]\n#[stages(4, 3, 2)]\nkernel matmul_tma<")
k = m[i:m.index("\n}\n", i) + 3]
j = m.index("run matmul_tma {\n    // `tilec bench` only")
r = m[j:m.index("\n}\n", j) + 3]
loop = "    for k in 0..cdiv(K, BK) {"
assert loop in k
pp = (k + "\n" + r).replace("matmul_tma", "matmul_pp").replace(loop, "    #[warp_specialize]\n    #[pingpong]\n" + loop)
open("/tmp/mm_ab.tile", "w").write(k + "\n" + r + "\n" + pp)
PY
timeout 60 $T verify /tmp/tma_ab.tile > $OUT/v-ab.log 2>&1; echo "verify A/B: rc $? $(grep -E '^verify' $OUT/v-ab.log)"; grep FAIL $OUT/v-ab.log | head -3
for r in 1 2; do timeout 60 $T bench /tmp/tma_ab.tile --config spec --runs 10 > $OUT/bench-ab$r.log 2>&1; grep -E "^attention" $OUT/bench-ab$r.log | cut -c1-100; done
timeout 40 $T bench /tmp/mm_ab.tile --config spec --runs 20 > $OUT/bench-mm.log 2>&1; grep -E "^matmul" $OUT/bench-mm.log | cut -c1-100
date -u +%FT%TZ
timeout 250 $T verify tests/gpu/warp_specialize.tile tests/gpu/persistent.tile tests/gpu/tensor_cores.tile tests/gpu/tuple_reduce.tile tests/gpu/random.tile tests/gpu/reproducers.tile > $OUT/v-rest.log 2>&1; echo "tests/gpu rest: rc $? $(grep -E '^verify' $OUT/v-rest.log) ($(grep -c '^  ok' $OUT/v-rest.log) ok lines)"; grep -E "FAIL" $OUT/v-rest.log | head -3
grep -E "^tests/gpu" $OUT/v-rest.log | tr '\n' ' '; echo
date -u +%FT%TZ
