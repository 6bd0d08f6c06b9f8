#!/usr/bin/env bash
# The build with ld.global.nc loads: every example and tests/gpu file against the interpreter,
# memcheck on the row kernels.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/cache-new
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
timeout 260 $T verify --all > $R/verify-examples.log 2>&1; echo "examples rc $?: $(grep '^verify:' $R/verify-examples.log)"; grep -E "FAIL" $R/verify-examples.log | head -5
timeout 150 $T verify tests/gpu/*.tile > $R/verify-tests-gpu.log 2>&1; echo "tests/gpu rc $?: $(grep '^verify:' $R/verify-tests-gpu.log)"; grep -E "FAIL" $R/verify-tests-gpu.log | head -5
timeout 100 compute-sanitizer --tool memcheck $T verify dsl-examples/layernorm.tile dsl-examples/softmax.tile > $R/memcheck.log 2>&1; echo "memcheck rc $?: $(grep -E '^verify|ERROR SUMMARY' $R/memcheck.log | sort | uniq -c | tr '\n' ' ')"
tar czf $OUT/run83.tar.gz -C $R .
date -u +%FT%TZ
