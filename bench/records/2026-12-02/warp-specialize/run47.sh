#!/usr/bin/env bash
# Warp specialisation: verify, bench beside the examples' TMA kernels and the peers, sanitizers.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 150 $T verify tests/gpu/warp_specialize.tile > $OUT/v-ws.log 2>&1; echo "warp_specialize.tile: $(grep -E '^verify' $OUT/v-ws.log)"; grep -B2 -A3 -E "FAIL|error" $OUT/v-ws.log | cut -c1-200 | head -12
timeout 90 $T verify .gpu/ws.tile > $OUT/v-ws-extra.log 2>&1; echo "ws.tile (bench configs): $(grep -E '^verify' $OUT/v-ws-extra.log)"; grep -B2 -A3 -E "FAIL|error" $OUT/v-ws-extra.log | cut -c1-200 | head -12
date -u +%FT%TZ
timeout 150 $T bench dsl-examples/matmul.tile tests/gpu/warp_specialize.tile dsl-examples/attention.tile .gpu/ws.tile --config spec --runs 10 > $OUT/bench.log 2>&1; grep -E "^(matmul_tma|matmul_ws|attention_tma|attention_ws)" $OUT/bench.log | cut -c1-112
date -u +%FT%TZ
timeout 120 python3 bench/peers.py --only matmul,attention --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "matmul|attention" $OUT/peers.log | tail -12
date -u +%FT%TZ
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool $T verify .gpu/ws_san.tile > $OUT/san-$tool.log 2>&1; echo "$tool ws_san: $(grep -h -E '^verify:|ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san-$tool.log | tr '\n' ' ')"
done
date -u +%FT%TZ
