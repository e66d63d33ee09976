"""Pareto frontiers of (time, memory) points as padded numpy arrays, many at once: the arithmetic
of parsim.shard.search's frontier search ("+" and "min" of frontiers, then the frontier kept)
for whole matrices of frontiers in one call.

A batch of frontiers is two float arrays ``t`` and ``m`` of shape (..., P): one frontier per
leading index, its points first, sorted as search.pareto sorts them, then padding (time and
memory both inf; no point with infinite memory is ever kept, so padding never is).  Every result
also carries, per point, the index it came from in the input's last axis, so that a search can
walk a chosen point back to the strategies it was made of, and, per frontier, whether it was
thinned (so that a batch of several searches knows which of them thinned).

Each function does exactly what its list counterpart in parsim.shard.search does, point for
point: the same pairs in the same order, the same stable sort on (time, memory) (ties: the
first), the same cap and thinning (round-half-even spacing by rank), so the same floats in the
same order (tests/test_strategy_search.py compares the two).
"""

from __future__ import annotations

import numpy as np


def pareto(t: np.ndarray, m: np.ndarray, keep: int | None, cap: float | None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """search.pareto on every frontier of the batch: (time, memory, source index along the last
    axis, whether each frontier was thinned: a bool array of the leading shape)."""
    lead, p = t.shape[:-1], t.shape[-1]
    if p == 1:                                          # one point each: kept if it fits
        kept = (m < np.inf) if cap is None else (m <= cap) & (m < np.inf)
        return (np.where(kept, t, np.inf), np.where(kept, m, np.inf), np.zeros(t.shape, dtype=np.intp),
                np.zeros(lead, dtype=bool))
    t, m = t.reshape(-1, p), m.reshape(-1, p)
    rows = np.arange(t.shape[0])[:, None]
    order = np.lexsort((m, t))                          # stable: equal (time, memory) keep their order
    ts, ms = t[rows, order], m[rows, order]
    mv = ms if cap is None else np.where(ms <= cap, ms, np.inf)    # over the cap: as if absent
    # kept: less memory than every valid point before it (so valid, and never infinite memory)
    before = np.empty_like(mv)                          # the least valid memory before each point
    before[:, 0] = np.inf
    np.minimum.accumulate(mv[:, :-1], axis=1, out=before[:, 1:])
    kept = mv < before
    n = np.cumsum(kept, axis=1)
    rank = n - 1
    n = n[:, -1:]
    over = (n[:, 0] > keep) if keep is not None else np.zeros(t.shape[0], dtype=bool)
    if over.any():
        # the ranks round(i (n - 1) / (keep - 1)), i < keep, of a frontier of n > keep points
        picks = np.round(np.arange(keep) * (n - 1) / (keep - 1))           # (rows, keep)
        kept &= (n <= keep) | (rank[:, :, None] == picks[:, None, :]).any(-1)
        rank = np.cumsum(kept, axis=1) - 1
    width = max(1, int(rank[:, -1].max(initial=-1)) + 1)
    if kept.all():                                      # every point kept: already packed
        out_t, out_m, src = ts, ms, order
    else:
        pack = np.argsort(~kept, axis=1, kind="stable")[:, :width]      # the kept points first, in order
        live = kept[rows, pack]
        out_t = np.where(live, ts[rows, pack], np.inf)
        out_m = np.where(live, ms[rows, pack], np.inf)
        src = order[rows, pack]
    return (out_t.reshape(lead + (width,)), out_m.reshape(lead + (width,)), src.reshape(lead + (width,)),
            over.reshape(lead))


def plus(at: np.ndarray, am: np.ndarray, bt: np.ndarray, bm: np.ndarray, keep: int | None, cap: float | None
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """"+" of two batches of frontiers (broadcast over the leading axes): every pair, a's points
    outer, then the frontier; (time, memory, index into a, index into b, thinned per frontier)."""
    pb = bt.shape[-1]
    st = at[..., :, None] + bt[..., None, :]
    sm = am[..., :, None] + bm[..., None, :]
    t, m, src, thinned = pareto(st.reshape(st.shape[:-2] + (-1,)), sm.reshape(sm.shape[:-2] + (-1,)), keep, cap)
    ia, ib = np.divmod(src, pb)
    return t, m, ia, ib, thinned


def union(t: np.ndarray, m: np.ndarray, axis: int, keep: int | None, cap: float | None
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """"min" over ``axis`` (not the last): the frontiers' points in axis order, then the frontier;
    (time, memory, index along ``axis``, index into that frontier, thinned per frontier)."""
    p, nd = t.shape[-1], t.ndim
    if axis % nd != nd - 2:                             # axis just before the points, the rest in order
        perm = [a for a in range(nd - 1) if a != axis % nd] + [axis % nd, nd - 1]
        t, m = t.transpose(perm), m.transpose(perm)
    out_t, out_m, src, thinned = pareto(t.reshape(t.shape[:-2] + (-1,)), m.reshape(m.shape[:-2] + (-1,)), keep, cap)
    j, q = np.divmod(src, p)
    return out_t, out_m, j, q, thinned
