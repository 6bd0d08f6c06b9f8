#!/usr/bin/env bash
# Where matmul_multicast loses to matmul_tma (run 99: 0.2661 against 0.1870 ms at 4096^3):
# probe.tile's five kernels at the static model's configuration (BM 128, BN 256, BK 64, 8 warps,
# 4 stages, a producer), three alternating rounds: matmul_tma (mt), the same in clusters of 2
# (mt_c), matmul_multicast's pair order without clusters (pairs_nc), in clusters without
# multicast (pairs_c_nomc: the pair index is computed so that the analysis cannot prove it
# uniform) and with it (pairs_mc). Then Nsight Compute on the first 4096^3 launch of mt,
# pairs_c_nomc and pairs_mc.
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
P=docs/bench-2026-12-04/multicast/probe.tile
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
TILE_CACHE_DIR=/tmp/c100 timeout 200 $T bench $P --kernel mt --kernel mt_c --kernel pairs_nc --kernel pairs_c_nomc --kernel pairs_mc --config model --runs 20 --rounds 3 --json $R/bench.json > $R/bench.log 2>&1; echo "bench rc $?"
for k in mt pairs_c_nomc pairs_mc; do
  TILE_CACHE_DIR=/tmp/c100 timeout 100 ncu -k regex:$k --launch-count 1 --section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats $T bench $P --kernel $k --config model --runs 1 > $R/ncu-$k.log 2>&1; echo "ncu $k rc $?"
done
tar czf $OUT/run100.tar.gz -C $R .
grep -E "^(mt|pairs)" $R/bench.log | grep "(" | cut -c1-130
for k in mt pairs_c_nomc pairs_mc; do
  echo "== $k"; grep -E "Duration|Memory Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Max Active Clusters|Cluster Size|Waves Per SM|Stall|Issued Warp|No Eligible|Active Warps Per Scheduler|One or More" $R/ncu-$k.log | sed 's/  */ /g' | head -24
done
date -u +%FT%TZ
