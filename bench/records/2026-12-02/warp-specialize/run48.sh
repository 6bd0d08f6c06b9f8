#!/usr/bin/env bash
# Warp specialisation by default (one block per SM): everything verified, benched with peers.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 150 $T verify --all > $OUT/v-all.log 2>&1; echo "verify --all: $(grep -E '^verify' $OUT/v-all.log)"; grep -B2 -A3 FAIL $OUT/v-all.log | cut -c1-200 | head -10
timeout 200 $T verify tests/gpu/*.tile > $OUT/v-gpu.log 2>&1; echo "tests/gpu: $(grep -E '^verify' $OUT/v-gpu.log)"; grep -B2 -A3 FAIL $OUT/v-gpu.log | cut -c1-200 | head -10
date -u +%FT%TZ
timeout 60 ./.gpu/jitgpu --ignored --test-threads 1 > $OUT/jit.log 2>&1; echo "jit gpu tests: $(grep '^test result' $OUT/jit.log)"; grep -E "FAILED|panicked" $OUT/jit.log | head -5
date -u +%FT%TZ
timeout 60 $T verify .gpu/attm.tile > $OUT/v-attm.log 2>&1; echo "attm (uniform mask branch): $(grep -E '^verify' $OUT/v-attm.log)"; grep -B2 -A3 FAIL $OUT/v-attm.log | cut -c1-200 | head -6
timeout 120 $T bench dsl-examples/matmul.tile dsl-examples/matmul_fp8.tile dsl-examples/attention.tile .gpu/attm.tile .gpu/rot2.tile --config spec --runs 10 > $OUT/bench.log 2>&1; grep -E "^(matmul_tma|matmul_fp8|attention_tma|attention_mk|attention_rot2)" $OUT/bench.log | cut -c1-112
date -u +%FT%TZ
timeout 150 python3 bench/peers.py --only matmul,matmul_fp8,attention --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "matmul|attention" $OUT/peers.log | tail -24
date -u +%FT%TZ
for tool in racecheck synccheck; do
  timeout 50 compute-sanitizer --tool $tool $T verify .gpu/def_san.tile > $OUT/san-$tool.log 2>&1; echo "$tool def_san: $(grep -h -E '^verify:|ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san-$tool.log | tr '\n' ' ')"
done
date -u +%FT%TZ
