"""Exploratory, in sample: ZB-H1's last pipeline stage, which parsim misprices in both directions on the development
runs (``runtime-sends-insample.txt``).  torch's ``PipelineStage.backward_one_chunk`` (torch 2.13,
torch/distributed/pipelining/stage.py) pops the stage's cached output at the I and, on the last stage, detaches
it; ``stage_backward_input`` (``_backward.py``) detaches the loss after the input gradients.  So the logits, and the
parts of the graph only the loss reaches (the loss's saved log-softmax), may be freed at the I, where parsim frees
them at the W.  Each variant moves bytes from the W's free to the I's on the last stage only:

- ``shipped``: d42465d's rule;
- ``logits at I``: the stage's output, the logits (which pipeline_held_bytes keeps until the backward);
- ``logits+loss at I``: that and the loss's saved bytes (LayerGraph.loss_saved_bytes).

Nothing here is shipped; a change drawn from it needs a held-out set drawn before it.

    python -W ignore results/2026-12-06g-intel-xeon/zbh1_last_stage_insample.py \\
        results/2026-12-06g-intel-xeon/dev-schedules/*/validation.json \\
        > results/2026-12-06g-intel-xeon/zbh1-last-stage-insample.txt
"""

from __future__ import annotations

import importlib
import os
import sys
from unittest import mock


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from runtime_sends_insample import MIB, pipeline_plans, totals  # noqa: E402

SIMULATE = importlib.import_module("parsim.sim.simulate")      # the module (parsim.sim.simulate is its function)
SHIPPED = SIMULATE.stage_activation_bytes


def variant(move):
    """stage_activation_bytes with ``move(graph, start, b)`` bytes of the last stage freed at its I, not its W."""
    def priced(graph, cfg, b, split, runtime):
        saved, w_held, sent = SHIPPED(graph, cfg, b, split, runtime)
        if split:
            last = cfg.stages - 1
            w_held = {**w_held, last: w_held.get(last, 0.0) - move(graph, cfg.bounds[last], b)}
        return saved, w_held, sent
    return priced


VARIANTS = {
    "shipped": None,
    "logits at I": variant(lambda g, start, b: g.layers[-1].output_bytes * b),
    "logits+loss at I": variant(lambda g, start, b: (g.layers[-1].output_bytes + g.loss_saved_bytes) * b),
}


def main(paths: list[str]) -> None:
    print(f"{'model':26s} {'plan':12s} rank  measured MiB" + "".join(f"  {name:>17s}" for name in VARIANTS))
    for path in paths:
        for spec, cluster, label, cfg, rows in pipeline_plans(path):
            if cfg.schedule != "zbh1":
                continue
            priced = {}
            for name, fn in VARIANTS.items():
                if fn is None:
                    priced[name] = totals(spec, cluster, cfg)
                else:
                    with mock.patch.object(SIMULATE, "stage_activation_bytes", fn):
                        priced[name] = totals(spec, cluster, cfg)
            for r in rows:
                k, measured = r["rank"], r["meas_total_bytes"]
                print(f"{spec.name:26s} {label:12s} {k:4d}  {measured / MIB:11.2f}"
                      + "".join(f"  {priced[n][k] / MIB:8.2f} {priced[n][k] / measured - 1:+7.1%}" for n in VARIANTS))


if __name__ == "__main__":
    main(sys.argv[1:])
