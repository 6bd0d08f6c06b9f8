#!/usr/bin/env bash
# `cluster_reduce(x, combine)`: tuples combined by a helper in one exchange. cluster.tile's new
# tuple case and the cluster examples (now one exchange a row: softmax's (max, sum) pairs,
# layernorm's (mean, M2, count)) verified, racecheck on cluster.tile, then the two examples
# timed (tuned, top 3).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/cache-98
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
timeout 90 $T verify tests/gpu/cluster.tile dsl-examples/softmax.tile dsl-examples/layernorm.tile > $R/verify.log 2>&1; echo "verify rc $?: $(grep '^verify:' $R/verify.log)"; grep -A2 FAIL $R/verify.log | head -12
timeout 60 compute-sanitizer --tool racecheck $T verify tests/gpu/cluster.tile > $R/racecheck.log 2>&1; echo "racecheck rc $?: $(grep -E '^verify|RACECHECK SUMMARY' $R/racecheck.log | tr '\n' ' ')"
timeout 70 $T bench dsl-examples/softmax.tile dsl-examples/layernorm.tile --kernel softmax_cluster --kernel layernorm_cluster --top-k 3 --runs 20 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
tar czf $OUT/run98.tar.gz -C $R .
grep -E "^(softmax|layernorm)" $R/bench.log | grep -E "16384|32768" | cut -c1-150
grep -c "local memory" $R/bench.log
date -u +%FT%TZ
