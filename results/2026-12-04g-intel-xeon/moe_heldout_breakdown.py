"""Where parsim's predicted step goes on the two held-out MoE sources first priced in the fifty-third
sitting (automodel-perf, xtuner-megatron-moe-bench), at their first pricing (the shipped profiles):
the measured and the priced step, the busiest pipeline rank's busy time (its compute), its token
all-to-alls (exposed, on the compute stream), its other exposed communication, its bubble.  A
diagnosis of where the misses could come from; nothing here changes a price.

    python results/2026-12-04g-intel-xeon/moe_heldout_breakdown.py
"""
from parsim.profile.published import figure_setup, figure_tokens, load_figures
from parsim.sim import simulate

FILES = ("results/published/automodel_figures.yaml", "results/published/xtuner_moe_figures.yaml")
print(f"{'row':62s} {'measured':>9s} {'priced':>8s} {'err':>7s} | slowest rank: {'busy':>6s} {'a2a':>6s} "
      f"{'comm':>6s} {'bubble':>6s}  (s)")
for path in FILES:
    for f in load_figures(path).figures:
        spec, cluster, compute, cfg = figure_setup(f)
        est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
        measured_s = figure_tokens(f) / f.measured / cluster.world_size        # the table's tokens/s/GPU
        r = max(est.ranks, key=lambda x: x.busy_s + x.exposed_comm_s)
        err = measured_s / est.step_time_s - 1       # predicted throughput over measured, less 1
        print(f"{f.id:62s} {measured_s:9.2f} {est.step_time_s:8.2f} {err:+7.1%} | "
              f"{r.busy_s:13.2f} {r.ep_comm_s:6.2f} {r.exposed_comm_s - r.ep_comm_s:6.2f} {r.bubble_s:6.2f}  "
              f"{cfg.recompute}, micro-batch {cfg.microbatch_size(spec.training.global_batch_size)}")
