#!/usr/bin/env bash
# The producer rule on the kernel's whole shared memory, and attention_tma's uniform mask branch.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 100 $T verify dsl-examples/attention.tile dsl-examples/matmul.tile > $OUT/v-ex.log 2>&1; echo "attention+matmul: $(grep -E '^verify' $OUT/v-ex.log)"; grep -B2 -A3 FAIL $OUT/v-ex.log | cut -c1-200 | head -8
timeout 70 $T verify tests/gpu/warp_specialize.tile > $OUT/v-ws.log 2>&1; echo "warp_specialize: $(grep -E '^verify' $OUT/v-ws.log)"; grep -B2 -A3 FAIL $OUT/v-ws.log | cut -c1-200 | head -8
date -u +%FT%TZ
timeout 50 $T bench dsl-examples/attention.tile --config spec --runs 10 > $OUT/bench.log 2>&1; grep -E "^attention_tma" $OUT/bench.log | cut -c1-112
timeout 40 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "attention" $OUT/peers.log | tail -8
date -u +%FT%TZ
