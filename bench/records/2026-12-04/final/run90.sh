#!/usr/bin/env bash
# Every example verified against the interpreter (`tilec verify --all`: each spec's sizes,
# ragged ones included), then every example under compute-sanitizer memcheck and racecheck
# (eight processes at a time, each with its own kernel cache), on the build with the static
# model's chains and re-reads.
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
TILE_CACHE_DIR=/tmp/cache-90 timeout 170 $T verify --all > $R/verify-all.log 2>&1; echo "verify --all rc $?: $(grep '^verify:' $R/verify-all.log)"; grep FAIL $R/verify-all.log | head -5
san() {
  tool=$1; f=$2; b=$(basename $f .tile)
  TILE_CACHE_DIR=/tmp/c90-$tool-$b timeout 280 compute-sanitizer --tool $tool $T verify $f > $R/$tool-$b.log 2>&1
  echo "$tool $b rc $?: $(grep -E '^verify:|ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool-$b.log | tr '\n' ' ')"
}
export -f san; export T R
for tool in racecheck memcheck; do for f in dsl-examples/*.tile; do echo "$tool $f"; done; done | xargs -P 8 -n 2 bash -c 'san "$0" "$1"' | sort
tar czf $OUT/run90.tar.gz -C $R .
date -u +%FT%TZ
