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

import torch
import torch.distributed as dist

import two_ranks        # benchmarks/two_ranks.py, beside this script
from parsim.profile.comm import measure_busy_sender     # the measurement parsim profile-comm writes

COMPUTE_S, SENDS = 0.03, 30


def _worker(rank: int, init: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    idle, busy = measure_busy_sender(rank, 1, SENDS, COMPUTE_S)
    if rank == 1:
        with open(out, "w") as f:
            f.write(f"256 KiB send, post to arrival: sender idle {idle * 1e3:.2f} ms, sender computing "
                    f"{busy * 1e3:.2f} ms ({busy / idle:.1f}x)\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    raise SystemExit(two_ranks.main(_worker))
