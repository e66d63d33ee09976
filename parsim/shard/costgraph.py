"""The cost graph a strategy search reduces (parsim.shard.search's module docstring): nodes with
candidate strategies, edges with redistribution times, the result of a search, and the one
order of eliminations that every search makes (the list search in parsim.shard.search, its
numpy twins in parsim.shard.search_np)."""

from __future__ import annotations

from dataclasses import dataclass, field


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


def assignment_cost(graph: CostGraph, combo) -> tuple[float, float]:
    """(time, memory) of one strategy per node (``combo``), edges included."""
    t = sum(graph.node_costs[v][s][0] for v, s in enumerate(combo))
    m = sum(graph.node_costs[v][s][1] for v, s in enumerate(combo))
    t += sum(cost[combo[u]][combo[v]] for (u, v), cost in graph.edge_costs.items())
    return t, m


def adjacency(n: int, edges) -> dict[int, set[int]]:
    """Each of the ``n`` operators' neighbours over ``edges`` ((u, v) pairs)."""
    adj: dict[int, set[int]] = {v: set() for v in range(n)}
    for u, v in edges:
        adj[u].add(v)
        adj[v].add(u)
    return adj


def eliminate_all(nodes, adj: dict[int, set[int]], counts: dict[str, int], fold_leaf, eliminate) -> None:
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
