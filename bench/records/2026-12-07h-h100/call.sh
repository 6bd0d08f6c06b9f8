#!/usr/bin/env bash
# GPU call 12: loops split over a cluster (split-K): correctness at every split, decode-shaped
# GEMMs timed on the model's choice beside torch, sanitizers; f64 math.
set -u
O=$1
export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
export TILE_CACHE_DIR=$(mktemp -d)
t=./target/release/tilec
for s in 2 4 8; do
  timeout 45 $t verify --split $s bench/corpus/small_m_gemm.tile > $O/verify_split$s.log 2>&1; echo "split $s: $(grep -E '^verify:' $O/verify_split$s.log)"; grep -B1 -A4 FAIL $O/verify_split$s.log | head -10
done
timeout 60 $t verify --split 2 bench/corpus/gemm_epilogue.tile > $O/verify_epi.log 2>&1; echo "epilogue split 2: $(grep -E '^verify:' $O/verify_epi.log)"
timeout 120 $t bench bench/corpus/small_m_gemm.tile --config model --runs 50 --json $O/smm.json > $O/smm.log 2>&1; tail -12 $O/smm.log | cut -c1-200
timeout 100 python3 bench/corpus_peers.py $O/smm.json --json $O/smm_peers.json --only small_m_gemm,small_m_gemv --no-compile --budget 80 > $O/smm_peers.log 2>&1; tail -14 $O/smm_peers.log
for s in 1 2 4; do timeout 30 $t bench .gpu/exp/smm_pinned.tile --config spec --split $s --runs 50 > $O/pinned$s.log 2>&1; grep -E "^small_m" $O/pinned$s.log | cut -c1-150 | sed "s/^/split $s: /"; done
timeout 50 compute-sanitizer --tool memcheck $t verify --split 4 .gpu/exp/smm_one.tile > $O/memcheck.log 2>&1; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log
timeout 40 compute-sanitizer --tool racecheck $t verify --split 2 .gpu/exp/smm_one.tile > $O/racecheck.log 2>&1; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|^verify:" $O/racecheck.log
timeout 40 $t verify tests/gpu/math_f64.tile tests/gpu/erf.tile > $O/math.log 2>&1; grep -E "^verify:" $O/math.log; grep -B1 -A5 FAIL $O/math.log | head -10
cd $O && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
