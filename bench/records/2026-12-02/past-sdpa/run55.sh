#!/usr/bin/env bash
set -u
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 50 $T bench .gpu/rot128.tile --config spec --runs 10 > $OUT/bench1.log 2>&1; grep -E "^att" $OUT/bench1.log | cut -c1-80
timeout 70 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "D=128" $OUT/peers.log | tail -8
timeout 50 $T bench .gpu/rot128.tile --config spec --runs 10 > $OUT/bench2.log 2>&1; grep -E "^att" $OUT/bench2.log | cut -c1-80
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
date -u +%FT%TZ
