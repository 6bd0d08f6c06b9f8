#!/usr/bin/env bash
# Run 87 (H200, 2026-12-03 20:39-20:42 UTC; outputs in run87/, docs/gpu.md): layernorm_fixed against three variants (lnv.tile: the
# output as run 85 wrote it, no fma, the lanes' states merged by sums), which differ in
# registers (blocks an SM) and instructions, verified, then timed in one process with the
# cases alternating; torch.compile in the same call.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/cache-87
T=./target/release/tilec
D=docs/bench-2026-12-03/nc
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
timeout 60 $T verify $D/lnv.tile > $R/verify.log 2>&1; echo "verify rc $? $(grep '^verify' $R/verify.log)"
timeout 220 $T bench $D/lnv.tile --top-k 4 --runs 20 --rounds 3 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
timeout 60 python3 bench/peers.py --only layernorm --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
timeout 100 $T verify tests/gpu/warp_specialize.tile > $R/verify-ws.log 2>&1; echo "warp_specialize rc $?: $(grep '^verify:' $R/verify-ws.log)"; grep -E FAIL $R/verify-ws.log | head -3
timeout 100 compute-sanitizer --tool racecheck $T verify tests/gpu/tuple_reduce.tile > $R/race.log 2>&1; echo "racecheck rc $?: $(grep -E '^verify|RACECHECK SUMMARY' $R/race.log | tr '\n' ' ')"
tar czf $OUT/run87.tar.gz -C $R .
grep -E "^(ln_|layernorm)" $R/bench.log | grep -E "\(" | cut -c1-110
grep -E "^layernorm" $R/peers.log | grep -E "compile" | grep -E "n=(4096|16384)" | cut -c1-100 | head -4
date -u +%FT%TZ
