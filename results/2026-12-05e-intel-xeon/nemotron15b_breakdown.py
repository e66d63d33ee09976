"""Where parsim's price of Nemotron-4 15B's three held-out rows goes (diagnosis only: nothing is changed or
fitted on them).  For each row: the measured step, parsim's step, the busiest rank's busy time (compute and
the tensor-parallel collectives on its stream) and its exposed communication (the data-parallel reduce-scatter
and all-gather the distributed optimizer leaves outside the backward).  Prices with the shipped profiles.

    python results/2026-12-05e-intel-xeon/nemotron15b_breakdown.py
"""

from parsim.profile.published import figure_setup, load_figures
from parsim.sim import simulate


def main() -> None:
    for f in load_figures("results/published/nemotron4_figures.yaml").figures:
        if f.source != "nemotron4-15b-report":
            continue
        spec, cluster, compute, cfg = figure_setup(f)
        est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
        rank = max(est.ranks, key=lambda r: r.busy_s + r.exposed_comm_s)
        print(f"{f.id}: dp {cfg.dp}, measured step {f.measured:.3f} s; parsim {est.step_time_s:.3f} s "
              f"= busy {rank.busy_s:.3f} s + exposed communication {rank.exposed_comm_s:.3f} s")


if __name__ == "__main__":
    main()
