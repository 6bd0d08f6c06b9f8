#!/usr/bin/env bash
# Persistent GEMM (tests/gpu/persistent.tile): debug verify (bounded waits), verify, sanitizers,
# bench next to matmul_tma and cuBLAS in one call; then regressions (verify --all, tests/gpu).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
# the bench specs of matmul_tma and matmul_persistent in one file
python3 - <<'PY'
import re
def runs(path, kernel):
    s = open(path).read(); out = []
    i = 0
    while True:
        a = s.find("\nrun " + kernel + " {", i)
        if a < 0: break
        b = s.index("\n}\n", a) + 3
        blk = s[a + 1:b]
        if "bench(" in blk: out.append(blk)
        i = b
    return out
def kern(path, name):
    s = open(path).read()
    a = s.index("kernel " + name + "<")
    a = s.rfind("\n\n", 0, a) + 2
    b = s.index("\n}\n", a) + 3
    return s[a:b]
out = kern("dsl-examples/matmul.tile", "matmul_tma") + "\n" + "".join(runs("dsl-examples/matmul.tile", "matmul_tma"))
out += "\n" + kern("tests/gpu/persistent.tile", "matmul_persistent") + "\n" + "".join(runs("tests/gpu/persistent.tile", "matmul_persistent"))
open("/tmp/mmbench.tile", "w").write(out)
# sanitizer file: a few small cases of each kernel
s = open("tests/gpu/persistent.tile").read()
s = s.replace("sizes(M: [256, 300, 512, 128, 64, 70], N: [512, 200, 512, 256, 64, 97], K: [1024, 320, 448, 0, 64, 150]);", "sizes(M: [300, 128], N: [200, 256], K: [320, 0]);")
s = s.replace("consts(T: bf16, BN: [128, 256], PROGRAMS: [1, 3, 132], GROUP_M: 2);", "consts(T: bf16, BN: 256, PROGRAMS: 3, GROUP_M: 2);")
s = s.replace("sizes(M: [256, 300, 64, 192], N: [256, 200, 64, 320], K: [1024, 320, 0, 576]);", "sizes(M: [192], N: [320], K: [576]);")
s = s.replace("consts(T: [bf16, f16], BM: [64, 128], BN: [64, 128], PROGRAMS: [2, 132], GROUP_M: 2);", "consts(T: bf16, BM: 64, BN: 128, PROGRAMS: 2, GROUP_M: 2);")
open("/tmp/pers_san.tile", "w").write(s)
PY
timeout 60 $T verify --debug /tmp/pers_san.tile > $OUT/v-debug.log 2>&1; echo "debug: rc $? $(grep -E '^verify' $OUT/v-debug.log)"; grep -E "FAIL|trap|wait" $OUT/v-debug.log | head -5
timeout 140 $T verify tests/gpu/persistent.tile > $OUT/v-pers.log 2>&1; echo "persistent: rc $? $(grep -E '^verify' $OUT/v-pers.log)"; grep -E "FAIL" $OUT/v-pers.log | head -5
date -u +%FT%TZ
timeout 90 $T bench /tmp/mmbench.tile --config spec --runs 30 > $OUT/bench.log 2>&1; grep -E "^matmul" $OUT/bench.log | cut -c1-110
timeout 60 python3 bench/peers.py --only matmul --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "M=4096|M=8192" $OUT/peers.log | head -6
date -u +%FT%TZ
for tool in memcheck racecheck synccheck; do timeout 50 compute-sanitizer --tool $tool $T verify /tmp/pers_san.tile > $OUT/san-$tool.log 2>&1; echo "$tool rc $?: $(grep -E '^verify|ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san-$tool.log | tr '\n' ' ')"; done
date -u +%FT%TZ
timeout 100 $T verify tests/gpu/warp_specialize.tile dsl-examples/matmul.tile > $OUT/v-gpu.log 2>&1; echo "warp_specialize + matmul.tile: rc $? $(grep -E '^verify' $OUT/v-gpu.log)"; grep FAIL $OUT/v-gpu.log | head -3
date -u +%FT%TZ
