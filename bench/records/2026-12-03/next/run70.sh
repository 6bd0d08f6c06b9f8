#!/usr/bin/env bash
# Next GPU call (prepared 2026-12-03, not yet run): the examples changed in d06f504 verified on
# the GPU (the sub-word stores of 89e1f4b, softmax_chunked, layernorm_chunked with Welford), the chunk-mean shift against Welford,
# every candidate of the row kernels timed on their largest bench case (data for the model's
# static choice: register counts from ptxas next to each candidate's time), and torch.compile's
# layernorm kernel source. run71.sh is the attention half.
set -u
export PATH=$PATH:/usr/local/cuda/bin
export TILE_CACHE_DIR=/tmp/tilecache
T=./target/release/tilec
D=docs/bench-2026-12-03/next
date -u +%FT%TZ
timeout 50 $T verify dsl-examples/softmax.tile dsl-examples/layernorm.tile $D/chunkmean.tile > $OUT/verify.log 2>&1; echo "verify rc $? $(grep -E '^verify' $OUT/verify.log)"; grep FAIL $OUT/verify.log | head -3
timeout 40 $T verify tests/gpu/narrow_int.tile tests/gpu/fp8.tile tests/gpu/float_conversions.tile > $OUT/verify-subword.log 2>&1; echo "verify sub-word rc $? $(grep -E '^verify' $OUT/verify-subword.log)"; grep FAIL $OUT/verify-subword.log | head -3
timeout 50 compute-sanitizer --tool memcheck $T verify dsl-examples/softmax.tile > $OUT/memcheck.log 2>&1; echo "memcheck rc $?: $(grep -E '^verify|ERROR SUMMARY' $OUT/memcheck.log | tr '\n' ' ')"
# file, kernel, seconds: the bench sizes' largest case, every candidate (20 runs each).
for k in "dsl-examples/softmax.tile softmax_chunked 50" "dsl-examples/layernorm.tile layernorm_chunked 50" "$D/chunkmean.tile layernorm_chunkmean 55" "$D/chunkmean.tile layernorm_chunkmean_evict 45" "dsl-examples/softmax.tile softmax 40" "dsl-examples/layernorm.tile layernorm 40" "dsl-examples/rmsnorm.tile rmsnorm 30"; do
  set -- $k
  timeout $3 $T tune $1 --kernel $2 --all-candidates --runs 20 --json $OUT/tune-$2.json > $OUT/tune-$2.log 2>&1; echo "tune $2 rc $?"
done
timeout 60 $T bench $D/chunkmean.tile dsl-examples/layernorm.tile --kernel layernorm_chunkmean --kernel layernorm_chunkmean_evict --kernel layernorm_chunked --kernel layernorm --top-k 8 --runs 20 --json $OUT/bench-ln.json > $OUT/bench-ln.log 2>&1; echo "bench layernorm rc $?"
cat > /tmp/inductor_ln.py <<'PY'
import torch
import torch.nn.functional as F
for dt in (torch.float32, torch.bfloat16):
    x = torch.randn(4096, 16384, device="cuda", dtype=dt)
    w = torch.randn(16384, device="cuda", dtype=dt)
    b = torch.randn(16384, device="cuda", dtype=dt)
    f = torch.compile(lambda x, w, b: F.layer_norm(x, (16384,), w, b, 1e-5))
    f(x, w, b)
    torch.cuda.synchronize()
PY
TORCH_LOGS=output_code timeout 50 python3 /tmp/inductor_ln.py > $OUT/inductor-ln.log 2>&1; echo "inductor dump rc $? ($(grep -c '@triton.jit' $OUT/inductor-ln.log) kernels)"
echo "== tune (model vs winner) =="; grep -hE "^\S+ \[|winner:" $OUT/tune-*.log | cut -c1-150 | head -30
echo "== layernorm =="; grep -E "n=(4096|16384) " $OUT/bench-ln.log | cut -c1-150
date -u +%FT%TZ
