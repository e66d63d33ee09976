"""FSDP across nodes, row by row (diagnosis only: nothing is changed, fitted or re-pinned).  Every scored public row
with ZeRO-3 over 2 nodes or more, development and held out: its measured / predicted step (the out-of-sample
residual), the tokens a GPU computes per micro-batch, the data-parallel degree, and the share of the priced step
that parsim leaves as exposed communication on the busiest rank.  Read with the medians per family: where the
misses grow as the tokens a GPU computes between two gathers shrink, or as the exposed share grows, the
gathers' and reduce-scatters' exposure across nodes is the suspect; where they do not, something else.

    python results/2026-12-05g-intel-xeon/fsdp_across_nodes.py
"""

import math
import statistics

from parsim.profile.loso import load_fit_spec
from parsim.profile.published import figure_setup, figure_tokens, load_all_figures
from parsim.sim import simulate
from parsim.sim.band import load_residuals


def main() -> None:
    ratio = {r.id: math.exp(r.log_ratio) for r in load_residuals()}
    held = load_fit_spec("results/published/fit.yaml").held_out
    rows = []
    for f in load_all_figures().figures:
        if f.excluded or f.id not in ratio or dict(f.parallel).get("zero") != 3 or f.nodes < 2:
            continue
        spec, cluster, compute, cfg = figure_setup(f)
        est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
        rank = max(est.ranks, key=lambda r: r.busy_s + r.exposed_comm_s)
        seq = figure_tokens(f) // spec.training.global_batch_size          # the model's args.seq_len
        tokens = cfg.microbatch_size(spec.training.global_batch_size) * seq // cfg.cp
        rows.append((f.source, f.id, ratio[f.id], tokens, cfg.dp, rank.exposed_comm_s / est.step_time_s,
                     f.source in held))
    print(f"{'family':26} {'row':52} {'meas/pred':>9} {'tokens/mb':>9} {'dp':>5} {'exposed':>8}")
    for fam, rid, r, tok, dp, exp, _ in sorted(rows):
        print(f"{fam:26} {rid[:52]:52} {r:9.3f} {tok:9d} {dp:5d} {exp:8.1%}")
    print("\nBy family (median measured / predicted; median tokens a GPU computes per micro-batch; median exposed share):")
    for fam in sorted({x[0] for x in rows}):
        own = [x for x in rows if x[0] == fam]
        print(f"  {fam:26} {'held out' if own[0][6] else 'development':11} {len(own):3} rows: "
              f"{statistics.median(x[2] for x in own):.3f}, {statistics.median(x[3] for x in own):.0f} tokens, "
              f"{statistics.median(x[5] for x in own):.1%} exposed")
    for label, test in (("at most 4,096 tokens per micro-batch", lambda x: x[3] <= 4096),
                        ("more than 4,096", lambda x: x[3] > 4096)):
        own = [x[2] for x in rows if test(x)]
        print(f"  {label}: {len(own)} rows, median measured / predicted {statistics.median(own):.3f}")


if __name__ == "__main__":
    main()
