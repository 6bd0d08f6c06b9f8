#!/usr/bin/env bash
# The multicast ring's releases at CTA scope (a remote `mbarrier.arrive` with the default
# .release.cta, and the producer's wait at CTA scope, as for the local ring) instead of cluster
# scope: probe.tile's kernels timed again, three alternating rounds, plus 8-stage rings of
# 32-column K steps (mt8, pairs_mc8) for a deeper ring; then multicast.tile verified again, with
# racecheck and synccheck.
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
P=docs/bench-2026-12-04/multicast/probe.tile
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
TILE_CACHE_DIR=/tmp/c101 timeout 240 $T bench $P --kernel mt --kernel pairs_c_nomc --kernel pairs_mc --kernel mt8 --kernel pairs_mc8 --config model --runs 20 --rounds 3 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
TILE_CACHE_DIR=/tmp/c101v timeout 100 $T verify tests/gpu/multicast.tile > $R/verify.log 2>&1; echo "verify rc $?: $(grep '^verify:' $R/verify.log)"; grep -A3 FAIL $R/verify.log | head
san() {
  tool=$1
  TILE_CACHE_DIR=/tmp/c101-$tool timeout 240 compute-sanitizer --tool $tool $T verify tests/gpu/multicast.tile > $R/$tool.log 2>&1
  echo "$tool rc $?: $(grep -E '^verify:|ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool.log | tr '\n' ' ')"
}
export -f san; export T R
printf "racecheck\nsynccheck\n" | xargs -P 2 -n 1 bash -c 'san "$0"'
tar czf $OUT/run101.tar.gz -C $R .
grep -E "^(mt|pairs)" $R/bench.log | grep "(" | cut -c1-130
date -u +%FT%TZ
