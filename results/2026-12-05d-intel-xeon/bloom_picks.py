"""Where parsim's pick among BLOOM's topology trials (held out) is not the measured fastest: the layout and
micro-batch of each, from the picks benchmarks/bench_published.py scores (parsim.profile.picks), on the
committed out-of-sample prices of results/published/bench_published.txt.  Then the development families on
Megatron's stack (results/published/harnesses.yaml), their 3D dense rows by micro-batch size: do they too run
slower than priced at small micro-batches?  Reads committed files; prices nothing but each row's plan.

    python results/2026-12-05d-intel-xeon/bloom_picks.py
"""

from __future__ import annotations

import math
import re
import statistics

from parsim.model.stacks import load_harnesses
from parsim.profile.picks import pick_groups
from parsim.profile.published import figure_setup, load_all_figures
from parsim.sim.band import load_residuals

BENCH = "results/published/bench_published.txt"
LAYOUT = re.compile(r"dp(\d+)tp(\d+)pp(\d+)-mbs(\d+)")


def main() -> None:
    figures = {f.id: f for f in load_all_figures().figures}
    rows, measured = [], {}
    for line in open(BENCH).read().splitlines()[2:]:
        p = line.split()
        if len(p) > 8 and p[0] in figures and p[1] == "bigscience-tr11-prequel" and "; excluded" not in line \
                and p[6] != "-":
            rows.append((figures[p[0]], p[1], float(p[3]), float(p[6])))
            measured[p[0]] = float(p[3])
    groups = pick_groups(rows)
    smaller = larger = same = 0
    print("group (rows): parsim's pick -> the measured fastest, dp/tp/pp and micro-batch size; the pick's regret")
    for g in groups:
        if g.pick == g.fastest:
            continue
        pick, best = LAYOUT.search(g.pick).groups(), LAYOUT.search(g.fastest).groups()
        smaller += int(pick[3]) < int(best[3])
        larger += int(pick[3]) > int(best[3])
        same += int(pick[3]) == int(best[3])
        print(f"  {len(g.rows)} rows: dp{pick[0]} tp{pick[1]} pp{pick[2]} mbs {pick[3]} ({measured[g.pick]:.4g}) "
              f"-> dp{best[0]} tp{best[1]} pp{best[2]} mbs {best[3]} ({measured[g.fastest]:.4g}); "
              f"regret {g.regret:.1%}")
    print(f"\n{len(groups)} groups, parsim's pick the fastest in {sum(g.pick == g.fastest for g in groups)}; where "
          f"not, the pick's micro-batch is smaller than the fastest's in {smaller}, larger in {larger}, the same in "
          f"{same}")

    print("\nDevelopment families on Megatron's stack, 3D dense rows: median measured / predicted step by "
          "micro-batch size")
    stacks = load_harnesses()
    by: dict[tuple[str, int], list[float]] = {}
    for r in load_residuals():
        if r.held_out or stacks[r.family] != "megatron" or (r.kind.mix, r.kind.model) != ("3d", "dense"):
            continue
        spec, _, _, cfg = figure_setup(figures[r.id])
        b = cfg.microbatch_size(spec.training.global_batch_size)
        by.setdefault((r.family, b), []).append(math.exp(r.log_ratio))
    for (fam, b), ratios in sorted(by.items()):
        print(f"  {fam:<20} micro-batch {b:2d}: {len(ratios):2d} rows, {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
