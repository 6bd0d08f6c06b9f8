"""Host-to-device copy bandwidth torch reaches from pinned memory, for the same copy as
runtime/jit/examples/runtime_bench.rs (256 MiB, median of 10, GPU time from CUDA events), so the
two can be compared as a ratio in one run on the GPU host:

    python3 bench/pinned_copy.py
"""
import torch

BYTES = 256 << 20
src = torch.zeros(BYTES, dtype=torch.uint8).pin_memory()
dst = torch.empty(BYTES, dtype=torch.uint8, device="cuda")
stream = torch.cuda.Stream()
times = []
with torch.cuda.stream(stream):
    for _ in range(12):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
times = sorted(times[2:])
gbps = BYTES / times[len(times) // 2] / 1e9
print(f"torch {torch.__version__}: 256 MiB pinned host to device {gbps:.1f} GB/s")
print(f"BENCH torch_pinned_gbps={gbps:.2f}")
