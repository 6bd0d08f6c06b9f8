#!/usr/bin/env bash
# Thread-block clusters: tests/gpu/cluster.tile and the two cluster examples verified (plus a
# debug build with bounded waits), the sanitizers on them, then softmax_cluster and
# layernorm_cluster timed beside softmax, softmax_staged and layernorm_fixed (tuned, top 4, two
# rounds) with the peers in the same call; attention_tma's new head-dim-128 case tuned over
# every candidate.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/cache-94
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
date -u +%FT%TZ
C="tests/gpu/cluster.tile dsl-examples/softmax.tile dsl-examples/layernorm.tile"
timeout 120 $T verify $C > $R/verify.log 2>&1; echo "verify rc $?: $(grep '^verify:' $R/verify.log)"; grep -A2 FAIL $R/verify.log | head -12
timeout 60 $T verify --debug tests/gpu/cluster.tile > $R/verify-debug.log 2>&1; echo "verify --debug rc $?: $(grep '^verify:' $R/verify-debug.log)"; grep -A2 FAIL $R/verify-debug.log | head -6
# The sanitizers on the cluster file and the cluster examples' first cases (one per spec).
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool $T verify tests/gpu/cluster.tile > $R/$tool.log 2>&1
  echo "$tool rc $?: $(grep -E '^verify|ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool.log | tr '\n' ' ')"
done
F="dsl-examples/softmax.tile dsl-examples/layernorm.tile"
K="--kernel softmax --kernel softmax_staged --kernel softmax_cluster --kernel layernorm_fixed --kernel layernorm_cluster"
timeout 200 $T bench $F $K --top-k 4 --runs 20 --rounds 2 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
timeout 90 python3 bench/peers.py --only softmax,layernorm --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
timeout 100 $T tune dsl-examples/attention.tile --kernel attention_tma -D D=128 --all-candidates --runs 10 --json $R/tune-att.json > $R/tune-att.log 2>&1; echo "tune attention_tma D128 rc $?"
tar czf $OUT/run94.tar.gz -C $R .
grep -E "^ +(BM|rank|static|best)|summary|chosen" $R/tune-att.log | cut -c1-140 | head -20
grep -E "softmax|layernorm" $R/bench.log | grep -E "16384|32768" | cut -c1-150 | head -40
python3 docs/bench-2026-12-03/ln2/table.py $R
date -u +%FT%TZ
