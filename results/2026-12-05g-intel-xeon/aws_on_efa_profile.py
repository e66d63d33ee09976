"""How much of the AWS family's miss the EFA profile accounts for (diagnosis only: the family stays scored as first
priced, on dgx-h100, in results/published/; nothing is fitted to it).  Each scored row of
results/published/aws_qwen3_30b_p5_figures.yaml priced on its shipped profile (dgx-h100, InfiniBand) and on
hardware_profiles/aws-p5.yaml (EFA, fitted to nccl-tests tables before this script was written, commit 21bf249),
and the micro-batch pairs' fixed cost a micro-batch (as results/2026-12-05f-intel-xeon/aws_microbatch_cost.py)
on each.

    python results/2026-12-05g-intel-xeon/aws_on_efa_profile.py > results/2026-12-05g-intel-xeon/aws-on-efa-profile.txt
"""

from parsim.hardware.cluster import load_profile, profile_path
from parsim.profile.published import load_figures, price

FIGURES = "results/published/aws_qwen3_30b_p5_figures.yaml"
PAIRS = (("ep16-tp8pp4dp2", 128, 32), ("ep32-tp8pp2dp4", 64, 16))


def main() -> None:
    rows = [f for f in load_figures(FIGURES).figures if not f.excluded]
    efa = load_profile(profile_path("aws-p5"))
    step = {}
    print(f"{'row':<58} {'measured s':>10} {'dgx-h100 s':>10} {'ratio':>6} {'aws-p5 s':>9} {'ratio':>6}")
    for f in rows:
        ib, ef = price(f), price(f, efa)
        step[f.id] = (f.measured, ib.step_time_s, ef.step_time_s)
        print(f"{f.id:<58} {f.measured:>10.3f} {ib.step_time_s:>10.3f} {f.measured / ib.step_time_s:>6.3f} "
              f"{ef.step_time_s:>9.3f} {f.measured / ef.step_time_s:>6.3f}")
    print("\nThe fixed cost of one micro-batch on the critical path, (step at micro-batch 1 - step at 4) / "
          "(difference in micro-batch count):")
    for layout, many, few in PAIRS:
        one, four = (step[f"aws-p5-qwen3-30b-a3b-{layout}-mb{b}-ovloff-nccl"] for b in (1, 4))
        costs = [(a - b) / (many - few) * 1e3 for a, b in zip(one, four)]
        print(f"  {layout}: measured {costs[0]:.1f} ms, dgx-h100 {costs[1]:.1f} ms, aws-p5 {costs[2]:.1f} ms")


if __name__ == "__main__":
    main()
