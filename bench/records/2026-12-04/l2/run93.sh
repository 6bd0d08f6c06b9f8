#!/usr/bin/env bash
# ln_two (two rows a program, w and b read once for both) against layernorm_fixed: verified,
# memchecked, then both tuned (top 4) and timed with the cases alternating over three rounds,
# torch.compile and Triton in the same call.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/cache-93
T=./target/release/tilec
D=docs/bench-2026-12-04/l2
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
timeout 60 $T verify $D/ln_two.tile > $R/verify.log 2>&1; echo "verify rc $?: $(grep '^verify:' $R/verify.log)"; grep FAIL $R/verify.log | head -3
timeout 90 compute-sanitizer --tool memcheck $T verify $D/ln_two.tile > $R/memcheck.log 2>&1; echo "memcheck rc $?: $(grep -E '^verify|ERROR SUMMARY' $R/memcheck.log | tr '\n' ' ')"
timeout 200 $T bench $D/ln_two.tile dsl-examples/layernorm.tile --kernel ln_two --kernel layernorm_fixed --top-k 4 --runs 20 --rounds 3 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
timeout 80 python3 bench/peers.py --only layernorm --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
tar czf $OUT/run93.tar.gz -C $R .
grep -E "^(ln_two|layernorm)" $R/bench.log | grep "(" | cut -c1-160
grep -E "^layernorm" $R/peers.log | grep " ms " | grep -E "n=(4096|16384)" | cut -c1-100
date -u +%FT%TZ
