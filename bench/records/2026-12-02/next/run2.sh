#!/usr/bin/env bash
# Second GPU call of the next session (as run.sh): the rest of tests/gpu (pingpong.tile
# included), racecheck on the turns and the persistent kernels' last sizes, the static choice
# at head dim 64 against every candidate (the thirteenth session's run 64: attention_tma 1.190;
# a model change for it is checked here), and `tilec bench --rounds` on its first GPU run.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 240 $T verify tests/gpu/{persistent,pingpong,random,reproducers,tensor_cores,tuple_reduce,warp_specialize}.tile > $OUT/v-gpu2.log 2>&1; echo "tests/gpu, second half: rc $? $(grep -E '^verify' $OUT/v-gpu2.log) ($(grep -c '^  ok' $OUT/v-gpu2.log) ok lines)"; grep FAIL $OUT/v-gpu2.log | head -3
python3 - <<'PY'
import re
for name in ("pingpong", "persistent"):
    s = open(f"tests/gpu/{name}.tile").read()
    s = re.sub(r"sizes\(([^)]*)\)", lambda m: "sizes(" + ", ".join(
        p.split(":")[0] + ": [" + p.split("[")[1].rstrip("]").split(",")[-1].strip() + "]" for p in re.findall(r"\w+: \[[^\]]*\]", m.group(1))) + ")", s)
    open(f"/tmp/{name}_san.tile", "w").write(s)
PY
timeout 80 compute-sanitizer --tool racecheck $T verify /tmp/pingpong_san.tile /tmp/persistent_san.tile > $OUT/san-race.log 2>&1; echo "racecheck rc $?: $(grep -E '^verify|RACECHECK SUMMARY' $OUT/san-race.log | tr '\n' ' ')"
date -u +%FT%TZ
timeout 100 $T tune dsl-examples/attention.tile --kernel attention_tma -D D=64 --all-candidates --runs 10 > $OUT/tune-tma.log 2>&1; grep summary $OUT/tune-tma.log | cut -c1-160
# The 128 x 8192 attention spreads 7.09-7.65 ms within one call: three rounds alternating it
# with the 16-head case.
timeout 80 $T bench dsl-examples/attention.tile --kernel attention_rotated --config spec --runs 10 --rounds 3 > $OUT/bench-rounds.log 2>&1; sed -n '/median round/,$p' $OUT/bench-rounds.log | cut -c1-120
date -u +%FT%TZ
