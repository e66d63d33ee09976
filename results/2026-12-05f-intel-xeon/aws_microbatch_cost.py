"""What AWS's micro-batch pairs say each micro-batch costs (arithmetic on committed files; diagnosis only,
nothing is changed, fitted or re-pinned).  At ep 16 and ep 32 the overlap=off arm ran the same 256 x 4,096
tokens as 128 (or 64) micro-batches of 1 and as 32 (or 16) of 4.  Reading the step as micro-batches x a fixed
cost each, plus what grows with the tokens, the difference between the two over the difference in micro-batch
count is the fixed cost of one micro-batch on the pipeline's critical path: measured (the source) and
predicted (the first pricing, via residuals.yaml).  Divided by the all-to-alls one micro-batch runs on a stage
(dispatch and combine, forward, recomputed forward and backward: 6 a layer, ASSUMED, over 48 / pp layers),
it is the fixed cost of one all-to-all, to the extent the all-to-alls carry it.

    python results/2026-12-05f-intel-xeon/aws_microbatch_cost.py
"""

import math

from parsim.profile.published import load_figures
from parsim.sim.band import load_residuals

LAYERS, A2A_PER_LAYER = 48, 6
PAIRS = (("ep16-tp8pp4dp2", 4, 128, 32), ("ep32-tp8pp2dp4", 2, 64, 16))


def main() -> None:
    ratio = {r.id: math.exp(r.log_ratio) for r in load_residuals() if r.family == "aws-p5-qwen3-30b"}
    measured = {f.id: f.measured for f in load_figures("results/published/aws_qwen3_30b_p5_figures.yaml").figures}
    for layout, pp, many, few in PAIRS:
        one, four = (f"aws-p5-qwen3-30b-a3b-{layout}-mb{b}-ovloff-nccl" for b in (1, 4))
        a2a = A2A_PER_LAYER * LAYERS // pp
        for what, t1, t4 in (("measured", measured[one], measured[four]),
                             ("predicted", measured[one] / ratio[one], measured[four] / ratio[four])):
            fixed_s = (t1 - t4) / (many - few)
            print(f"{layout}, {what}: {t1:.3f} s with {many} micro-batches of 1, {t4:.3f} s with {few} of 4: "
                  f"{fixed_s * 1e3:.1f} ms a micro-batch, {fixed_s / a2a * 1e3:.2f} ms for each of its {a2a} "
                  f"all-to-alls on a stage")


if __name__ == "__main__":
    main()
