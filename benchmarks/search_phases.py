"""Where a planner search spends its wall time, by step of the branch and bound (no cProfile, so
the seconds are the search's own): one search of benchmarks/bench_planner.py (``_one``) with each
step of parsim.search.bound.BranchAndBound and the costly calls under them timed (outermost call
only), printed with their call counts.

    python benchmarks/search_phases.py examples/gpt3_175b.yaml dgx-a100:128x8

Steps: push (every family's first entry), graph_entry (a searched-layout family: its strategy
search and graph; searched_graph, auto_strategies under it), floor_entry (a candidate split:
Bounds.split), split_entry (simulated: simulated).  A step's time includes the calls listed under
it.  Run it on a quiet machine; compare shares, not seconds, across hosts.
"""

import collections
import functools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import parsim.search.bound as bound  # noqa: E402
import parsim.search.split as split  # noqa: E402
import parsim.shard.prepare as prepare  # noqa: E402
from bench_planner import _one  # noqa: E402

SECONDS: collections.Counter = collections.Counter()
CALLS: collections.Counter = collections.Counter()


def timed(owner, name: str, label: str) -> None:
    """Replace owner.name by a wrapper adding its outermost calls' wall time to SECONDS[label]."""
    f = getattr(owner, name)
    depth = [0]

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        if depth[0]:
            return f(*args, **kwargs)
        depth[0] += 1
        start = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            SECONDS[label] += time.perf_counter() - start
            CALLS[label] += 1
            depth[0] -= 1
    setattr(owner, name, wrapper)


STEPS = [(bound.BranchAndBound, "push", "push"),
         (bound.BranchAndBound, "graph_entry", "graph_entry"),
         (bound.BranchAndBound, "searched_graph", "  searched_graph"),
         (prepare, "auto_strategies", "    auto_strategies"),
         (bound, "search_auto_sizes", "  search_auto_sizes"),
         (bound.BranchAndBound, "floor_entry", "floor_entry"),
         (split.Bounds, "split", "  Bounds.split"),
         (bound.BranchAndBound, "split_entry", "split_entry"),
         (bound.BranchAndBound, "simulated", "  simulated")]


def main() -> int:
    model, cluster = sys.argv[1:3]
    for owner, name, label in STEPS:
        timed(owner, name, label)
    outcome = _one(model, cluster)
    print(f"{model} on {cluster}: search {outcome['search_time_s']:.3f} s; {outcome['outcome']}")
    for _, _, label in STEPS:
        print(f"  {label:24s} {SECONDS[label]:8.3f} s {CALLS[label]:8,} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
