"""The size of the two changes set 2026-12-07f measures, before any of its plans was run: each of the set's plans and
the planner's pick (balanced splits, as validate resolves them with the analytical model; the profiled run may split
otherwise), its step time and each rank's peak priced on this CPU cluster (local-cpu, the analytical model):

- without either change (the code before them);
- "pipe": a torch pipeline stage's memory as torch holds it (parsim.cost.memory): the gradient entering the last
  layer of a stage that sends its output is the receive buffer already priced (backward_workspace_bytes'
  ``buffered_grad``), and Schedule1F1B keeps one sent output past its backward (torch_pipeline_buffer_bytes'
  ``warmup``);
- "cut": NanoChat's model forward outside its layers (parsim.model.hf: EMBEDDING_NORMED, nanochat in
  LOGITS_CAPPED), the model extracted again without it;
- both (the code with them).

Each switched off by patching the names it lands as, so the script reruns at the code with the changes.

    python -W ignore results/2026-12-07f-amd-epyc/change_size_1207f.py \\
        > results/2026-12-07f-amd-epyc/change-size-1207f.txt
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from dataclasses import replace
from unittest import mock

import parsim.cost.memory
import parsim.model.extracted
import parsim.model.hf
import parsim.sim.memory
from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.validation import default_cases

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-07e-amd-epyc"))

from outer_scalings_size_1207e import priced as priced_torch  # noqa: E402

SET = "results/heldout/2026-12-07f.yaml"
MODELS = ["nanochat_tiny", "iquestcoder_tiny", "diffllama_tiny"]
MIB = 2 ** 20
SIMULATE = importlib.import_module("parsim.sim.simulate")      # the module (parsim.sim.simulate names the function)


@contextlib.contextmanager
def pipe_off():
    """The pipeline stage's memory as before: the entering gradient counted in the workspace, no sent output kept."""
    workspace, buffers = parsim.cost.memory.backward_workspace_bytes, parsim.cost.memory.torch_pipeline_buffer_bytes

    def unbuffered(*args, buffered_grad=False, **kwargs):
        return workspace(*args, **kwargs)

    with mock.patch.object(parsim.sim.memory, "backward_workspace_bytes", unbuffered), \
            mock.patch.object(SIMULATE, "backward_workspace_bytes", unbuffered), \
            mock.patch.object(parsim.sim.memory, "torch_pipeline_buffer_bytes",
                              lambda received, sent, m, schedule, warmup=0: buffers(received, sent, m, schedule)):
        yield


def cut_off(path: str):
    """The model at ``path`` extracted again as parsim cut NanoChat before: no norm on the embeddings, no cap."""
    with mock.patch.object(parsim.model.hf, "EMBEDDING_NORMED", frozenset()), \
            mock.patch.object(parsim.model.hf, "LOGITS_CAPPED", parsim.model.hf.LOGITS_CAPPED - {"nanochat"}), \
            mock.patch.dict(parsim.model.extracted._EXTRACTED, clear=True):
        return load_model(path)


def priced(spec, cluster, cases, pipe: bool) -> list[tuple[float, list[float]]]:
    """(step time in s, each rank's peak in bytes) of each case, under torch's pipeline runtime
    (outer_scalings_size_1207e.priced), with the pipeline stage's change or without it."""
    with contextlib.nullcontext() if pipe else pipe_off():
        return priced_torch(spec, cluster, cases)


def main() -> None:
    cluster = load_cluster("local-cpu")
    print("each rank's peak in MiB: without either change, with the pipeline stage's (pipe), with NanoChat's cut "
          "(cut), with both; the step in ms without and with both")
    for name in MODELS:
        path = f"results/heldout/models/{name}.yaml"
        spec, before = load_model(path), cut_off(path)
        training = replace(spec.training, pipeline_runtime="torch")
        cases = default_cases(spec, cluster, AnalyticalCompute.for_training(cluster.device, training), SET)
        runs = {(cut, pipe): priced(spec if cut else before, cluster, cases, pipe)
                for cut in (False, True) for pipe in (False, True)}
        for k, case in enumerate(cases):
            step0, step = runs[False, False][k][0], runs[True, True][k][0]
            ranks = []
            for r in range(len(runs[False, False][k][1])):
                none, pipe, cut, both = (runs[key][k][1][r] / MIB for key in
                                         ((False, False), (False, True), (True, False), (True, True)))
                ranks.append(f"{r}: {none:6.2f} pipe {pipe - none:+5.2f} cut {cut - none:+5.2f} -> {both:6.2f} "
                             f"{both / none - 1:+5.1%}")
            print(f"{name:17s} {case.label:13s} step {step0 * 1e3:7.1f} -> {step * 1e3:7.1f} ms "
                  f"{step / step0 - 1:+5.1%}   " + "   ".join(ranks))


if __name__ == "__main__":
    main()
