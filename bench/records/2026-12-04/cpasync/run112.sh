#!/usr/bin/env bash
# Run 112: why the pointer attention at head dim 128 (bf16, 16 x 8192, not causal, BM 128 BN 128,
# 8 warps, one block per SM) runs slower with 2 stages after the exp2/fma change (run 111:
# 1.171 ms against 1.096 before; with 3 stages 1.031). Three variants of the example, each
# with only that bench case and its configuration as the spec's (`--config spec`): the old
# formulation on 2 stages, the new on 2 and on 3. Timed in alternating processes, three
# rounds; then Nsight Compute on each (warp states, memory, SASS stall samples).
set -u
export PATH=$PATH:/usr/local/cuda/bin
T=$PWD/target/release/tilec
R=$OUT/r; mkdir -p $R /tmp/v112
date -u +%FT%TZ
python3 - <<'PY'
s = open("dsl-examples/attention.tile").read()
kernel = s[s.index("kernel attention<"):s.index("run attention {")]
old = (kernel
       .replace('    assert(scale > 0.0, "attention: scale must be positive (the running max is kept scaled)");\n', "")
       .replace("    // exp(x) = exp2(x * log2(e)); a positive scale commutes with the row max.\n", "")
       .replace("    let qk_scale = scale * 1.4426950408889634;\n\n", "")
       .replace("        let s = dot(qt, trans(kb));", "        let s = dot(qt, trans(kb)) * scale;")
       .replace("max(m_i, max(s, axis: 1) * qk_scale)", "max(m_i, max(s, axis: 1))")
       .replace("exp2(m_i - m_new)", "exp(m_i - m_new)")
       .replace("exp2(fma(s, qk_scale, -m_new[:, None]))", "exp(s - m_new[:, None])"))
assert old.count("exp(") == 2 and "* scale;" in old
d128 = "consts(T: bf16, D: 128, CAUSAL: [false, true], BM: 128, BN: 64);"
d64 = "    bench(bh: [32], seq: [2048]);\n    consts(T: bf16, D: 64, CAUSAL: [false, true], BM: 128, BN: 128);"
def variant(src, stages):
    i = src.index("run attention {\n    // `tilec bench` only: 16 heads")
    head, tail = src[:i], src[i:]
    tail = tail.replace(d128, "consts(T: bf16, D: 128, CAUSAL: false, BM: 128, BN: 128);", 1)
    assert d64 in tail
    tail = tail.replace(d64, "    consts(T: bf16, D: 64, CAUSAL: [false, true], BM: 128, BN: 128);", 1)
    head = head.replace("#[stages(2, 3)]\nkernel attention<", f"#[stages({stages})]\nkernel attention<", 1)
    return head + tail
open("/tmp/v112/old2.tile", "w").write(variant(s.replace(kernel, old), 2))
open("/tmp/v112/new2.tile", "w").write(variant(s, 2))
open("/tmp/v112/new3.tile", "w").write(variant(s, 3))
PY
for r in 1 2 3; do
  for v in old2 new2 new3; do
    TILE_CACHE_DIR=/tmp/c112-$v timeout 60 $T bench /tmp/v112/$v.tile --kernel attention --config spec --runs 20 > $R/bench-$v-$r.log 2>&1; echo "round $r $v rc $?"
  done
done
S="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats --section SourceCounters"
for v in old2 new2 new3; do
  TILE_CACHE_DIR=/tmp/c112-$v timeout 90 ncu -k regex:"^attention\$" --launch-count 1 $S -o $R/$v $T bench /tmp/v112/$v.tile --kernel attention --config spec --runs 1 > $R/ncu-$v-run.log 2>&1; echo "ncu $v rc $?"
  ncu -i $R/$v.ncu-rep --page details > $R/$v-details.txt 2>&1
  ncu -i $R/$v.ncu-rep --page source --print-source sass --csv > /tmp/v112/$v-sass.csv 2>&1
  rm -f $R/$v.ncu-rep
done
python3 - > $R/sass-stalls.txt <<'PY'
import csv, collections
for v in ["old2", "new2", "new3"]:
    rows = list(csv.reader(open(f"/tmp/v112/{v}-sass.csv")))
    hi = [i for i, r in enumerate(rows) if r and r[0] == "Address"][0]
    h = rows[hi]; body = [r for r in rows[hi + 1:] if len(r) == len(h)]
    ie, src, st = h.index("Instructions Executed"), h.index("Source"), h.index("Warp Stall Sampling (All Samples)")
    total = sum(int(r[st]) for r in body)
    print(f"== {v}: {sum(int(r[ie]) for r in body)} instructions, {total} stall samples; top instructions by samples")
    for r in sorted(body, key=lambda r: -int(r[st]))[:14]:
        print(f"   {int(r[st]):6d} {100*int(r[st])/total:5.1f}%  {r[src].strip()[:90]}")
PY
tar czf $OUT/run112.tar.gz -C $R .
for r in 1 2 3; do for v in old2 new2 new3; do echo "$r $v $(grep -E '^attention .*D=128' $R/bench-$v-$r.log | grep -v '(' | cut -c1-90)"; done; done
for v in old2 new2 new3; do echo "== $v"; grep -E "Duration|Executed Instructions |Registers Per|L2 Cache Throughput|Warp Cycles Per Issued|Issue Slots Busy" $R/$v-details.txt | head -8; done
head -60 $R/sass-stalls.txt
date -u +%FT%TZ
