#!/usr/bin/env bash
# GPU against interpreter, on the GPU host, from the repository root, with a release tilec in
# target/release:
#
#   bash tests/gpu/run-on-gpu.sh OUTDIR [GENERATED_DIR]
#
# Verifies every example (against its reference and the interpreter), every file of tests/gpu/
# (against the interpreter, zero tolerance) and, when given, a folder of generated kernels
# (tests/gen.rs: `TILE_GEN_DIR=DIR cargo test --release -p tile-tests --test suite
# write_generated_kernels -- --ignored`). Logs go to OUTDIR; the summary lines are printed.
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
if [ -n "$gen" ]; then
  timeout 300 $tilec verify "$gen"/*.tile > "$out/verify-generated.log" 2>&1
  echo "generated ($(ls "$gen"/*.tile | wc -l) files): $(grep '^verify:' "$out/verify-generated.log")"
fi
grep -h 'FAIL' "$out"/verify-*.log | head -20
