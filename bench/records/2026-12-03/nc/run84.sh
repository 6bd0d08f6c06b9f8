#!/usr/bin/env bash
# The rest of tests/gpu on the ld.global.nc build (run 83's 150 s cap stopped after narrow_int),
# and ncu on layernorm_fixed bf16 4096 x 16384 (as the example, without eviction hints, at
# inductor's shape) next to torch.compile's kernel: DRAM bytes, L2 hits, occupancy, stalls.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/cache-new
T=./target/release/tilec
D=docs/bench-2026-12-03/nc
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
timeout 170 $T verify tests/gpu/{no_reference,persistent,pingpong,random,reproducers,staged_loads,tensor_cores,tuple_reduce,warp_specialize}.tile > $R/verify-tests-gpu-rest.log 2>&1; echo "tests/gpu rest rc $?: $(grep '^verify:' $R/verify-tests-gpu-rest.log)"; grep -E "FAIL" $R/verify-tests-gpu-rest.log | head -5
timeout 40 $T bench $D/lnvar.tile --config spec --runs 20 > $R/bench-lnvar.log 2>&1; echo "bench rc $?"
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__block_size,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
for k in ln_cur ln_nohint ln_ind; do
  timeout 45 ncu -k regex:"$k" --launch-skip 2 --launch-count 2 --metrics $M $T bench $D/lnvar.tile --kernel $k --config spec --runs 3 > $R/ncu-$k.log 2>&1; echo "ncu $k rc $?"
done
cat > /tmp/ind.py <<'PY'
import torch
import torch.nn.functional as F
x = torch.randn(4096, 16384, device="cuda", dtype=torch.bfloat16)
w = torch.randn(16384, device="cuda", dtype=torch.bfloat16)
b = torch.randn(16384, device="cuda", dtype=torch.bfloat16)
f = torch.compile(lambda x, w, b: F.layer_norm(x, (16384,), w, b, 1e-5))
for _ in range(3):
    f(x, w, b)
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _ in range(2):
    f(x, w, b)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
PY
timeout 70 ncu --profile-from-start off --metrics $M python3 /tmp/ind.py > $R/ncu-inductor.log 2>&1; echo "ncu inductor rc $?"
tar czf $OUT/run84.tar.gz -C $R .
echo "== bench =="; grep -E "^ln_" $R/bench-lnvar.log | cut -c1-150
echo "== ncu =="; awk '/^  [a-zA-Z_0-9]+ \(|triton_/{k=$1} /duration|throughput|warps_active|registers|block_size|long_scoreboard|hit_rate|bytes_read|bytes_write|lts__t_bytes/{print k, $1, $(NF-1), $NF}' $R/ncu-*.log | head -60
date -u +%FT%TZ
