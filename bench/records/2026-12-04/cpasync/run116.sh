#!/usr/bin/env bash
# Run 116: the fp8 GEMM (matmul_fp8, e4m3, per-tensor and per-row scales, static choice) against
# torch._scaled_mm and Triton in the same call, on the build of this session's last commit.
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=$PWD/target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
TILE_CACHE_DIR=/tmp/c116 timeout 90 $T bench dsl-examples/matmul_fp8.tile --kernel matmul_fp8 --config model --runs 20 > $R/bench-matmul_fp8.log 2>&1; echo "bench rc $?"
timeout 90 python3 bench/peers.py --only matmul_fp8 --no-compile-time --no-torch-compile --json $R/peers-matmul_fp8.json > $R/peers-matmul_fp8.log 2>&1; echo "peers rc $?"
tar czf $OUT/run116.tar.gz -C $R .
grep -E "^matmul_fp8 " $R/bench-matmul_fp8.log | cut -c1-110
grep -E " ms " $R/peers-matmul_fp8.log | cut -c1-120
date -u +%FT%TZ
