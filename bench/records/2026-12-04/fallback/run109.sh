#!/usr/bin/env bash
# Run 109: a pending wgmma that reads P from registers is waited for before P's next value is
# computed (the cp.async fallback of attention_rotated no longer draws C7513): every file whose
# PTX moved (attention_rotated, attention_overlap, attention_persistent, attention_pingpong),
# verified on the GPU, two processes side by side.
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
(TILE_CACHE_DIR=/tmp/c109a timeout 230 $T verify dsl-examples/attention.tile tests/gpu/attention_overlap.tile tests/gpu/pingpong.tile > $R/verify-a.log 2>&1; echo "verify attention/overlap/pingpong rc $?: $(grep '^verify:' $R/verify-a.log)"; grep -A3 FAIL $R/verify-a.log | head) &
(TILE_CACHE_DIR=/tmp/c109b timeout 230 $T verify tests/gpu/persistent.tile > $R/verify-b.log 2>&1; echo "verify persistent rc $?: $(grep '^verify:' $R/verify-b.log)"; grep -A3 FAIL $R/verify-b.log | head) &
wait
tar czf $OUT/run109.tar.gz -C $R .
date -u +%FT%TZ
