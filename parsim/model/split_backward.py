"""What a split backward holds from its I to its W (Layer.w_held_bytes): the gradients torch's pipeline stage keeps
for the weights' backward under ZB-H1, counted on the operators a layer's extraction recorded (OpInfo)."""

from __future__ import annotations

from parsim.model.graph import ELEMENT_BYTES


def weight_output_bytes(ops, ways=lambda k: 1) -> float:
    """Bytes of the gradients a split backward holds from I to W (Layer.w_held_bytes), op k's output divided by
    ``ways(k)``, its split on one device: torch's stage_backward_input keeps the gradient entering each autograd node
    where a weight's path joins the input's until stage_backward_weight uses it (torch 2.13,
    torch/distributed/pipelining/_backward.py: get_param_groups' "intermediates" and the grads their hooks capture).
    Those nodes are the operators where a weight meets the data path (OpInfo.joins_weight): the matrix products and
    convolutions, the norms with an affine weight (LayerNorm, BatchNorm, RMSNorm's product), and where a weight is
    transformed before it meets the data, the operator taking the transformed weight (Gemma's RMSNorm scales by
    1 + w; DiffLlama weighs its second attention by a lambda computed from four weights), not the one on weights
    alone; an embedding's integer indices carry no gradient, so it is left out.  Gradients that are one tensor are
    counted once (shared_gradients: a residual block's two BatchNorms summed)."""
    held: dict[int, float] = {}
    for k, root in enumerate(shared_gradients(ops)):
        op = ops[k]
        if op.joins_weight and op.kind != "Embedding":
            held[root] = max(held.get(root, 0.0), op.output_elements * ELEMENT_BYTES.get(op.dtype, 4) / ways(k))
    return sum(held.values())


def shared_gradients(ops) -> list[int]:
    """For each op, the op whose output's gradient is the same tensor as its own (itself where none): autograd's
    AddBackward hands its output's gradient on unchanged to both operands, and SubBackward to the first, so an op
    whose output only such an add (or sub, as its first operand) of as many elements consumes (a view of it: no
    broadcast) gets the add's gradient: a residual block's BatchNorms on its branch and its shortcut get one tensor,
    and so do Cohere's attention and MLP outputs, summed with the residual.  Consumers are the recorded ops
    (OpInfo.inputs_from); an op consumed elsewhere too keeps its own."""
    consumers: dict[int, list[tuple[int, int]]] = {}
    for k, op in enumerate(ops):
        for j, src in enumerate(op.inputs_from):
            if src >= 0:
                consumers.setdefault(src, []).append((k, j))
    root = list(range(len(ops)))
    for k in reversed(range(len(ops))):          # a consumer comes after its producers: its root is final
        uses = consumers.get(k, [])
        if len(uses) == 1:
            c, j = uses[0]
            if (ops[c].aten == "add" or (ops[c].aten == "sub" and j == 0)) \
                    and ops[c].output_elements == ops[k].output_elements:
                root[k] = root[c]
    return root
