"""Stage partitioning: a pure function from per-layer costs to stage boundaries.

Min-max dynamic program, as PipeDream (Narayanan et al. 2019, Sec. 3.1) and Alpa's stage
construction do: choose boundaries 0 = b0 < b1 < ... < bk = L minimising
max_j (time of the layers in stage j + the time to send its boundary activation),
subject to every stage fitting device memory:

    best[j][i] = min over l < i of max(best[j-1][l], cost(l, i)),   memory(l, i, j) <= cap

Each step j is one numpy operation over the (l, i) matrix, so k stages over L layers cost
O(k * L^2) element operations but only O(k) Python steps.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

from parsim.errors import InfeasibleError

# memory(stage index, start layer matrix, stop layer matrix) -> bytes matrix
MemoryFn = Callable[[int, np.ndarray, np.ndarray], np.ndarray]


def partition(layer_cost: Sequence[float], stages: int, boundary_cost: Sequence[float] | None = None,
              memory: MemoryFn | None = None, capacity_bytes: float = np.inf) -> tuple[tuple[int, ...], float]:
    """(boundaries, bottleneck time) of ``stages`` contiguous non-empty stages.

    layer_cost[i]: time of layer i; boundary_cost[i]: time charged to a stage ending after layer i,
    or boundary_cost[j][i]: that time for stage j (its boundary crosses the link from stage j's
    device to stage j+1's, which may differ from stage to stage);
    memory(j, A, B): bytes of stage j holding layers [A, B) (element-wise over matrices).
    Raises InfeasibleError if no split fits ``capacity_bytes``."""
    L = len(layer_cost)
    if stages > L:
        raise InfeasibleError(f"cannot cut {L} layers into {stages} pipeline stages; use pp <= {L}")
    prefix = np.concatenate([[0.0], np.cumsum(np.asarray(layer_cost, dtype=float))])
    edges = np.zeros((stages, L + 1))
    if boundary_cost is not None:
        given = np.asarray(boundary_cost, dtype=float)
        rows = np.broadcast_to(given, (stages, given.shape[-1])) if given.ndim == 1 else given
        edges[:, 1:L] = rows[:stages, : L - 1]                        # no transfer after the last layer
    A, B, valid = _grid(L)
    work = np.where(valid, prefix[B] - prefix[A], np.inf)    # inf where B <= A, and so is every c below
    sends = edges.any(axis=1)
    span = L - stages + 1               # stage j starts at l in [j, j + span) and ends at i in (l, j + span]
    columns = np.arange(span)
    best = np.full(span, np.inf)        # best[l - j]: the least bottleneck of stages 0..j-1 ending at l
    best[0] = 0.0
    args = []                           # per stage j: for each end i, its start l, as l - j
    for j in range(stages):
        rows, cols = slice(j, j + span), slice(j + 1, j + 1 + span)
        c = work[rows, cols] + edges[j][cols][None, :] if sends[j] else work[rows, cols]
        if memory is not None:
            c = np.where(memory(j, A[rows, cols], B[rows, cols]) <= capacity_bytes, c, np.inf)
        cand = np.maximum(best[:, None], c)          # cand[l - j, i - j - 1]: stages so far end at l, stage j = [l, i)
        arg = np.argmin(cand, axis=0)                # first minimum: deterministic
        best = cand[arg, columns]                    # over the ends i = j + 1 + index: stage j + 1's starts
        args.append(arg)
        if best.min() == np.inf:
            break                                    # stage j can end nowhere, nor can any after it
    if not np.isfinite(best[-1]):
        raise InfeasibleError(f"no split of {L} layers into {stages} stages fits {capacity_bytes:.4g} bytes per device")
    bounds = [L]
    for j in range(stages - 1, -1, -1):
        bounds.append(int(args[j][bounds[-1] - j - 1]) + j)
    return tuple(reversed(bounds)), float(best[-1])


# Kept: grid_band knows a band by its grid's identity, so every call on L layers must get the same
# arrays.  Benchmark line: GPT-3 175B's plan on 1,024 A100s (bench_planner.py --goals) asks 45,249
# times for one grid (counts, 2026-11-28).
@functools.lru_cache(maxsize=64)
def _grid(L: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, B > A) over every (start, stop) layer pair: a stage = layers [A, B); read-only, shared
    by every call on L layers.  partition() asks the memory function for stage j over the band of
    pairs stage j can take, a view of rows [j, j + span) and columns [j + 1, j + 1 + span) of A and
    B (grid_band names it), so a memory function may do its stage-independent work once per grid."""
    A, B = np.meshgrid(np.arange(L + 1), np.arange(L + 1), indexing="ij")
    valid = B > A
    for x in (A, B, valid):
        x.flags.writeable = False
    return A, B, valid


def grid_band(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray, slice, slice] | None:
    """(whole A, whole B, rows, columns) of the grid that A and B are a band of (as partition()
    passes them), None for other arrays: the grid holds A[l, i] = l and B[l, i] = i."""
    if A.ndim != 2 or A.base is None or B.base is None or A.size == 0:
        return None
    L = A.base.shape[0] - 1
    gA, gB, _ = _grid(L)
    if A.base is not gA or B.base is not gB:
        return None
    r, c = int(A[0, 0]), int(B[0, 0])
    return gA, gB, slice(r, r + A.shape[0]), slice(c, c + A.shape[1])


def balanced_bounds(layer_cost: Sequence[float], stages: int,
                    boundary_cost: Sequence[float] | None = None) -> tuple[int, ...]:
    """Boundaries minimising the slowest stage, without a memory limit."""
    return partition(layer_cost, stages, boundary_cost)[0]
