#!/usr/bin/env bash
# Second GPU call of the next session (repository root; release tilec; OUT set; ~6 minutes):
# - persistent attention with heads fastest (tile t: head t % heads, query block t / heads,
#   causal longest first), so that each round of 132 tiles holds blocks of equal length; the
#   round-robin order of run 59 left causal programs unequal (0.69 ms against 0.50 for
#   attention_rotated at 16 x 8192, D128);
# - the static choice of attention_tma at head dim 64 against every candidate (1.20x in run 53);
# - the TMA-store GEMMs next to cuBLAS again.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
date -u +%FT%TZ
python3 - <<'PY'
s = open("tests/gpu/persistent.tile").read()
a = s.index("#[warps(8, 4)]\n#[stages(2, 3)]\n#[grid(min(cdiv(seq, BM) * heads, PROGRAMS))]")
k = s[a:]
v = k.replace("kernel attention_persistent<", "kernel attention_heads_first<").replace("run attention_persistent {", "run attention_heads_first {")
v = v.replace("        let bm = tile % blocks;\n", "        let bm = tile / heads;\n").replace("        let row0 = (tile / blocks) * seq;\n", "        let row0 = (tile % heads) * seq;\n")
assert "tile / heads" in v and "tile % heads" in v
open("/tmp/att_heads.tile", "w").write(k + "\n" + v)
PY
timeout 80 $T verify /tmp/att_heads.tile > $OUT/v-heads.log 2>&1; echo "verify: rc $? $(grep -E '^verify' $OUT/v-heads.log)"
timeout 120 $T bench /tmp/att_heads.tile dsl-examples/attention.tile --config spec --runs 10 > $OUT/bench-att.log 2>&1; grep -E "D=128" $OUT/bench-att.log | cut -c1-100
timeout 70 python3 bench/peers.py --only attention,matmul --no-compile-time --no-torch-compile --json $OUT/peers.json > $OUT/peers.log 2>&1; grep -E "torch" $OUT/peers.log | head -8
date -u +%FT%TZ
timeout 90 $T tune dsl-examples/attention.tile --kernel attention_tma -D D=64 --all-candidates --runs 10 > $OUT/tune-d64.log 2>&1; grep summary $OUT/tune-d64.log
timeout 40 $T bench docs/bench-2026-12-02/persistent/run60-mmbench.tile --config spec --runs 20 > $OUT/bench-mm.log 2>&1; grep -E "^matmul" $OUT/bench-mm.log | cut -c1-100
date -u +%FT%TZ
