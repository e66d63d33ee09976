"""The training stack that ran each public source family's rows, and the out-of-sample error per stack.

``results/published/harnesses.yaml`` labels every family of the public benchmark (parsim.profile.loso's
families) with one of STACKS, read from the family's figures file, which cites the source's own words for
it.  parsim prices Megatron-Core-level kernels and collectives whatever stack a plan runs on; what separates
two families that ran the same model on the same device is mostly their stack's own speed
(results/2026-12-05c-intel-xeon/harness-spread.txt).  ``by_stack`` says, per stack, how far parsim's
out-of-sample prices fall from the rows and in which direction: a diagnosis printed by
benchmarks/bench_published.py.  A label, not a parameter: nothing is fitted to it and no prediction reads it.
"""

from __future__ import annotations

import os
import statistics

from parsim.inputs import Fields, load_file

HARNESSES = "results/published/harnesses.yaml"
SCHEMA_VERSION = 1
# Megatron-LM and what is built on it; DeepSpeed's ZeRO or pipeline engine under the rows; torch's own FSDP;
# MindSpore; a stack of its own (the file's header says which sources each takes)
STACKS = ("megatron", "deepspeed", "torch-fsdp", "mindspore", "other")


def load_harnesses(path: str | os.PathLike = HARNESSES) -> dict[str, str]:
    """family -> stack, from the harness table; every error names the file and the field."""
    path = os.fspath(path)
    r = Fields(load_file(path, "a harness table YAML"), path)
    r.schema_version(SCHEMA_VERSION)
    fam = r.sub("families")
    stacks = {name: fam.choice(name, STACKS) for name in list(fam.data)}
    fam.done()
    r.done()
    return stacks


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
