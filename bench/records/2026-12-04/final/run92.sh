#!/usr/bin/env bash
# Stage counts of the producer-fed attention loops at head dim 128: every candidate of
# attention_rotated (4 x 32 and 16 heads x 8192) and attention_tma (-D D=128, its 32 x 2048 bench)
# timed twice by `tune --all-candidates` (the GPU drifts within a call: two sweeps show whether
# 2 against 3 stages holds); then attention_rotated in the static model's configuration against
# torch SDPA in alternating processes, two rounds.
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
for r in 1 2; do
  TILE_CACHE_DIR=/tmp/cache-92-$r timeout 120 $T tune dsl-examples/attention.tile --kernel attention_rotated --all-candidates --runs 10 --json $R/tune-rot-$r.json > $R/tune-rot-$r.log 2>&1; echo "tune rot $r rc $?"
  TILE_CACHE_DIR=/tmp/cache-92-$r timeout 60 $T tune dsl-examples/attention.tile --kernel attention_tma -D D=128 --all-candidates --runs 20 --json $R/tune-tma-$r.json > $R/tune-tma-$r.log 2>&1; echo "tune tma $r rc $?"
done
for r in 1 2; do
  TILE_CACHE_DIR=/tmp/cache-92 timeout 60 $T bench dsl-examples/attention.tile --kernel attention_rotated --config model --runs 10 > $R/att-tile-$r.log 2>&1; echo "round $r tile rc $?"
  timeout 60 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $R/att-peers-$r.json > $R/att-peers-$r.log 2>&1; echo "round $r peers rc $?"
done
tar czf $OUT/run92.tar.gz -C $R .
for f in $R/tune-*.log; do echo "== $(basename $f)"; grep -E "^attention|BM=128 BN=128 .*warps=8|summary" $f | cut -c1-120; done
echo "== attention (tile in the model's configuration, then SDPA, per round) =="
for r in 1 2; do grep -E "seq=8192" $R/att-tile-$r.log | cut -c1-150; grep -E "seq=8192.*torch " $R/att-peers-$r.log | grep " ms " | cut -c1-100; done
date -u +%FT%TZ
