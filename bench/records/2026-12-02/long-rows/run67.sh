#!/usr/bin/env bash
# Row kernels walking a row in chunks with the next chunk prefetched in registers (looped.tile)
# against the examples, Triton and torch.compile in one call; `tilec bench --rounds` after
# 5332d18 (cases prepared once) with torch SDPA in the same call.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
D=docs/bench-2026-12-02/long-rows
date -u +%FT%TZ
timeout 60 $T verify $D/looped.tile > $OUT/verify.log 2>&1; echo "verify looped rc $? $(grep -E '^verify' $OUT/verify.log)"; grep FAIL $OUT/verify.log | head -3
timeout 200 $T bench $D/looped.tile --top-k 8 --runs 20 --json $OUT/bench-looped.json > $OUT/bench-looped.log 2>&1; echo "bench looped rc $?"
timeout 100 $T bench dsl-examples/layernorm.tile dsl-examples/softmax.tile --kernel layernorm --kernel softmax --runs 20 --json $OUT/bench-ex.json > $OUT/bench-ex.log 2>&1; echo "bench examples rc $?"
timeout 100 python3 bench/peers.py --only softmax,layernorm --no-compile-time --json $OUT/peers.json > $OUT/peers.log 2>&1; echo "peers rc $?"
date -u +%FT%TZ
timeout 60 $T bench dsl-examples/attention.tile --kernel attention_rotated --config spec --runs 10 --rounds 3 > $OUT/bench-rounds.log 2>&1; echo "bench --rounds rc $?"; sed -n '/median round/,$p' $OUT/bench-rounds.log | cut -c1-130
timeout 70 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $OUT/peers-att.json > $OUT/peers-att.log 2>&1; echo "peers attention rc $?"; grep -E "seq=8192" $OUT/peers-att.log | head -8
echo "== tile =="; grep -E "(cols|n)=(4096|16384|32768) " $OUT/bench-looped.log $OUT/bench-ex.log | sed 's/^.*\.log://' | cut -c1-150
echo "== peers =="; grep -E "softmax|layernorm" $OUT/peers.log | grep -E "(cols|n)=(4096|16384|32768) " | cut -c1-110 | head -24
date -u +%FT%TZ
