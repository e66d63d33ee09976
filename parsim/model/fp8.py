"""FP8 GEMMs with bf16 elsewhere, as NVIDIA Transformer Engine (TE) trains: ``training.fp8: true``
with ``dtype: bf16`` (Megatron-LM's ``--bf16 --fp8-format hybrid``).

TE runs the GEMMs of its Linear layers in FP8 (E4M3 forward, E5M2 gradients: the HYBRID format,
DelayedScaling's default) and keeps everything else -- the attention core, norms, element-wise
operators, the loss -- in bf16 (TE docs, "Using FP8 with Transformer Engine").  Here:

- **Which GEMMs.** A layer's Linear GEMMs are the matmul kernels (forward, data and weight
  gradient) whose batch count does not grow with the batch (``klass`` "matmul", not a per-sample
  batched GEMM such as attention's QK^T and AV) in a layer that owns a weight operator.  Their
  ``klass`` becomes ``FP8_KLASS``; parsim.hardware.numerics prices that class at the device's
  ``fp8`` peak.  A layer whose only weight is tied to another layer's (the GPT's LM head, which
  computes its logits with the word embedding) stays bf16: Megatron-LM's output layer is its own
  ColumnParallelLinear, not a TE module.
- **Saved activations.** TE saves the FP8-cast input of each FP8 Linear for its weight gradient,
  1 byte an element instead of 2 (``FP8_BYTES``): the bytes autograd keeps of each such input
  are halved.  Taken as saved for the Linear alone (true of the GPT and Llama blocks: a norm
  keeps its own input, not its output; GeLU and SiLU keep their inputs).
- **Weights.** Beside the bf16 weight, each FP8 GEMM weight has an FP8 copy used by the
  forward and its transpose for the data gradient: Hopper's FP8 tensor cores take only TN GEMMs,
  so the transpose is materialized (TE docs, "Performance Considerations: Handling transposes";
  transformer_engine/common/gemm/cublaslt_gemm.cu: "Hopper only supports TN GEMMs for FP8"):
  ``FP8_WEIGHT_COPY_BYTES`` = 2 bytes per parameter.
- **Scaling state.** DelayedScaling keeps per FP8 GEMM 3 forward tensors (input, weight,
  output) and 2 backward (grad output, grad input), each with an fp32 amax history of
  ``amax_history_len`` entries (default 1024: transformer_engine/common/recipe.py, DelayedScaling;
  TE docs, Common API) and an fp32 scale and inverse scale (transformer_engine/pytorch/module/
  base.py, set_meta_tensor): ``FP8_META_BYTES_PER_GEMM``.

Left out: TE's cast (and amax) kernels, which it fuses into the preceding norm where it can
(LayerNormLinear); FP8 operands' smaller bytes in a GEMM's roofline (its bytes stay as recorded
in bf16, so a memory-bound GEMM is not faster in FP8).
"""

from __future__ import annotations

import math
from dataclasses import replace

FP8_KLASS = "fp8_matmul"
FP8_BYTES = 1
FP8_WEIGHT_COPY_BYTES = 2                 # the FP8 weight and its transpose (Hopper: TN-only FP8 GEMMs)
AMAX_HISTORY_LEN = 1024                   # TE DelayedScaling default
FP8_TENSORS_PER_GEMM = 3 + 2              # forward: input, weight, output; backward: grad output, grad input
FP8_META_BYTES_PER_GEMM = FP8_TENSORS_PER_GEMM * (AMAX_HISTORY_LEN + 2) * 4    # amax history, scale, scale_inv (fp32)


def _weight_matmuls(layer) -> list[int]:
    """Indices of the layer's matmul operators with a weight the layer owns (its Linear layers)."""
    return [k for k, op in enumerate(layer.ops) if op.kind == "MatMul" and any(op.param_inputs)]


def _linear_kernel(kernel) -> bool:
    if kernel.klass != "matmul" or not kernel.gemm:
        return False
    (_, g1) = kernel.gemm[3]
    return g1 == 0


def fp8_layer(layer, extraction_batch: int, width: int):
    """``layer`` with its Linear GEMM kernels in FP8 and their saved inputs at 1 byte an element
    (module docstring); unchanged without an operator view or a weight matmul of its own."""
    linears = _weight_matmuls(layer)
    if not linears:
        return layer
    from parsim.model.graph import FROM_LAYER_INPUT

    ops = list(layer.ops)
    cut: dict[int, float] = {}                   # producer -> bytes no longer kept (extraction batch)
    for k in linears:
        src = ops[k].inputs_from[0] if ops[k].inputs_from else None
        if src is None or src in cut:
            continue
        elements = math.prod(ops[k].input_shapes[0])
        cut[src] = elements * (width - FP8_BYTES)
    input_cut = 0.0
    for src, nbytes in cut.items():
        if src == FROM_LAYER_INPUT:
            input_cut = min(nbytes / extraction_batch, layer.input_saved_bytes)
        elif src >= 0:
            nbytes = min(nbytes, ops[src].saved_bytes)
            cut[src] = nbytes
            ops[src] = replace(ops[src], saved_bytes=ops[src].saved_bytes - nbytes)
    total = sum(v for s, v in cut.items() if s >= 0) / extraction_batch + input_cut
    kernels = tuple(replace(kern, klass=FP8_KLASS) if _linear_kernel(kern) else kern for kern in layer.kernels)
    return replace(layer, ops=tuple(ops), kernels=kernels, saved_bytes=layer.saved_bytes - total,
                   input_saved_bytes=layer.input_saved_bytes - input_cut)


def fp8_graph(graph):
    """The graph trained with FP8 GEMMs (module docstring); the model's graph, in bf16."""
    if graph.fp8:
        return graph
    if graph.dtype != "bf16":
        raise ValueError(f"FP8 GEMMs run beside bf16, not {graph.dtype}")
    width = 2
    return replace(graph, layers=tuple(fp8_layer(layer, graph.extraction_batch, width) for layer in graph.layers),
                   fp8=True)


def fp8_weight_params(layer) -> float:
    """Parameters of the layer's FP8 GEMM weights on one device (a tensor-parallel layer's
    share, ``Layer.tp_share``, of the unsharded weights its operators name)."""
    total = 0
    for k in _weight_matmuls(layer):
        op = layer.ops[k]
        total += sum(math.prod(shape) for shape, own in zip(op.input_shapes, op.param_inputs) if own)
    return total * layer.tp_share


def fp8_static_bytes(graph, held) -> float:
    """What FP8 adds to a rank holding the layers ``held`` beside its bf16 weights: the FP8 weight
    copies and each FP8 GEMM's scaling state (module docstring); 0 for a graph without FP8."""
    if not graph.fp8:
        return 0.0
    total = 0.0
    for i in held:
        layer = graph.layers[i]
        gemms = len(_weight_matmuls(layer))
        total += FP8_WEIGHT_COPY_BYTES * fp8_weight_params(layer) + FP8_META_BYTES_PER_GEMM * gemms
    return total
