#!/usr/bin/env bash
# GPU against interpreter, on the GPU host, from the repository root, with a release tilec in
# target/release:
#
#   bash tests/gpu/run-on-gpu.sh OUTDIR [GENERATED_DIR]
#
# Verifies every example (against its reference and the interpreter), every file of tests/gpu/
# (against the interpreter, zero tolerance) and, when given, a folder of generated kernels
# (tests/gen.rs: `TILE_GEN_DIR=DIR cargo test --release -p tile-tests --test suite
# write_generated_kernels -- --ignored`). With JIT_TESTS set to the tile-jit GPU test binary
# (`cargo test --release -p tile-jit --test gpu --no-run` prints its path; copy it next to
# tilec), its ignored tests run too (the JIT on the GPU: tensor maps, caches, launches), and
# with SANITIZE=1 compute-sanitizer's memcheck, racecheck and synccheck run over
# tests/gpu/descriptors.tile and tests/gpu/tensor_cores.tile. Logs go to OUTDIR; the summary
# lines are printed.
set -u
out=${1:?usage: bash tests/gpu/run-on-gpu.sh OUTDIR [GENERATED_DIR]}
gen=${2:-}
mkdir -p "$out"
tilec=./target/release/tilec
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
date -u +%Y-%m-%dT%H:%M:%SZ
timeout 300 $tilec verify --all > "$out/verify-examples.log" 2>&1
echo "examples: $(grep '^verify:' "$out/verify-examples.log")"
timeout 300 $tilec verify tests/gpu/*.tile > "$out/verify-tests-gpu.log" 2>&1
echo "tests/gpu: $(grep '^verify:' "$out/verify-tests-gpu.log")"
# sm_80 code (runs on newer GPUs too): fp8 conversions in integer arithmetic.
timeout 120 $tilec verify --sm 80 tests/gpu/fp8.tile > "$out/verify-fp8-sm80.log" 2>&1
echo "tests/gpu/fp8.tile on sm_80: $(grep '^verify:' "$out/verify-fp8-sm80.log")"
if [ -n "$gen" ]; then
  timeout 300 $tilec verify "$gen"/*.tile > "$out/verify-generated.log" 2>&1
  echo "generated ($(ls "$gen"/*.tile | wc -l) files): $(grep '^verify:' "$out/verify-generated.log")"
fi
if [ -n "${JIT_TESTS:-}" ]; then
  timeout 200 "$JIT_TESTS" --ignored --test-threads 1 > "$out/jit-gpu-tests.log" 2>&1
  echo "tile-jit GPU tests: $(grep '^test result' "$out/jit-gpu-tests.log")"
fi
if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck synccheck; do
    timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 $tilec verify tests/gpu/descriptors.tile tests/gpu/tensor_cores.tile > "$out/sanitize-$tool.log" 2>&1
    echo "$tool (exit $?): $(grep -h -E '^verify:|ERROR SUMMARY' "$out/sanitize-$tool.log" | tr '\n' ' ')"
  done
fi
grep -h 'FAIL' "$out"/verify-*.log | head -20
