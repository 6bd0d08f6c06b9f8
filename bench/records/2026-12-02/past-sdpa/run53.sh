#!/usr/bin/env bash
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 150 $T verify .gpu/att_aligned.tile > $OUT/v-att.log 2>&1; echo "attention.tile (+ aligned D128 BN128): $(grep -E '^verify' $OUT/v-att.log)"; grep -B2 -A3 FAIL $OUT/v-att.log | cut -c1-200 | head -8; grep -c "  ok" $OUT/v-att.log
date -u +%FT%TZ
timeout 40 $T bench .gpu/l2.tile --config spec --runs 10 > $OUT/l2.log 2>&1; grep -E "^l2read" $OUT/l2.log | sed -E 's/ +/ /g' | cut -d' ' -f1-8
timeout 150 $T bench dsl-examples/attention.tile --config spec --runs 10 > $OUT/bench.log 2>&1; grep -E "^att" $OUT/bench.log | sed -E 's/ +/ /g' | cut -d' ' -f1-8
date -u +%FT%TZ
timeout 100 $T tune dsl-examples/attention.tile --kernel attention_tma --all-candidates --runs 10 --json $OUT/tune-tma.json > $OUT/tune-tma.log 2>&1; echo "tune tma rc $?"; grep -E "summary" $OUT/tune-tma.log
timeout 130 $T tune dsl-examples/attention.tile --kernel attention_rotated --all-candidates --runs 5 --json $OUT/tune-rot.json > $OUT/tune-rot.log 2>&1; echo "tune rot rc $?"; grep -E "summary" $OUT/tune-rot.log
date -u +%FT%TZ
timeout 90 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "attention" $OUT/peers.log | tail -12
date -u +%FT%TZ
