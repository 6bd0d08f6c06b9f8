#!/usr/bin/env bash
# Persistent GEMM with 4 stages (tile loop stores from the accumulator layout): verify, racecheck,
# bench next to the 3-stage persistent kernel, matmul_tma and cuBLAS in one call.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
python3 - <<'PY'
s = open("tests/gpu/persistent.tile").read()
s4 = s.replace("#[stages(3)]", "#[stages(4)]").replace("matmul_persistent", "matmul_persistent_s4")
a = s4.index("run matmul_persistent_s4 {"); a = s4.rfind("\n", 0, a)
keep = [s4[:s4.index("#[warps(4)]")]]
for blk in s4[a:].split("\nrun ")[1:]:
    if blk.startswith("matmul_persistent_s4 {"):
        keep.append("run " + blk.split("\n}\n")[0] + "\n}\n\n")
open("/tmp/pers4.tile", "w").write("".join(keep))
san = "".join(keep).replace("sizes(M: [256, 300, 512, 128, 64, 70], N: [512, 200, 512, 256, 64, 97], K: [1024, 320, 448, 0, 64, 150]);", "sizes(M: [300, 128], N: [200, 256], K: [320, 0]);").replace("consts(T: bf16, BN: [128, 256], PROGRAMS: [1, 3, 132], GROUP_M: 2);", "consts(T: bf16, BN: 256, PROGRAMS: 3, GROUP_M: 2);")
open("/tmp/pers4_san.tile", "w").write(san)
def kern(path, name):
    s = open(path).read(); a = s.index("kernel " + name + "<"); a = s.rfind("\n\n", 0, a) + 2
    return s[a:s.index("\n}\n", a) + 3]
def runs(text, kernel):
    out = []
    for blk in text.split("\nrun ")[1:]:
        if blk.startswith(kernel + " {") and "bench(" in blk:
            out.append("run " + blk.split("\n}\n")[0] + "\n}\n")
    return out
m = open("dsl-examples/matmul.tile").read(); p4 = open("/tmp/pers4.tile").read()
out = kern("dsl-examples/matmul.tile", "matmul_tma") + "\n" + "".join(runs(m, "matmul_tma"))
out += "\n" + kern("tests/gpu/persistent.tile", "matmul_persistent") + "\n" + "".join(runs(s, "matmul_persistent"))
out += "\n" + kern("/tmp/pers4.tile", "matmul_persistent_s4") + "\n" + "".join(runs(p4, "matmul_persistent_s4"))
open("/tmp/mmbench.tile", "w").write(out)
PY
timeout 60 $T verify --debug /tmp/pers4_san.tile > $OUT/v-debug.log 2>&1; echo "debug s4: rc $? $(grep -E '^verify' $OUT/v-debug.log)"; grep -E "FAIL|trap" $OUT/v-debug.log | head -5
timeout 100 $T verify /tmp/pers4.tile > $OUT/v-pers4.log 2>&1; echo "persistent s4: rc $? $(grep -E '^verify' $OUT/v-pers4.log)"; grep -E "FAIL" $OUT/v-pers4.log | head -5
date -u +%FT%TZ
timeout 120 $T bench /tmp/mmbench.tile --config spec --runs 30 > $OUT/bench.log 2>&1; grep -E "^matmul" $OUT/bench.log | cut -c1-110
timeout 60 python3 bench/peers.py --only matmul --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "torch" $OUT/peers.log | head -2
timeout 100 $T bench /tmp/mmbench.tile --config spec --runs 30 > $OUT/bench2.log 2>&1; grep -E "^matmul" $OUT/bench2.log | cut -c1-110
date -u +%FT%TZ
timeout 50 compute-sanitizer --tool racecheck $T verify /tmp/pers4_san.tile > $OUT/san-race.log 2>&1; echo "racecheck rc $?: $(grep -E '^verify|RACECHECK SUMMARY' $OUT/san-race.log | tr '\n' ' ')"
timeout 40 compute-sanitizer --tool memcheck $T verify /tmp/pers4_san.tile > $OUT/san-mem.log 2>&1; echo "memcheck rc $?: $(grep -E '^verify|ERROR SUMMARY' $OUT/san-mem.log | tr '\n' ' ')"
date -u +%FT%TZ
