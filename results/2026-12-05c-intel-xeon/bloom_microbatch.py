"""BLOOM's topology trials (results/published/bloom_prequel_figures.yaml, held out): what the miss
costs per micro-batch.  For each pair of scored rows that ran the same model, layout (dp, tp, pp),
global batch, precision and day, and differ only in the micro-batch size, the part of the measured
step parsim does not predict, R = measured - predicted step, is compared: if the miss were a fixed
cost c per micro-batch and pipeline stage (a micro-batch passes each stage once, and in 1F1B the
step's critical path runs every micro-batch through the stage), R = m c + r, so
c = (R_a - R_b) / (m_a - m_b), m the micro-batches a step.  Prints each pair's c, and c per layer a
stage holds.  Deterministic: prices the rows at the shipped profiles, fits nothing, changes nothing.

    python results/2026-12-05c-intel-xeon/bloom_microbatch.py
"""

from __future__ import annotations

import itertools
import re
import statistics

from parsim.profile.published import load_figures, price

BLOOM = "results/published/bloom_prequel_figures.yaml"
DAY = re.compile(r"\b(02-\d\d)\b")         # the row's Notes column: the day it ran


def main() -> None:
    rows = {}
    for f in load_figures(BLOOM).figures:
        if f.excluded:
            continue
        par, model = dict(f.parallel), dict(f.model)
        args, training = dict(model["args"]), dict(model["training"])
        key = (args["layers"], args["hidden"], args["heads"], par["dp"], par["tp"], par["pp"],
               training["global_batch_size"], training["dtype"], DAY.search(f.row).group(1), par.get("split", ""))
        rows.setdefault(key, []).append((par["microbatches"], f.measured, price(f).predicted, f.id))
    per_layer = []
    print(f"{'rows (same model, layout, batch, day; micro-batches m)':<74} {'m':>9} {'c s':>7} {'c/layer ms':>10}")
    for key, group in sorted(rows.items()):
        for (ma, meas_a, pred_a, id_a), (mb, meas_b, pred_b, id_b) in itertools.combinations(sorted(group), 2):
            if ma == mb:
                continue
            c = ((meas_a - pred_a) - (meas_b - pred_b)) / (ma - mb)
            layers_a_stage = key[0] / key[5]
            per_layer.append(c / layers_a_stage)
            print(f"{id_a[:36]:<36} vs {id_b[10:46]:<36} {ma:>4}/{mb:<4} {c:7.3f} {c / layers_a_stage * 1e3:10.1f}")
    if per_layer:
        print(f"\n{len(per_layer)} pairs; c per layer a stage holds: median {statistics.median(per_layer) * 1e3:.1f} ms, "
              f"range {min(per_layer) * 1e3:.1f} to {max(per_layer) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
