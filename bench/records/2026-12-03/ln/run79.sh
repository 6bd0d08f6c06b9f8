#!/usr/bin/env bash
# Plain loops unrolled four copies an iteration (gir: "4 copies of the body"), with
# layernorm_chunked and softmax_chunked rewritten as plain loops (no load carried one iteration
# ahead in registers; torch.compile's shape): the changed examples verified (memcheck on
# ind.tile), every candidate of the chunked kernels timed at their largest bench case, and the
# peers, in one call (cut to fit the session's device time).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
D=docs/bench-2026-12-03/ln
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
timeout 90 $T verify dsl-examples/layernorm.tile dsl-examples/softmax.tile dsl-examples/histogram.tile $D/ind.tile tests/gpu/staged_loads.tile > $R/verify.log 2>&1; echo "verify rc $? $(grep -E '^verify' $R/verify.log)"; grep FAIL $R/verify.log | head -3
timeout 40 compute-sanitizer --tool memcheck $T verify $D/ind.tile > $R/memcheck.log 2>&1; echo "memcheck rc $?: $(grep -E '^verify|ERROR SUMMARY' $R/memcheck.log | tr '\n' ' ')"
date -u +%FT%TZ
for k in "dsl-examples/layernorm.tile layernorm_chunked 50" "dsl-examples/softmax.tile softmax_chunked 50"; do
  set -- $k
  timeout $3 $T tune $1 --kernel $2 --all-candidates --runs 20 --json $R/tune-$2.json > $R/tune-$2.log 2>&1; echo "tune $2 rc $?"
done
timeout 100 python3 bench/peers.py --only layernorm,softmax --no-compile-time --json $R/peers.json > $R/peers.log 2>&1; echo "peers rc $?"
tar czf $OUT/run79.tar.gz -C $R .
echo "== tune =="; grep -hE "^[a-z_]+ \[|summary" $R/tune-*.log | cut -c1-190
python3 - $R <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/tune-*.json")):
    d = json.load(open(f))
    for c in d.get("cases", []):
        cs = [x for x in c.get("candidates", []) if x.get("median_ms")]
        cs.sort(key=lambda x: x["median_ms"])
        print(c.get("kernel"), c.get("case"), " | ".join(f'{x["config"]} {x["median_ms"]:.4f} r{x.get("registers")}' for x in cs[:3]))
PY
echo "== peers =="; grep -E "layernorm|softmax" $R/peers.log | grep -E "(n|cols)=(4096|16384|32768) " | cut -c1-110
date -u +%FT%TZ
