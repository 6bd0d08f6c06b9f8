#!/usr/bin/env bash
# Run 108: the static choice with the 1% tie band (`config::TIE`): the pointer attention and
# vector_add, every candidate timed again (`static` in the summaries is the new choice); every
# candidate of matmul_tma and matmul_multicast (bf16, the spec's largest case), to see at which
# tile sizes multicast pays; then one more round of attention_rotated against torch SDPA at head
# dim 128 (run 106's three rounds swung up to 12% at 4 x 32 heads).
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
TILE_CACHE_DIR=/tmp/c108-ptr timeout 80 $T tune dsl-examples/attention.tile --kernel attention --all-candidates --runs 20 --json $R/tune-attention.json > $R/tune-attention.log 2>&1; echo "tune attention rc $?"; grep -E "summary" $R/tune-attention.log | cut -c1-220
TILE_CACHE_DIR=/tmp/c108-va timeout 60 $T tune dsl-examples/vector_add.tile --all-candidates --runs 20 --json $R/tune-vector_add.json > $R/tune-vector_add.log 2>&1; echo "tune vector_add rc $?"; grep -E "summary" $R/tune-vector_add.log | cut -c1-220
for k in matmul_tma matmul_multicast; do
  TILE_CACHE_DIR=/tmp/c108-$k timeout 110 $T tune dsl-examples/matmul.tile --kernel $k -D T=bf16 --all-candidates --runs 10 --json $R/tune-$k.json > $R/tune-$k.log 2>&1; echo "tune $k rc $?"; grep -E "summary" $R/tune-$k.log | cut -c1-220
done
tar czf $OUT/run108.tar.gz -C $R .
for r in 4; do
  nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
  TILE_CACHE_DIR=/tmp/c108-att timeout 90 $T bench dsl-examples/attention.tile --kernel attention_rotated --config model --runs 10 > $R/att-$r.log 2>&1; echo "round $r att rc $?"
  timeout 70 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $R/att-peers-$r.json > $R/att-peers-$r.log 2>&1; echo "round $r peers rc $?"
done
tar czf $OUT/run108.tar.gz -C $R .
for r in 4; do
  echo "-- round $r"; grep -E "^attention_rotated .*seq=8192" $R/att-$r.log | cut -c1-100
  grep -E "seq=8192.*torch " $R/att-peers-$r.log | grep " ms " | cut -c1-100
done
date -u +%FT%TZ
