#!/usr/bin/env bash
# Run 61 (2026-12-02, thirteenth session), written as the next session's first call (from the repository root; release tilec in
# target/release; OUT set; about 8 minutes). What the 2026-12-02 twelfth session left unverified:
# TMA stores (9263be4) ran under time caps in its last call (275 cases passed, 0 failed, but
# parts of matmul.tile, warp_specialize.tile, fp8_dot.tile and persistent.tile were not
# reached), and no sanitizer has run on them. This call verifies every example and every
# tests/gpu file whole, then runs the sanitizers on the kernels that store through descriptors.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
timeout 200 $T verify --all > $OUT/v-all.log 2>&1; echo "verify --all: rc $? $(grep -E '^verify' $OUT/v-all.log)"; grep FAIL $OUT/v-all.log | head -3
timeout 220 $T verify tests/gpu/*.tile > $OUT/v-gpu.log 2>&1; echo "tests/gpu: rc $? $(grep -E '^verify' $OUT/v-gpu.log) ($(grep -c '^  ok' $OUT/v-gpu.log) ok lines)"; grep FAIL $OUT/v-gpu.log | head -3
date -u +%FT%TZ
# Sanitizers on TMA stores: descriptors.tile's last size of each spec.
python3 - <<'PY'
import re
s = open("tests/gpu/descriptors.tile").read()
s = re.sub(r"sizes\(([^)]*)\)", lambda m: "sizes(" + ", ".join(
    p.split(":")[0] + ": [" + p.split("[")[1].rstrip("]").split(",")[-1].strip() + "]" for p in re.findall(r"\w+: \[[^\]]*\]", m.group(1))) + ")", s)
open("/tmp/desc_san.tile", "w").write(s)
PY
for tool in memcheck racecheck synccheck; do timeout 50 compute-sanitizer --tool $tool $T verify /tmp/desc_san.tile > $OUT/san-$tool.log 2>&1; echo "$tool rc $?: $(grep -E '^verify|ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san-$tool.log | tr '\n' ' ')"; done
date -u +%FT%TZ
