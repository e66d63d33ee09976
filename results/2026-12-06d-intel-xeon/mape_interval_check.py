"""The set MAPE's 95% interval on every committed CPU validation report, two ways: as written (the percentile
interval of the bootstrap replicates' mean |error|, parsim before the sixty-fifth sitting) and as parsim draws it
now (parsim.report.errorbars.mape_interval: each plan's signed-error interval at 1 - 0.05/P, and the least and
greatest mean |error| they allow), from the same runs with the same seed.  It counts the reports whose MAPE lies
outside its interval under each rule and prints the intervals' widths.

    python results/2026-12-06d-intel-xeon/mape_interval_check.py > results/2026-12-06d-intel-xeon/mape-interval.txt
"""

from __future__ import annotations

import dataclasses
import glob
import json
import statistics

from parsim.report.errorbars import plan_errors
from parsim.report.validation import Row

FIELDS = {f.name for f in dataclasses.fields(Row)}


def rows_of(d: dict) -> list[Row]:
    """The plans of a validation.json as validate summarised them (already pooled), the nested lists as tuples."""
    def tup(x):
        return tuple(tup(v) for v in x) if isinstance(x, list) else x
    return [Row(**{k: tup(v) for k, v in p.items() if k in FIELDS}) for p in d["plans"]]


def main() -> None:
    paths = sorted(p for p in glob.glob("results/**/validation.json", recursive=True))
    outside = {"written": 0, "now": 0}
    widths = {"written": [], "now": []}
    n = 0
    print(f"{'report':90s} {'MAPE':>6s} {'as written':>17s} {'now':>17s}")
    for path in paths:
        d = json.load(open(path))
        written = d.get("mape_step_time_ci")
        if not written or not all(p.get("measured_steps_s") for p in d["plans"]):
            continue
        mape = d["mape_step_time"]
        now = plan_errors(rows_of(d))["mape_step_time_ci"]
        n += 1
        for rule, (lo, hi) in (("written", written), ("now", now)):
            outside[rule] += not lo <= mape <= hi
            widths[rule].append(hi - lo)
        flag = "  <- outside as written" if not written[0] <= mape <= written[1] else ""
        print(f"{path[8:98]:90s} {mape:6.1%} [{written[0]:5.1%}, {written[1]:5.1%}] "
              f"[{now[0]:5.1%}, {now[1]:5.1%}]{flag}")
    print(f"{n} reports; MAPE outside its interval: as written {outside['written']}, now {outside['now']}; "
          f"median width as written {statistics.median(widths['written']):.1%}, "
          f"now {statistics.median(widths['now']):.1%}")


if __name__ == "__main__":
    main()
