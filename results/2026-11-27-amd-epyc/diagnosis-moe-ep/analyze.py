"""Prints the two readings behind docs/moe.md's "Profiling expert parallelism" (run from this folder):

1. exchanges.rank{0,1}.json: every token all-to-all and split-size exchange of a dp=2 ep=2 run of
   the Qwen3-MoE-style model (set moe-2026-11-27b's plan), (kind, entry, exit) in CLOCK_MONOTONIC
   seconds, shared by the two processes of one machine; the first 40 records (warm-up) dropped.
   Per exchange: the arrival skew |entry0 - entry1|, the time after both arrived, each rank's total.
2. profiler_units.rank{0,1}.jsonl: the concurrent profilers' per-unit forward and backward times
   at micro-batch 8 (parsim profile --nproc 2, 15 repeats; last round): how far the two
   processes' layers differ when nothing exchanges, and what a run that waited for the slower
   after every unit would pay over the mean chain.
"""
import json
import statistics as st


def exchanges():
    a, b = (json.load(open(f"exchanges.rank{r}.json")) for r in (0, 1))
    n = min(len(a), len(b))
    a, b = a[40:n], b[40:n]
    for kind in ("counts", "tokens"):
        rows = [(abs(s0 - s1), min(e0, e1) - max(s0, s1), e0 - s0, e1 - s1)
                for (k0, s0, e0), (k1, s1, e1) in zip(a, b) if k0 == k1 == kind]
        cols = list(zip(*rows))
        f = lambda v: f"mean {st.fmean(v) * 1e3:.3f} median {st.median(v) * 1e3:.3f} ms"    # noqa: E731
        print(f"{kind}: {len(rows)} exchanges; skew {f(cols[0])}; after both arrived {f(cols[1])}; "
              f"rank 0 in the call {f(cols[2])}; rank 1 {f(cols[3])}")


def profiler_units():
    recs = [[json.loads(line) for line in open(f"profiler_units.rank{r}.jsonl")][-1] for r in (0, 1)]
    keys = [k for k in recs[0] if k.endswith("|fwd_s") or k.endswith("|bwd_s")]
    reps = len(recs[0][keys[0]])
    chain = [[sum(rec[k][i] for k in keys) for i in range(reps)] for rec in recs]
    mean_chain = st.fmean(st.median(c) for c in chain)
    synced = [sum(max(recs[0][k][i], recs[1][k][i]) for k in keys) for i in range(reps)]
    print(f"profilers: {reps} repeats, chain medians {[round(st.median(c) * 1e3, 2) for c in chain]} ms; "
          f"slowest chain over the mean {st.median(max(x) for x in zip(*chain)) / mean_chain:.3f}; "
          f"waiting for the slower after every unit {st.median(synced) / mean_chain:.3f}")
    for k in keys:
        x, y = recs[0][k], recs[1][k]
        print(f"  {k:16s} medians {st.median(x) * 1e3:6.2f} {st.median(y) * 1e3:6.2f} ms, "
              f"mean |difference| {st.fmean(abs(p - q) for p, q in zip(x, y)) * 1e3:5.2f} ms")


exchanges()
profiler_units()
