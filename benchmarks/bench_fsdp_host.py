"""FSDP2's host time per unit on 2 local gloo ranks, one thread each, at unit sizes from 4 KiB to
16 MiB: what a unit's forward (with its all-gather) and backward (with its reduce-scatter) take
beyond the plain chain and beyond the collectives timed alone (parsim.profile.comm.fsdp_excess_s,
the measurement `parsim profile-comm` writes as collective.fsdp_*).  profile-comm fits a line
through two sizes, 4 KiB and 16 MiB (per-unit time + bytes at a copy rate); this prints the line's
value at every size beside the measured excess, so a reader can see whether the line holds.

    python benchmarks/bench_fsdp_host.py

Takes a minute or two; run it with the machine otherwise idle.
"""

from __future__ import annotations

import torch.distributed as dist

import two_ranks        # benchmarks/two_ranks.py, beside this script
from parsim.exec.runtime import configure_process
from parsim.hardware.collectives import COLLECTIVE_FIT_OPS
from parsim.profile.comm import (FSDP_UNIT_BYTES, SIZES_BYTES, fsdp_excess_s, fsdp_host_fit,
                                 sharded_collective_times)

UNIT_BYTES = SIZES_BYTES[:5]        # 4 KiB .. 16 MiB
REPEATS = 7


def _collective_times(world: int) -> dict:
    """all-gather and reduce-scatter alone at each size, as profile-comm times them (64 MiB: not needed)."""
    times = {op: sharded_collective_times(op, UNIT_BYTES, world, REPEATS) for op in COLLECTIVE_FIT_OPS}
    return {op: (SIZES_BYTES, t + [float("nan")] * (len(SIZES_BYTES) - len(t))) for op, t in times.items()}


def _worker(rank: int, init: str, out: str) -> None:
    configure_process(1)         # one thread, and malloc keeping freed pages: as profile-comm and a run
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    links = _collective_times(2)
    excess = fsdp_excess_s(2, REPEATS, links, UNIT_BYTES)
    fit = fsdp_host_fit({b: excess[b] for b in FSDP_UNIT_BYTES})
    if rank == 0:
        rows = ["unit      gather: measured  line   reduce-scatter: measured  line   (ms per unit)"]
        for nbytes, got in sorted(excess.items()):
            line = [fit[op][0] + (nbytes / fit[op][1] if fit[op][1] else 0.0) for op in COLLECTIVE_FIT_OPS]
            rows.append(f"{nbytes >> 10:>7} KiB   {got[0] * 1e3:8.2f} {line[0] * 1e3:6.2f}   "
                        f"{got[1] * 1e3:16.2f} {line[1] * 1e3:6.2f}")
        rows.append("line: " + ", ".join(f"{op} {a * 1e6:.0f} us + bytes at {r / 1e9:.2f} GB/s"
                                          for op, (a, r) in fit.items()))
        with open(out, "w") as f:
            f.write("\n".join(rows) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    raise SystemExit(two_ranks.main(_worker))
