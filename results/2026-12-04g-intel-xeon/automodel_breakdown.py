"""Where parsim's predicted step goes for each scored automodel-perf row, at its first pricing (the
shipped profiles, nothing changed): step, rank 0's busy / exposed communication / bubble / sync wait,
its optimizer actions' seconds, the all-to-all seconds a rank spends, and so how large the bias of
pricing a GA > 1 row as one accumulation step with the optimizer is (the optimizer priced GA times per
table step's tokens).  Information about a held-out set; nothing here changes a price.

    python results/2026-12-04g-intel-xeon/automodel_breakdown.py
"""
from parsim.profile.published import figure_setup, load_figures, figure_tokens
from parsim.sim import simulate

GA = {"amp-deepseek-v3-h100-256gpu": 1, "amp-deepseek-v3-h100-1024gpu": 4,
      "amp-kimi-k2-h100-256gpu": 2, "amp-qwen3-30b-a3b-h100-8gpu": 1}

for f in load_figures("results/published/automodel_figures.yaml").figures:
    spec, cluster, compute, cfg = figure_setup(f)
    est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=True)
    step = est.step_time_s
    r0 = est.ranks[0]
    # the longest rank's optimizer actions, summed over its stages (the engine's records)
    opt = max(sum(e - s for r, a, _, s, e in est.timeline.records if r == rank and a.kind.name == "OPTIMIZER")
              for rank in range(len(est.ranks)))
    ga = GA[f.id]
    # the run's step: GA schedule runs, one optimizer: GA x (step - opt) + opt
    run_step = ga * (step - opt) + opt
    tokens = figure_tokens(f)
    print(f"{f.id:34s} step {step:7.3f} s  busy {r0.busy_s:6.3f}  exposed comm {r0.exposed_comm_s:6.3f}  "
          f"bubble {r0.bubble_s:6.3f}  sync wait {r0.sync_wait_s:6.3f}  optimizer {opt:6.3f} s; "
          f"GA {ga}: priced {tokens / step / cluster.world_size:7.1f} tok/s/GPU, "
          f"with one optimizer per {ga} runs {ga * tokens / run_step / cluster.world_size:7.1f}")
