"""The size of the change set 2026-12-07g measures, before any of its plans was run: what a split backward holds from
I to W where a weight meets the data path (Layer.w_held_bytes, split_backward.weight_output_bytes): with the change,
every autograd node where a weight (or a tensor computed from weights alone) joins the data, as torch's
stage_backward_input keeps their gradients, the norms' affine weights and Gemma's 1 + w among them; without it (the
rule before), the operators that take a weight themselves, among the inputs extraction records.  Each of the set's
plans and the planner's pick (balanced splits, as validate resolves them with the analytical model), its step time
and each rank's peak priced on this CPU cluster (local-cpu, the analytical model) both ways.  Only ZB-H1 plans split
the backward, so only their ranks can move.

    python -W ignore results/2026-12-07g-amd-epyc/w_held_size_1207g.py \\
        > results/2026-12-07g-amd-epyc/w-held-size-1207g.txt
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

from parsim.model.graph import ELEMENT_BYTES

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-07e-amd-epyc"))

from outer_scalings_size_1207e import print_sizes  # noqa: E402

SET = "results/heldout/2026-12-07g.yaml"
MODELS = ["youtu_tiny", "vaultgemma_tiny", "llama_bias_control_tiny"]


def held_before(layer, batch: int) -> float:
    """A layer's w_held_bytes by the rule before the change: the outputs of the recorded operators that take a
    weight (own or tied) among their recorded inputs, an embedding's aside, per sample."""
    return sum(op.output_elements * ELEMENT_BYTES.get(op.dtype, 4) for op in layer.ops
               if (any(op.param_inputs) or any(op.tied_inputs)) and op.kind != "Embedding") / batch


def _graph_before(graph):
    layers = tuple(replace(layer, w_held_bytes=held_before(layer, graph.extraction_batch)) for layer in graph.layers)
    cpu = _graph_before(graph.cpu_graph) if graph.cpu_graph is not None else None
    return replace(graph, layers=layers, cpu_graph=cpu)


def held_off(spec):
    """The model priced with the rule before the change (its graph's and its CPU graph's w_held_bytes)."""
    return replace(spec, graph=_graph_before(spec.graph))


def main() -> None:
    print_sizes(MODELS, SET, held_off, 24)


if __name__ == "__main__":
    main()
