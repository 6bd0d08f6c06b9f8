#!/usr/bin/env bash
# The tuner now also times candidates the model estimates just over the register budget: the
# 32768-column cases of softmax and softmax_staged, tuned (top 4), in one call.
set -u
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
python3 - <<'PY'
s = open("dsl-examples/softmax.tile").read()
s = s.replace("bench(rows: [4096], cols: [1024, 4096, 16384, 32768]);", "bench(rows: [4096], cols: [32768]);")
s = s.replace("bench(rows: [4096], cols: [16384, 32768]);", "bench(rows: [4096], cols: [32768]);")
open("/tmp/softmax32k.tile", "w").write(s)
PY
timeout 75 $T bench /tmp/softmax32k.tile --kernel softmax_staged --kernel softmax --top-k 4 --runs 20 --json $OUT/bench.json > $OUT/bench.log 2>&1; echo "bench rc $?"
grep -E "cols=" $OUT/bench.log | cut -c1-150
date -u +%FT%TZ
