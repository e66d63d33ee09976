"""The committed reports' pipeline ranks (pp = 2, dp = 1, GPipe and 1F1B), in sample: torch's pipeline rule as
landed in 0b6051c (``planned`` in ../2026-12-06e-intel-xeon/pipeline_memory_insample.py: m receive buffers a
rank, each micro-batch's output kept until its backward, the first unit's saved input not counted twice) against
the same rule with the gradient Schedule1F1B keeps from one backward's send to the next (``send``: one more
tensor of the received activation's size on the last stage under 1F1B when m > 1;
parsim.cost.memory.torch_pipeline_buffer_bytes), both against the measurement with the receive buffers counted.

Written, and the rule drawn, before set 2026-12-06d's report was read.  What each rank's miss is, in received activations (``miss / boundary``), is printed for the 1F1B last stages: a
constant 1 across models would say one such tensor is missing.  Every row read here is a development row.

    python -W ignore results/2026-12-06f-intel-xeon/pipeline_send_insample.py \\
        > results/2026-12-06f-intel-xeon/pipeline-send-insample.txt
"""

from __future__ import annotations

import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06e-intel-xeon"))

from pipeline_memory_insample import rows  # noqa: E402


def main(paths: list[str]) -> None:
    seen, unique = set(), []
    for x in rows(paths):
        key = (x["plan"], x["rank"], round(x["measured"]), round(x["old"]))
        if key not in seen:
            seen.add(key)
            x["send"] = x["planned"] + (x["boundary"] if "1f1b" in x["plan"] and x["rank"] == 1 and x["m"] > 1
                                        else 0.0)
            unique.append(x)
    print(f"{len(unique)} pipeline ranks (pp = 2, dp = 1) from {len({x['report'] for x in unique})} reports, "
          "against the measurement with the receive buffers")
    print("rule      schedule  rank  median err  mean |err|  max |err|  within 10%")
    for rule in ("planned", "send"):
        for schedule in ("gpipe", "1f1b"):
            for rank in (0, 1):
                errs = [x[rule] / x["fixed"] - 1 for x in unique if x["rank"] == rank and schedule in x["plan"]]
                print(f"{rule:<9} {schedule:<8} {rank:>5}  {statistics.median(errs):+9.1%}"
                      f"  {statistics.mean(map(abs, errs)):9.1%}  {max(map(abs, errs)):8.1%}"
                      f"  {sum(abs(e) <= 0.10 for e in errs):>4}/{len(errs)}")
    print()
    print("1F1B last stages: report, plan, the landed rule's error, miss in received activations, error with the send")
    for x in unique:
        if "1f1b" in x["plan"] and x["rank"] == 1:
            miss = (x["fixed"] - x["planned"]) / x["boundary"]
            print(f"{x['report'].split('results/')[-1].removesuffix('/validation.json')[:70]:<70} {x['plan']:<12}"
                  f" {x['planned'] / x['fixed'] - 1:+6.1%}  {miss:6.2f}  {x['send'] / x['fixed'] - 1:+6.1%}")


if __name__ == "__main__":
    # the reports up to set 2026-12-06c's: measured before the receive buffers were counted (187e075), which
    # rows() adds; set 2026-12-06d's (this sitting's folder) measures 0b6051c, not this rule
    main(sys.argv[1:] or sorted(p for p in glob.glob("results/**/validation.json", recursive=True)
                                if "2026-12-06f" not in p))
