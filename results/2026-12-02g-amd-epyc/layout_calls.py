"""What the built-in layouts' patterns (parsim.shard.builtin.strategies: gated_mlp and
whole_weight_ops read every operator of the graph) cost a goal search: their calls and wall time
inside one DeepSeek-V3 search on 2,048 H100s (benchmarks/bench_planner.py's goal); run alone.

    python results/2026-12-02g-amd-epyc/layout_calls.py
"""

import os
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import parsim.shard.builtin as builtin  # noqa: E402
from bench_planner import _one  # noqa: E402

calls, seconds = [0], [0.0]
strategies = builtin.strategies


def timed(*args, **kwargs):
    start = time.perf_counter()
    try:
        return strategies(*args, **kwargs)
    finally:
        calls[0] += 1
        seconds[0] += time.perf_counter() - start


builtin.strategies = timed
print(_one("examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8"))
print(f"parsim.shard.builtin.strategies: {calls[0]} calls, {seconds[0] * 1e3:.1f} ms")
