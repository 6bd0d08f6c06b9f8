#!/usr/bin/env bash
# The planning corpus (bench/corpus/*.tile: kernels in the categories a user brings — GEMM
# epilogues, batched, grouped, small-M and fp8 GEMMs, GQA prefill and paged decode attention,
# fused residual norms, cross-entropy) on the GPU host, from the repository root, with a release
# build of tilec in target/release (and the JIT's GPU tests in target/release/deps for `jit`):
#
#   bash bench/corpus-on-gpu.sh OUTDIR [jit] [verify] [bench] [peers] [sweep=FILE:KERNEL,..] [examples] [sm80]
#
# (no step named: jit verify bench peers). Writes into OUTDIR: jit.log (the JIT's GPU tests),
# verify.log (every corpus case on the GPU against its reference), corpus.json + bench.log
# (`tilec bench --config model`: the user's default path, nothing pinned, no tune cache),
# peers.json + peers.log (bench/corpus_peers.py: torch on the same cases, ratios),
# tune-NAME.json (exhaustive sweeps: the static choice against the best; SWEEP_FLAGS=--all-cases
# sweeps every bench case, SWEEP_S seconds per kernel), examples.log
# (`tilec verify --all`), sm80.log (the examples' sm_80 PTX verified on this GPU).
# Each step has its own time limit (JIT_S, VERIFY_S, BENCH_S, PEERS_S seconds) so that one slow
# step cannot eat the others' time.
set -u
out=${1:?usage: bash bench/corpus-on-gpu.sh OUTDIR [steps..]}
shift
steps=${*:-jit verify bench peers}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
# A fresh cache: no tuned winner or kept plan from an earlier run decides anything.
export TILE_CACHE_DIR=$(mktemp -d /tmp/tile-cache.XXXX)
tilec=./target/release/tilec
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"

for step in $steps; do
  case $step in
    jit)
      t=$(ls target/release/deps/gpu-* 2>/dev/null | grep -v '\.d$' | head -1)
      timeout ${JIT_S:-120} "$t" --ignored --test-threads 1 > "$out/jit.log" 2>&1
      grep -E '^test result|FAILED|panicked' "$out/jit.log" | head -20 ;;
    verify)
      timeout ${VERIFY_S:-200} $tilec verify bench/corpus/*.tile ${VERIFY_EXTRA:-} > "$out/verify.log" 2>&1
      grep -E '^verify:' "$out/verify.log"; grep -B1 -A6 FAILED "$out/verify.log" | head -40 ;;
    bench)
      timeout ${BENCH_S:-240} $tilec bench --config model --runs 30 bench/corpus/*.tile --json "$out/corpus.json" > "$out/bench.log" 2>&1
      tail -3 "$out/bench.log" ;;
    peers)
      timeout ${PEERS_S:-200} python3 bench/corpus_peers.py "$out/corpus.json" --json "$out/peers.json" --budget $(( ${PEERS_S:-200} - 30 )) > "$out/peers.log" 2>&1
      tail -70 "$out/peers.log" ;;
    sweep=*)
      for fk in $(echo "${step#sweep=}" | tr ',' ' '); do
        f=${fk%%:*}; k=${fk#*:}
        timeout ${SWEEP_S:-200} $tilec tune --all-candidates --runs 10 ${SWEEP_FLAGS:-} --kernel "$k" "bench/corpus/$f.tile" --json "$out/tune-$k.json"
      done > "$out/tune.log" 2>&1
      grep -E 'summary:|error' "$out/tune.log" ;;
    examples)
      timeout 300 $tilec verify --all > "$out/examples.log" 2>&1
      grep '^verify:' "$out/examples.log"; grep -B1 -A6 FAILED "$out/examples.log" | head -30 ;;
    sm80)
      timeout 300 $tilec verify --all --sm 80 > "$out/sm80.log" 2>&1
      grep '^verify:' "$out/sm80.log"; grep -B1 -A6 FAILED "$out/sm80.log" | head -30 ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
rm -rf "$TILE_CACHE_DIR"
