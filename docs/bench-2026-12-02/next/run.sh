#!/usr/bin/env bash
# First GPU call of the next session (repository root; release tilec in target/release; OUT
# set; about 8 minutes): the baseline after whatever that session changed — `verify --all`,
# every tests/gpu file (pingpong.tile included), racecheck on the turns and the persistent
# kernels' last sizes — then the static choice at head dim 64 against every candidate (the
# thirteenth session's run 64: attention_tma 1.190, attention 1.145 / 1.131; a model change
# for them is checked here).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 200 $T verify --all > $OUT/v-all.log 2>&1; echo "verify --all: rc $? $(grep -E '^verify' $OUT/v-all.log)"; grep FAIL $OUT/v-all.log | head -3
timeout 240 $T verify tests/gpu/*.tile > $OUT/v-gpu.log 2>&1; echo "tests/gpu: rc $? $(grep -E '^verify' $OUT/v-gpu.log) ($(grep -c '^  ok' $OUT/v-gpu.log) ok lines)"; grep FAIL $OUT/v-gpu.log | head -3
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
timeout 120 $T tune dsl-examples/attention.tile --kernel attention_tma -D D=64 --all-candidates --runs 10 > $OUT/tune-tma.log 2>&1; grep summary $OUT/tune-tma.log | cut -c1-160
date -u +%FT%TZ
