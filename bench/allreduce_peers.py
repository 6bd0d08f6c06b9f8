#!/usr/bin/env python3
"""Peer side of the all-reduce measurement of runtime/jit/examples/tp_mlp.rs: torch.distributed
(NCCL backend) all-reduce of bf16, in place, 1 MiB to 1 GiB, one process per GPU, timed with
CUDA events (median of 10 after 3 warm-ups), printed in tp_mlp's columns so the two tables
compare line by line (algorithm bandwidth = bytes / time; bus bandwidth = algbw * 2(n-1)/n, as
nccl-tests define them).

Usage (on the GPU host, from the repository root; N GPUs, default all):
    python3 bench/allreduce_peers.py [N]
"""

import os
import statistics
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, n, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", rank))
    if rank == 0:
        print(f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, {n} x {torch.cuda.get_device_name(0)}")
        print(f"{'bytes':>10} {'us':>10} {'algbw GB/s':>12} {'busbw GB/s':>12}")
    size = 1 << 20
    while size <= 1 << 30:
        x = torch.zeros(size // 2, dtype=torch.bfloat16, device="cuda")
        times = []
        for i in range(13):
            dist.barrier()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dist.all_reduce(x)
            end.record()
            torch.cuda.synchronize()
            if i >= 3:
                times.append(start.elapsed_time(end) * 1e-3)
        s = statistics.median(times)
        alg = size / s / 1e9
        bus = alg * 2 * (n - 1) / n
        if rank == 0:
            print(f"{size:>10} {s * 1e6:>10.1f} {alg:>12.1f} {bus:>12.1f}")
        size *= 4
    dist.destroy_process_group()


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else torch.cuda.device_count()
    if n < 1 or n > torch.cuda.device_count():
        sys.exit(f"asked for {n} GPU(s); this machine has {torch.cuda.device_count()}")
    mp.spawn(worker, args=(n, 29500 + os.getpid() % 1000), nprocs=n, join=True)


if __name__ == "__main__":
    main()
