"""parsim.sim.overlap.gemm_share as a DeepSeek-V3 search on 2,048 H100s calls it, replayed: every call
recorded, then timed as it is and from per-(kernels, phase) terms computed once (the same sums in the
same order: equal results), to size that saving against the search.

    python results/2026-12-02f-amd-epyc/gemm_share_replay.py
"""
import sys, time
sys.path.insert(0, "benchmarks")
import bench_planner
import parsim.sim.overlap as ov
calls = []
orig = ov.gemm_share
def rec(layer, kind, mb):
    calls.append((layer, kind, mb)); return orig(layer, kind, mb)
ov.gemm_share = rec
print(bench_planner._one("examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8"))
ov.gemm_share = orig
PH = ov.PHASES
def terms(layer, kind):
    phases = PH[kind]
    out = tuple((k.flops[0], k.flops[1], k.phase in ("F", "I") and k.klass in ov.GEMM_KLASSES and bool(k.gemm) and k.gemm[3] == (1.0, 0.0))
                for k in layer.kernels if k.phase in phases)
    return out
def share(t, kind, mb):
    if not t:
        return 0.0 if kind == "W" else 1.0
    total = gemm = 0
    for f0, f1, g in t:
        flops = f0 + f1 * mb
        total += flops
        if g:
            gemm += flops
    return gemm / total if total else 0.0
t0 = time.perf_counter(); a = [orig(*c) for c in calls]; t1 = time.perf_counter()
cache = {}
for c in calls:
    k = (id(c[0].kernels), c[1])
    if k not in cache: cache[k] = terms(c[0], c[1])
t2 = time.perf_counter(); b = [share(cache[(id(c[0].kernels), c[1])], c[1], c[2]) for c in calls]; t3 = time.perf_counter()
print(len(calls), len(cache), "old", t1 - t0, "new", t3 - t2, "terms", t2 - t1, "same", a == b)
