#!/usr/bin/env bash
# mbarrier waits that sleep (`try_wait` with a suspend-time hint) against the spinning waits of
# run 102's build (`tilec-spin`): attention_rotated (static configuration) and matmul_tma, old
# and new builds in alternating processes with torch SDPA between them, two rounds; then the new
# build verified on the files whose kernels wait on mbarriers, and racecheck on two of them.
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
OLD=./target/release/tilec-spin
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
for r in 1 2; do
  for b in spin sleep; do
    X=$T; [ $b = spin ] && X=$OLD
    TILE_CACHE_DIR=/tmp/c103-$b timeout 90 $X bench dsl-examples/attention.tile --kernel attention_rotated --config model --runs 10 > $R/att-$b-$r.log 2>&1; echo "round $r att $b rc $?"
  done
  timeout 60 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $R/att-peers-$r.json > $R/att-peers-$r.log 2>&1; echo "round $r peers rc $?"
  for b in spin sleep; do
    X=$T; [ $b = spin ] && X=$OLD
    TILE_CACHE_DIR=/tmp/c103-$b timeout 60 $X bench dsl-examples/matmul.tile --kernel matmul_tma --config model --runs 20 > $R/mm-$b-$r.log 2>&1; echo "round $r mm $b rc $?"
  done
done
TILE_CACHE_DIR=/tmp/c103v timeout 200 $T verify dsl-examples/attention.tile dsl-examples/matmul.tile tests/gpu/multicast.tile tests/gpu/cluster.tile tests/gpu/warp_specialize.tile tests/gpu/pingpong.tile > $R/verify.log 2>&1; echo "verify rc $?: $(grep '^verify:' $R/verify.log)"; grep -A3 FAIL $R/verify.log | head
san() {
  f=$1; b=$(basename $f .tile)
  TILE_CACHE_DIR=/tmp/c103-r-$b timeout 150 compute-sanitizer --tool racecheck $T verify $f > $R/racecheck-$b.log 2>&1
  echo "racecheck $b rc $?: $(grep -E '^verify:|RACECHECK SUMMARY' $R/racecheck-$b.log | tr '\n' ' ')"
}
export -f san; export T R
printf "tests/gpu/multicast.tile\ntests/gpu/cluster.tile\n" | xargs -P 2 -n 1 bash -c 'san "$0"'
tar czf $OUT/run103.tar.gz -C $R .
for r in 1 2; do
  for b in spin sleep; do echo "-- round $r $b"; grep -E "^attention_rotated .*seq=8192" $R/att-$b-$r.log | cut -c1-110; grep -E "^matmul_tma" $R/mm-$b-$r.log | cut -c1-110; done
  grep -E "seq=8192.*torch " $R/att-peers-$r.log | grep " ms " | cut -c1-100
done
date -u +%FT%TZ
