#!/usr/bin/env bash
# Persistent attention (attention_rotated's body inside a loop over (query block, head) tiles,
# the K/V ring going on from tile to tile): debug verify, verify, racecheck, bench next to
# attention_rotated and torch SDPA in one call.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 60 $T verify --debug .gpu/att_pers_san.tile > $OUT/v-debug.log 2>&1; echo "debug: rc $? $(grep -E '^verify' $OUT/v-debug.log)"; grep -E "FAIL|trap" $OUT/v-debug.log | head -3
timeout 100 $T verify .gpu/att_pers.tile > $OUT/v-pers.log 2>&1; echo "persistent attention: rc $? $(grep -E '^verify' $OUT/v-pers.log)"; grep -E "FAIL" $OUT/v-pers.log | head -5
date -u +%FT%TZ
timeout 120 $T bench .gpu/attbench.tile --config spec --runs 10 > $OUT/bench.log 2>&1; grep -E "^attention" $OUT/bench.log | cut -c1-100
timeout 90 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "D=128" $OUT/peers.log | grep -E "torch" | head -4
timeout 100 $T bench .gpu/attbench.tile --config spec --runs 10 > $OUT/bench2.log 2>&1; grep -E "^attention" $OUT/bench2.log | cut -c1-100
date -u +%FT%TZ
timeout 60 compute-sanitizer --tool racecheck $T verify .gpu/att_pers_san.tile > $OUT/san-race.log 2>&1; echo "racecheck rc $?: $(grep -E '^verify|RACECHECK SUMMARY' $OUT/san-race.log | tr '\n' ' ')"
date -u +%FT%TZ
