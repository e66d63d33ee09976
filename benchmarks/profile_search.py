"""Where a planner search spends its time: one search of benchmarks/bench_planner.py (``_one``)
under cProfile, its stats written to OUT and the calls to the pricing functions counted.

    python benchmarks/profile_search.py examples/deepseek_v3.yaml dgx-h100-superpod:256x8 search.prof

cProfile slows the search about 2x; read the counts and shares, not the seconds.
"""

import cProfile
import os
import pstats
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_planner import _one  # noqa: E402

# (file's end, function): the prices a search asks for, counted
COUNTED = [("sim/overlap.py", "layer_time_s"), ("cost/kernels.py", "kernel_time_s"),
           ("cost/comm.py", "all_to_all_time_s"), ("search/partition.py", "partition"),
           ("sim/simulate.py", "_simulate")]


def main() -> int:
    model, cluster, out = sys.argv[1:4]
    prof = cProfile.Profile()
    prof.enable()
    outcome = _one(model, cluster)
    prof.disable()
    prof.dump_stats(out)
    print(outcome)
    stats = pstats.Stats(out).stats
    for end, name in COUNTED:
        calls = sum(v[1] for k, v in stats.items() if k[0].endswith(end) and k[2] == name)
        print(f"  {end + ':' + name:40s} {calls:>10,} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
