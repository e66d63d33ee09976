"""Set 2026-12-06e's H4 and H5 (../2026-12-06f-intel-xeon/preregistered-2026-12-06e.md): the peak memory of each
pipeline rank of the set's pp = 2 plans, as validate priced it at 2bc247f's rule (torch's Schedule1F1B keeps the
input gradient a stage sent last until the next backward's sends: parsim.cost.memory.torch_pipeline_buffer_bytes),
against the rule before it (0b6051c's: no such gradient), both against the same measurement.

The rule before is priced from the same report: the report's prediction less the one gradient the change adds,
on each 1F1B rank that sends gradients (rank 1 of pp = 2) when m > 1, the size of the activation the rank receives
(the output of the layer before its cut, times the micro-batch size).  The script checks the report's prediction
against the analytical model's under torch's runtime (the peak of a plan without ZeRO does not depend on times),
and that pricing with the gradient dropped gives the rule before's figure.

H4: the mean |error| of the three 1F1B last stages' peaks lower with the change than without it.
H5: with the change, the decoder's 1F1B last stage within 2% of its measured peak, and every one of the 12
pipeline ranks within 10%.

    python -W ignore results/2026-12-06g-intel-xeon/heldout_1206e_memory.py \\
        results/2026-12-06g-intel-xeon/heldout-2026-12-06e/*/validation.json \\
        > results/2026-12-06g-intel-xeon/heldout-1206e-memory.txt
"""

from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from runtime_sends_insample import MIB, pipeline_plans, totals  # noqa: E402


def ranks(path: str):
    for spec, cluster, label, cfg, rows in pipeline_plans(path):
        analytical = totals(spec, cluster, cfg)
        cut, b = cfg.bounds[1], cfg.microbatch_size(spec.training.global_batch_size)
        for r in rows:
            k = r["rank"]
            new, measured = r["pred_total_bytes"], r["meas_total_bytes"]
            one_f = cfg.schedule == "1f1b" and k == 1 and cfg.microbatches > 1
            sent = spec.graph.layers[cut - 1].output_bytes * b if one_f else 0.0
            yield dict(model=os.path.basename(os.path.dirname(path)), plan=label, rank=k, measured=measured, new=new,
                       old=new - sent, analytical_same=abs(analytical[k] - new) <= 1.0,
                       decoder=spec.source.kind == "hf")


def main(paths: list[str]) -> None:
    found = [x for path in paths for x in ranks(path)]
    print(f"{'model':28s} {'plan':13s} rank  measured MiB  change MiB   error  before MiB   error")
    for x in found:
        print(f"{x['model']:28s} {x['plan']:13s} {x['rank']:4d}  {x['measured'] / MIB:11.2f}  {x['new'] / MIB:10.2f}"
              f"  {x['new'] / x['measured'] - 1:+6.1%}  {x['old'] / MIB:10.2f}  {x['old'] / x['measured'] - 1:+6.1%}")
    print(f"{len(found)} pipeline ranks; the analytical model under torch's runtime gives the report's profiled "
          f"prediction on {sum(x['analytical_same'] for x in found)} of them (the peak does not depend on times)")
    last = [x for x in found if "1f1b" in x["plan"] and x["rank"] == 1]
    new = [abs(x["new"] / x["measured"] - 1) for x in last]
    old = [abs(x["old"] / x["measured"] - 1) for x in last]
    print(f"1F1B last stages ({len(last)}): mean |error| with the change {statistics.fmean(new):.2%}, without it "
          f"{statistics.fmean(old):.2%}: H4 {'holds' if statistics.fmean(new) < statistics.fmean(old) else 'fails'}")
    every = [abs(x["new"] / x["measured"] - 1) for x in found]
    dec = [abs(x["new"] / x["measured"] - 1) for x in last if x["decoder"]]
    print(f"with the change: the decoder's 1F1B last stage {', '.join(f'{e:.2%}' for e in dec)} from its measured peak;"
          f" {sum(e <= 0.10 for e in every)} of {len(every)} ranks within 10% (max |error| {max(every):.1%}): "
          f"H5 {'holds' if all(e <= 0.02 for e in dec) and all(e <= 0.10 for e in every) else 'fails'}")


if __name__ == "__main__":
    main(sys.argv[1:])
