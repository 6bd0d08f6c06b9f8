#!/usr/bin/env bash
# attention_rotated (bf16, head dim 128, seq 8192) against torch SDPA in alternating processes,
# two rounds each, so that the GPU's drift within a call (5-12% between rounds in run 67) falls
# on both sides of the ratio (prepared 2026-12-03, not yet run).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
for r in 1 2; do
  timeout 45 $T bench dsl-examples/attention.tile --kernel attention_rotated --config spec --runs 10 > $OUT/att-tile-$r.log 2>&1; echo "round $r tile rc $?"
  timeout 60 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $OUT/att-peers-$r.json > $OUT/att-peers-$r.log 2>&1; echo "round $r peers rc $?"
done
echo "== attention (tile, then SDPA, per round) =="; for r in 1 2; do grep -E "seq=8192" $OUT/att-tile-$r.log | cut -c1-110; grep -E "seq=8192.*torch " $OUT/att-peers-$r.log | cut -c1-100; done
date -u +%FT%TZ
