#!/usr/bin/env bash
# First GPU call of the next session (repository root; release tilec in target/release; OUT
# set; under 10 minutes): the baseline after whatever that session changed — `verify --all`
# and the first half of tests/gpu (the rest, the sanitizers and the measurements are run2.sh).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 200 $T verify --all > $OUT/v-all.log 2>&1; echo "verify --all: rc $? $(grep -E '^verify' $OUT/v-all.log)"; grep FAIL $OUT/v-all.log | head -3
timeout 330 $T verify tests/gpu/{atomics,attention_branch,attention_overlap,builtins,descriptors,erf,float_conversions,fp8_dot,fp8,math_f64,narrow_int,no_reference}.tile > $OUT/v-gpu1.log 2>&1; echo "tests/gpu, first half: rc $? $(grep -E '^verify' $OUT/v-gpu1.log) ($(grep -c '^  ok' $OUT/v-gpu1.log) ok lines)"; grep FAIL $OUT/v-gpu1.log | head -3
date -u +%FT%TZ
