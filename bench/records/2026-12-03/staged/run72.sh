#!/usr/bin/env bash
# Loads staged with cp.async in loops without tensor-core dots (`#[stages(..)]` on row loops):
# staged.tile verified and under memcheck/racecheck, every candidate of its kernels timed on the
# largest bench case (tune --all-candidates), the examples timed in the same call; the sub-word
# stores of 89e1f4b verified (tests/gpu files with u8/fp8/f16 tiles).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
D=docs/bench-2026-12-03/staged
date -u +%FT%TZ
timeout 60 $T verify $D/staged.tile > $OUT/verify.log 2>&1; echo "verify rc $? $(grep -E '^verify' $OUT/verify.log)"; grep -E "FAIL|error" $OUT/verify.log | head -5
timeout 35 $T verify tests/gpu/narrow_int.tile tests/gpu/fp8.tile tests/gpu/float_conversions.tile > $OUT/verify-subword.log 2>&1; echo "verify sub-word rc $? $(grep -E '^verify' $OUT/verify-subword.log)"; grep FAIL $OUT/verify-subword.log | head -3
timeout 40 compute-sanitizer --tool memcheck $T verify $D/staged.tile --kernel softmax_staged --kernel layernorm_staged > $OUT/memcheck.log 2>&1; echo "memcheck rc $?: $(grep -E '^verify|ERROR SUMMARY' $OUT/memcheck.log | tr '\n' ' ')"
timeout 50 compute-sanitizer --tool racecheck $T verify $D/staged.tile --kernel softmax_staged --kernel layernorm_staged > $OUT/racecheck.log 2>&1; echo "racecheck rc $?: $(grep -E '^verify|RACECHECK SUMMARY' $OUT/racecheck.log | tr '\n' ' ')"
# kernel, pins, seconds: every feasible candidate on the largest bench case, 20 runs each.
for k in "softmax_staged -D T=bf16 -D ROWS=1 55 sm-bf16" "softmax_staged -D T=f32 -D ROWS=1 40 sm-f32" "layernorm_staged -D T=f32 50 lns-f32" "layernorm_staged -D T=bf16 50 lns-bf16" "layernorm_rows_staged -D T=f32 -D ROWS=1 40 lnr-f32" "layernorm_rows_staged -D T=bf16 -D ROWS=1 40 lnr-bf16"; do
  set -- $k
  timeout ${@: -2:1} $T tune $D/staged.tile --kernel $1 ${@:2:$#-3} --all-candidates --runs 20 --json $OUT/tune-${@: -1}.json > $OUT/tune-${@: -1}.log 2>&1; echo "tune $1 ${@: -1} rc $?"
done
timeout 60 $T bench dsl-examples/softmax.tile dsl-examples/layernorm.tile --kernel softmax --kernel layernorm --runs 20 --json $OUT/bench-ex.json > $OUT/bench-ex.log 2>&1; echo "bench examples rc $?"
echo "== tune: the five fastest candidates of each =="
for f in $OUT/tune-*.json; do python3 - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for rec in d["cases"]:
    c = [x for x in rec["candidates"] if x.get("median_ms")]
    c.sort(key=lambda x: x["median_ms"])
    print("--", sys.argv[1].split("/")[-1], rec["case"], "static", rec.get("static"), rec.get("static_ms"))
    for x in c[:5]:
        print("   %.4f ms  regs %s  %s" % (x["median_ms"], x["registers"], x["config"]))
PY
done
echo "== examples =="; grep -E "(cols|n)=(4096|16384|32768) " $OUT/bench-ex.log | cut -c1-150
date -u +%FT%TZ
