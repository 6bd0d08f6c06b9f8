#!/usr/bin/env bash
# Staged row loops at fixed warps and stages (the model estimates the staged candidates over
# the register budget, so `tune --all-candidates` skipped them in run 72): one file per
# (warps, stages), benched in two alternating rounds next to the examples; staged.tile under
# memcheck and racecheck; the u8 stores of 89e1f4b verified (narrow_int.tile).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
D=docs/bench-2026-12-03/staged
date -u +%FT%TZ
timeout 50 $T verify tests/gpu/narrow_int.tile > $OUT/verify-narrow.log 2>&1; echo "verify narrow_int rc $? $(grep -E '^verify' $OUT/verify-narrow.log)"; grep FAIL $OUT/verify-narrow.log | head -3
timeout 50 compute-sanitizer --tool memcheck $T verify $D/staged.tile > $OUT/memcheck.log 2>&1; echo "memcheck rc $?: $(grep -E '^verify|ERROR SUMMARY' $OUT/memcheck.log | tr '\n' ' ')"
timeout 80 compute-sanitizer --tool racecheck $T verify $D/staged.tile > $OUT/racecheck.log 2>&1; echo "racecheck rc $?: $(grep -E '^verify|RACECHECK SUMMARY' $OUT/racecheck.log | tr '\n' ' ')"
mkdir -p /tmp/v
files=()
for w in 16 32; do for s in 1 2 3; do
  python3 - "$D/staged.tile" /tmp/v/w${w}s${s}.tile $w $s <<'PY'
import re, sys
src, dst, w, s = sys.argv[1:]
t = open(src).read()
t = re.sub(r'#\[warps\([^)]*\)\]', '#[warps(%s)]' % w, t)
t = re.sub(r'#\[stages\([^)]*\)\]', '#[stages(%s)]' % s, t)
t = t.replace('const ROWS: i32 in [1, 2, 4]', 'const ROWS: i32 in [1]').replace('const PROGRAMS: i32 in [132, 264]', 'const PROGRAMS: i32 in [132]')
t = t.replace('bench(rows: [4096], cols: [1024, 4096, 16384, 32768]);', 'bench(rows: [4096], cols: [16384, 32768]);')
t = t.replace('bench(rows: [4096], n: [1024, 4096, 16384]);', 'bench(rows: [4096], n: [16384]);')
t = t.replace('kernel softmax_staged', 'kernel softmax_w%ss%s' % (w, s)).replace('run softmax_staged', 'run softmax_w%ss%s' % (w, s))
t = t.replace('kernel layernorm_rows_staged', 'kernel lnrows_w%ss%s' % (w, s)).replace('run layernorm_rows_staged', 'run lnrows_w%ss%s' % (w, s))
open(dst, 'w').write(t)
PY
  files+=(/tmp/v/w${w}s${s}.tile)
done; done
ks=""; for w in 16 32; do for s in 1 2 3; do ks="$ks --kernel softmax_w${w}s${s} --kernel lnrows_w${w}s${s}"; done; done
timeout 200 $T bench "${files[@]}" $ks --config model --runs 20 --rounds 2 --json $OUT/bench-staged.json > $OUT/bench-staged.log 2>&1; echo "bench staged rc $?"
timeout 70 $T bench dsl-examples/softmax.tile dsl-examples/layernorm.tile --kernel softmax --kernel layernorm --runs 20 --json $OUT/bench-ex.json > $OUT/bench-ex.log 2>&1; echo "bench examples rc $?"
echo "== staged (median round) =="; sed -n '/median round/,$p' $OUT/bench-staged.log | grep -E "(cols|n)=(16384|32768) |error" | cut -c1-150
echo "== examples =="; grep -E "(cols|n)=(16384|32768) " $OUT/bench-ex.log | cut -c1-150
date -u +%FT%TZ
