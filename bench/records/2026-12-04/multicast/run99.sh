#!/usr/bin/env bash
# TMA multicast in thread-block clusters: tests/gpu/multicast.tile (bit for bit against the
# interpreter) and matmul.tile (with matmul_multicast) verified, `--debug`, the three sanitizers
# on multicast.tile; `verify --all` for the rest; then matmul_tma against matmul_multicast at the
# static model's configuration, four alternating rounds, with cuBLAS and Triton in the same call.
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
TILE_CACHE_DIR=/tmp/c99 timeout 150 $T verify tests/gpu/multicast.tile dsl-examples/matmul.tile > $R/verify.log 2>&1; echo "verify rc $?: $(grep '^verify:' $R/verify.log)"; grep -B1 -A3 "FAIL\|error" $R/verify.log | head -30
TILE_CACHE_DIR=/tmp/c99d timeout 100 $T verify --debug tests/gpu/multicast.tile > $R/debug.log 2>&1; echo "debug rc $?: $(grep '^verify:' $R/debug.log)"; grep -A3 "FAIL\|trap" $R/debug.log | head -12
san() {
  tool=$1
  TILE_CACHE_DIR=/tmp/c99-$tool timeout 240 compute-sanitizer --tool $tool $T verify tests/gpu/multicast.tile > $R/$tool.log 2>&1
  echo "$tool rc $?: $(grep -E '^verify:|ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool.log | tr '\n' ' ')"
}
export -f san; export T R
printf "memcheck\nracecheck\nsynccheck\n" | xargs -P 3 -n 1 bash -c 'san "$0"' &
SANPID=$!
TILE_CACHE_DIR=/tmp/c99a timeout 240 $T verify --all > $R/verify-all.log 2>&1; echo "verify --all rc $?: $(grep '^verify:' $R/verify-all.log)"; grep -A3 "FAIL" $R/verify-all.log | head -12
wait $SANPID
TILE_CACHE_DIR=/tmp/c99b timeout 150 $T bench dsl-examples/matmul.tile --kernel matmul_tma --kernel matmul_multicast --config model --runs 20 --rounds 4 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
timeout 90 python3 bench/peers.py --only matmul --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
tar czf $OUT/run99.tar.gz -C $R .
grep -E "^matmul" $R/bench.log | cut -c1-160
grep -E "^matmul" $R/peers.log | grep -v " ok$" | cut -c1-110
date -u +%FT%TZ
