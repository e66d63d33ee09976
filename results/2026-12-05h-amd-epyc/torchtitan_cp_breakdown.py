"""Where parsim's price of torchtitan's four scored context-parallel rows goes (diagnosis only: nothing is changed,
fitted or re-pinned on them).  For each Llama 3.1 8B row (8 H100, FSDP2 x CP, 262,144 tokens a step): the measured
step (tokens a step / (TPS/GPU x 8)); parsim's step as drawn, as busy time plus exposed communication on the
busiest rank; and the same plan with the fused attention priced as FlashAttention-2 (training.attention_kernel
fa2, the kernel torch's sdpa ran on H100 in late 2024 unless told otherwise) instead of the profile's default.

    python results/2026-12-05h-amd-epyc/torchtitan_cp_breakdown.py
"""

from dataclasses import replace

from parsim.cost.compute import AnalyticalCompute
from parsim.profile.published import figure_setup, load_figures
from parsim.sim import simulate


def priced(spec, cluster, cfg, training):
    compute = AnalyticalCompute.for_training(cluster.device, training)
    est = simulate(spec.graph, training, cluster, cfg, compute, keep_timeline=False)
    rank = max(est.ranks, key=lambda r: r.busy_s + r.exposed_comm_s)
    return est.step_time_s, rank.busy_s, rank.exposed_comm_s


def main() -> None:
    for f in load_figures("results/published/longctx_torchtitan_cp_figures.yaml").figures:
        if f.excluded:
            continue
        spec, cluster, compute, cfg = figure_setup(f)
        measured_s = 262144 / (f.measured * cluster.world_size)
        step, busy, exposed = priced(spec, cluster, cfg, spec.training)
        fa2, _, _ = priced(spec, cluster, cfg, replace(spec.training, attention_kernel="fa2"))
        print(f"{f.id}: measured {measured_s:.2f} s; parsim {step:.2f} s = busy {busy:.2f} + exposed {exposed:.2f} "
              f"(measured / priced {measured_s / step:.2f}); with FlashAttention-2's rate {fa2:.2f} s "
              f"(measured / priced {measured_s / fa2:.2f})")


if __name__ == "__main__":
    main()
