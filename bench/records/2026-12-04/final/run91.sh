#!/usr/bin/env bash
# synccheck on every example (eight processes at a time, each with its own kernel cache); then
# the bf16 GEMMs (matmul on mma.sync/wgmma with cp.async stages, matmul_tma on TMA rings) at
# 4096^3 and 8192^3, tuned, two rounds, with Triton and cuBLAS (torch.matmul) in the same call.
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
san() {
  tool=$1; f=$2; b=$(basename $f .tile)
  TILE_CACHE_DIR=/tmp/c91-$tool-$b timeout 200 compute-sanitizer --tool $tool $T verify $f > $R/$tool-$b.log 2>&1
  echo "$tool $b rc $?: $(grep -E '^verify:|ERROR SUMMARY' $R/$tool-$b.log | tr '\n' ' ')"
}
export -f san; export T R
for f in dsl-examples/*.tile; do echo "synccheck $f"; done | xargs -P 8 -n 2 bash -c 'san "$0" "$1"' | sort
TILE_CACHE_DIR=/tmp/cache-91 timeout 240 $T bench dsl-examples/matmul.tile --kernel matmul --kernel matmul_tma --top-k 4 --runs 20 --rounds 2 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
timeout 90 python3 bench/peers.py --only matmul --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
tar czf $OUT/run91.tar.gz -C $R .
grep -E "^matmul" $R/bench.log | cut -c1-150
grep -E "^matmul" $R/peers.log | grep -v " ok$" | cut -c1-110
date -u +%FT%TZ
