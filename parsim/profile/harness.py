"""The out-of-sample error per training stack: the stack that ran each public source family's rows.

``results/published/harnesses.yaml`` labels every family of the public benchmark (parsim.profile.loso's
families) with one of parsim.model.stacks.STACKS (parsim.model.stacks.load_harnesses), read from the family's
figures file, which cites the source's own words for it.  parsim prices Megatron-Core-level kernels and
collectives whatever stack a plan runs on; what separates two families that ran the same model on the same
device is mostly their stack's own speed (results/2026-12-05c-intel-xeon/harness-spread.txt).  ``by_stack``
says, per stack, how far parsim's out-of-sample prices fall from the rows and in which direction: a diagnosis
printed by benchmarks/bench_published.py.  A label, not a parameter: nothing is fitted to it and no price
reads it.
"""

from __future__ import annotations

import statistics

from parsim.model.stacks import STACKS


def by_stack(errors: dict[str, list[float]], stacks: dict[str, str], held_out=frozenset()) -> list[str]:
    """One line per stack of the families in ``errors`` (family -> its rows' out-of-sample throughput errors,
    predicted / measured - 1, so + is a price too fast): its families (how many of them ``held_out``, fitted
    on by no fold), rows, MAPE over its rows, the median of its families' median errors, and how many of its
    families were priced fast (median error above 0).  Each family counts once in the median: one source's
    forty rows share its bias."""
    lines = []
    for stack in STACKS:
        families = sorted(f for f in errors if stacks[f] == stack)
        if not families:
            continue
        rows = [e for f in families for e in errors[f]]
        medians = {f: statistics.median(errors[f]) for f in families}
        held = sum(1 for f in families if f in held_out)
        fast = sum(m > 0 for m in medians.values())
        lines.append(f"{stack}: {len(families)} families ({held} of them in no fit), {len(rows)} rows, "
                     f"out-of-sample MAPE {statistics.mean(abs(e) for e in rows):.1%}; median of the families' "
                     f"median errors {statistics.median(medians.values()):+.1%}; {fast} of {len(families)} families "
                     "priced fast (" + ", ".join(f"{f} {medians[f]:+.1%}" for f in families) + ")")
    return lines
