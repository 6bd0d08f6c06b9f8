#!/usr/bin/env bash
# For the next session's first device call (not run yet): tests/gpu/multicast.tile now names its
# stages, so verify, `--debug` and the three sanitizers exercise multicasting rings (clusters of 2
# and 4, producer and thread 0, 4 and 3 stages); then the files with mbarrier waits that run 103
# did not reach with the sleeping waits, and `verify --all`.
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
TILE_CACHE_DIR=/tmp/cn timeout 150 $T verify tests/gpu/multicast.tile > $R/verify-mc.log 2>&1; echo "verify multicast rc $?: $(grep '^verify:' $R/verify-mc.log)"; grep -A3 FAIL $R/verify-mc.log | head -20
TILE_CACHE_DIR=/tmp/cnd timeout 150 $T verify --debug tests/gpu/multicast.tile > $R/debug-mc.log 2>&1; echo "debug rc $?: $(grep '^verify:' $R/debug-mc.log)"; grep -A3 "FAIL\|trap" $R/debug-mc.log | head -12
san() {
  tool=$1
  TILE_CACHE_DIR=/tmp/cn-$tool timeout 300 compute-sanitizer --tool $tool $T verify tests/gpu/multicast.tile > $R/$tool.log 2>&1
  echo "$tool rc $?: $(grep -E '^verify:|ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool.log | tr '\n' ' ')"
}
export -f san; export T R
printf "memcheck\nracecheck\nsynccheck\n" | xargs -P 3 -n 1 bash -c 'san "$0"'
TILE_CACHE_DIR=/tmp/cnv timeout 200 $T verify tests/gpu/descriptors.tile tests/gpu/persistent.tile tests/gpu/fp8_dot.tile tests/gpu/tensor_cores.tile dsl-examples/matmul_fp8.tile > $R/verify-rest.log 2>&1; echo "verify rest rc $?: $(grep '^verify:' $R/verify-rest.log)"; grep -A3 FAIL $R/verify-rest.log | head
tar czf $OUT/next.tar.gz -C $R .
date -u +%FT%TZ
