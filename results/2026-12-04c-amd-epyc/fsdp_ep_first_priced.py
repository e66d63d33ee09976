"""The ZeRO-3 rows of the two held-out MoE sources whose routed experts shard apart from the dense
parameters (ep > 1, or an expert tp other than attention's), priced the first time parsim shards those
experts over their own ranks (forty-ninth sitting, 2026-12-04): the 21 with ep > 1 could not be priced
before; the 3 Parallel Folding FSDP rows (ep 1, tp 8, the drawn etp 1) were priced with their experts
in the dense units, over the 16 dense shard ranks instead of their 128 (bench_published.txt at 9a95f4c:
-84.2%, -16.0%, -81.6%).  Every row as drawn, and beside it, as information and not a change of any
row, the same plan with the experts' tp equal to attention's (etp = tp, Megatron-Core's default
without --expert-tensor-parallel-size; the drawn rows leave etp at 1).  All are excluded rows.

    python results/2026-12-04c-amd-epyc/fsdp_ep_first_priced.py > results/2026-12-04c-amd-epyc/fsdp-ep-first-priced.txt
"""
from dataclasses import replace

from parsim.profile.published import load_figures, price

FILES = ("results/published/moe_parallel_folding_figures.yaml", "results/published/moe_modelzoo_figures.yaml")

print(f"{'row':<50} {'measured':>9} {'priced':>8} {'error':>7}  {'etp=tp':>7} {'error':>7}  excluded")
for path in FILES:
    for f in load_figures(path).figures:
        p = dict(f.parallel)
        if p.get("zero", 0) < 2 or (p.get("ep", 1) == 1 and p.get("etp", 1) == p.get("tp", 1)):
            continue
        drawn = price(f)
        alt = ""
        if p.get("tp", 1) > 1 and p.get("etp", 1) != p["tp"]:
            q = price(replace(f, parallel=tuple(sorted({**p, "etp": p["tp"]}.items()))))
            alt = f"{q.predicted:>7.1f} {q.error:>+7.1%}"
        print(f"{f.id:<50} {f.measured:>9.1f} {drawn.predicted:>8.1f} {drawn.error:>+7.1%}  {alt:>15}  "
              f"{'yes' if f.excluded else 'no'}")
