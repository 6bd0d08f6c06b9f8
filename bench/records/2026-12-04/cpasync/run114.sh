#!/usr/bin/env bash
# Run 114: the final build (ties go to the deeper ring where an SM runs one program at a time,
# `Estimate::resident`): every candidate of the pointer attention and of softmax_staged on their
# bench cases, `static` in the summaries being this build's choice; then the static choices
# timed, three rounds (`--rounds 3`).
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=$PWD/target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
TILE_CACHE_DIR=/tmp/c114-a timeout 100 $T tune dsl-examples/attention.tile --kernel attention --all-candidates --runs 20 --json $R/tune-attention.json > $R/tune-attention.log 2>&1; echo "tune attention rc $?"
for t in bf16 f32; do
  TILE_CACHE_DIR=/tmp/c114-s timeout 60 $T tune dsl-examples/softmax.tile --kernel softmax_staged -D T=$t --all-candidates --runs 20 --json $R/tune-softmax_staged-$t.json > $R/tune-softmax_staged-$t.log 2>&1; echo "tune softmax_staged $t rc $?"
done
TILE_CACHE_DIR=/tmp/c114-b timeout 90 $T bench dsl-examples/attention.tile dsl-examples/softmax.tile --kernel attention --kernel softmax_staged --config model --runs 20 --rounds 3 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
tar czf $OUT/run114.tar.gz -C $R .
grep -h "summary" $R/tune-*.log | cut -c1-200
grep -E "\(" $R/bench.log | cut -c1-100
date -u +%FT%TZ
