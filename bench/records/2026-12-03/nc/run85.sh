#!/usr/bin/env bash
# Reductions across warps folded as a tree over the lanes (one shared-memory read and log2(W)
# shuffles a thread instead of W reads and W - 1 combines), and layernorm_fixed written with
# fma: every example and the reduction files of tests/gpu against the interpreter; the row
# kernels (tuned, top 4) and the peers, to set beside run 82.
set -u
export PATH=$PATH:/usr/local/cuda/bin
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
T=./target/release/tilec
TILE_CACHE_DIR=/tmp/cache-new timeout 120 $T verify --all > $R/verify-examples.log 2>&1; echo "examples rc $?: $(grep '^verify:' $R/verify-examples.log)"; grep -E "FAIL" $R/verify-examples.log | head -5
TILE_CACHE_DIR=/tmp/cache-new timeout 50 $T verify tests/gpu/{tuple_reduce,reproducers}.tile > $R/verify-tests-gpu.log 2>&1; echo "tests/gpu rc $?: $(grep '^verify:' $R/verify-tests-gpu.log)"; grep -E "FAIL" $R/verify-tests-gpu.log | head -5
K="--kernel layernorm --kernel layernorm_fixed --kernel rmsnorm"
F="dsl-examples/layernorm.tile dsl-examples/rmsnorm.tile"
TILE_CACHE_DIR=/tmp/cache-new timeout 110 $T bench $F $K --top-k 4 --runs 20 --json $R/bench-new.json > $R/bench-new.log 2>&1; echo "bench rc $?"
timeout 70 python3 bench/peers.py --only layernorm,rmsnorm --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
tar czf $OUT/run85.tar.gz -C $R .
cp docs/bench-2026-12-03/nc/run82/bench-new.json $R/bench-base.json; python3 docs/bench-2026-12-03/nc/table.py $R || grep -E '^(layernorm|rmsnorm)' $R/bench-new.log | cut -c1-150
date -u +%FT%TZ
