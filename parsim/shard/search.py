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
from dataclasses import dataclass
from typing import Sequence

from parsim.shard.costgraph import CostGraph, SearchResult, adjacency, assignment_cost, eliminate_all
from parsim.shard.search_np import capped, fastest


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


def exhaustive(graph: CostGraph, cap: float | None = None) -> tuple[tuple[int, ...], float, float] | None:
    """The fastest assignment within ``cap`` by trying every one (the reference for tests)."""
    best = None
    for combo in itertools.product(*[range(len(c)) for c in graph.node_costs]):
        t, m = assignment_cost(graph, combo)
        if cap is not None and m > cap:
            continue
        if best is None or (t, m) < (best[1], best[2]):
            best = (combo, t, m)
    return best


# The points a frontier keeps (module docstring): the default of every search.
KEEP = 16


def search(graph: CostGraph, cap: float | None = None, keep: int | None = KEEP,
           exhaustive_limit: int = 100_000) -> SearchResult | None:
    """The fastest assignment within ``cap`` (module docstring); None if none fits.  With a cap,
    the frontiers are numpy arrays (search_np.capped), the same points in the same order.  Without a cap
    (and ``keep`` not None) every frontier keeps its first point alone: the fastest, least memory
    among equals, is what "+" and "min" carry to the answer (a sum of points no faster is no
    faster: rounding is monotone), so the answer is the same at a fraction of the work
    (tests/test_strategy_search.py compares the two on the zoo's graphs)."""
    n = len(graph.node_costs)
    if cap is None and keep is not None:
        fast = fastest(graph)
        if fast is not None:
            return fast
        keep = 1
    elif keep is not None:
        capped_result = capped(graph, cap, keep)
        if capped_result is not None:
            return capped_result
    nodes = {v: [(Point(t, m, ("pick", v, s)),) for s, (t, m) in enumerate(costs)]
             for v, costs in enumerate(graph.node_costs)}
    edges: dict[tuple[int, int], list[list[Frontier]]] = {
        k: [[(Point(t, 0.0),) for t in row] for row in cost] for k, cost in graph.edge_costs.items()}
    adj = adjacency(n, edges)
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

    eliminate_all(nodes, adj, counts, fold_leaf, eliminate)

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
    t, m = assignment_cost(graph, strategies)
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
