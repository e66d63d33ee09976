"""How a collective and compute running at once slow each other, measured on synthetic kernels
(``parsim profile-comm``, parsim.profile.overlap), never on the model being priced.

One point per (op, message bytes, load, threads per rank): the collective alone takes ``comm``,
the load alone ``compute``, both at once ``both``; what the collective adds to the compute is
``added = both - compute`` (module parsim.profile.overlap), split into two named terms:

- ``overlap`` in [0, 1]: the share of the collective hidden behind the compute,
  1 - min(added, comm) / comm;
- ``contention`` >= 0: what running both costs beyond running them one after the other, per
  second of the collective alone, max(0, added - comm) / comm (on CPU, gloo's threads and the
  compute share cores, caches and memory bandwidth).

The simulator charges a collective of priced time t on the compute stream (1 - overlap +
contention) x t (parsim.sim.engine).  A load is a synthetic kernel of known compute intensity
(``flops_per_byte``: FLOPs per byte it moves, FLOPs = 2 x MACs): a GEMM (compute-bound) or a
streaming add (memory-bound); a model's stage is looked up at the intensity of its backward
(``backward_intensity`` in parsim.sim.simulate), interpolated in log bytes and log intensity
between the measured points, clamped at the ends (Calculon's efficiency tables, calculon/
network.py, interpolate the same way in size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

OPS = ("all_reduce", "reduce_scatter", "p2p")


@dataclass(frozen=True)
class Interaction:
    op: str                   # all_reduce | reduce_scatter | p2p
    message_bytes: int        # the collective's buffer (a send's message)
    load: str                 # the synthetic kernel: gemm | stream
    flops_per_byte: float     # its compute intensity
    threads: int              # compute threads per rank
    overlap: float            # [0, 1]
    contention: float         # >= 0, per second of the collective alone


def _interp(points: list[tuple[float, float]], x: float) -> float:
    """Linear in log x between (x, y) points sorted by x, clamped at the ends."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            w = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + w * (y1 - y0)
    return points[-1][1]


def interaction_at(table: tuple[Interaction, ...], op: str, message_bytes: float, flops_per_byte: float,
                   threads: int) -> tuple[float, float] | None:
    """(overlap, contention) of ``op`` on ``message_bytes`` under a load of ``flops_per_byte``,
    from the points measured at the thread count nearest ``threads``; None where ``op`` has none."""
    rows = [p for p in table if p.op == op]
    if not rows:
        return None
    near = min({p.threads for p in rows}, key=lambda t: (abs(t - threads), t))
    by_load: dict[float, list[Interaction]] = {}
    for p in rows:
        if p.threads == near:
            by_load.setdefault(p.flops_per_byte, []).append(p)
    out = []
    for term in ("overlap", "contention"):
        per_load = sorted((fpb, _interp(sorted((p.message_bytes, getattr(p, term)) for p in ps),
                                        max(message_bytes, 1.0)))
                          for fpb, ps in by_load.items())
        out.append(_interp(per_load, max(flops_per_byte, 1e-12)))
    overlap, contention = out
    return min(1.0, max(0.0, overlap)), max(0.0, contention)


def read_interaction(rows, fail) -> tuple[Interaction, ...]:
    """``collective.interaction``: a list of [op, message_bytes, load, flops_per_byte, threads,
    overlap, contention] rows, as profile-comm writes them; ``fail(message)`` -> InputError."""
    out = []
    for i, row in enumerate(rows):
        if not (isinstance(row, list) and len(row) == 7):
            raise fail(f"interaction[{i}]: expected [op, message_bytes, load, flops_per_byte, threads, overlap, "
                       f"contention], got {row!r}")
        op, nbytes, load, fpb, threads, overlap, contention = row
        if op not in OPS:
            raise fail(f"interaction[{i}]: op must be one of {', '.join(OPS)}, got {op!r}")
        nums = (nbytes, fpb, threads, overlap, contention)
        if any(isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) for x in nums):
            raise fail(f"interaction[{i}]: message_bytes, flops_per_byte, threads, overlap and contention must be "
                       f"numbers, got {row!r}")
        if nbytes <= 0 or fpb <= 0 or threads < 1 or not 0 <= overlap <= 1 or contention < 0:
            raise fail(f"interaction[{i}]: need message_bytes > 0, flops_per_byte > 0, threads >= 1, overlap in "
                       f"[0, 1], contention >= 0; got {row!r}")
        out.append(Interaction(op, int(nbytes), str(load), float(fpb), int(threads), float(overlap),
                               float(contention)))
    return tuple(out)


def interaction_flow(table: tuple[Interaction, ...]) -> str:
    """``interaction: [...]`` for the collective section's flow mapping, with a leading ", "."""
    if not table:
        return ""
    rows = ", ".join(f"[{p.op}, {p.message_bytes}, {p.load}, {p.flops_per_byte:.4g}, {p.threads}, "
                     f"{p.overlap:.3f}, {p.contention:.3f}]" for p in table)
    return f", interaction: [{rows}]"
