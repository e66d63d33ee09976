"""Simulator speed: one 1F1B step with p pipeline stages, m micro-batches and dp = 8.

    python benchmarks/bench_simulator.py            # the goals (p=64 at m=1,024 and 32,768), plus a sweep

Prints the median of 5 runs of the whole simulate() call (schedule generation, lowering, pricing,
event loop, memory accounting) and the time per action, to show how cost grows with p*m.  From
parsim.sim.steady.FROM_ACTIONS compute actions a step is extrapolated from its steady state
(issue 40: p=64 with 32,768 micro-batches under 0.5 s; tests/test_steady.py checks it equals the
whole run), so past it the time stops growing with m.
"""

import statistics
import sys
import time

from parsim.hardware import load_cluster
from parsim.model.graph import Layer, LayerGraph
from parsim.model.spec import Training
from parsim.plan import ParallelConfig
from parsim.sim import simulate


def case(p, m, dp=8, repeats=5):
    g = LayerGraph("uniform", tuple(Layer(f"l{i}", 1e12, 2e12, 10_000_000, 40_000_000, 1e6, 1e7) for i in range(p)))
    cluster = load_cluster(f"dgx-a100:{max(1, p * dp // 8)}x8")
    cfg = ParallelConfig(dp=dp, pp=p, microbatches=m, schedule="1f1b", bounds=tuple(range(p + 1)))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        simulate(g, Training(global_batch_size=m * dp), cluster, cfg, keep_timeline=False)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


if __name__ == "__main__":
    print(f"goal: p=64 m=1024 dp=8 1F1B under 0.5 s -> median of 11: {case(64, 1024, repeats=11):.3f} s")
    print(f"goal: p=64 m=32768 dp=8 1F1B under 0.5 s -> median of 11: {case(64, 32768, repeats=11):.3f} s")
    print(f"{'p':>4} {'m':>6} {'p*m':>8} {'median s':>9} {'us per F/B':>11}")
    for p, m in [(8, 64), (16, 256), (32, 512), (64, 256), (64, 512), (64, 1024), (64, 4096), (64, 32768)]:
        t = case(p, m, repeats=5 if p * m <= 16384 else 3)
        print(f"{p:>4} {m:>6} {p * m:>8} {t:9.3f} {t / (2 * p * m) * 1e6:11.2f}")
        sys.stdout.flush()
