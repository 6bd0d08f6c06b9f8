#!/usr/bin/env bash
# Run 106: attention_rotated (static configuration, head dim 128) with the f32 exponential as
# `ex2.approx.ftz.f32` (`tilec`) against the build before (`tilec-old`: `ex2.approx.f32`), in
# alternating processes with torch SDPA between them, three rounds; then Nsight Compute's
# instruction count and tensor-pipe use of the new build (bh 16, run 102's first case).
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
OLD=./target/release/tilec-old
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
for r in 1 2 3; do
  nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
  for b in old ftz; do
    X=$T; [ $b = old ] && X=$OLD
    TILE_CACHE_DIR=/tmp/c106-$b timeout 90 $X bench dsl-examples/attention.tile --kernel attention_rotated --config model --runs 10 > $R/att-$b-$r.log 2>&1; echo "round $r att $b rc $?"
  done
  timeout 70 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $R/att-peers-$r.json > $R/att-peers-$r.log 2>&1; echo "round $r peers rc $?"
done
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats"
TILE_CACHE_DIR=/tmp/c106-ncu timeout 150 ncu -k regex:attention_rotated --launch-count 1 $S -o $R/rot $T bench dsl-examples/attention.tile --kernel attention_rotated --config model --runs 1 > $R/ncu-rot-run.log 2>&1; echo "ncu rc $?"
ncu -i $R/rot.ncu-rep --page details > $R/rot-details.txt 2>&1; rm -f $R/rot.ncu-rep
grep -E "Duration|Executed Instructions |Tensor|Issue Slots Busy" $R/rot-details.txt | head -12
tar czf $OUT/run106.tar.gz -C $R .
for r in 1 2 3; do
  for b in old ftz; do echo "-- round $r $b"; grep -E "^attention_rotated .*seq=8192" $R/att-$b-$r.log | cut -c1-100; done
  grep -E "seq=8192.*torch " $R/att-peers-$r.log | grep " ms " | cut -c1-100
done
date -u +%FT%TZ
