#!/usr/bin/env bash
# Call A: the build of a8a8f1b (HEAD) on the GPU: scratch fix, loop guard.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 90 $T verify tests/gpu/attention_overlap.tile > $OUT/v-overlap.log 2>&1; echo "attention_overlap: $(grep -E '^verify' $OUT/v-overlap.log)"; grep -A3 FAIL $OUT/v-overlap.log | cut -c1-200 | head -8
timeout 150 $T verify --all > $OUT/v-all.log 2>&1; echo "verify --all: $(grep -E '^verify' $OUT/v-all.log)"; grep -A3 FAIL $OUT/v-all.log | cut -c1-200 | head -8
date -u +%FT%TZ
G=$(ls tests/gpu/*.tile | grep -v attention_overlap)
timeout 200 $T verify $G > $OUT/v-gpu.log 2>&1; echo "tests/gpu (rest): $(grep -E '^verify' $OUT/v-gpu.log)"; grep -A3 FAIL $OUT/v-gpu.log | cut -c1-200 | head -8
date -u +%FT%TZ
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $T verify tests/gpu/attention_overlap.tile > $OUT/mem-overlap.log 2>&1; echo "memcheck attention_overlap (exit $?): $(grep -h -E '^verify:|ERROR SUMMARY' $OUT/mem-overlap.log | tr '\n' ' ')"
date -u +%FT%TZ
