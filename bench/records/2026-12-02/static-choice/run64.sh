#!/usr/bin/env bash
# The static choice against every candidate for the attention bench cases, with today's
# kernels and model (the last sweep, run 53, predates both).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 120 $T tune dsl-examples/attention.tile --kernel attention_tma --all-candidates --runs 10 --json $OUT/tune-tma.json > $OUT/tune-tma.log 2>&1; echo "tune attention_tma rc $?"; grep -E "summary" $OUT/tune-tma.log | cut -c1-200
timeout 150 $T tune dsl-examples/attention.tile --kernel attention_rotated --all-candidates --runs 5 --json $OUT/tune-rot.json > $OUT/tune-rot.log 2>&1; echo "tune attention_rotated rc $?"; grep -E "summary" $OUT/tune-rot.log | cut -c1-200
timeout 110 $T tune dsl-examples/attention.tile --kernel attention --all-candidates --runs 10 --json $OUT/tune-ptr.json > $OUT/tune-ptr.log 2>&1; echo "tune attention rc $?"; grep -E "summary" $OUT/tune-ptr.log | cut -c1-200
date -u +%FT%TZ
