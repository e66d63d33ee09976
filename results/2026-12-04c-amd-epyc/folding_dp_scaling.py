"""Where the held-out Parallel Folding rows' priced step grows with dp (docs/accuracy.md, "ZeRO-3 beside expert
parallelism": Folding rows priced slower the larger dp, Mixtral-8x22B -11% -> -26% and Qwen2-57B-A14B -8% -> -22%
from their smallest to 1,024 GPUs).  For Table 4's strong-scaling Folding and MCore rows (the same global batch
on more GPUs), each row's measured and priced step and its busiest rank's time split: compute, exposed all-to-alls,
other exposed communication (the gradient reductions, the pipeline's sends), bubble, waiting.  Analysis of a
held-out source's rows: nothing here changes the model.  From the repository root:

    python results/2026-12-04c-amd-epyc/folding_dp_scaling.py
"""
from parsim.profile.published import figure_setup, figure_tokens, load_figures
from parsim.sim import simulate

figures = load_figures("results/published/moe_parallel_folding_figures.yaml").figures
print(f"{'row':<44} {'dp':>4} {'m':>4} {'ran':>7} {'priced':>7} {'error':>7}  {'compute':>8} {'a2a':>7} "
      f"{'other':>7} {'bubble':>7} {'wait':>6}   (busiest rank, s)")
for figure in figures:
    if figure.excluded or not figure.id.startswith("mpf-t4-") or "tp-ep-dp" in figure.id or "g8t8" in figure.id:
        continue
    spec, cluster, compute, cfg = figure_setup(figure)
    est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
    measured_s = figure_tokens(figure) / (figure.measured * cfg.dp * cfg.tp * cfg.pp * cfg.cp)
    r = max(est.ranks, key=lambda x: x.busy_s + x.exposed_comm_s)
    print(f"{figure.id.replace('mpf-t4-', ''):<44} {cfg.dp:>4} {cfg.microbatches:>4} {measured_s:>7.2f} "
          f"{est.step_time_s:>7.2f} {measured_s / est.step_time_s - 1:>+7.1%}  {r.busy_s:>8.2f} {r.ep_comm_s:>7.2f} "
          f"{r.exposed_comm_s - r.ep_comm_s:>7.2f} {r.bubble_s:>7.2f} {r.sync_wait_s:>6.2f}")
