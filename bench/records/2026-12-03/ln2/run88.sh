#!/usr/bin/env bash
# layernorm_fixed with the lanes' states merged by two sums (ln_sums of run 87, now the
# example's): verified and memchecked; every candidate timed at 16384 columns; then every row
# kernel (softmax, layernorm, rmsnorm; tuned, top 4, two rounds) and the peers in the same call,
# for the table (table.py).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/cache-88
T=./target/release/tilec
D=docs/bench-2026-12-03/ln2
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
timeout 60 $T verify dsl-examples/layernorm.tile > $R/verify.log 2>&1; echo "verify rc $?: $(grep '^verify:' $R/verify.log)"; grep FAIL $R/verify.log | head -3
timeout 90 compute-sanitizer --tool memcheck $T verify dsl-examples/layernorm.tile > $R/memcheck.log 2>&1; echo "memcheck rc $?: $(grep -E '^verify|ERROR SUMMARY' $R/memcheck.log | tr '\n' ' ')"
timeout 80 $T tune dsl-examples/layernorm.tile --kernel layernorm_fixed --all-candidates --runs 20 --json $R/tune.json > $R/tune.log 2>&1; echo "tune rc $?"
F="dsl-examples/softmax.tile dsl-examples/layernorm.tile dsl-examples/rmsnorm.tile"
K="--kernel softmax --kernel softmax_staged --kernel layernorm_fixed --kernel rmsnorm"
timeout 250 $T bench $F $K --top-k 4 --runs 20 --rounds 2 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
timeout 100 python3 bench/peers.py --only softmax,layernorm,rmsnorm --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
tar czf $OUT/run88.tar.gz -C $R .
grep -E "summary|^ +(N=|BLOCK)" $R/tune.log | cut -c1-120 | head -30
python3 $D/table.py $R
date -u +%FT%TZ
