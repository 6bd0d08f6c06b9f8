#!/usr/bin/env bash
# layernorm_fixed (layernorm.tile: the row length a compile-time constant, both loops unrolled)
# verified and benched next to the whole-row example and the peers in one call; the SASS of the
# run-time-length loop and the unrolled one, to see where ptxas puts their loads.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
D=docs/bench-2026-12-03/ln
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
timeout 60 $T verify dsl-examples/layernorm.tile > $R/verify.log 2>&1; echo "verify rc $? $(grep -E '^verify' $R/verify.log)"; grep FAIL $R/verify.log | head -3
timeout 90 $T bench dsl-examples/layernorm.tile --kernel layernorm --kernel layernorm_fixed --top-k 4 --runs 20 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
timeout 50 python3 bench/peers.py --only layernorm --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
for k in layernorm_ind layernorm_ind_unroll; do
  $T compile $D/ind.tile --kernel $k -D BLOCK=4096 -D T=bf16 --num-warps 8 --assume-aligned --emit ptx > $R/$k.ptx 2>&1
  ptxas -arch=sm_90a $R/$k.ptx -o $R/$k.cubin && cuobjdump -sass $R/$k.cubin > $R/$k.sass 2>&1
  echo "$k: $(grep -c LDG $R/$k.sass) LDG, $(grep -c STG $R/$k.sass) STG, $(grep -cE 'BRA' $R/$k.sass) BRA"
done
tar czf $OUT/run80.tar.gz -C $R .
rm -f $R/*.cubin
echo "== bench =="; grep -E "n=(4096|16384) " $R/bench.log | cut -c1-150
echo "== peers =="; grep -E "layernorm" $R/peers.log | grep -E "n=(4096|16384) " | cut -c1-110 | head -12
date -u +%FT%TZ
