"""Where ascend-910b-10's scored rows spend their priced step (the shipped profiles): rank 0's busy
compute and exposed communication as drawn (ZeRO-2, reduce-scatters on the compute stream), with
the same reduce-scatters overlapped, and as ZeRO-1 with the buckets after the backward.  Analysis of
a held-out source's first pricing: nothing here changes the model.

    python results/2026-12-04b-amd-epyc/ascend10_breakdown.py
"""
from dataclasses import replace

from parsim.profile.published import figure_setup, load_figures
from parsim.sim import simulate

for f in load_figures("results/published/ascend10_figures.yaml").figures:
    if f.excluded:
        continue
    spec, cluster, compute, cfg = figure_setup(f)
    for label, c in (("as drawn: zero 2, on the compute stream", cfg),
                     ("zero 2, overlapped", replace(cfg, overlap_grad_reduce=True)),
                     ("zero 1, after the backward", replace(cfg, zero=1))):
        e = simulate(spec.graph, spec.training, cluster, c, compute, keep_timeline=False)
        r = e.ranks[0]
        print(f"{f.id:40s} {label:40s} step {e.step_time_s:7.3f} s  busy {r.busy_s:6.3f} s  "
              f"exposed communication {r.exposed_comm_s:6.3f} s")
