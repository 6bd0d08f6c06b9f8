#!/usr/bin/env bash
# The cluster protocol without its exit meeting and with the entry meeting's wait moved to the
# first reduction: verified again (plus debug and the sanitizers), then probe.tile's parts of a
# cluster's cost and the cluster examples beside the kernels they would replace, with the peers.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/cache-95
T=./target/release/tilec
D=docs/bench-2026-12-04/cluster
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
date -u +%FT%TZ
C="tests/gpu/cluster.tile dsl-examples/softmax.tile dsl-examples/layernorm.tile"
timeout 120 $T verify $C > $R/verify.log 2>&1; echo "verify rc $?: $(grep '^verify:' $R/verify.log)"; grep -A2 FAIL $R/verify.log | head -12
timeout 60 $T verify --debug tests/gpu/cluster.tile > $R/verify-debug.log 2>&1; echo "verify --debug rc $?: $(grep '^verify:' $R/verify-debug.log)"
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool $T verify tests/gpu/cluster.tile > $R/$tool.log 2>&1
  echo "$tool rc $?: $(grep -E '^verify|ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool.log | tr '\n' ' ')"
done
timeout 120 $T bench $D/probe.tile --top-k 3 --runs 20 --rounds 2 --json $R/probe.json > $R/probe.log 2>&1; echo "probe rc $?"
F="dsl-examples/softmax.tile dsl-examples/layernorm.tile"
K="--kernel softmax --kernel softmax_staged --kernel softmax_cluster --kernel layernorm_fixed --kernel layernorm_cluster"
timeout 200 $T bench $F $K --top-k 4 --runs 20 --rounds 2 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
tar czf $OUT/run95.tar.gz -C $R .
grep -E "^(whole|halves|softmax|layernorm)" $R/probe.log $R/bench.log | grep -E "16384|32768" | sed 's/^[^:]*://' | cut -c1-150 | sort | uniq | head -60
date -u +%FT%TZ
