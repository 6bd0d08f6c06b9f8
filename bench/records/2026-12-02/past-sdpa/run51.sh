#!/usr/bin/env bash
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader
# 1. the debug build's child on its own (what hung in run 50?)
s=$SECONDS; TILE_TEST_DEBUG_CHILD=1 timeout 60 $JIT --ignored --exact debug_build_child --nocapture > $OUT/debug-child.log 2>&1; rc=$?
echo "debug child: rc $rc after $((SECONDS - s)) s"; grep -E "tile debug|launch|panicked|test result" $OUT/debug-child.log | cut -c1-220 | head -6
# 2. the other JIT GPU tests
timeout 100 $JIT --ignored --test-threads 1 --skip a_debug_build_traps_instead_of_hanging --skip debug_build_child > $OUT/jit.log 2>&1; echo "jit gpu tests (rc $?): $(grep '^test result' $OUT/jit.log)"; grep -E "FAILED|panicked" $OUT/jit.log | head -5
date -u +%FT%TZ
# 3. verify
timeout 200 $T verify --all > $OUT/v-all.log 2>&1; echo "verify --all: $(grep -E '^verify' $OUT/v-all.log)"; grep -B2 -A3 FAIL $OUT/v-all.log | cut -c1-200 | head -8
timeout 100 $T verify tests/gpu/attention_branch.tile > $OUT/v-branch.log 2>&1; echo "attention_branch: $(grep -E '^verify' $OUT/v-branch.log)"; grep -B2 -A3 FAIL $OUT/v-branch.log | cut -c1-200 | head -8
date -u +%FT%TZ
# 4. bench (spec), the branch variants, the static choice, peers
timeout 120 $T bench dsl-examples/attention.tile tests/gpu/attention_branch.tile --config spec --runs 10 > $OUT/bench.log 2>&1; grep -E "^att" $OUT/bench.log | sed -E 's/ +/ /g' | cut -d' ' -f1-5,9-10
timeout 90 $T bench dsl-examples/attention.tile --config model --runs 10 > $OUT/bench-model.log 2>&1; grep -E "^att" $OUT/bench-model.log | sed -E 's/ +/ /g' | cut -d' ' -f1-5,10-
timeout 60 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "attention" $OUT/peers.log | tail -8
date -u +%FT%TZ
