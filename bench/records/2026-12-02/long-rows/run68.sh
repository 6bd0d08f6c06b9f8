#!/usr/bin/env bash
# After the two-pass layernorm_chunked: every example verified, memcheck on layernorm.tile, and
# layernorm.tile's kernels against Triton and torch.compile in the same call.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 230 $T verify --all > $OUT/v-all.log 2>&1; echo "verify --all rc $? $(grep -E '^verify' $OUT/v-all.log)"; grep FAIL $OUT/v-all.log | head -3
timeout 60 compute-sanitizer --tool memcheck $T verify dsl-examples/layernorm.tile > $OUT/memcheck.log 2>&1; echo "memcheck rc $?: $(grep -E '^verify|ERROR SUMMARY' $OUT/memcheck.log | tr '\n' ' ')"
timeout 90 $T bench dsl-examples/layernorm.tile --kernel layernorm --kernel layernorm_chunked --runs 20 --json $OUT/bench-ln.json > $OUT/bench-ln.log 2>&1; echo "bench layernorm rc $?"
timeout 90 python3 bench/peers.py --only layernorm --no-compile-time --json $OUT/peers.json > $OUT/peers.log 2>&1; echo "peers rc $?"
echo "== tile =="; grep -E "n=(4096|16384) " $OUT/bench-ln.log | cut -c1-150
echo "== peers =="; grep -E "layernorm" $OUT/peers.log | grep -E "n=(4096|16384) " | cut -c1-110 | head -12
date -u +%FT%TZ
