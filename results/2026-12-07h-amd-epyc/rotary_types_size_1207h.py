"""The size of the change set 2026-12-07h measures, before any of its plans was run: each of the set's plans and the
planner's pick (balanced splits, as validate resolves them with the analytical model), its step time and each rank's
peak priced on this CPU cluster (local-cpu, the analytical model) at the parsim this script imports, or the one line
a model stops with.  Run once at main (before the change) and once with the draft applied in a work tree:

    S=results/2026-12-07h-amd-epyc/rotary_types_size_1207h.py
    (echo "before the change (main):"; python -W ignore $S; echo; echo "with the change (the draft, a work tree):"
     cd /tmp/wt && PYTHONPATH=/tmp/wt python -W ignore /work/main/$S) > ${S%/*}/rotary-types-size-1207h.txt

(the set's files copied into the work tree, where they are not committed yet).
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-07e-amd-epyc"))

from parsim.cost.compute import AnalyticalCompute  # noqa: E402
from parsim.hardware import load_cluster  # noqa: E402
from parsim.model.spec import load_model  # noqa: E402
from parsim.validation import default_cases  # noqa: E402

from outer_scalings_size_1207e import priced  # noqa: E402

SET = "results/heldout/2026-12-07h.yaml"
MODELS = ["gemma3_tiny", "olmo3_tiny", "mistral_control_tiny"]
MIB = 2 ** 20


def main() -> None:
    cluster = load_cluster("local-cpu")
    for name in MODELS:
        path = f"results/heldout/models/{name}.yaml"
        try:
            spec = load_model(path)
        except Exception as e:          # what a user sees instead of a price: its type and first line
            print(f"{name:28s} not priced: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            continue
        training = replace(spec.training, pipeline_runtime="torch")
        cases = default_cases(spec, cluster, AnalyticalCompute.for_training(cluster.device, training), SET)
        for case, (step, peaks) in zip(cases, priced(spec, cluster, cases)):
            ranks = "  ".join(f"{k}: {p / MIB:7.2f} MiB" for k, p in enumerate(peaks))
            print(f"{name:28s} {case.label:13s} {step * 1e3:8.1f} ms   {ranks}")


if __name__ == "__main__":
    main()
