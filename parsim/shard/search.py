"""Strategy search over an operator graph: MindSpore's AUTO_PARALLEL dynamic programming
(the seeds' design document; Wang et al., "Supporting Very Large Models using Automatic
Dataflow Graph Partitioning", EuroSys 2019 for the eliminations).

A cost graph has:
- nodes (operators), each with candidate strategies; a strategy's cost is a Pareto frontier of
  (time, memory) points (one point to start with);
- edges between operators, with a frontier for every pair (producer strategy, consumer
  strategy): the redistribution's time.

The graph is reduced until no edge is left:
- **edge**: two edges between the same pair of nodes are summed into one;
- **operator**: a node with exactly two neighbours u, w becomes an edge u-w
  (E'[i][k] = min over j of E(u,v)[i][j] + N_v[j] + E(v,w)[j][k]);
- **triangle**: the same when u and w are already joined; the new edge is summed into theirs;
- **merge**: a node whose only neighbour is its producer folds into it
  (N_u'[i] = N_u[i] + min over j of E[i][j] + N_v[j]);
- **contract**: the same for a node whose only neighbour is its consumer;
- **star**: a node whose neighbours all have no other neighbour takes all of them at once.

"min" and "+" work on frontiers: "+" adds every pair of points, "min" takes the union, and after
each step only the Pareto frontier of (time, memory) is kept, capped at ``keep`` points (evenly
spaced along the frontier by rank, with the fastest and the smallest always kept; ``keep=None``
keeps all and the search is exact).  Thinning never changes the answer without a memory cap
(the fastest point survives every step) nor where no frontier outgrows ``keep``; under a cap it
may, by about 1% at keep=16 (tests/test_strategy_search.py measures it).  Every point remembers the choices it was made of, so the reductions are
replayed in reverse by walking the chosen point's provenance to the strategy of each operator.

When nodes with three or more neighbours remain (the graph cannot be reduced), the rest is
searched exhaustively if it has at most ``exhaustive_limit`` combinations, else by a documented
heuristic: a greedy pass in node order that picks each node's best strategy against its already
chosen neighbours, then coordinate-descent passes until no single change helps (MindSpore uses
recursive bisection there; either gives a feasible, not always optimal, assignment).
"""

from __future__ import annotations

import math
import itertools
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from parsim.shard import frontiers


@dataclass(frozen=True)
class Point:
    time_s: float
    mem_bytes: float
    why: tuple = ()          # provenance: ("pick", node, strategy) leaves and nested tuples


Frontier = tuple  # of Point, sorted by time


def pareto(points, keep: int | None = None, cap: float | None = None, thinned: list | None = None) -> Frontier:
    """The points no other point beats in both time and memory (ties: the first), optionally
    over a memory cap dropped and thinned to ``keep`` (how many it dropped appended to ``thinned``)."""
    if keep == 1 and cap is None:                # the fastest alone (the least memory among equals)
        if not points:
            return ()
        return (min(points, key=lambda p: (p.time_s, p.mem_bytes)),)    # first of equals, as sorted's
    pts = sorted(points, key=lambda p: (p.time_s, p.mem_bytes))
    out, best_mem = [], float("inf")
    for p in pts:
        if cap is not None and p.mem_bytes > cap:
            continue
        if p.mem_bytes < best_mem:
            out.append(p)
            best_mem = p.mem_bytes
    if keep is not None and len(out) > keep:
        idx = {round(i * (len(out) - 1) / (keep - 1)) for i in range(keep)}
        if thinned is not None:
            thinned.append(len(out) - len(idx))
        out = [out[i] for i in sorted(idx)]
    return tuple(out)


def _plus(*fronts, keep=None, cap=None, thinned=None) -> Frontier:
    acc = fronts[0]
    for f in fronts[1:]:
        acc = pareto([Point(a.time_s + b.time_s, a.mem_bytes + b.mem_bytes, (a.why, b.why)) for a in acc for b in f],
                     keep, cap, thinned)
    return acc


def _union(fronts, keep=None, cap=None, thinned=None) -> Frontier:
    return pareto([p for f in fronts for p in f], keep, cap, thinned)


@dataclass
class CostGraph:
    """Nodes 0..n-1; ``node_costs[v][s]`` = (time, memory) of node v under strategy s;
    ``edges[(u, v)][i][j]`` = time of the edge under u's strategy i and v's j (u < v)."""

    node_costs: list[list[tuple[float, float]]]
    edge_costs: dict[tuple[int, int], list[list[float]]] = field(default_factory=dict)

    def add_edge(self, u: int, v: int, cost: list[list[float]]) -> None:
        if u == v:
            raise ValueError("an edge joins two different nodes")
        if u > v:
            u, v, cost = v, u, [list(col) for col in zip(*cost)]
        if (u, v) in self.edge_costs:                    # parallel edges are summed (edge elimination)
            old = self.edge_costs[(u, v)]
            cost = [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(old, cost)]
        self.edge_costs[(u, v)] = cost


@dataclass(frozen=True)
class SearchResult:
    strategies: tuple[int, ...]          # per node, the index of its chosen strategy
    time_s: float
    mem_bytes: float
    eliminations: dict                   # how many of each elimination ran
    exact: bool                          # False when the heuristic fallback ran, or thinning dropped points under a cap


def exhaustive(graph: CostGraph, cap: float | None = None) -> tuple[tuple[int, ...], float, float] | None:
    """The fastest assignment within ``cap`` by trying every one (the reference for tests)."""
    best = None
    for combo in itertools.product(*[range(len(c)) for c in graph.node_costs]):
        t, m = _total(graph, combo)
        if cap is not None and m > cap:
            continue
        if best is None or (t, m) < (best[1], best[2]):
            best = (combo, t, m)
    return best


def _total(graph: CostGraph, combo) -> tuple[float, float]:
    t = sum(graph.node_costs[v][s][0] for v, s in enumerate(combo))
    m = sum(graph.node_costs[v][s][1] for v, s in enumerate(combo))
    t += sum(cost[combo[u]][combo[v]] for (u, v), cost in graph.edge_costs.items())
    return t, m


def search(graph: CostGraph, cap: float | None = None, keep: int | None = 16,
           exhaustive_limit: int = 100_000) -> SearchResult | None:
    """The fastest assignment within ``cap`` (module docstring); None if none fits.  With a cap,
    the frontiers are numpy arrays (_capped), the same points in the same order.  Without a cap
    (and ``keep`` not None) every frontier keeps its first point alone: the fastest, least memory
    among equals, is what "+" and "min" carry to the answer (a sum of points no faster is no
    faster: rounding is monotone), so the answer is the same at a fraction of the work
    (tests/test_strategy_search.py compares the two on the zoo's graphs)."""
    n = len(graph.node_costs)
    if cap is None and keep is not None:
        fast = _fastest(graph)
        if fast is not None:
            return fast
        keep = 1
    elif keep is not None:
        capped = _capped(graph, cap, keep)
        if capped is not None:
            return capped
    nodes = {v: [(Point(t, m, ("pick", v, s)),) for s, (t, m) in enumerate(costs)]
             for v, costs in enumerate(graph.node_costs)}
    edges: dict[tuple[int, int], list[list[Frontier]]] = {
        k: [[(Point(t, 0.0),) for t in row] for row in cost] for k, cost in graph.edge_costs.items()}
    adj: dict[int, set[int]] = {v: set() for v in range(n)}
    for u, v in edges:
        adj[u].add(v)
        adj[v].add(u)
    counts = {"operator": 0, "triangle": 0, "edge": 0, "merge": 0, "contract": 0, "star": 0}
    exact = True
    thinned: list[int] = []               # points the thinning dropped, per thinning

    def matrix(u, v):                     # E oriented [u's strategy][v's strategy]
        if u < v:
            return edges[(u, v)]
        return [list(col) for col in zip(*edges[(v, u)])]

    def drop_edge(u, v):
        edges.pop((min(u, v), max(u, v)))
        adj[u].discard(v)
        adj[v].discard(u)

    def fold_leaf(v, u):                  # v's only neighbour is u
        e = matrix(u, v)
        nodes[u] = [_plus(nodes[u][i], _union([_plus(e[i][j], nodes[v][j], keep=keep, cap=cap, thinned=thinned)
                                                for j in range(len(nodes[v]))], keep, cap, thinned), keep=keep, cap=cap, thinned=thinned)
                    for i in range(len(nodes[u]))]
        drop_edge(u, v)
        del nodes[v], adj[v]

    def eliminate(u, v, w, triangle):      # v between u and w: E[u][w] (+)= min over j of E1 + N_v + E2
        e1, e2 = matrix(u, v), matrix(v, w)
        new = [[_union([_plus(e1[i][j], nodes[v][j], e2[j][k], keep=keep, cap=cap, thinned=thinned)
                        for j in range(len(nodes[v]))], keep, cap, thinned)
                for k in range(len(nodes[w]))] for i in range(len(nodes[u]))]
        drop_edge(u, v)
        drop_edge(v, w)
        del nodes[v], adj[v]
        if triangle:
            old = edges[(u, w)]
            new = [[_plus(old[i][k], new[i][k], keep=keep, cap=cap, thinned=thinned) for k in range(len(new[0]))]
                   for i in range(len(new))]
        edges[(u, w)] = new

    _eliminate(nodes, adj, counts, fold_leaf, eliminate)

    # What is left: isolated nodes, plus any part the eliminations could not reduce.
    rest = [v for v in nodes if adj[v]]
    fronts = []
    if rest:
        exact = exact and math.prod(len(nodes[v]) for v in rest) <= exhaustive_limit
        fronts.append(_rest(rest, adj, nodes, matrix, keep, cap, exhaustive_limit, thinned))
    fronts += [_union(nodes[v], keep, cap, thinned) for v in nodes if not adj[v]]
    total = _plus(*fronts, keep=keep, cap=cap, thinned=thinned)
    if not total:
        return None
    point = min(total, key=lambda p: (p.time_s, p.mem_bytes))
    strategies = [-1] * n                   # replay: walk the chosen point's provenance
    stack = [point.why]
    while stack:
        why = stack.pop()
        if not why:
            continue
        if why[0] == "pick":
            strategies[why[1]] = why[2]
        else:
            stack.extend(why)
    t, m = _total(graph, strategies)
    # Thinning keeps each frontier's fastest point and "+" and "min" carry the fastest through,
    # so without a cap it never changes the answer; under one it may drop the point that wins.
    return SearchResult(tuple(strategies), t, m, counts, exact and (cap is None or not thinned))


def _rest(rest: Sequence[int], adj, nodes, matrix, keep, cap, limit, thinned) -> Frontier:
    """The frontier of the nodes the eliminations could not remove (module docstring): every
    combination when there are at most ``limit``, else the heuristic's one assignment."""
    links = [(u, w) for u in rest for w in adj[u] if u < w]

    def frontier(assign) -> Frontier:
        parts = [nodes[v][s] for v, s in assign.items()] + [matrix(u, w)[assign[u]][assign[w]] for u, w in links]
        return _plus(*parts, keep=keep, cap=cap, thinned=thinned)

    combos = [range(len(nodes[v])) for v in rest]
    if math.prod(len(c) for c in combos) <= limit:
        return _union([frontier(dict(zip(rest, combo))) for combo in itertools.product(*combos)], keep, cap, thinned)

    def cost(assign) -> float:
        f = frontier(assign)
        return f[0].time_s if f else float("inf")

    assign = {v: 0 for v in rest}
    for v in rest:                           # greedy in node order, then coordinate descent
        assign[v] = min(range(len(nodes[v])), key=lambda s: cost({**assign, v: s}))
    improved = True
    while improved:
        improved = False
        for v in rest:
            for s in range(len(nodes[v])):
                trial = {**assign, v: s}
                if cost(trial) < cost(assign) - 1e-15:
                    assign, improved = trial, True
    return frontier(assign)


def _eliminate(nodes, adj: dict[int, set[int]], counts: dict[str, int], fold_leaf, eliminate) -> None:
    """The eliminations both searches make, in one order (module docstring), until none applies:
    a node with one neighbour is folded into it (``fold_leaf(v, u)``; every satellite of a star's
    centre at once), a node with two is eliminated into an edge between them (``eliminate(u, v,
    w, triangle)``, ``triangle``: u and w already share one, which the new edge adds to).  The
    callbacks do the arithmetic and remove v from ``nodes`` and ``adj``; this counts each kind."""
    changed = True
    while changed:
        changed = False
        for v in sorted(nodes):
            if v not in nodes:
                continue
            nb = adj[v]
            if len(nb) == 1:
                (u,) = nb
                leaves = [x for x in adj[u] if len(adj[x]) == 1]
                if len(adj[u]) >= 2 and len(leaves) == len(adj[u]):
                    counts["star"] += 1       # u is a star's centre: take every satellite
                    for x in leaves:
                        fold_leaf(x, u)
                else:
                    counts["merge" if u < v else "contract"] += 1   # folded into its producer / consumer
                    fold_leaf(v, u)
                changed = True
            elif len(nb) == 2:
                u, w = sorted(nb)
                triangle = w in adj[u]
                counts["triangle" if triangle else "operator"] += 1
                counts["edge"] += triangle
                eliminate(u, v, w, triangle)
                adj[u].add(w)
                adj[w].add(u)
                changed = True


def _lexmin(t: np.ndarray, m: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time, memory, index) of the least (time, memory) along ``axis``, the first of equals: what
    pareto(..., keep=1) keeps of points listed in index order."""
    t_min = t.min(axis=axis, keepdims=True)
    tied = t == t_min
    m_tied = np.where(tied, m, np.inf)
    m_min = m_tied.min(axis=axis, keepdims=True)
    idx = (tied & (m_tied == m_min)).argmax(axis=axis)
    return np.squeeze(t_min, axis), np.squeeze(m_min, axis), idx


def _fastest(graph: CostGraph) -> SearchResult | None:
    """search(graph) without a cap, each frontier its first point, as numpy arrays: the same
    eliminations in the same order and the same sums in the same order, so the same answer; the
    choices are recorded per elimination and replayed backwards.  None where eliminations leave an
    irreducible rest (search's generic path handles it)."""
    n = len(graph.node_costs)
    nt = {v: np.array([c[0] for c in costs]) for v, costs in enumerate(graph.node_costs)}
    nm = {v: np.array([c[1] for c in costs]) for v, costs in enumerate(graph.node_costs)}
    et = {k: np.array(cost, dtype=float) for k, cost in graph.edge_costs.items()}
    em = {k: np.zeros_like(x) for k, x in et.items()}
    adj: dict[int, set[int]] = {v: set() for v in range(n)}
    for u, v in et:
        adj[u].add(v)
        adj[v].add(u)
    counts = {"operator": 0, "triangle": 0, "edge": 0, "merge": 0, "contract": 0, "star": 0}
    records: list[tuple] = []             # ("fold", v, u, j per u-strategy) / ("op", v, u, w, j per (i, k))

    def matrix(u, v):                     # (time, memory) oriented [u's strategy][v's strategy]
        if u < v:
            return et[(u, v)], em[(u, v)]
        return et[(v, u)].T, em[(v, u)].T

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
            memo[key] = _lexmin(e_t + nt[v][None, :], e_m + nm[v][None, :], 1)
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
            st = (t1[:, :, None] + nt[v][None, :, None]) + t2[None, :, :]
            sm = (m1[:, :, None] + nm[v][None, :, None]) + m2[None, :, :]
            memo[key] = _lexmin(st, sm, 1)
        new_t, new_m, j = memo[key]
        records.append(("op", v, u, w, j))
        drop_edge(u, v)
        drop_edge(v, w)
        del nt[v], nm[v], adj[v]
        if triangle:
            new_t, new_m = et[(u, w)] + new_t, em[(u, w)] + new_m
        et[(u, w)], em[(u, w)] = new_t, new_m

    _eliminate(nt, adj, counts, fold_leaf, eliminate)
    if any(adj[v] for v in nt):
        return None
    strategies = [-1] * n
    for v in nt:                          # isolated: each its own fastest
        strategies[v] = int(_lexmin(nt[v], nm[v], 0)[2])
    for rec in reversed(records):         # an eliminated node's choice given its neighbours'
        if rec[0] == "fold":
            _, v, u, j = rec
            strategies[v] = int(j[strategies[u]])
        else:
            _, v, u, w, j = rec
            strategies[v] = int(j[strategies[u], strategies[w]])
    t, m = _total(graph, strategies)
    return SearchResult(tuple(strategies), t, m, counts, True)


def _capped(graph: CostGraph, cap: float, keep: int) -> SearchResult | None:
    """search(graph, cap, keep) with every matrix of frontiers a padded numpy batch
    (parsim.shard.frontiers): the same eliminations in the same order, the same points in the same
    order, so the same answer.  Each elimination's result is a version that records, per point,
    the points it was made of; the chosen point is walked back through them.  None where
    eliminations leave an irreducible rest (search's generic path handles it)."""
    n = len(graph.node_costs)
    versions: list[tuple] = []            # ("node", v) | ("edge",) | ("fold", ...) | ("op", ...)

    def version(record) -> int:
        versions.append(record)
        return len(versions) - 1

    nodes = {}                            # v -> (time, memory, version), [strategy, point]
    for v, costs in enumerate(graph.node_costs):
        nodes[v] = (np.array([[c[0]] for c in costs], dtype=float), np.array([[c[1]] for c in costs], dtype=float),
                    version(("node", v)))
    edges = {}                            # (u, v), u < v -> (time, memory, version), [u's, v's strategy, point]
    for k, cost in graph.edge_costs.items():
        t = np.array(cost, dtype=float)[:, :, None]
        edges[k] = (t, np.zeros_like(t), version(("edge",)))
    adj: dict[int, set[int]] = {v: set() for v in range(n)}
    for u, v in edges:
        adj[u].add(v)
        adj[v].add(u)
    counts = {"operator": 0, "triangle": 0, "edge": 0, "merge": 0, "contract": 0, "star": 0}
    thinned = False

    def matrix(u, v):                     # (time, memory, version, flipped), oriented [u's][v's strategy]
        if u < v:
            t, m, ver = edges[(u, v)]
            return t, m, ver, False
        t, m, ver = edges[(v, u)]
        return t.transpose(1, 0, 2), m.transpose(1, 0, 2), ver, True

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

    def plus(at, am, bt, bm):             # (time, memory, index into a, into b, thinned)
        return remember(("+", at.shape, bt.shape, at.tobytes(), am.tobytes(), bt.tobytes(), bm.tobytes()),
                        lambda: frontiers.plus(at, am, bt, bm, keep, cap))

    def union(t, m, axis):                # (time, memory, index along axis, into that frontier, thinned)
        return remember(("min", axis, t.shape, t.tobytes(), m.tobytes()), lambda: frontiers.union(t, m, axis, keep, cap))

    def fold_sums(et, em, vt, vm, ot, om):   # N_u[i] + min over j of (E[i][j] + N_v[j]), and where from
        at, am, a_e, a_v, th1 = plus(et, em, vt[None], vm[None])              # [i, j, point]
        ut, um, u_j, u_p, th2 = union(at, am, 1)                               # [i, point]
        nt, nm, n_old, n_new, th3 = plus(ot, om, ut, um)
        i = np.arange(nt.shape[0])[:, None]
        j = np.take_along_axis(u_j, n_new, 1)
        r = np.take_along_axis(u_p, n_new, 1)
        return nt, nm, n_old, j, a_e[i, j, r], a_v[i, j, r], th1 or th2 or th3

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
        at, am, a_1, a_v, th1 = plus(t1, m1, vt[None], vm[None])              # [i, j, point]
        bt, bm, b_a, b_2, th2 = plus(at[:, :, None], am[:, :, None], t2[None], m2[None])   # [i, j, k, point]
        ut, um, u_j, u_p, th3 = union(bt, bm, 1)                               # [i, k, point]
        o_p, th4 = None, False
        if old is not None:
            ut, um, o_p, n_p, th4 = plus(*old, ut, um)
            u_j, u_p = np.take_along_axis(u_j, n_p, 2), np.take_along_axis(u_p, n_p, 2)
        i = np.arange(ut.shape[0])[:, None, None]
        k = np.arange(ut.shape[1])[None, :, None]
        r = b_a[i, u_j, k, u_p]
        return ut, um, u_j, a_1[i, u_j, r], a_v[i, u_j, r], b_2[i, u_j, k, u_p], o_p, th1 or th2 or th3 or th4

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

    _eliminate(nodes, adj, counts, fold_leaf, eliminate)
    if any(adj[v] for v in nodes):
        return None
    parts = []                            # per isolated node: its frontier over its strategies
    for v, (t, m, ver) in nodes.items():
        ft, fm, s, p, th = union(t, m, 0)
        thinned |= th
        parts.append((ft, fm, ver, s, p))
    acc_t, acc_m = parts[0][0], parts[0][1]
    steps = []
    for ft, fm, *_ in parts[1:]:
        acc_t, acc_m, ia, ib, th = plus(acc_t, acc_m, ft, fm)
        thinned |= th
        steps.append((ia, ib))
    if not acc_m[0] < np.inf:
        return None
    walk, p = [], 0                       # the first (fastest) point, back through the "+" chain
    for (ia, ib), part in zip(reversed(steps), reversed(parts[1:])):
        walk.append((part, int(ib[p])))
        p = int(ia[p])
    walk.append((parts[0], p))
    stack = [(ver, (int(s[q]),), int(pp[q])) for (_, _, ver, s, pp), q in walk]
    strategies = [-1] * n
    while stack:
        ver, idx, p = stack.pop()
        rec = versions[ver]
        if rec[0] == "node":
            strategies[rec[1]] = idx[0]
        elif rec[0] == "fold":
            _, over, ever, flip, vver, n_old, j, e_p, v_p = rec
            (i,) = idx
            jj = int(j[i, p])
            stack += [(over, (i,), int(n_old[i, p])), (ever, (jj, i) if flip else (i, jj), int(e_p[i, p])),
                      (vver, (jj,), int(v_p[i, p]))]
        elif rec[0] == "op":
            _, ver1, flip1, vver, ver2, flip2, old, j, p1, pv, p2 = rec
            i, k = idx
            jj = int(j[i, k, p])
            stack += [(ver1, (jj, i) if flip1 else (i, jj), int(p1[i, k, p])), (vver, (jj,), int(pv[i, k, p])),
                      (ver2, (k, jj) if flip2 else (jj, k), int(p2[i, k, p]))]
            if old is not None:
                stack.append((old[0], (i, k), int(old[1][i, k, p])))
    t, m = _total(graph, strategies)
    return SearchResult(tuple(strategies), t, m, counts, not thinned)
