"""The size of the change set 2026-12-07e measures, before any of its plans was run: each of the set's plans and the
planner's pick (balanced splits, as validate resolves them with the analytical model; the profiled run may split
otherwise), its step time and each rank's peak priced on this CPU cluster (local-cpu, the analytical model) with
the model's forward outside its layers as transformers computes it (parsim.model.hf.outer_scalings: the embedding
multiplier, the logits' scale, the logits' cap) and without it (the function giving none, the model extracted
again: parsim's cut before the change).  The same plan, split as with the change, is priced both ways.

    python -W ignore results/2026-12-07e-amd-epyc/outer_scalings_size_1207e.py \\
        > results/2026-12-07e-amd-epyc/outer-scalings-size-1207e.txt
"""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import parsim.model.extracted
import parsim.model.hf
from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.sim import simulate
from parsim.validation import default_cases

SET = "results/heldout/2026-12-07e.yaml"
MODELS = ["hyperclovax_tiny", "gemma2_tiny", "qwen2_control_tiny"]
MIB = 2 ** 20


def priced(spec, cluster, cases) -> list[tuple[float, list[float]]]:
    """(step time in s, each rank's peak in bytes) of each case, under torch's pipeline runtime."""
    training = replace(spec.training, pipeline_runtime="torch")
    compute = AnalyticalCompute.for_training(cluster.device, training)
    out = []
    for case in cases:
        est = simulate(spec.graph, training, cluster, case.config, compute, keep_timeline=False)
        out.append((est.step_time_s, [r.memory.total_bytes for r in est.ranks]))
    return out


def print_sizes(models: list[str], set_path: str, before, width: int) -> None:
    """Each case of the held-out set ``set_path`` for each model (results/heldout/models/<name>.yaml): its step time
    and each rank's peak priced with the model as loaded and with ``before(spec)``, the model before the change."""
    cluster = load_cluster("local-cpu")
    print(f"{'model':{width}s} {'plan':13s} {'step without':>12s} {'with':>9s} {'change':>7s}   "
          "rank: peak without -> with")
    for name in models:
        spec = load_model(f"results/heldout/models/{name}.yaml")
        training = replace(spec.training, pipeline_runtime="torch")
        cases = default_cases(spec, cluster, AnalyticalCompute.for_training(cluster.device, training), set_path)
        for case, (step, peaks), (step0, peaks0) in zip(cases, priced(spec, cluster, cases),
                                                        priced(before(spec), cluster, cases)):
            ranks = "  ".join(f"{k}: {p0 / MIB:6.2f} -> {p / MIB:6.2f} MiB {p / p0 - 1:+5.1%}"
                              for k, (p, p0) in enumerate(zip(peaks, peaks0)))
            print(f"{name:{width}s} {case.label:13s} {step0 * 1e3:9.1f} ms {step * 1e3:6.1f} ms "
                  f"{step / step0 - 1:+6.1%}   {ranks}")


def without_scalings(spec):
    """The model extracted again with parsim's cut before the change (no outer scalings)."""
    with mock.patch.object(parsim.model.hf, "outer_scalings", lambda cfg: (None, None, None)), \
            mock.patch.dict(parsim.model.extracted._EXTRACTED, clear=True):
        return load_model(spec.path)


def main() -> None:
    print_sizes(MODELS, SET, without_scalings, 19)


if __name__ == "__main__":
    main()
