"""cProfile of the DeepSeek-V3 search's push (binding every family: its floors, which price each
layer class at each micro-batch size) on 2,048 H100s, bench_planner.py's goal; the top 35 by
cumulative time.  cProfile inflates call-heavy code: read shares, not seconds.

    python results/2026-12-02f-amd-epyc/push_profile.py
"""
import cProfile
import pstats
import sys

sys.path.insert(0, "benchmarks")
import bench_planner  # noqa: E402
import parsim.search.bound as bound  # noqa: E402
from parsim.model.spec import load_model  # noqa: E402

load_model("examples/deepseek_v3.yaml")
profile = cProfile.Profile()
push = bound.BranchAndBound.push


def profiled_push(self, *args, **kwargs):
    profile.enable()
    try:
        return push(self, *args, **kwargs)
    finally:
        profile.disable()


bound.BranchAndBound.push = profiled_push
print(bench_planner._one("examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8"))
pstats.Stats(profile).sort_stats("cumulative").print_stats(35)
