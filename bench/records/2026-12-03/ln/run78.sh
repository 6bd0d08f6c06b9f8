#!/usr/bin/env bash
# One call for what run76.sh and run77.sh (prepared, not run: the pool refused machines for
# 30 minutes) split in two, cut to fit: layernorm at 16384 columns against torch.compile (the
# inductor-shaped loops of ind.tile, the persistent staged rows of rows.tile: verified, every
# candidate timed; inductor's chosen config; ncu on inductor's kernel and ours), the tuner's
# near-budget fix on softmax/softmax_staged at 32768, the layernorm example, and the peers.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
D=docs/bench-2026-12-03/ln
date -u +%FT%TZ
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 40 $T verify $D/ind.tile $D/rows.tile > $OUT/verify.log 2>&1; echo "verify rc $? $(grep -E '^verify' $OUT/verify.log)"; grep FAIL $OUT/verify.log | head -3
for k in layernorm_ind layernorm_ind_unroll; do
  timeout 40 $T tune $D/ind.tile --kernel $k --all-candidates --runs 20 --json $OUT/tune-$k.json > $OUT/tune-$k.log 2>&1; echo "tune $k rc $?"
done
timeout 45 $T tune $D/rows.tile --kernel layernorm_row_staged --all-candidates --runs 20 --json $OUT/tune-row-staged.json > $OUT/tune-row-staged.log 2>&1; echo "tune row_staged rc $?"
python3 - <<'PY'
s = open("dsl-examples/softmax.tile").read()
s = s.replace("bench(rows: [4096], cols: [1024, 4096, 16384, 32768]);", "bench(rows: [4096], cols: [32768]);")
s = s.replace("bench(rows: [4096], cols: [16384, 32768]);", "bench(rows: [4096], cols: [32768]);")
open("/tmp/softmax32k.tile", "w").write(s)
PY
timeout 70 $T bench /tmp/softmax32k.tile --kernel softmax_staged --kernel softmax --top-k 4 --runs 20 --json $OUT/bench-softmax.json > $OUT/bench-softmax.log 2>&1; echo "bench softmax rc $?"
timeout 35 $T bench dsl-examples/layernorm.tile --kernel layernorm --runs 20 --json $OUT/bench-ln.json > $OUT/bench-ln.log 2>&1; echo "bench layernorm rc $?"
timeout 110 python3 bench/peers.py --only softmax,layernorm --no-compile-time --json $OUT/peers.json > $OUT/peers.log 2>&1; echo "peers rc $?"
date -u +%FT%TZ
cat > /tmp/ind.py <<'PY'
import gc, torch
import torch.nn.functional as F
from torch._inductor.runtime.triton_heuristics import CachingAutotuner
for dt in (torch.float32, torch.bfloat16):
    x = torch.randn(4096, 16384, device="cuda", dtype=dt)
    w = torch.randn(16384, device="cuda", dtype=dt)
    b = torch.randn(16384, device="cuda", dtype=dt)
    f = torch.compile(lambda x, w, b: F.layer_norm(x, (16384,), w, b, 1e-5))
    for _ in range(3):
        f(x, w, b)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    f(x, w, b)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
for o in gc.get_objects():
    if isinstance(o, CachingAutotuner):
        for l in o.launchers:
            print("inductor", o.inductor_meta.get("kernel_name"), o.triton_meta["signature"].get("in_ptr0"), l.config, "regs", getattr(l, "n_regs", "?"), "spills", getattr(l, "n_spills", "?"))
PY
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__block_size,launch__grid_size,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,lts__t_sector_hit_rate.pct,dram__bytes_read.sum
timeout 70 ncu --profile-from-start off --metrics $M python3 /tmp/ind.py > $OUT/ncu-inductor.log 2>&1; echo "ncu inductor rc $?"
python3 - "$D/ind.tile" /tmp/ncu.tile <<'PY'
import sys
s = open(sys.argv[1]).read()
s = s.replace('#[warps(4, 8, 16)]', '#[warps(16)]').replace('in [1024, 2048, 4096]', 'in [2048]')
s = s.replace('BLOCK: [1024]', 'BLOCK: [2048]').replace('consts(T: [f32, bf16]', 'consts(T: [bf16]')
open(sys.argv[2], 'w').write(s)
PY
timeout 60 ncu -k regex:"layernorm" --launch-skip 2 --launch-count 24 --metrics $M $T bench /tmp/ncu.tile --config spec --runs 3 > $OUT/ncu-tile.log 2>&1; echo "ncu tile rc $?"
echo "== inductor config =="; grep "^inductor" $OUT/ncu-inductor.log | cut -c1-200
echo "== ncu =="; awk '/^  [a-zA-Z_0-9]+ \(|triton_red/{k=$1} /duration|throughput|warps_active|registers|block_size|grid_size|long_scoreboard|hit_rate|bytes_read/{print k, $1, $(NF-1), $NF}' $OUT/ncu-inductor.log $OUT/ncu-tile.log | head -70
echo "== tune =="; grep -hE "^[a-z_]+ \[|summary" $OUT/tune-*.log | cut -c1-190 | head -24
echo "== softmax 32768 =="; grep -E "cols=32768" $OUT/bench-softmax.log | cut -c1-150
echo "== layernorm example =="; grep -E "n=(4096|16384) " $OUT/bench-ln.log | cut -c1-150
echo "== peers =="; grep -E "softmax|layernorm" $OUT/peers.log | grep -E "(cols|n)=(4096|16384|32768) " | cut -c1-110
date -u +%FT%TZ
