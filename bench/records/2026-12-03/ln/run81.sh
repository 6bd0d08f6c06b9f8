#!/usr/bin/env bash
# Prepared, not run (the session's device time ran out): the tuner's tie-aware shortlist (tune::TIE) on layernorm_fixed: bench at 4096 x 16384 (f32 and
# bf16, `--config tuned`, top 4 plus the model's ties), memcheck on the example's verify cases,
# torch.compile's layernorm in the same call.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
python3 - <<'PY'
s = open("dsl-examples/layernorm.tile").read()
s = s.replace("bench(rows: [4096], n: [4096, 16384]);", "bench(rows: [4096], n: [16384]);")
open("/tmp/ln16k.tile", "w").write(s)
PY
timeout 80 $T bench /tmp/ln16k.tile --kernel layernorm_fixed --top-k 4 --runs 20 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
timeout 60 compute-sanitizer --tool memcheck $T verify dsl-examples/layernorm.tile > $R/memcheck.log 2>&1; echo "memcheck rc $?: $(grep -E '^verify|ERROR SUMMARY' $R/memcheck.log | tr '\n' ' ')"
timeout 50 python3 bench/peers.py --only layernorm --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
tar czf $OUT/run81.tar.gz -C $R .
echo "== bench =="; grep -E "n=16384 " $R/bench.log | cut -c1-150
echo "== peers =="; grep -E "layernorm" $R/peers.log | grep -E "n=16384 " | cut -c1-110 | head -6
date -u +%FT%TZ
