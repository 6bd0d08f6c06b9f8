#!/usr/bin/env bash
# TMA stores (store through a descriptor on sm_90a): verify the kernels that store through
# descriptors, bench the GEMMs next to cuBLAS in one call. Budget-bound: every step capped.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 50 $T verify tests/gpu/descriptors.tile > $OUT/v-desc.log 2>&1; echo "descriptors: rc $? $(grep -E '^verify' $OUT/v-desc.log)"; grep -E "FAIL" $OUT/v-desc.log | head -3
timeout 50 $T verify tests/gpu/persistent.tile > $OUT/v-pers.log 2>&1; echo "persistent: rc $? $(grep -E '^verify' $OUT/v-pers.log)"; grep -E "FAIL" $OUT/v-pers.log | head -3
timeout 40 $T bench .gpu/mmbench.tile --config spec --runs 20 > $OUT/bench.log 2>&1; grep -E "^matmul" $OUT/bench.log | cut -c1-100
timeout 35 python3 bench/peers.py --only matmul --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "torch" $OUT/peers.log | head -2
date -u +%FT%TZ
timeout 60 $T verify dsl-examples/matmul.tile tests/gpu/warp_specialize.tile > $OUT/v-mm.log 2>&1; echo "matmul + warp_specialize: rc $? $(grep -E '^verify' $OUT/v-mm.log)"; grep -E "FAIL" $OUT/v-mm.log | head -3
timeout 55 $T verify dsl-examples/matmul_fp8.tile tests/gpu/fp8_dot.tile > $OUT/v-fp8.log 2>&1; echo "fp8: rc $? $(grep -E '^verify' $OUT/v-fp8.log)"; grep -E "FAIL" $OUT/v-fp8.log | head -3
date -u +%FT%TZ
