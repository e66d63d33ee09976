"""Set 2026-12-06f's H4 and H5 (preregistered-2026-12-06f.md): the peak memory of each pipeline rank of the set's
pp = 2 plans, as validate priced it (with the sends torch's _PipelineScheduleRuntime keeps until the step ends,
parsim.cost.memory.runtime_sent_bytes, d42465d) and without them, both against the same measurement.  Each plan is
priced again with the analytical model, with the rule and with it switched off (runtime_sends_insample.ranks); the
script checks the first against the report's profiled prediction (the peak of a plan without ZeRO does not depend
on times).

H4: on the 12 interleaved and ZB-H1 ranks, the mean |error| lower with the change than without it.
H5: with the change, every one of the 18 pipeline ranks within 10%, and the two decoders' interleaved and ZB-H1
ranks within 3%.

    python -W ignore results/2026-12-06g-intel-xeon/heldout_1206f_memory.py \\
        results/2026-12-06h-intel-xeon/heldout-2026-12-06f/*/validation.json \\
        > results/2026-12-06h-intel-xeon/heldout-1206f-memory.txt
"""

from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from runtime_sends_insample import MIB, ranks  # noqa: E402


def print_ranks(found: list[dict], model_width: int = 26, plan_width: int = 19) -> None:
    """One line per rank (runtime_sends_insample.ranks' dicts): measured, without the rule, with it."""
    print(f"{'model':{model_width}s} {'plan':{plan_width}s} rank  measured MiB  without MiB   error  with MiB   error")
    for x in found:
        print(f"{x['model']:{model_width}s} {x['plan']:{plan_width}s} {x['rank']:4d}  {x['measured'] / MIB:11.2f}"
              f"  {x['old'] / MIB:11.2f}  {x['old'] / x['measured'] - 1:+6.1%}  {x['new'] / MIB:8.2f}"
              f"  {x['new'] / x['measured'] - 1:+6.1%}")


def main(paths: list[str]) -> None:
    found = [x for path in paths for x in ranks(path)]
    print_ranks(found)
    same = sum(abs(x["new"] - x["report"]) <= 1.0 for x in found)
    print(f"{len(found)} pipeline ranks; the analytical model with the rule gives the report's prediction on {same}")
    runtime = [x for x in found if "interleaved" in x["plan"] or "zbh1" in x["plan"]]
    new = statistics.fmean(abs(x["new"] / x["measured"] - 1) for x in runtime)
    old = statistics.fmean(abs(x["old"] / x["measured"] - 1) for x in runtime)
    print(f"interleaved and ZB-H1 ranks ({len(runtime)}): mean |error| with the change {new:.2%}, without it {old:.2%}:"
          f" H4 {'holds' if new < old else 'fails'}")
    every = [abs(x["new"] / x["measured"] - 1) for x in found]
    decoders = [abs(x["new"] / x["measured"] - 1) for x in runtime if "cifar" not in x["model"]]
    holds = all(e <= 0.10 for e in every) and all(e <= 0.03 for e in decoders)
    print(f"with the change: {sum(e <= 0.10 for e in every)} of {len(every)} ranks within 10% (max |error| "
          f"{max(every):.1%}); the decoders' interleaved and ZB-H1 ranks within 3%: {sum(e <= 0.03 for e in decoders)} "
          f"of {len(decoders)}: H5 {'holds' if holds else 'fails'}")


if __name__ == "__main__":
    main(sys.argv[1:])
