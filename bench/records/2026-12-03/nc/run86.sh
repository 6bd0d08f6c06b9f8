#!/usr/bin/env bash
# layernorm_fixed with fma against its earlier form in one process, cases alternating (two
# rounds), at 1024, 4096 and 16384 columns; torch.compile and Triton in the same call.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/cache-86
T=./target/release/tilec
D=docs/bench-2026-12-03/nc
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
timeout 80 $T bench $D/lnf.tile --top-k 4 --runs 20 --rounds 2 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
timeout 45 python3 bench/peers.py --only layernorm --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
tar czf $OUT/run86.tar.gz -C $R .
grep -E "^layernorm" $R/bench.log | cut -c1-160
grep -E "^layernorm" $R/peers.log | grep -E "triton|compile" | cut -c1-100
date -u +%FT%TZ
