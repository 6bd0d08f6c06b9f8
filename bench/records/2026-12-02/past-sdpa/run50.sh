#!/usr/bin/env bash
# First GPU call of the next session (from the repository root, release tilec in target/release,
# OUT set): debug builds on the GPU, the attention variants, an ncu profile of attention_tma.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
V=docs/bench-2026-12-02/past-sdpa/attention_variants.tile
date -u +%FT%TZ
# The tile-jit GPU tests (JIT=path of `cargo test --release -p tile-jit --test gpu --no-run`'s
# binary, copied into the bundle), the debug build's timeout among them (~10 s).
timeout 120 $JIT --ignored --test-threads 1 > $OUT/jit.log 2>&1; echo "jit gpu tests: $(grep '^test result' $OUT/jit.log)"; grep -E "FAILED|panicked" $OUT/jit.log | head -5
timeout 150 $T verify --debug dsl-examples/attention.tile dsl-examples/matmul.tile dsl-examples/matmul_fp8.tile > $OUT/v-debug.log 2>&1; echo "debug builds: $(grep -E '^verify' $OUT/v-debug.log)"; grep -B2 -A3 FAIL $OUT/v-debug.log | cut -c1-200 | head -8
timeout 90 $T verify $V > $OUT/v-variants.log 2>&1; echo "variants: $(grep -E '^verify' $OUT/v-variants.log)"; grep -B2 -A3 FAIL $OUT/v-variants.log | cut -c1-200 | head -8
date -u +%FT%TZ
timeout 120 $T bench dsl-examples/attention.tile $V --config spec --runs 10 > $OUT/bench.log 2>&1; grep -E "^att" $OUT/bench.log | cut -c1-112
timeout 60 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "attention" $OUT/peers.log | tail -8
date -u +%FT%TZ
timeout 120 ncu --launch-skip 3 --launch-count 1 -k regex:attention_tma --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --metrics smsp__pcsamp_warps_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_long_scoreboard,smsp__pcsamp_warps_issue_stalled_wait,smsp__pcsamp_warps_issue_stalled_math_pipe_throttle,smsp__pcsamp_warps_issue_stalled_membar $T bench dsl-examples/attention.tile --config spec --runs 2 > $OUT/ncu.log 2>&1; echo "ncu exit $?"; grep -E "Throughput|Issued|Eligible|Active Warps|Duration|Pipe|stalled" $OUT/ncu.log | head -30
date -u +%FT%TZ
