"""gloo's all-reduce on 2 local ranks: the same bytes in fp32 and in bf16, interleaved, so that
the two are compared in one run on the same machine state.  ``parsim profile-comm`` measures
fp32 only; the ratio says how far a bf16 plan's gradient all-reduce departs from that.

    python benchmarks/bench_allreduce_dtypes.py

Prints, per size, the median time of each dtype over repeats and the bf16 / fp32 ratio.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

import two_ranks        # benchmarks/two_ranks.py, beside this script

SIZES_BYTES = (8 << 20, 48 << 20)      # a 25 MiB-class bucket, and ResNet-50's bf16 gradients
ROUNDS, REPEATS = 3, 5


def _worker(rank: int, init: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    lines = []
    for nbytes in SIZES_BYTES:
        times: dict[str, list[float]] = {"fp32": [], "bf16": []}
        for _ in range(ROUNDS):                       # fp32 and bf16 take turns
            for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
                t = torch.ones(nbytes // torch.empty((), dtype=dtype).element_size(), dtype=dtype)
                for _ in range(REPEATS):
                    dist.barrier()
                    t0 = time.perf_counter()
                    dist.all_reduce(t)
                    times[name].append(time.perf_counter() - t0)
        f32, b16 = statistics.median(times["fp32"]), statistics.median(times["bf16"])
        lines.append(f"{nbytes / 2**20:.0f} MiB: fp32 {f32 * 1e3:.1f} ms, bf16 {b16 * 1e3:.1f} ms, "
                     f"bf16 / fp32 {b16 / f32:.2f}")
    if rank == 0:
        with open(out, "w") as f:
            f.write("\n".join(lines) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    raise SystemExit(two_ranks.main(_worker))
