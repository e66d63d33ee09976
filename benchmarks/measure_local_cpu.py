"""Measure the numbers in hardware_profiles/local-cpu.yaml on this machine (one thread per rank).

    python benchmarks/measure_local_cpu.py

Prints medians over repeats: fp32 matmul FLOP/s at several sizes (the efficiency curve), memory
copy bandwidth, and gloo point-to-point and all-reduce bandwidth between 2 processes on loopback.
`parsim profile-comm` (a later issue) replaces the communication half.
"""

import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _median_time(fn, repeats=7, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def compute():
    torch.set_num_threads(1)
    for n in (64, 128, 256, 512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        t = _median_time(lambda: torch.mm(a, b))
        print(f"matmul n={n:5d} flops={2 * n**3:.3e}  {2 * n**3 / t / 1e9:7.2f} GFLOP/s")
    x = torch.randn(64 * 2**20 // 4)
    y = torch.empty_like(x)
    t = _median_time(lambda: y.copy_(x))
    print(f"copy 64 MiB: {2 * x.numel() * 4 / t / 1e9:.2f} GB/s (read + write)")


def _comm(rank, world):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for nbytes in (2**16, 2**20, 2**24, 2**26):
        x = torch.ones(nbytes // 4)

        def p2p():
            if rank == 0:
                dist.send(x, 1)
                dist.recv(x, 1)
            else:
                dist.recv(x, 0)
                dist.send(x, 0)
        t_p2p = _median_time(p2p) / 2
        t_ar = _median_time(lambda: dist.all_reduce(x))
        if rank == 0:
            print(f"{nbytes:>9d} B  p2p {t_p2p * 1e6:9.1f} us {nbytes / t_p2p / 1e9:5.2f} GB/s   "
                  f"all_reduce {t_ar * 1e6:9.1f} us algbw {nbytes / t_ar / 1e9:5.2f} GB/s")
    dist.destroy_process_group()


if __name__ == "__main__":
    compute()
    mp.spawn(_comm, args=(2,), nprocs=2)
