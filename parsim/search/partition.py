"""Stage partitioning: a pure function from per-layer costs to stage boundaries.

Min-max dynamic program, as PipeDream (Narayanan et al. 2019, Sec. 3.1) and Alpa's stage
construction do: choose boundaries 0 = b0 < b1 < ... < bk = L minimising
max_j ( sum of layer costs in stage j + the cost of sending its boundary activation ).

    best[j][i] = min over l < i of max(best[j-1][l], cost(l, i))      O(k * L^2)
"""

from __future__ import annotations

from typing import Sequence

from parsim.errors import InfeasibleError


def balanced_bounds(layer_cost: Sequence[float], stages: int,
                    boundary_cost: Sequence[float] | None = None) -> tuple[int, ...]:
    """Boundaries of ``stages`` contiguous, non-empty stages minimising the slowest stage.

    layer_cost[i]: time of layer i (forward + backward); boundary_cost[i]: extra time charged to
    a stage that ends after layer i (its activation transfer), 0 for the last layer."""
    L = len(layer_cost)
    if stages > L:
        raise InfeasibleError(f"cannot cut {L} layers into {stages} pipeline stages; use pp <= {L}")
    prefix = [0.0]
    for c in layer_cost:
        prefix.append(prefix[-1] + c)
    edge = list(boundary_cost) if boundary_cost is not None else [0.0] * L

    def cost(a: int, b: int) -> float:   # layers [a, b)
        return prefix[b] - prefix[a] + (edge[b - 1] if b < L else 0.0)

    inf = float("inf")
    best = [[inf] * (L + 1) for _ in range(stages + 1)]
    arg = [[0] * (L + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for j in range(1, stages + 1):
        for i in range(j, L - (stages - j) + 1):
            for l in range(j - 1, i):
                v = max(best[j - 1][l], cost(l, i))
                if v < best[j][i] - 1e-15:
                    best[j][i], arg[j][i] = v, l
    bounds = [L]
    for j in range(stages, 0, -1):
        bounds.append(arg[j][bounds[-1]])
    return tuple(reversed(bounds))
