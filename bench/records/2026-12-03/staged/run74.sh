#!/usr/bin/env bash
# softmax_staged (dsl-examples/softmax.tile) and tests/gpu/staged_loads.tile verified on the GPU
# and under memcheck/racecheck; softmax.tile's kernels benched (tuned, top 4) next to Triton and
# torch.compile in the same call; tests/gpu/narrow_int.tile (the u8 stores of 89e1f4b); torch.compile's
# layernorm kernel at 16384 columns (inductor-ln.log, the dump run70.sh prepared).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 90 $T verify dsl-examples/softmax.tile tests/gpu/staged_loads.tile > $OUT/verify.log 2>&1; echo "verify rc $? $(grep -E '^verify' $OUT/verify.log)"; grep -E "FAIL|error" $OUT/verify.log | head -5
timeout 40 compute-sanitizer --tool memcheck $T verify tests/gpu/staged_loads.tile > $OUT/memcheck.log 2>&1; echo "memcheck rc $?: $(grep -E '^verify|ERROR SUMMARY' $OUT/memcheck.log | tr '\n' ' ')"
timeout 60 compute-sanitizer --tool racecheck $T verify tests/gpu/staged_loads.tile > $OUT/racecheck.log 2>&1; echo "racecheck rc $?: $(grep -E '^verify|RACECHECK SUMMARY' $OUT/racecheck.log | tr '\n' ' ')"
timeout 80 $T bench dsl-examples/softmax.tile --kernel softmax --kernel softmax_staged --top-k 4 --runs 20 --json $OUT/bench.json > $OUT/bench.log 2>&1; echo "bench rc $?"
timeout 70 python3 bench/peers.py --only softmax --no-compile-time --json $OUT/peers.json > $OUT/peers.log 2>&1; echo "peers rc $?"
timeout 50 $T verify tests/gpu/narrow_int.tile > $OUT/verify-narrow.log 2>&1; echo "verify narrow_int rc $? $(grep -E '^verify' $OUT/verify-narrow.log)"; grep -c "^  ok" $OUT/verify-narrow.log; grep FAIL $OUT/verify-narrow.log | head -3
sed -n '/^cat > \/tmp\/inductor_ln.py/,/^PY$/p' docs/bench-2026-12-03/next/run70.sh | sed '1d;$d' > /tmp/inductor_ln.py
TORCH_LOGS=output_code timeout 40 python3 /tmp/inductor_ln.py > $OUT/inductor-ln.log 2>&1; echo "inductor dump rc $? ($(grep -c '@triton.jit' $OUT/inductor-ln.log) kernels)"
echo "== tile =="; grep -E "cols=(16384|32768) " $OUT/bench.log | cut -c1-150
echo "== peers =="; grep -E "softmax" $OUT/peers.log | grep -E "cols=(16384|32768) " | cut -c1-110
date -u +%FT%TZ
