#!/usr/bin/env bash
# The whole benchmark in one command, on the GPU host, from the repository root, with a release
# build of tilec and of the launch_overhead example in target/release:
#
#   bash bench/run-on-gpu.sh OUTDIR [verify] [bench] [peers] [launch] [sweep=FILE,FILE..]
#
# (no step named: verify bench peers launch). Writes into OUTDIR: verify.log (tilec verify
# --all, plain and with --opt), tile.json + bench.log (tilec bench --all), peers.json +
# peers.log (bench/peers.py), launch.log (launch overhead and JIT compile/cached times),
# launch.json, tune-NAME.json + tune.log (exhaustive sweeps), and report.md (bench/report.py's
# table). The plot is drawn afterwards, on any machine, by `tile-plot` (bench/plot).
# Each step has its own time limit so one slow step cannot eat the others' time.
set -u
out=${1:?usage: bash bench/run-on-gpu.sh OUTDIR [steps..]}
shift
steps=${*:-verify bench peers launch}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
# Winners and compiled kernels cached outside OUTDIR (it comes back to the build machine).
export TILE_CACHE_DIR=${TILE_CACHE_DIR:-/tmp/tile-cache}
tilec=./target/release/tilec
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/gpu.txt"
date -u +%Y-%m-%dT%H:%M:%SZ >> "$out/gpu.txt"

for step in $steps; do
  case $step in
    verify)
      { timeout 300 $tilec verify --all; timeout 300 $tilec verify --all --opt; } > "$out/verify.log" 2>&1
      grep '^verify:' "$out/verify.log" ;;
    bench)
      timeout 420 $tilec bench --all --runs 50 --json "$out/tile.json" > "$out/bench.log" 2>&1
      tail -1 "$out/bench.log" ;;
    peers)
      timeout 420 python3 bench/peers.py --json "$out/peers.json" > "$out/peers.log" 2>&1
      tail -1 "$out/peers.log" ;;
    launch)
      timeout 120 ./target/release/examples/launch_overhead --json "$out/launch.json" > "$out/launch.log" 2>&1
      grep -E 'JitKernel|raw cuLaunchKernel|cold|disk cache' "$out/launch.log" ;;
    sweep=*)
      for f in $(echo "${step#sweep=}" | tr ',' ' '); do
        timeout 300 $tilec tune --all-candidates --runs 20 "dsl-examples/$f.tile" --json "$out/tune-$f.json"
      done > "$out/tune.log" 2>&1
      grep 'summary:' "$out/tune.log" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
if [ -f "$out/tile.json" ] && [ -f "$out/peers.json" ]; then
  launch=()
  [ -f "$out/launch.json" ] && launch=(--launch "$out/launch.json")
  python3 bench/report.py "$out/tile.json" "$out/peers.json" "${launch[@]}" --out "$out/report.md" > /dev/null && echo "wrote $out/report.md"
fi
