#!/usr/bin/env bash
# Run 115: the Hopper issue's acceptance on the build of this session's last commit, in one call:
# every example verified against the interpreter (`tilec verify --all`, ragged sizes included)
# and under compute-sanitizer memcheck, racecheck and synccheck (eight processes at a time);
# the bf16 GEMM (matmul_tma, static choice) and attention_rotated (4 x 32 heads, seq 8192, head
# dim 128) against their peers in the same call, two rounds of the attention.
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=$PWD/target/release/tilec
R=$OUT/r; mkdir -p $R
date -u +%FT%TZ
TILE_CACHE_DIR=/tmp/c115 timeout 170 $T verify --all > $R/verify-all.log 2>&1; echo "verify --all rc $?: $(grep '^verify:' $R/verify-all.log)"; grep FAIL $R/verify-all.log | head -5
san() {
  tool=$1; f=$2; b=$(basename $f .tile)
  TILE_CACHE_DIR=/tmp/c115-$tool-$b timeout 200 compute-sanitizer --tool $tool $T verify $f > $R/$tool-$b.log 2>&1
  echo "$tool $b rc $?: $(grep -E '^verify:|ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool-$b.log | tr '\n' ' ')"
}
export -f san; export T R
for tool in memcheck racecheck synccheck; do for f in dsl-examples/*.tile; do echo "$tool $f"; done; done | xargs -P 8 -n 2 bash -c 'san "$0" "$1"' | sort > $R/sanitizers.txt
grep -c "rc 0" $R/sanitizers.txt; grep -v "rc 0" $R/sanitizers.txt | head -5
tar czf $OUT/run115.tar.gz -C $R .
TILE_CACHE_DIR=/tmp/c115-mm timeout 80 $T bench dsl-examples/matmul.tile --kernel matmul_tma --config model --runs 20 > $R/bench-matmul_tma.log 2>&1; echo "bench matmul_tma rc $?"
timeout 70 python3 bench/peers.py --only matmul --no-compile-time --no-torch-compile --json $R/peers-matmul.json > $R/peers-matmul.log 2>&1; echo "peers matmul rc $?"
for r in 1 2; do
  TILE_CACHE_DIR=/tmp/c115-att timeout 80 $T bench dsl-examples/attention.tile --kernel attention_rotated --config model --runs 10 > $R/att-$r.log 2>&1; echo "round $r att rc $?"
  timeout 80 python3 bench/peers.py --only attention --no-compile-time --no-torch-compile --json $R/att-peers-$r.json > $R/att-peers-$r.log 2>&1; echo "round $r peers rc $?"
done
tar czf $OUT/run115.tar.gz -C $R .
grep -E "^matmul_tma " $R/bench-matmul_tma.log | cut -c1-100
grep -E " ms " $R/peers-matmul.log | grep -E "torch|triton" | cut -c1-100
for r in 1 2; do echo "-- round $r"; grep -E "^attention_rotated .*seq=8192" $R/att-$r.log | cut -c1-100; grep -E "seq=8192.*torch " $R/att-peers-$r.log | grep " ms " | cut -c1-100; done
date -u +%FT%TZ
