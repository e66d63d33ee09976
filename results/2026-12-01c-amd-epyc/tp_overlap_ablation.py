"""Each published row that sets tp_comm_overlap priced with it and without (the profiles shipped when run;
deterministic).  python results/2026-12-01c-amd-epyc/tp_overlap_ablation.py"""
from dataclasses import replace
from parsim.profile.published import load_all_figures, price
for f in load_all_figures().figures:
    par = dict(f.parallel)
    if not par.get("tp_comm_overlap") or f.excluded: continue
    try:
        on = price(f)
        par["tp_comm_overlap"] = False
        off = price(replace(f, parallel=tuple(par.items())))
    except Exception as e:
        print(f.id, "ERR", str(e)[:80]); continue
    m = f.measured
    sign = -1 if f.metric == "step_time_s" else 1
    e = lambda p: (p.predicted/m - 1) if sign > 0 else (m/p.predicted - 1)
    print(f"{f.id:45s} {f.profile:18s} on {e(on):+.3f} off {e(off):+.3f} gain {off.step_time_s/on.step_time_s:.3f}")
