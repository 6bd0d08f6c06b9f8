#!/usr/bin/env bash
# Loads through `*T` arguments as ld.global.nc (noalias readonly parameters): the build before
# (tilec-base, 4f666f8) and after, each tuning its own cache (top 4 and the model's ties), on the
# memory-bound examples; Triton and torch.compile in the same call.
set -u
export PATH=$PATH:/usr/local/cuda/bin
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
K="--kernel softmax --kernel softmax_staged --kernel layernorm --kernel layernorm_fixed --kernel rmsnorm"
F="dsl-examples/softmax.tile dsl-examples/layernorm.tile dsl-examples/rmsnorm.tile"
for b in base new; do
  T=./target/release/tilec; [ $b = base ] && T=./target/release/tilec-base
  TILE_CACHE_DIR=/tmp/cache-$b timeout 170 $T bench $F $K --top-k 4 --runs 20 --json $R/bench-$b.json > $R/bench-$b.log 2>&1; echo "bench $b rc $?"
done
timeout 120 python3 bench/peers.py --only softmax,layernorm,rmsnorm --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
tar czf $OUT/run82.tar.gz -C $R .
python3 docs/bench-2026-12-03/nc/table.py $R
date -u +%FT%TZ
