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
from numpy.lib.stride_tricks import as_strided

from parsim.errors import InfeasibleError

# memory(stage index, start layer matrix, stop layer matrix) -> bytes matrix
MemoryFn = Callable[[int, np.ndarray, np.ndarray], np.ndarray]


def partition(layer_cost: Sequence[float], stages: int, boundary_cost: Sequence[float] | None = None,
              memory: MemoryFn | None = None, capacity_bytes: float = np.inf) -> tuple[tuple[int, ...], float]:
    """(boundaries, bottleneck time) of ``stages`` contiguous non-empty stages.

    layer_cost[i]: time of layer i; boundary_cost[i]: time charged to a stage ending after layer i,
    or boundary_cost[j][i]: that time for stage j (its boundary crosses the link from stage j's
    device to stage j+1's, which may differ from stage to stage);
    memory(j, A, B): bytes of stage j holding layers [A, B) (element-wise: partition passes a
    block of stages at once, j of shape (n, 1, 1) and A, B their bands, band_stack; a memory
    function may offer ``stacked(j0, j1, span)``, the same numbers from its own once-per-grid
    parts, parsim.search.split.StageMemory).
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
    A, B, valid = stage_grid(L)
    work = np.where(valid, prefix[B] - prefix[A], np.inf)    # inf where B <= A, and so is every c below
    span = L - stages + 1               # stage j starts at l in [j, j + span) and ends at i in (l, j + span]
    sent = band_stack(edges, span, 0, stages, rows=False) if edges.any() else None   # [j, c] = edges[j, j + 1 + c]
    stacked = getattr(memory, "stacked", None)
    block = max(1, _STACK_ELEMENTS // (span * span))
    columns = np.arange(span)
    best = np.full(span, np.inf)        # best[l - j]: the least bottleneck of stages 0..j-1 ending at l
    best[0] = 0.0
    args = []                           # per stage j: for each end i, its start l, as l - j
    cand = np.empty((span, span))
    for j0 in range(0, stages, block):
        j1 = min(stages, j0 + block)
        # c[j - j0][i - j - 1, l - j]: the time of stage j = [l, i), inf where it does not fit (ends
        # by starts, so that each end's minimum over starts runs along contiguous memory)
        c = band_stack(work, span, j0, j1).transpose(0, 2, 1)
        c = np.ascontiguousarray(c) if sent is None else np.add(c, sent[j0:j1, :, None], order="C")
        if memory is not None:
            held = stacked(j0, j1, span) if stacked is not None else \
                memory(np.arange(j0, j1)[:, None, None], band_stack(A, span, j0, j1), band_stack(B, span, j0, j1))
            np.copyto(c, np.inf, where=~(held.transpose(0, 2, 1) <= capacity_bytes))
        for j in range(j0, j1):
            np.maximum(best, c[j - j0], out=cand)        # stages so far end at l, stage j = [l, i)
            arg = cand.argmin(axis=1)                    # first minimum: deterministic
            best = cand[columns, arg]                    # over the ends i = j + 1 + index: stage j + 1's starts
            args.append(arg)
        if best.min() == np.inf:
            # the block's last stage can end nowhere, nor can any after it (asked once a block: a
            # stage that can end nowhere leaves every later one so, and the answer is the same)
            break
    if not np.isfinite(best[-1]):
        raise InfeasibleError(f"no split of {L} layers into {stages} stages fits {capacity_bytes:.4g} bytes per device")
    bounds = [L]
    for j in range(stages - 1, -1, -1):
        bounds.append(int(args[j][bounds[-1] - j - 1]) + j)
    return tuple(reversed(bounds)), float(best[-1])


# The stages partition() stacks at once: at most about this many (start, stop) pairs (4 MiB of float64).
_STACK_ELEMENTS = 1 << 19


# Kept: StageMemory.stacked finds its once-per-grid parts by the grid's identity, so every call on
# L layers must get the same arrays.  Benchmark line: GPT-3 175B's plan on 1,024 A100s
# (bench_planner.py --goals) asks 45,249 times for one grid (counts, 2026-11-28).
@functools.lru_cache(maxsize=64)
def stage_grid(L: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, B > A) over every (start, stop) layer pair: a stage = layers [A, B); read-only, shared
    by every call on L layers."""
    A, B = np.meshgrid(np.arange(L + 1), np.arange(L + 1), indexing="ij")
    valid = B > A
    for x in (A, B, valid):
        x.flags.writeable = False
    return A, B, valid


def band_stack(X: np.ndarray, span: int, j0: int, j1: int, rows: bool = True) -> np.ndarray:
    """Stages j0..j1-1's bands of X, stacked, a read-only view: for an (L + 1) x (L + 1) grid array
    (rows: starts, columns: stops), [j - j0, a, c] = X[j + a, j + 1 + c], stage j's starts
    [j, j + span) by its stops [j + 1, j + 1 + span), the pairs partition() weighs for it; with
    ``rows`` False, for a (stages, L + 1) array of one row per stage, [j - j0, c] = X[j, j + 1 + c]."""
    X = np.ascontiguousarray(X)
    if not 0 <= j0 < j1 <= X.shape[0] or j1 + span - 1 >= X.shape[1] or (rows and j1 + span - 2 >= X.shape[0]):
        raise ValueError(f"band_stack: stages {j0}..{j1 - 1} with span {span} reach past a {X.shape} array")
    s0, s1 = X.strides
    if not rows:
        return as_strided(X[j0:, j0 + 1:], shape=(j1 - j0, span), strides=(s0 + s1, s1), writeable=False)
    return as_strided(X[j0:, j0 + 1:], shape=(j1 - j0, span, span), strides=(s0 + s1, s0, s1), writeable=False)


def balanced_bounds(layer_cost: Sequence[float], stages: int,
                    boundary_cost: Sequence[float] | None = None) -> tuple[int, ...]:
    """Boundaries minimising the slowest stage, without a memory limit."""
    return partition(layer_cost, stages, boundary_cost)[0]
