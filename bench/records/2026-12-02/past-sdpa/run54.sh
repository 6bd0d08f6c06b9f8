#!/usr/bin/env bash
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
O=./.gpu/tilec-old
date -u +%FT%TZ
for f in attention rmsnorm layernorm; do
  timeout 80 $O bench dsl-examples/$f.tile --config model --runs 10 > $OUT/old-$f.log 2>&1
  timeout 80 $T bench dsl-examples/$f.tile --config model --runs 10 > $OUT/new-$f.log 2>&1
done
date -u +%FT%TZ
for f in attention rmsnorm layernorm; do
  echo "== $f old | new (median ms)"
  paste -d'|' <(grep -E "^(att|rms|layer)" $OUT/old-$f.log | cut -c1-72) <(grep -E "^(att|rms|layer)" $OUT/new-$f.log | cut -c55-72)
done
timeout 200 $T verify dsl-examples/attention.tile dsl-examples/rmsnorm.tile dsl-examples/layernorm.tile > $OUT/verify.log 2>&1; echo "verify (new model): $(grep -E '^verify' $OUT/verify.log)"; grep -B2 -A3 FAIL $OUT/verify.log | cut -c1-200 | head -8
date -u +%FT%TZ
