#!/usr/bin/env bash
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 90 $JIT --ignored --test-threads 1 > $OUT/jit.log 2>&1; echo "jit gpu tests (rc $?): $(grep '^test result' $OUT/jit.log)"; grep -E "FAILED|panicked" $OUT/jit.log | head -5
timeout 150 $T verify .gpu/att_aligned.tile > $OUT/v-att.log 2>&1; echo "attention.tile (+ aligned D128 BN128): $(grep -E '^verify' $OUT/v-att.log)"; grep -B2 -A3 FAIL $OUT/v-att.log | cut -c1-200 | head -8
timeout 150 $T verify tests/gpu/attention_branch.tile > $OUT/v-branch.log 2>&1; echo "attention_branch: $(grep -E '^verify' $OUT/v-branch.log)"; grep -B2 -A3 FAIL $OUT/v-branch.log | cut -c1-200 | head -8
date -u +%FT%TZ
timeout 100 compute-sanitizer --tool racecheck --print-limit 5 $T verify .gpu/att_san.tile > $OUT/racecheck.log 2>&1; echo "racecheck (rc $?): $(grep -E '^verify|RACECHECK SUMMARY|ERROR SUMMARY' $OUT/racecheck.log | tr '\n' ' ')"
date -u +%FT%TZ
timeout 120 $T bench dsl-examples/attention.tile tests/gpu/attention_branch.tile --config spec --runs 10 > $OUT/bench.log 2>&1; grep -E "^att" $OUT/bench.log | sed -E 's/ +/ /g' | cut -d' ' -f1-9
timeout 90 $T bench dsl-examples/attention.tile --config model --runs 10 > $OUT/bench-model.log 2>&1; grep -E "^att" $OUT/bench-model.log | sed -E 's/ +/ /g' | cut -d' ' -f1-7,12-
timeout 60 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "attention" $OUT/peers.log | tail -8
date -u +%FT%TZ
