"""Strategy-search speed (AUTO_PARALLEL, parsim.shard.auto): building the cost graph of a model's
operators and reducing it with MindSpore's eliminations.

    python benchmarks/bench_strategy_search.py

Goal (issue #8): a 96-layer GPT-3 graph searches in under 1 s.  Medians of 5 runs, after one
warm-up run; model extraction is not timed.
"""

from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.shard.auto import auto_strategies, cost_graph
from parsim.profile.comm import median_time_s
from parsim.shard.search import search


def timed(fn, repeats=5):
    return median_time_s(fn, repeats, warmup=1)


if __name__ == "__main__":
    spec = load_model("examples/gpt3_175b.yaml")
    cluster = load_cluster("dgx-a100:1x8")
    for tp in (2, 4, 8):
        g, _, _ = cost_graph(spec.graph, tp, cluster, "fp16", "adam", 1)
        # each call given no memo builds its cost graph and searches (parsim.shard.auto.StrategySearches)
        total = timed(lambda: auto_strategies(spec.graph, tp, cluster, "fp16", "adam"))
        reduce_only = timed(lambda: search(g))
        _, result = auto_strategies(spec.graph, tp, cluster, "fp16", "adam")
        print(f"GPT-3 175B, {len(spec.graph)} layers, tp={tp}: {len(g.node_costs)} operators, {len(g.edge_costs)} edges; "
              f"build + search {total:.3f} s, search alone {reduce_only:.3f} s (goal < 1 s); "
              f"eliminations {sum(result.eliminations.values())}")
