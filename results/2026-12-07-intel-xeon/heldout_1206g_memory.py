"""Set 2026-12-06g's H4 and H5 (results/2026-12-06h-intel-xeon/preregistered-2026-12-06g.md): the peak memory of each
pipeline rank of the set's pp = 2 plans, priced with torch's last stage freeing its logits and the loss's saved bytes
at each micro-batch's I under a split backward (parsim.cost.memory.last_stage_freed_at_i_bytes, 57d8948) and without
it (freed at the W, the rule before), both against the same measurement.  Each plan is priced again with the
analytical model (runtime_sends_insample.totals); the script checks the first against the report's profiled
prediction (the peak of a plan without ZeRO follows from its order of actions alone, not from their times).

H4: on the 6 ZB-H1 last stages, the mean |error| lower with the change than without it.
H5: with the change, every one of the 12 ZB-H1 ranks within 5%, and every one of the 18 pipeline ranks within 10%.

    python -W ignore results/2026-12-07-intel-xeon/heldout_1206g_memory.py \\
        results/2026-12-07-intel-xeon/heldout-2026-12-06g/*/validation.json \\
        > results/2026-12-07-intel-xeon/heldout-1206g-memory.txt
"""

from __future__ import annotations

import os
import sys
from statistics import fmean

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06g-intel-xeon"))

from heldout_1206f_memory import print_ranks  # noqa: E402
from runtime_sends_insample import ranks  # noqa: E402


def main(paths: list[str]) -> None:
    # the set's plans (the pick is scored by H1-H3), the last-stage rule switched off for "without"
    found = [x for path in paths for x in ranks(path, "last_stage_freed_at_i_bytes", lambda *a: 0.0)
             if x["plan"].startswith("pp2-")]
    print_ranks(found, 28, 12)
    same = sum(abs(x["new"] - x["report"]) <= 1.0 for x in found)
    print(f"{len(found)} pipeline ranks; the analytical model with the change gives the report's prediction on {same}")
    last = [x for x in found if "zbh1" in x["plan"] and x["rank"] == 1]
    new = fmean(abs(x["new"] / x["measured"] - 1) for x in last)
    old = fmean(abs(x["old"] / x["measured"] - 1) for x in last)
    print(f"ZB-H1 last stages ({len(last)}): mean |error| with the change {new:.2%}, without it {old:.2%}:"
          f" H4 {'holds' if new < old else 'fails'}")
    zb = [abs(x["new"] / x["measured"] - 1) for x in found if "zbh1" in x["plan"]]
    every = [abs(x["new"] / x["measured"] - 1) for x in found]
    holds = all(e <= 0.05 for e in zb) and all(e <= 0.10 for e in every)
    print(f"with the change: {sum(e <= 0.05 for e in zb)} of {len(zb)} ZB-H1 ranks within 5% (max |error| "
          f"{max(zb):.1%}); {sum(e <= 0.10 for e in every)} of {len(every)} pipeline ranks within 10% (max |error| "
          f"{max(every):.1%}): H5 {'holds' if holds else 'fails'}")


if __name__ == "__main__":
    main(sys.argv[1:])
