"""Where parsim's price of Megatron-LLaMA's five held-out rows goes (diagnosis only: nothing is changed, fitted or
re-pinned on them).  For each scored row: the measured step; parsim's step as busy time plus exposed
communication on the busiest rank; and what the data-parallel reduction alone costs at the profile's price: a
reduce-scatter of one tensor-parallel rank's fp32 gradients over its dp group (the parameters' all-gather after
the step is the bf16 half of that).

    python results/2026-12-05g-intel-xeon/megatron_llama_breakdown.py
"""

from parsim.cost.comm import collective_time_s
from parsim.profile.published import figure_setup, load_figures
from parsim.sim import simulate


def main() -> None:
    for f in load_figures("results/published/megatron_llama_figures.yaml").figures:
        if f.excluded:
            continue
        spec, cluster, compute, cfg = figure_setup(f)
        est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
        rank = max(est.ranks, key=lambda r: r.busy_s + r.exposed_comm_s)
        measured_s = 2048 * 2048 / (f.measured * cluster.world_size)
        grad_bytes = sum(layer.param_count for layer in spec.graph.layers) * 4 / cfg.tp
        dp_group = [r * cfg.tp for r in range(cfg.dp)]
        reduce_s = collective_time_s(cluster, dp_group, grad_bytes, "reduce_scatter")
        print(f"{f.id}: measured {measured_s:.3f} s; parsim {est.step_time_s:.3f} s = busy {rank.busy_s:.3f} + "
              f"exposed {rank.exposed_comm_s:.3f}; the fp32 reduce-scatter over dp {cfg.dp} alone: {reduce_s:.3f} s; "
              f"measured - parsim: {measured_s - est.step_time_s:+.3f} s")


if __name__ == "__main__":
    main()
