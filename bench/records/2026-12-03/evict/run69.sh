#!/usr/bin/env bash
# Eviction hints (`evict:` on load/store) on two-pass row kernels: evict.tile verified and under
# memcheck, benched with every candidate timed (top-k 16) in two alternating rounds next to the
# examples, Triton and torch.compile in the same call; ncu's L2 hit rate and DRAM bytes of the
# hinted and plain kernels at one configuration.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
D=docs/bench-2026-12-03/evict
date -u +%FT%TZ
timeout 70 $T verify $D/evict.tile dsl-examples/layernorm.tile > $OUT/verify.log 2>&1; echo "verify rc $? $(grep -E '^verify' $OUT/verify.log)"; grep FAIL $OUT/verify.log | head -3
timeout 80 compute-sanitizer --tool memcheck $T verify $D/evict.tile > $OUT/memcheck.log 2>&1; echo "memcheck rc $?: $(grep -E '^verify|ERROR SUMMARY' $OUT/memcheck.log | tr '\n' ' ')"
timeout 200 $T bench $D/evict.tile dsl-examples/layernorm.tile --kernel layernorm_evict --kernel layernorm_plain --kernel softmax_looped --kernel softmax_evict --kernel layernorm_chunked --top-k 16 --runs 20 --rounds 2 --json $OUT/bench-evict.json > $OUT/bench-evict.log 2>&1; echo "bench evict rc $?"
timeout 60 $T bench dsl-examples/layernorm.tile dsl-examples/softmax.tile --kernel layernorm --kernel softmax --runs 20 --json $OUT/bench-ex.json > $OUT/bench-ex.log 2>&1; echo "bench examples rc $?"
timeout 100 python3 bench/peers.py --only softmax,layernorm --no-compile-time --json $OUT/peers.json > $OUT/peers.log 2>&1; echo "peers rc $?"
python3 - "$D/evict.tile" /tmp/ncu.tile <<'PY'
import sys
s = open(sys.argv[1]).read()
s = s.replace('#[warps(2, 4, 8, 16)]', '#[warps(16)]').replace('in [512, 1024, 2048, 4096]', 'in [4096]')
s = s.replace('BLOCK: [512, 1024]', 'BLOCK: [4096]').replace('T: [f32, bf16]', 'T: [f32]')
s = s.replace('n: [4096, 16384]);', 'n: [16384]);').replace('cols: [4096, 16384, 32768]);', 'cols: [32768]);')
open(sys.argv[2], 'w').write(s)
PY
timeout 60 ncu -k regex:"layernorm|softmax" --launch-count 40 --metrics gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum $T bench /tmp/ncu.tile --config spec --runs 2 > $OUT/ncu.log 2>&1; echo "ncu rc $?"
grep -E "^  [a-z_]+ \(|duration|hit_rate|dram__bytes" $OUT/ncu.log | head -48 > $OUT/ncu-short.log
echo "== tile (median round) =="; sed -n '/median round/,$p' $OUT/bench-evict.log | grep -E "(cols|n)=(4096|16384|32768) " | cut -c1-150
echo "== examples =="; grep -E "(cols|n)=(4096|16384|32768) " $OUT/bench-ex.log | cut -c1-150
echo "== peers =="; grep -E "softmax|layernorm" $OUT/peers.log | grep -E "(cols|n)=(4096|16384|32768) " | cut -c1-110 | head -24
echo "== ncu =="; awk '/^  [a-z_]+ \(/{k=$1} /duration|hit_rate|dram__bytes/{print k, $1, $(NF-1), $NF}' $OUT/ncu.log | head -40
date -u +%FT%TZ
