#!/usr/bin/env bash
# Call B: bench + peers at HEAD; the ping-pong build (tilec-pp) verified, benched, sanitized.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
P=./target/release/tilec-pp
date -u +%FT%TZ
timeout 150 $T bench dsl-examples/matmul.tile dsl-examples/matmul_fp8.tile dsl-examples/attention.tile --config spec --runs 10 > $OUT/bench.log 2>&1; grep -E "^(matmul|att)" $OUT/bench.log | cut -c1-120
date -u +%FT%TZ
timeout 180 python3 bench/peers.py --only matmul,matmul_fp8,attention --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "matmul|attention" $OUT/peers.log | tail -24
date -u +%FT%TZ
timeout 120 $P verify .gpu/pp.tile > $OUT/v-pp.log 2>&1; echo "verify pp: $(grep -E '^verify' $OUT/v-pp.log)"; grep -A3 FAIL $OUT/v-pp.log | cut -c1-200 | head -8
timeout 60 $P bench .gpu/pp.tile --config spec --runs 10 > $OUT/bench-pp.log 2>&1; grep -E "^att" $OUT/bench-pp.log | cut -c1-120
date -u +%FT%TZ
timeout 60 compute-sanitizer --tool synccheck --error-exitcode 9 $P verify .gpu/pp_san.tile > $OUT/sync-pp.log 2>&1; echo "synccheck pp (exit $?): $(grep -h -E '^verify:|ERROR SUMMARY' $OUT/sync-pp.log | tr '\n' ' ')"
timeout 60 compute-sanitizer --tool racecheck --racecheck-report all $P verify .gpu/pp_san.tile > $OUT/race-pp.log 2>&1; echo "racecheck pp: $(grep -h -E '^verify:|RACECHECK SUMMARY' $OUT/race-pp.log | tr '\n' ' ')"
date -u +%FT%TZ
