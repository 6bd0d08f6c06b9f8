#!/usr/bin/env bash
# Long rows (issue 10): softmax that walks a row in chunks (3 or 2 passes, re-reading it from
# L2) or recomputes its exponentials, and layernorm_chunked, at 16384 and 32768 columns against
# the examples, Triton and torch.compile in the same call; ncu on the example's softmax, bf16
# 32768 (75% of a copy on 2026-12-01); and the first GPU run of `tilec bench --rounds`.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
D=docs/bench-2026-12-02/long-rows
date -u +%FT%TZ
python3 - <<'PY'
import re
s = open("dsl-examples/layernorm.tile").read()
i = s.index("run layernorm_chunked")
s = s[:i] + s[i:].replace("consts(T: [f32, bf16], BLOCK: 1024);", "consts(T: [f32, bf16], BLOCK: 1024);\n    bench(rows: [4096], n: [4096, 16384]);", 1)
open("/tmp/ln_chunked.tile", "w").write(s)
s = open("dsl-examples/softmax.tile").read()
s = s.replace("consts(T: [f32, bf16], BLOCK: next_pow2(cols));", "consts(T: [bf16], BLOCK: next_pow2(cols));", 1)
s = s.replace("bench(rows: [4096], cols: [1024, 4096, 16384, 32768]);", "bench(rows: [4096], cols: [32768]);", 1)
open("/tmp/sm_bf16.tile", "w").write(s)
PY
timeout 60 $T verify $D/long_rows.tile > $OUT/verify.log 2>&1; echo "verify long_rows rc $? $(grep -E '^verify' $OUT/verify.log)"; grep FAIL $OUT/verify.log | head -3
timeout 170 $T bench dsl-examples/softmax.tile $D/long_rows.tile --runs 20 --json $OUT/bench-softmax.json > $OUT/bench-softmax.log 2>&1; echo "bench softmax rc $?"
timeout 90 $T bench /tmp/ln_chunked.tile --kernel layernorm --kernel layernorm_chunked --runs 20 --json $OUT/bench-ln.json > $OUT/bench-ln.log 2>&1; echo "bench layernorm rc $?"
timeout 110 python3 bench/peers.py --only softmax,layernorm --no-compile-time --json $OUT/peers.json > $OUT/peers.log 2>&1; echo "peers rc $?"
timeout 50 ncu --launch-skip 2 --launch-count 1 -k regex:softmax --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis $T bench /tmp/sm_bf16.tile --config model --runs 3 > $OUT/ncu-softmax.log 2>&1; echo "ncu rc $?"; grep -E "DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit Reg|Warp Cycles Per Issued|Stall" $OUT/ncu-softmax.log | head -14
date -u +%FT%TZ
timeout 75 $T bench dsl-examples/attention.tile --kernel attention_rotated --config spec --runs 10 --rounds 3 > $OUT/bench-rounds.log 2>&1; echo "bench --rounds rc $?"; sed -n '/median round/,$p' $OUT/bench-rounds.log | cut -c1-120 | head -12
echo "== softmax / long rows (tile) =="; grep -E "softmax|ms" $OUT/bench-softmax.log | grep -E "cols=(16384|32768)" | cut -c1-150
echo "== layernorm (tile) =="; grep -E "n=(4096|16384)" $OUT/bench-ln.log | cut -c1-150
echo "== peers =="; grep -E "softmax|layernorm" $OUT/peers.log | grep -E "16384|32768|4096" | cut -c1-150 | head -24
date -u +%FT%TZ
