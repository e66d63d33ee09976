"""AUTO_PARALLEL: choose every operator's strategy by searching the operator graph of a model
(or a stage) with parsim.shard.search, under the cluster's cost model.

Candidates per operator (on a tensor-parallel group of t devices): replication, and every
split of one dimension by t that divides, for each dimension the operator allows (MatMul: rows,
columns or the contraction; BatchMatMul: also the batch; Conv2d: batch, output or input
channels; Embedding: vocabulary or hidden; fused Attention: batch or heads, its KV heads split
up to their count and replicated beyond, the K and V projections (and rotary) also split by the
KV-head count, as Megatron's GQA layout; element-wise ops and normalizations: any dimension
they do not reduce over).  Megatron's layouts are in this set.  Splitting two dimensions at once
(2 x 4 on 8 devices) is left out to keep the graph small; MindSpore's full candidate set is every
factorization.

Costs, per micro-batch of b samples, on one device:
- node time: the operator's forward and backward (3x the forward's FLOPs for a contraction,
  Kaplan et al. 2020; 3.5x for fused attention, parsim.model.attention; element-wise ops: their output read and written in forward and backward)
  over its pieces, at the device's achieved rate; plus its parameter-gradient mirror reduction
  spread over the step's micro-batches;
- node memory: its parameters' bytes per device under the optimizer (parsim.cost.memory), plus
  the saved activations of its output over the output's pieces;
- edge time: the forward and backward redistribution between the producer's output layout and the
  consumer's input layout (parsim.shard.ops.edge_steps), priced on the group's links.
"""

from __future__ import annotations

import math

from parsim.cost.layer import redistribution_time_s
from parsim.cost.memory import bytes_per_param
from parsim.errors import InfeasibleError
from parsim.hardware.numerics import MathMode, engines
from parsim.model.graph import FROM_ELSEWHERE, FROM_LAYER_INPUT, LayerGraph, OpInfo
from parsim.model.attention import BACKWARD_RATIO
from parsim.shard.graph import elem_bytes, mirror_steps
from parsim.shard.ops import COMPUTE, REDUCED_DIMS, edge_steps, op_pieces, op_sharding, ways
from parsim.shard.search import KEEP, CostGraph, SearchResult, search
from parsim.shard.search_np import capped_many, fastest_many


def kv_head_paths(ops, t: int) -> dict[int, int]:
    """Op index -> g for the operators that make a fused attention's K and V from fewer KV heads
    g than t devices (t a multiple of g): the projection and the element-wise ops after it
    (rotary).  They may also split by g, replicated t / g times, as Megatron lays out GQA beyond
    the KV-head count (parsim.shard.strategy.attention)."""
    out: dict[int, int] = {}
    for op in ops:
        g = op.input_shapes[1][1] if op.kind == "Attention" else 0
        if not g or g >= t or t % g:
            continue
        todo = [op.inputs_from[j] for j in (1, 2) if j < len(op.inputs_from)]
        while todo:
            i = todo.pop()
            if i < 0 or i in out or ops[i].kind not in ("MatMul", "ElementWise"):
                continue
            out[i] = g
            if ops[i].kind == "ElementWise":
                todo += list(ops[i].inputs_from)
    return out


def candidates(op: OpInfo, t: int, kv_heads: int = 0) -> list[tuple]:
    """Strategies to try for ``op`` on t devices (module docstring); the first is replication.
    ``kv_heads``: the op makes K or V of that many heads (kv_head_paths), also split that many ways."""
    ones = tuple((1,) * len(s) for s in op.input_shapes)
    if kv_heads and op.kind == "MatMul":
        return candidates(op, t) + [((1, 1), (1, kv_heads))]
    if kv_heads and op.kind == "ElementWise" and len(op.output_shape) == 4:
        return candidates(op, t) + [((1, kv_heads, 1, 1),)]
    if op.kind == "MatMul":
        out = [ones, ((t, 1), (1, 1)), ((1, 1), (1, t)), ((1, t), (t, 1))]
    elif op.kind == "BatchMatMul":
        out = [ones, ((t, 1, 1), (t, 1, 1)), ((1, t, 1), (1, 1, 1)), ((1, 1, 1), (1, 1, t)), ((1, 1, t), (1, t, 1))]
    elif op.kind == "Conv2d":
        out = [ones, ((t, 1, 1, 1), (1, 1, 1, 1)), ((1, 1, 1, 1), (t, 1, 1, 1)), ((1, t, 1, 1), (1, t, 1, 1))]
    elif op.kind == "Embedding":
        out = [ones, ((t, 1),), ((1, t),)]
    elif op.kind == "Attention":          # batch, or heads: KV heads by t up to their count, replicated beyond
        kv = min(t, op.input_shapes[1][1])
        out = [ones, ((t, 1, 1, 1),) * 3, ((1, t, 1, 1), (1, kv, 1, 1), (1, kv, 1, 1))]
    else:
        shape = op.input_shapes[0] if op.kind != "ElementWise" else op.output_shape
        reduced = REDUCED_DIMS.get(op.kind, lambda n: ())(len(shape))
        out = [((1,) * len(shape),)] + [(tuple(t if d == i else 1 for d in range(len(shape))),)
                                        for i in range(len(shape)) if i not in reduced]
    return out


class StrategySearches:
    """The auto layout's searches of one run, and what building their cost graphs works out more
    than once (parsim.sim.prices.Prices keeps one; a call given none makes its own):

    - ``searched``: auto_strategies' answers by (graph id, t, cluster id, dtype, optimizer, micro-
      batch size, micro-batches[, cap]), the graph and cluster held in the entry;
    - ``cost_graphs``: the cost graph of each such key without a cap, and its least memory;
    - ``options``, ``node_terms``, ``edge_steps``: per operator (by value) and t, what a node's and
      an edge's costs take from the shardings alone, the same at every micro-batch size (a ResNet
      meets some 13 sizes per tp);
    - ``interned``: one object per (step, device matrix) value (cost_graphs prices each by its id);
    - ``edges``: parsim.shard.ops.edge_steps' memo (layout pairs and their signatures)."""

    def __init__(self):
        self.searched: dict[tuple, tuple] = {}
        self.cost_graphs: dict[tuple, tuple] = {}
        self.options: dict[tuple, tuple] = {}
        self.node_terms: dict[tuple, tuple] = {}
        self.edge_steps: dict[tuple, tuple] = {}
        self.interned: dict[tuple, tuple] = {}
        self.edges: dict = {}


def cost_graph(graph: LayerGraph, t: int, cluster, dtype: str, optimizer: str, microbatch: int,
               microbatches: int = 1, memo: StrategySearches | None = None
               ) -> tuple[CostGraph, list[tuple[int, int]], list[list]]:
    """The cost graph of ``graph``'s operators (module docstring): (graph, (layer, op) per node,
    the shardings of each node's candidates)."""
    return cost_graphs(graph, t, cluster, dtype, optimizer, [microbatch], microbatches, memo)[0]


def cost_graphs(graph: LayerGraph, t: int, cluster, dtype: str, optimizer: str, microbatch_sizes,
                microbatches: int = 1, memo: StrategySearches | None = None
                ) -> list[tuple[CostGraph, list[tuple[int, int]], list[list]]]:
    """cost_graph at each of ``microbatch_sizes``: the operators, candidates and edges are walked
    once, and each size's numbers are computed as cost_graph computes them alone."""
    memo = memo if memo is not None else StrategySearches()
    if not any(layer.ops for layer in graph.layers):
        raise InfeasibleError(f"{graph.name} has no operator view (a layers: table?); the auto layout "
                              "searches operators")
    device = cluster.device
    bw = device.achieved_bandwidth_bytes_per_s()
    rate = engines(device, MathMode(dtype))["matmul"].rate_flops_per_s     # the numeric mode's GEMM engine
    per_param = sum(bytes_per_param(dtype, optimizer).values())
    scales = [microbatch / graph.extraction_batch for microbatch in microbatch_sizes]
    sizes = range(len(scales))
    node_of: dict[tuple[int, int], int] = {}
    where: list[tuple[int, int]] = []
    shardings: list[list] = []
    costs: list[list[list[tuple[float, float]]]] = [[] for _ in sizes]   # per size, per node
    node_memo: dict[int, tuple] = {}          # identical layers share their OpInfo objects
    mirror_s: dict[tuple, float] = {}         # the same reductions recur over a graph's nodes
    kv_of: list[int] = []                     # per node: its KV heads (kv_head_paths), 0 if none
    for li, layer in enumerate(graph.layers):
        kv = kv_head_paths(layer.ops, t)
        for oi, op in enumerate(layer.ops):
            node_of[(li, oi)] = len(where)
            where.append((li, oi))
            kv_of.append(kv.get(oi, 0))
            if id(op) not in node_memo:
                opts, node_cost = [], [[] for _ in sizes]
                eb = elem_bytes(op)
                for strategy, sh, pieces, param_elements, out_ways, mirrors in _node_terms(memo, op, t, kv_of[-1]):
                    if mirrors not in mirror_s:
                        mirror_s[mirrors] = sum(redistribution_time_s(step, cluster, matrix) for step, matrix in mirrors)
                    opts.append((strategy, sh))
                    param_bytes = sum(n * per_param for n in param_elements)     # the same at every size
                    for k, scale in enumerate(scales):
                        if op.kind in COMPUTE:
                            flops = (1 + (BACKWARD_RATIO if op.kind == "Attention" else 2)) * op.flops * scale / pieces
                            time_s = flops / (rate * device.compute_efficiency(flops))
                        else:
                            time_s = 4 * op.output_elements * eb * scale / pieces / bw   # read + write, F and B
                        mem = param_bytes + op.saved_bytes * scale / out_ways
                        time_s += mirror_s[mirrors] / microbatches
                        node_cost[k].append((time_s, mem))
                if not opts:
                    raise InfeasibleError(f"{layer.name}/{op.name}: no strategy divides it on {t} devices")
                node_memo[id(op)] = (opts, node_cost)
            opts, node_cost = node_memo[id(op)]
            shardings.append(opts)
            for k in sizes:
                costs[k].append(node_cost[k])
    graphs = [CostGraph(costs[k]) for k in sizes]
    edge_memo: dict[tuple, list] = {}
    prices: dict[int, list[float]] = {}       # the same steps recur over a graph's edges
    zero = [0.0] * len(scales)

    def priced(pair: tuple) -> list[float]:   # an interned (step, device matrix) of _edge_steps, by its id
        hit = prices.get(id(pair))
        if hit is None:
            hit = prices[id(pair)] = [redistribution_time_s(pair[0], cluster, pair[1], scale=scale)
                                      for scale in scales]
        return hit

    def cell(steps: tuple) -> list[float]:   # an edge cell's steps summed in order, per size
        return [sum(col, 0.0) for col in zip(*map(priced, steps))] if steps else zero

    for li, layer in enumerate(graph.layers):
        for oi, op in enumerate(layer.ops):
            v = node_of[(li, oi)]
            for j, src in enumerate(op.inputs_from):
                if src == FROM_ELSEWHERE:
                    continue
                if src == FROM_LAYER_INPUT:
                    prev = graph.layers[li - 1] if li > 0 else None
                    if prev is None or prev.ops_output < 0 or not prev.ops:
                        continue
                    u = node_of[(li - 1, prev.ops_output)]
                else:
                    u = node_of[(li, src)]
                ul, uo = where[u]
                key = (id(graph.layers[ul].ops[uo]), id(op), j)
                if key not in edge_memo:
                    steps = _edge_steps(memo, graph.layers[ul].ops[uo], kv_of[u], op, kv_of[v], j, t)
                    # per row, its cells by size: [row][k] -> the row's cells at size k (zip: in C)
                    rows = [tuple(zip(*[cell(pair) for pair in row])) for row in steps]
                    edge_memo[key] = [[list(row[k]) for row in rows] for k in sizes]
                for k in sizes:
                    graphs[k].add_edge(u, v, edge_memo[key][k])
    return [(graphs[k], where, shardings) for k in sizes]


def _options(memo: StrategySearches, op: OpInfo, t: int, kv_heads: int) -> tuple[tuple[tuple, object], ...]:
    """(strategy, sharding) of each candidate that divides ``op`` on t devices: the same at every
    micro-batch size, so worked out once for the cost graphs of every size (by the operator's
    value, in ``memo``)."""
    key = (op, t, kv_heads)
    hit = memo.options.get(key)
    if hit is None:
        out = []
        for strategy in candidates(op, t, kv_heads):
            try:
                out.append((strategy, op_sharding(op, strategy, t)))
            except InfeasibleError:
                continue
        hit = memo.options[key] = tuple(out)
    return hit


def _node_terms(memo: StrategySearches, op: OpInfo, t: int, kv_heads: int) -> tuple[tuple, ...]:
    """(strategy, sharding, pieces, elements of each parameter input on one device, the output's
    ways, the parameter gradients' reductions) of each candidate (_options): what a node's costs
    take from its sharding alone, the same at every micro-batch size."""
    key = (op, t, kv_heads)
    hit = memo.node_terms.get(key)
    if hit is None:
        out = []
        for strategy, sh in _options(memo, op, t, kv_heads):
            params = tuple(math.prod(op.input_shapes[j]) // ways(sh.inputs[j]) for j, p in enumerate(op.param_inputs)
                           if p)
            out.append((strategy, sh, op_pieces(sh), params, ways(sh.output), tuple(mirror_steps(sh, elem_bytes(op)))))
        hit = memo.node_terms[key] = tuple(out)
    return hit


def _edge_steps(memo: StrategySearches, producer: OpInfo, producer_kv: int, consumer: OpInfo, consumer_kv: int,
                j: int, t: int) -> tuple:
    """[producer candidate][consumer candidate]: the (step, device matrix) of each communicating
    forward and backward redistribution of the consumer's input j (per sample of the extraction
    batch): the same at every micro-batch size, so listed once for the cost graphs of every size."""
    key = (producer, producer_kv, consumer, consumer_kv, j, t)
    hit = memo.edge_steps.get(key)
    if hit is not None:
        return hit
    eb, copied = elem_bytes(producer), consumer.input_copied(j)       # the producer's output moves
    rows = []
    for _, p_sh in _options(memo, producer, t, producer_kv):
        row = []
        for _, c_sh in _options(memo, consumer, t, consumer_kv):
            pair = ()
            if j < len(c_sh.inputs):
                fwd, bwd, matrix = edge_steps(p_sh.output, c_sh.inputs[j], c_sh.input_grads[j], eb, copied, memo.edges)
                pair = tuple(_interned(memo, (step, matrix if matrix is not None else (step.group_size,)))
                             for step in fwd + bwd if step.communicates)
            row.append(pair)
        rows.append(tuple(row))
    hit = memo.edge_steps[key] = tuple(rows)
    return hit


def _interned(memo: StrategySearches, pair: tuple) -> tuple:
    """One object per (step, device matrix) value in the run: cost_graphs prices each by its id
    (hashing a Step dataclass per edge cell of every graph cost more than pricing it)."""
    return memo.interned.setdefault(pair, pair)


def auto_strategies(graph: LayerGraph, t: int, cluster, dtype: str = "fp32", optimizer: str = "momentum",
                    microbatch: int = 1, microbatches: int = 1, cap_bytes: float | None = None,
                    memo: StrategySearches | None = None) -> tuple[dict[str, tuple], SearchResult]:
    """Every operator's strategy as op id -> strategy (for parsim.shard.graph.shard_graph), and the
    search's result.  Raises InfeasibleError when nothing fits ``cap_bytes``.  Kept in ``memo``
    (a run's; None: this call's own): the search without a cap is run once per (graph, t,
    cluster, training setup, micro-batch size), and a cap that its answer fits gives the same
    answer; only a cap it misses searches again.  A cap below the least memory any assignment can
    take is refused before any search, and the cost graph is built once for every cap
    (search_sizes fills the memo for several sizes at once)."""
    memo = memo if memo is not None else StrategySearches()
    free_key = _free_key(graph, t, cluster, dtype, optimizer, microbatch, microbatches)
    (g, where, shardings), floor_bytes = _cost_graphs_of(memo, [free_key], graph, cluster)[0]
    infeasible = f"no operator strategies on {t} devices fit {cap_bytes or 0:.4g} bytes"
    if cap_bytes is not None and floor_bytes > cap_bytes:
        raise InfeasibleError(infeasible)  # before the search without a cap, which could not help
    if free_key not in memo.searched:
        _remember(memo, free_key, graph, cluster, search(g, None))
    _, _, chosen, result = memo.searched[free_key]
    if result is None:
        raise InfeasibleError(infeasible)
    if cap_bytes is None or result.mem_bytes <= cap_bytes:
        return dict(chosen), result
    if _capped_search_due(memo, free_key, cap_bytes):
        _remember(memo, free_key + (cap_bytes,), graph, cluster, search(g, cap_bytes))
    _, _, chosen, result = memo.searched[free_key + (cap_bytes,)]
    if result is None:
        raise InfeasibleError(infeasible)
    return dict(chosen), result


def _free_key(graph: LayerGraph, t: int, cluster, dtype: str, optimizer: str, microbatch: int,
              microbatches: int) -> tuple:
    """The memo's key of a search without a cap (StrategySearches; a cap's adds the cap): the graph
    and cluster by identity, as the memo holds them."""
    return (id(graph), t, id(cluster), dtype, optimizer, microbatch, microbatches)


def _capped_search_due(memo: StrategySearches, free_key: tuple, cap_bytes: float) -> bool:
    """Whether auto_strategies, asked for ``free_key``'s size under ``cap_bytes``, would search
    under that cap (the one rule, which search_sizes runs ahead of it): the size's answer without a
    cap is known and misses the cap, the cap is not below the least memory any assignment takes
    (else it refuses before any search), and that search has not run."""
    free = memo.searched.get(free_key)
    return (free is not None and free[3] is not None and free[3].mem_bytes > cap_bytes
            and free_key + (cap_bytes,) not in memo.searched and memo.cost_graphs[free_key][3] <= cap_bytes)


def answered(graph: LayerGraph, t: int, cluster, dtype: str, optimizer: str, microbatch: int, cap_bytes: float,
             microbatches: int = 1, memo: StrategySearches | None = None) -> bool:
    """Whether auto_strategies would answer this size under ``cap_bytes`` from ``memo`` without a
    search: its search without a cap has run, and no search under the cap is due (_capped_search_due)."""
    free_key = _free_key(graph, t, cluster, dtype, optimizer, microbatch, microbatches)
    return memo is not None and free_key in memo.searched and not _capped_search_due(memo, free_key, cap_bytes)


def search_sizes(graph: LayerGraph, t: int, cluster, dtype: str, optimizer: str, microbatch_sizes,
                 microbatches: int = 1, memo: StrategySearches | None = None, caps=()) -> None:
    """Run the searches without a cap that auto_strategies would run for each of
    ``microbatch_sizes``, all in one pass (search_np.fastest_many: the cost graphs of one model
    on t devices differ only in their numbers, and each answer is the one its own search gives),
    and keep them in ``memo``; sizes already searched are skipped.  A planner meets some 13 sizes
    per tp on ResNet-50 and pays for about one search (parsim.search.planner).  Then, for each
    (size, cap) of ``caps``, the search under that cap that auto_strategies would run next (the
    size's answer without a cap misses the cap, and the cap is above the least memory), those of
    one cap in one pass (search_np.capped_many: each answer the one its own search gives; a
    GPT-3 175B planner meets two such sizes under one cap, 2026-11-29)."""
    if memo is None:
        return                             # nothing would keep the answers
    keys = [_free_key(graph, t, cluster, dtype, optimizer, b, microbatches) for b in sorted(set(microbatch_sizes))]
    keys = [k for k in keys if k not in memo.searched]
    if len(keys) >= 2:                     # one size: auto_strategies' own search is the same work
        graphs = [built[0] for built, _ in _cost_graphs_of(memo, keys, graph, cluster)]
        found = fastest_many(graphs)
        if found is not None:              # else an irreducible rest: auto_strategies searches each alone
            for key, result in zip(keys, found):
                _remember(memo, key, graph, cluster, result)
    by_cap: dict[float, list[tuple]] = {}
    for b, cap in sorted(set(caps)):
        free_key = _free_key(graph, t, cluster, dtype, optimizer, b, microbatches)
        if _capped_search_due(memo, free_key, cap):
            by_cap.setdefault(cap, []).append(free_key)
    for cap, keys in by_cap.items():
        if len(keys) < 2:
            continue                       # one size: auto_strategies' own search is the same work
        graphs = [built[0] for built, _ in _cost_graphs_of(memo, keys, graph, cluster)]
        for key, result in zip(keys, capped_many(graphs, cap, KEEP)):
            if result is not None:         # None: no answer, or an irreducible rest: search's own path
                _remember(memo, key + (cap,), graph, cluster, result)


def _cost_graphs_of(memo: StrategySearches, keys: list[tuple], graph: LayerGraph,
                    cluster) -> list[tuple[tuple, float]]:
    """The cost graph of each key of auto_strategies (one graph, t and training setup; sizes may
    differ) and the least memory any assignment takes (every node's smallest candidate: edges
    hold no memory), built once (those missing together, cost_graphs) and kept in ``memo``."""
    missing = [key for key in keys if key not in memo.cost_graphs]   # one cost graph serves every cap
    if missing:
        _, t, _, dtype, optimizer, _, microbatches = missing[0]
        built = cost_graphs(graph, t, cluster, dtype, optimizer, [key[5] for key in missing], microbatches, memo)
        for key, one in zip(missing, built):
            floor_bytes = sum(min(m for _, m in costs) for costs in one[0].node_costs)
            memo.cost_graphs[key] = (graph, cluster, one, floor_bytes)   # held: the key names their ids
    return [memo.cost_graphs[key][2:] for key in keys]


def _remember(memo: StrategySearches, key: tuple, graph: LayerGraph, cluster, result: SearchResult | None) -> None:
    """Keep a search's result under its key, with every operator's chosen strategy by op id."""
    chosen = None
    if result is not None:
        _, where, shardings = memo.cost_graphs[key[:7]][2]
        chosen = {}
        for v, s in enumerate(result.strategies):
            li, oi = where[v]
            layer = graph.layers[li]
            chosen[f"{layer.name}/{layer.ops[oi].name}"] = shardings[v][s][0]
    memo.searched[key] = (graph, cluster, chosen, result)      # held: the key names their ids
