"""How far apart the public sources sit where they ran the same model on the same device: the
part of the benchmark's error a harness-blind model cannot remove.

For each scored row of results/published/residuals.yaml (its out-of-sample residual r = log(measured
step / predicted step), parsim.sim.band's score), the row's model is keyed by its per-layer shape
(layers, parameters to 2 significant digits) and its device.  Where two or more source families ran
one (model, device), each family's median r is its bias there; parsim already prices the layouts'
differences (bubbles, micro-batch, recompute, overlap), so what is left between two families' biases
is the harnesses' own (framework, kernels, launch overheads, settings a source leaves unstated).
Prints each such group, then the pooled spread: the root mean square of the family biases about
their group's mean (each group's deviations over F - 1), the median |difference| of two families'
biases, and from it the spread s of one family's bias, robust to the few sources far off.  Deterministic: prices nothing, reads committed residuals.

    python results/2026-12-05c-intel-xeon/harness_spread.py
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from parsim.profile.published import figure_spec, load_all_figures
from parsim.sim.band import load_residuals


def model_key(figure) -> tuple:
    graph = figure_spec(figure).graph
    params = sum(layer.param_count for layer in graph.layers)
    return (len(graph.layers), float(f"{params:.2g}"))


def main() -> None:
    figures = load_all_figures()
    groups: dict = defaultdict(lambda: defaultdict(list))
    for r in load_residuals():
        f = figures.by_id(r.id)
        groups[(r.kind.device, model_key(f))][r.family].append((r.log_ratio, r.id, r.held_out, r.kind.model))
    pairs: dict = defaultdict(list)        # (model kind, whether a held-out family is in the pair) -> |b_a - b_b|
    sq, dof = 0.0, 0
    print(f"{'device':<20} {'layers':>6} {'params':>8}  family: rows, median log(measured/predicted step) -> ratio")
    for (device, (layers, params)), fams in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if len(fams) < 2:
            continue
        bias = {fam: statistics.median(x[0] for x in rows) for fam, rows in fams.items()}
        held = {fam: any(x[2] for x in rows) for fam, rows in fams.items()}
        kind = next(iter(fams.values()))[0][3]
        mean = statistics.fmean(bias.values())
        sq += sum((b - mean) ** 2 for b in bias.values())
        dof += len(bias) - 1
        names = sorted(bias)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                pairs[(kind, held[a] or held[b])].append(abs(bias[a] - bias[b]))
        print(f"{device:<20} {layers:>6} {params:>8.2g}  ({kind})")
        for fam in names:
            print(f"    {fam:<28} {len(fams[fam]):>3} rows  {bias[fam]:+.3f} -> {math.exp(bias[fam]):.3f}"
                  f"{' (held out)' if held[fam] else ''}")
    every = [d for ds in pairs.values() for d in ds]
    print(f"\n{dof} degrees of freedom over the groups above; pooled spread of the family biases about their "
          f"group's mean: {math.sqrt(sq / dof):.3f} in log (x{math.exp(math.sqrt(sq / dof)):.3f}), the few sources "
          f"far off included")
    print("median |difference| of two families' biases, and the spread s of one family's bias it gives "
          "(b_a - b_b ~ N(0, 2 s^2): median |b_a - b_b| = 0.6745 sqrt(2) s), robust to the few far off:")
    subsets = [("every pair", every)] + [(f"{kind} models, {'a held-out family in the pair' if h else 'development families only'}",
                                          pairs[(kind, h)]) for kind, h in sorted(pairs)]
    for name, ds in subsets:
        if not ds:
            continue
        med = statistics.median(ds)
        s = med / (0.6745 * math.sqrt(2))
        print(f"  {name:<58} {len(ds):>3} pairs  median {med:.3f} (x{math.exp(med):.3f})  s {s:.3f}; "
              f"90% from s alone: x[{math.exp(-1.645 * s):.3f}, {math.exp(1.645 * s):.3f}]")


if __name__ == "__main__":
    main()
