"""A gloo send of one pipeline boundary (256 KiB, the small GPT's) between 2 local ranks, one
thread each: the time from the send's post to its arrival when the sender then waits (idle),
and when it goes straight on computing (busy), as torch's ``_PipelineScheduleRuntime``
(interleaved 1F1B, ZB-H1) does after every SEND.  The two alternate in one run, so the ratio
holds on a noisy machine.  It is the measurement behind an open question: interleaved plans run
8-13% slower than predicted on this CPU, and their measured traces show milliseconds between a
forward and its consumer on the other rank where the simulator prices 0.1-0.3 ms.

    python benchmarks/bench_p2p_busy_sender.py

Prints the median post-to-arrival time of each case over 15 sends.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

import two_ranks        # benchmarks/two_ranks.py, beside this script

BOUNDARY_ELEMENTS = 65536             # 256 KiB of fp32: batch 2 x 128 tokens x 256 hidden
COMPUTE_S, SENDS = 0.03, 30


def _compute(a: torch.Tensor, seconds: float) -> None:
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        a @ a


def _worker(rank: int, init: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    x, a = torch.ones(BOUNDARY_ELEMENTS), torch.randn(384, 384)
    arrived: dict[str, list[float]] = {"idle": [], "busy": []}
    for k in range(SENDS):
        mode = "busy" if k % 2 else "idle"
        dist.barrier()
        t0 = time.perf_counter()
        if rank == 0:
            work = dist.isend(x, 1)
            if mode == "busy":
                _compute(a, COMPUTE_S)
            work.wait()
        else:
            dist.recv(x, 0)
            arrived[mode].append(time.perf_counter() - t0)
            _compute(a, COMPUTE_S)          # the receiving stage computes next, as in a pipeline
        dist.barrier()
    if rank == 1:
        idle, busy = (statistics.median(arrived[m]) for m in ("idle", "busy"))
        with open(out, "w") as f:
            f.write(f"256 KiB send, post to arrival: sender idle {idle * 1e3:.2f} ms, sender computing "
                    f"{busy * 1e3:.2f} ms ({busy / idle:.1f}x)\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    raise SystemExit(two_ranks.main(_worker))
