#!/usr/bin/env bash
# The static model with elementwise chains held element by element and a program's re-reads
# hitting L2 when the resident programs' traffic fits there: every candidate of the kernels whose
# static choice moved (dropout, histogram, layernorm_chunked, softmax_chunked; layernorm_fixed
# was timed per candidate in run 88) timed by `tilec tune --all-candidates`, so that the old
# and the new choice read off one table. Then next/run71.sh (attention_rotated against SDPA in
# alternating processes).
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/cache-89
T=./target/release/tilec
R=$OUT/r; mkdir -p $R/att
date -u +%FT%TZ
for fk in "dropout dropout" "histogram histogram" "layernorm layernorm_chunked" "softmax softmax_chunked"; do
  set -- $fk
  timeout 100 $T tune dsl-examples/$1.tile --kernel $2 --all-candidates --runs 20 --json $R/tune-$2.json > $R/tune-$2.log 2>&1
  echo "tune $2 rc $?"
done
OUT=$R/att timeout 230 bash docs/bench-2026-12-03/next/run71.sh > $R/att/run71.log 2>&1; echo "run71 rc $?"
tar czf $OUT/run89.tar.gz -C $R .
grep -h -E "^[a-z_]+ \[|model's choice|summary" $R/tune-*.log | cut -c1-150
tail -8 $R/att/run71.log
date -u +%FT%TZ
