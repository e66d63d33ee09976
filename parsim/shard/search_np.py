"""The strategy search of parsim.shard.search on numpy arrays, answer for answer: without a memory
cap (``fastest``: every frontier its fastest point, so one number per strategy) and under one
(``capped``: frontiers as padded batches, parsim.shard.frontiers), each also for several cost
graphs of one shape at once (``fastest_many``, ``capped_many``).  Both make the same
eliminations in the same order (costgraph.eliminate_all) with the same sums in the same order,
and remember each elimination's arithmetic by the exact bytes of its operands, since a
transformer's identical blocks repeat it."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from parsim.shard import frontiers
from parsim.shard.costgraph import CostGraph, SearchResult, adjacency, assignment_cost, eliminate_all


def _lexmin(t: np.ndarray, m: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time, memory, index) of the least (time, memory) along ``axis``, the first of equals: what
    pareto(..., keep=1) keeps of points listed in index order."""
    t_min = t.min(axis=axis, keepdims=True)
    tied = t == t_min
    m_tied = np.where(tied, m, np.inf)
    m_min = m_tied.min(axis=axis, keepdims=True)
    idx = (tied & (m_tied == m_min)).argmax(axis=axis)
    return np.squeeze(t_min, axis), np.squeeze(m_min, axis), idx


def _one_shape(graphs: Sequence[CostGraph], caller: str) -> CostGraph:
    """The first of ``graphs`` once all have its shape (the same strategies per node and the same
    edges), as a search of several at once needs; else ValueError."""
    first = graphs[0]
    for g in graphs[1:]:
        if [len(c) for c in g.node_costs] != [len(c) for c in first.node_costs] or \
                g.edge_costs.keys() != first.edge_costs.keys():
            raise ValueError(f"{caller}: the cost graphs differ in shape; search them one by one")
    return first


def fastest(graph: CostGraph) -> SearchResult | None:
    """search(graph) without a cap, each frontier its first point, as numpy arrays: the same
    eliminations in the same order and the same sums in the same order, so the same answer; the
    choices are recorded per elimination and replayed backwards.  None where eliminations leave an
    irreducible rest (search's generic path handles it)."""
    found = fastest_many([graph])
    return None if found is None else found[0]


def fastest_many(graphs: Sequence[CostGraph]) -> list[SearchResult] | None:
    """fastest() of several cost graphs of one shape (the same nodes, strategies per node and
    edges: one model's operators at several micro-batch sizes, parsim.shard.auto) in one pass:
    every array carries a last axis with one column per graph, and each column's sums are
    fastest()'s on its own graph, element for element, so each answer is the one fastest() gives
    alone, for about the price of one search (the eliminations' order depends on the edges alone,
    and small arrays cost numpy the same whatever their length).  None as fastest()."""
    first = _one_shape(graphs, "fastest_many")
    n = len(first.node_costs)
    nt, nm, et, em = {}, {}, {}, {}
    # identical blocks share their cost lists (parsim.shard.auto.cost_graph), converted once here;
    # arrays are never changed in place, so nodes and edges may share them
    arrays: dict[tuple, tuple] = {}
    for v in range(n):
        lists = [g.node_costs[v] for g in graphs]
        key = tuple(map(id, lists))
        if key not in arrays:
            arrays[key] = (np.array([[c[0] for c in costs] for costs in lists]).T.copy(),
                           np.array([[c[1] for c in costs] for costs in lists]).T.copy())
        nt[v], nm[v] = arrays[key]
    zeros: dict[tuple, np.ndarray] = {}
    for k in first.edge_costs:
        lists = [g.edge_costs[k] for g in graphs]
        key = tuple(map(id, lists))
        if key not in arrays:
            t = np.stack([np.array(cost, dtype=float) for cost in lists], axis=-1)
            arrays[key] = (t, zeros.setdefault(t.shape, np.zeros_like(t)))
        et[k], em[k] = arrays[key]
    adj = adjacency(n, et)
    counts = {"operator": 0, "triangle": 0, "edge": 0, "merge": 0, "contract": 0, "star": 0}
    records: list[tuple] = []             # ("fold", v, u, j per u-strategy) / ("op", v, u, w, j per (i, k))

    def matrix(u, v):                     # (time, memory) oriented [u's strategy][v's strategy][graph]
        if u < v:
            return et[(u, v)], em[(u, v)]
        return et[(v, u)].swapaxes(0, 1), em[(v, u)].swapaxes(0, 1)

    def drop_edge(u, v):
        k = (min(u, v), max(u, v))
        del et[k], em[k]
        adj[u].discard(v)
        adj[v].discard(u)

    memo: dict[tuple, tuple] = {}         # identical blocks: the same minimum of the same operands

    def fold_leaf(v, u):                  # nodes[u][i] += min over j of E[i][j] + N_v[j]
        e_t, e_m = matrix(u, v)
        key = ("fold", e_t.shape, e_t.tobytes(), e_m.tobytes(), nt[v].tobytes(), nm[v].tobytes())
        if key not in memo:
            memo[key] = _lexmin(e_t + nt[v][None], e_m + nm[v][None], 1)
        bt, bm, j = memo[key]
        nt[u], nm[u] = nt[u] + bt, nm[u] + bm
        records.append(("fold", v, u, j))
        drop_edge(u, v)
        del nt[v], nm[v], adj[v]

    def eliminate(u, v, w, triangle):
        (t1, m1), (t2, m2) = matrix(u, v), matrix(v, w)
        key = ("op", t1.shape, t2.shape, t1.tobytes(), m1.tobytes(), nt[v].tobytes(), nm[v].tobytes(),
               t2.tobytes(), m2.tobytes())
        if key not in memo:
            # [i, j, k]: (E1[i][j] + N_v[j]) + E2[j][k], as _plus sums them
            st = (t1[:, :, None] + nt[v][None, :, None]) + t2[None]
            sm = (m1[:, :, None] + nm[v][None, :, None]) + m2[None]
            memo[key] = _lexmin(st, sm, 1)
        new_t, new_m, j = memo[key]
        records.append(("op", v, u, w, j))
        drop_edge(u, v)
        drop_edge(v, w)
        del nt[v], nm[v], adj[v]
        if triangle:
            new_t, new_m = et[(u, w)] + new_t, em[(u, w)] + new_m
        et[(u, w)], em[(u, w)] = new_t, new_m

    eliminate_all(nt, adj, counts, fold_leaf, eliminate)
    if any(adj[v] for v in nt):
        return None
    out = []
    for col, graph in enumerate(graphs):
        strategies = [-1] * n
        for v in nt:                      # isolated: each its own fastest
            strategies[v] = int(_lexmin(nt[v][:, col], nm[v][:, col], 0)[2])
        for rec in reversed(records):     # an eliminated node's choice given its neighbours'
            if rec[0] == "fold":
                _, v, u, j = rec
                strategies[v] = int(j[strategies[u], col])
            else:
                _, v, u, w, j = rec
                strategies[v] = int(j[strategies[u], strategies[w], col])
        t, m = assignment_cost(graph, strategies)
        out.append(SearchResult(tuple(strategies), t, m, dict(counts), True))
    return out


def capped(graph: CostGraph, cap: float, keep: int) -> SearchResult | None:
    """search(graph, cap, keep) with every matrix of frontiers a padded numpy batch
    (parsim.shard.frontiers): the same eliminations in the same order, the same points in the same
    order, so the same answer.  None where eliminations leave an irreducible rest (search's generic
    path handles it)."""
    return capped_many([graph], cap, keep)[0]


def capped_many(graphs: Sequence[CostGraph], cap: float, keep: int) -> list[SearchResult | None]:
    """capped() of several cost graphs of one shape (as fastest_many's: one model's operators at
    several micro-batch sizes) under one cap, in one pass: every array carries a first axis with
    one row per graph.  Each frontier is kept, thinned and padded row by row (frontiers.pareto),
    so each graph's points, and where they came from, are the ones its own search makes; a row is
    only padded wider, with points of infinite time and memory that no sum or union keeps, and
    its thinning is its own.  Each elimination's result is a version that records, per point,
    the points it was made of; each graph's chosen point is walked back through them."""
    first = _one_shape(graphs, "capped_many")
    n, g_all = len(first.node_costs), np.arange(len(graphs))
    versions: list[tuple] = []            # ("node", v) | ("edge",) | ("fold", ...) | ("op", ...)

    def version(record) -> int:
        versions.append(record)
        return len(versions) - 1

    arrays: dict[tuple, tuple] = {}       # shared cost lists converted once (as in fastest)
    nodes = {}                            # v -> (time, memory, version), [graph, strategy, point]
    for v in range(n):
        lists = [g.node_costs[v] for g in graphs]
        key = tuple(map(id, lists))
        if key not in arrays:
            arrays[key] = (np.array([[[c[0]] for c in costs] for costs in lists], dtype=float),
                           np.array([[[c[1]] for c in costs] for costs in lists], dtype=float))
        nodes[v] = arrays[key] + (version(("node", v)),)
    edges = {}                            # (u, v), u < v -> (time, memory, version), [graph, u's, v's strategy, point]
    zeros: dict[tuple, np.ndarray] = {}
    for k in first.edge_costs:
        lists = [g.edge_costs[k] for g in graphs]
        key = tuple(map(id, lists))
        if key not in arrays:
            t = np.array(lists, dtype=float)[..., None]
            arrays[key] = (t, zeros.setdefault(t.shape, np.zeros_like(t)))
        edges[k] = arrays[key] + (version(("edge",)),)
    adj = adjacency(n, edges)
    counts = {"operator": 0, "triangle": 0, "edge": 0, "merge": 0, "contract": 0, "star": 0}
    thinned = np.zeros(len(graphs), dtype=bool)     # per graph

    def matrix(u, v):                     # (time, memory, version, flipped), oriented [graph][u's][v's strategy]
        if u < v:
            t, m, ver = edges[(u, v)]
            return t, m, ver, False
        t, m, ver = edges[(v, u)]
        return t.transpose(0, 2, 1, 3), m.transpose(0, 2, 1, 3), ver, True

    def drop_edge(u, v):
        del edges[(min(u, v), max(u, v))]
        adj[u].discard(v)
        adj[v].discard(u)

    # Identical blocks (a transformer's) repeat the same sums on the same frontiers: each result,
    # of one "+" or "min" or of a whole elimination, is kept by the exact bytes and shapes of its
    # operands (results are never changed in place).
    memo: dict[tuple, tuple] = {}

    def remember(key, compute):
        if key not in memo:
            memo[key] = compute()
        return memo[key]

    def per_graph(over: np.ndarray) -> np.ndarray:   # frontiers thinned, per graph (the first axis)
        return over.reshape(len(graphs), -1).any(axis=1)

    def plus(at, am, bt, bm):             # (time, memory, index into a, into b, thinned per graph)
        def compute():
            t, m, ia, ib, over = frontiers.plus(at, am, bt, bm, keep, cap)
            return t, m, ia, ib, per_graph(over)
        return remember(("+", at.shape, bt.shape, at.tobytes(), am.tobytes(), bt.tobytes(), bm.tobytes()), compute)

    def union(t, m, axis):                # (time, memory, index along axis, into that frontier, thinned per graph)
        def compute():
            ut, um, j, q, over = frontiers.union(t, m, axis, keep, cap)
            return ut, um, j, q, per_graph(over)
        return remember(("min", axis, t.shape, t.tobytes(), m.tobytes()), compute)

    def fold_sums(et, em, vt, vm, ot, om):   # N_u[i] + min over j of (E[i][j] + N_v[j]), and where from
        at, am, a_e, a_v, th1 = plus(et, em, vt[:, None], vm[:, None])         # [graph, i, j, point]
        ut, um, u_j, u_p, th2 = union(at, am, 2)                               # [graph, i, point]
        nt, nm, n_old, n_new, th3 = plus(ot, om, ut, um)
        g = g_all[:, None, None]
        i = np.arange(nt.shape[1])[None, :, None]
        j = np.take_along_axis(u_j, n_new, 2)
        r = np.take_along_axis(u_p, n_new, 2)
        return nt, nm, n_old, j, a_e[g, i, j, r], a_v[g, i, j, r], th1 | th2 | th3

    def fold_leaf(v, u):
        nonlocal thinned
        et, em, ever, flip = matrix(u, v)
        (vt, vm, vver), (ot, om, over) = nodes[v], nodes[u]
        key = ("fold", et.shape, vt.shape, ot.shape) + tuple(x.tobytes() for x in (et, em, vt, vm, ot, om))
        nt, nm, n_old, j, e_p, v_p, th = remember(key, lambda: fold_sums(et, em, vt, vm, ot, om))
        thinned |= th
        nodes[u] = (nt, nm, version(("fold", over, ever, flip, vver, n_old, j, e_p, v_p)))
        drop_edge(u, v)
        del nodes[v], adj[v]

    def op_sums(t1, m1, vt, vm, t2, m2, old):   # (old +) min over j of ((E1 + N_v) + E2), and where from
        at, am, a_1, a_v, th1 = plus(t1, m1, vt[:, None], vm[:, None])         # [graph, i, j, point]
        bt, bm, b_a, b_2, th2 = plus(at[:, :, :, None], am[:, :, :, None], t2[:, None], m2[:, None])
        ut, um, u_j, u_p, th3 = union(bt, bm, 2)                               # [graph, i, k, point]
        o_p, th4 = None, False
        if old is not None:
            ut, um, o_p, n_p, th4 = plus(*old, ut, um)
            u_j, u_p = np.take_along_axis(u_j, n_p, 3), np.take_along_axis(u_p, n_p, 3)
        g = g_all[:, None, None, None]
        i = np.arange(ut.shape[1])[None, :, None, None]
        k = np.arange(ut.shape[2])[None, None, :, None]
        r = b_a[g, i, u_j, k, u_p]
        return ut, um, u_j, a_1[g, i, u_j, r], a_v[g, i, u_j, r], b_2[g, i, u_j, k, u_p], o_p, th1 | th2 | th3 | th4

    def eliminate(u, v, w, triangle):     # E[u][w] (+)= min over j of ((E1 + N_v) + E2)
        nonlocal thinned
        t1, m1, ver1, flip1 = matrix(u, v)
        t2, m2, ver2, flip2 = matrix(v, w)
        vt, vm, vver = nodes[v]
        ot, om, over = edges[(u, w)] if triangle else (None, None, None)
        arrays = (t1, m1, vt, vm, t2, m2) + ((ot, om) if triangle else ())
        key = ("op",) + tuple(x.shape for x in arrays) + tuple(x.tobytes() for x in arrays)
        ut, um, j, p1, pv, p2, o_p, th = remember(
            key, lambda: op_sums(t1, m1, vt, vm, t2, m2, (ot, om) if triangle else None))
        thinned |= th
        drop_edge(u, v)
        drop_edge(v, w)
        del nodes[v], adj[v]
        rec = ("op", ver1, flip1, vver, ver2, flip2, (over, o_p) if triangle else None, j, p1, pv, p2)
        edges[(u, w)] = (ut, um, version(rec))

    eliminate_all(nodes, adj, counts, fold_leaf, eliminate)
    if any(adj[v] for v in nodes):
        return [None] * len(graphs)
    parts = []                            # per isolated node: its frontier over its strategies
    for v, (t, m, ver) in nodes.items():
        ft, fm, s, p, th = union(t, m, 1)
        thinned |= th
        parts.append((ft, fm, ver, s, p))
    acc_t, acc_m = parts[0][0], parts[0][1]
    steps = []
    for ft, fm, *_ in parts[1:]:
        acc_t, acc_m, ia, ib, th = plus(acc_t, acc_m, ft, fm)
        thinned |= th
        steps.append((ia, ib))
    out = []
    for g, graph in enumerate(graphs):
        if not acc_m[g, 0] < np.inf:
            out.append(None)
            continue
        walk, p = [], 0                   # the first (fastest) point, back through the "+" chain
        for (ia, ib), part in zip(reversed(steps), reversed(parts[1:])):
            walk.append((part, int(ib[g, p])))
            p = int(ia[g, p])
        walk.append((parts[0], p))
        stack = [(ver, (int(s[g, q]),), int(pp[g, q])) for (_, _, ver, s, pp), q in walk]
        strategies = [-1] * n
        while stack:
            ver, idx, p = stack.pop()
            rec = versions[ver]
            if rec[0] == "node":
                strategies[rec[1]] = idx[0]
            elif rec[0] == "fold":
                _, over, ever, flip, vver, n_old, j, e_p, v_p = rec
                (i,) = idx
                jj = int(j[g, i, p])
                stack += [(over, (i,), int(n_old[g, i, p])),
                          (ever, (jj, i) if flip else (i, jj), int(e_p[g, i, p])),
                          (vver, (jj,), int(v_p[g, i, p]))]
            elif rec[0] == "op":
                _, ver1, flip1, vver, ver2, flip2, old, j, p1, pv, p2 = rec
                i, k = idx
                jj = int(j[g, i, k, p])
                stack += [(ver1, (jj, i) if flip1 else (i, jj), int(p1[g, i, k, p])),
                          (vver, (jj,), int(pv[g, i, k, p])),
                          (ver2, (k, jj) if flip2 else (jj, k), int(p2[g, i, k, p]))]
                if old is not None:
                    stack.append((old[0], (i, k), int(old[1][g, i, k, p])))
        t, m = assignment_cost(graph, strategies)
        out.append(SearchResult(tuple(strategies), t, m, dict(counts), not bool(thinned[g])))
    return out
