#!/usr/bin/env bash
# Run 105: the previous session's next.sh (multicast.tile with its stages pinned: verify,
# `--debug`, memcheck/racecheck/synccheck; the mbarrier files run 103 did not reach), on the build
# whose f32 exponential is `ex2.approx.ftz.f32`; and every file that calls exp, exp2, sigmoid or erf
# verified with that build. The sanitizers and the verifies of phase 3 share the GPU (no timing).
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=./target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
nvidia-smi --query-gpu=driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
TILE_CACHE_DIR=/tmp/cn timeout 100 $T verify tests/gpu/multicast.tile > $R/verify-mc.log 2>&1; echo "verify multicast rc $?: $(grep '^verify:' $R/verify-mc.log)"; grep -A3 FAIL $R/verify-mc.log | head -20
TILE_CACHE_DIR=/tmp/cnd timeout 100 $T verify --debug tests/gpu/multicast.tile > $R/debug-mc.log 2>&1; echo "debug rc $?: $(grep '^verify:' $R/debug-mc.log)"; grep -A3 "FAIL\|trap" $R/debug-mc.log | head -12
date -u +%FT%TZ
job() {
  case $0 in
    memcheck|racecheck|synccheck)
      TILE_CACHE_DIR=/tmp/cn-$0 timeout 290 compute-sanitizer --tool $0 $T verify tests/gpu/multicast.tile > $R/$0.log 2>&1
      echo "$0 rc $?: $(grep -E '^verify:|ERROR SUMMARY|RACECHECK SUMMARY' $R/$0.log | tr '\n' ' ')";;
    rest)
      TILE_CACHE_DIR=/tmp/cn-rest timeout 290 $T verify tests/gpu/descriptors.tile tests/gpu/persistent.tile tests/gpu/fp8_dot.tile tests/gpu/tensor_cores.tile dsl-examples/matmul_fp8.tile > $R/verify-rest.log 2>&1
      echo "verify rest rc $?: $(grep '^verify:' $R/verify-rest.log)"; grep -A3 FAIL $R/verify-rest.log | head;;
    expex)
      TILE_CACHE_DIR=/tmp/cn-expex timeout 290 $T verify dsl-examples/attention.tile dsl-examples/softmax.tile dsl-examples/swiglu.tile dsl-examples/paged_attention.tile dsl-examples/dequant.tile dsl-examples/dropout.tile dsl-examples/histogram.tile > $R/verify-exp-examples.log 2>&1
      echo "verify exp examples rc $?: $(grep '^verify:' $R/verify-exp-examples.log)"; grep -A3 FAIL $R/verify-exp-examples.log | head;;
    expt)
      TILE_CACHE_DIR=/tmp/cn-expt timeout 290 $T verify tests/gpu/erf.tile tests/gpu/builtins.tile tests/gpu/float_conversions.tile tests/gpu/fp8.tile tests/gpu/math_f64.tile tests/gpu/random.tile tests/gpu/attention_branch.tile tests/gpu/attention_overlap.tile tests/gpu/pingpong.tile tests/gpu/warp_specialize.tile > $R/verify-exp-tests.log 2>&1
      echo "verify exp tests rc $?: $(grep '^verify:' $R/verify-exp-tests.log)"; grep -A3 FAIL $R/verify-exp-tests.log | head;;
  esac
}
export -f job; export T R
printf "memcheck\nracecheck\nsynccheck\nrest\nexpex\nexpt\n" | xargs -P 6 -n 1 bash -c 'job'
tar czf $OUT/run105.tar.gz -C $R .
date -u +%FT%TZ
