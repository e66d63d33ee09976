"""One public row's predicted step split per pipeline rank (busy, exposed communication and its
expert all-to-alls, bubble, waiting on others), with the shipped profiles:

    python results/2026-12-03-amd-epyc/rank_breakdown.py ROW_ID [ROW_ID ...]
"""

import os
import sys
from dataclasses import replace

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

from parsim.cost.compute import AnalyticalCompute  # noqa: E402
from parsim.profile.published import (figure_cluster, figure_imbalance, figure_spec, load_all_figures,  # noqa: E402
                                      shipped_profile)
from parsim.search.resolve import resolve_config  # noqa: E402
from parsim.sim import simulate  # noqa: E402

for f in load_all_figures(os.path.join(ROOT, "results", "published")).figures:
    if f.id not in sys.argv[1:]:
        continue
    spec = figure_spec(f)
    imbalance = figure_imbalance(f.routing)
    if imbalance is not None:
        spec = replace(spec, training=replace(spec.training, moe_imbalance=imbalance))
    cluster = figure_cluster(f, shipped_profile(f))
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    cfg = resolve_config(spec, cluster, compute, **dict(f.parallel))
    est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
    print(f"{f.id}: step {est.step_time_s:.3f} s; split {cfg.bounds}")
    for r in est.ranks:
        print(f"  rank {r.rank}: busy {r.busy_s:.3f} s, exposed {r.exposed_comm_s:.3f} s (expert all-to-alls "
              f"{r.ep_comm_s:.3f}), bubble {r.bubble_s:.3f}, waiting {r.sync_wait_s:.3f}")
