# One torch SDPA forward (bf16, batch 16 heads 1 as bh 16, seq 8192, head dim 128, not causal),
# after a warm-up, for Nsight Compute to profile beside attention_rotated.
import torch
import torch.nn.functional as F

q, k, v = (torch.randn(16, 1, 8192, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("profiled")
F.scaled_dot_product_attention(q, k, v)
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
