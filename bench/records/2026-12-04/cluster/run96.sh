#!/usr/bin/env bash
# The exit meeting back, split (arrive after the last reduction, wait at the end), for
# racecheck; verified with the sanitizers; then probe.tile's persistent staged cluster softmax
# (staged_c2) beside softmax_cluster, layernorm_cluster and the kernels they would replace, with
# the peers.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/cache-96
T=./target/release/tilec
D=docs/bench-2026-12-04/cluster
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
date -u +%FT%TZ
C="tests/gpu/cluster.tile dsl-examples/softmax.tile dsl-examples/layernorm.tile $D/probe.tile"
timeout 120 $T verify $C > $R/verify.log 2>&1; echo "verify rc $?: $(grep '^verify:' $R/verify.log)"; grep -A2 FAIL $R/verify.log | head -12
timeout 60 $T verify --debug tests/gpu/cluster.tile > $R/verify-debug.log 2>&1; echo "verify --debug rc $?: $(grep '^verify:' $R/verify-debug.log)"
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool $T verify tests/gpu/cluster.tile $D/probe.tile > $R/$tool.log 2>&1
  echo "$tool rc $?: $(grep -E '^verify|ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool.log | tr '\n' ' ')"
done
F="dsl-examples/softmax.tile dsl-examples/layernorm.tile $D/probe.tile"
K="--kernel softmax --kernel softmax_staged --kernel softmax_cluster --kernel staged_c2 --kernel layernorm_fixed --kernel layernorm_cluster"
timeout 240 $T bench $F $K --top-k 6 --runs 20 --rounds 2 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
timeout 90 python3 bench/peers.py --only softmax,layernorm --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
tar czf $OUT/run96.tar.gz -C $R .
grep -E "^(staged_c2|softmax|layernorm)" $R/bench.log | grep -E "16384|32768" | cut -c1-150 | sort | uniq | head -40
python3 docs/bench-2026-12-03/ln2/table.py $R
date -u +%FT%TZ
