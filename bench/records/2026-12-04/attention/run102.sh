#!/usr/bin/env bash
# Where attention_rotated's non-causal loop loses its time (head dim 128, bh 16 x seq 8192, its
# static configuration: BM 128, BN 128, 8 warps, 3 stages, a producer): Nsight Compute's warp states, pipe utilisation and per-instruction stall
# samples, beside torch SDPA's kernel on the same shapes. Then matmul.tile verified again with
# the final multicast build (run 99 verified it before the release moved to CTA scope).
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats --section SchedulerStats --section SourceCounters --section Occupancy"
TILE_CACHE_DIR=/tmp/c102 timeout 200 ncu -k regex:attention_rotated --launch-count 1 $S -o $R/rot $T bench dsl-examples/attention.tile --kernel attention_rotated --config model --runs 1 > $R/ncu-rot-run.log 2>&1; echo "ncu rot rc $?"
timeout 150 ncu --launch-skip 3 --launch-count 1 -k regex:"flash|fmha|attention|sdpa|cudnn" $S -o $R/sdpa python3 docs/bench-2026-12-04/attention/sdpa_once.py > $R/ncu-sdpa-run.log 2>&1; echo "ncu sdpa rc $?"
for f in rot sdpa; do
  ncu -i $R/$f.ncu-rep --page details > $R/$f-details.txt 2>&1
  ncu -i $R/$f.ncu-rep --page source --csv --print-source sass > $R/$f-sass.csv 2>&1
  rm -f $R/$f.ncu-rep
done
TILE_CACHE_DIR=/tmp/c102v timeout 120 $T verify dsl-examples/matmul.tile > $R/verify.log 2>&1; echo "verify rc $?: $(grep '^verify:' $R/verify.log)"
tar czf $OUT/run102.tar.gz -C $R .
for f in rot sdpa; do
  echo "== $f"; grep -E "^  [a-z_]|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Issued Warp Per Scheduler|No Eligible|Active Warps Per Scheduler|Eligible Warps|Warp Cycles Per Issued|Registers Per|Block Size|Grid Size|Tensor|Pipe" $R/$f-details.txt | sed 's/  */ /g' | head -30
done
date -u +%FT%TZ
