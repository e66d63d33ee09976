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

- **Casts.** TE quantizes each FP8 GEMM operand the layer computes in bf16 with a cast that also
  writes its transpose (Hopper's FP8 GEMMs are TN-only, so the weight gradient's operands are
  materialized transposed; transformer_engine/common/transpose/cast_transpose.cu, the amax
  reduction fused in): it reads 2 bytes an element and writes 1 + 1 (``CAST_TRANSPOSE_BYTES`` =
  4).  Priced as memory-bound kernels (parsim.cost.kernels, family "elementwise") of the layer,
  one per FP8 Linear input in the forward and one per FP8 Linear output gradient in the
  backward (``cast_kernels``).  An input that a norm writes costs nothing more: TE's
  LayerNormLinear, which Megatron-Core's TE layer spec uses for the QKV and FC1 projections
  (TELayerNormColumnParallelLinear), writes the norm's output in FP8 and its transpose, 1 + 1
  bytes where bf16 wrote 2.  Recomputation re-runs the forward's casts with its forward.

Left out: the weights' casts, which Megatron-LM runs once a step, not once a micro-batch (it
passes TE ``is_first_microbatch`` and TE keeps the FP8 weights between micro-batches); FP8
operands' smaller bytes in a GEMM's roofline (its bytes stay as recorded in bf16, so a
memory-bound GEMM is not faster in FP8).
"""

from __future__ import annotations

import math
from dataclasses import replace

FP8_KLASS = "fp8_matmul"
FP8_BYTES = 1
CAST_TRANSPOSE_BYTES = 2 + FP8_BYTES + FP8_BYTES   # per element: bf16 read, FP8 and its transpose written
CAST_OP, GRAD_CAST_OP = "fp8_cast_transpose", "fp8_cast_transpose_grad"   # Kernel.op of the casts
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
    if kernels:
        casts = cast_kernels(layer.ops, linears, extraction_batch)
        kernels += casts
        layer = replace(layer, fwd_mem_bytes=layer.fwd_mem_bytes + _per_sample(casts, "F"),
                        bwd_mem_bytes=layer.bwd_mem_bytes + _per_sample(casts, "I"))
    return replace(layer, ops=tuple(ops), kernels=kernels, saved_bytes=layer.saved_bytes - total,
                   input_saved_bytes=layer.input_saved_bytes - input_cut)


def _norm_output(ops, src: int) -> bool:
    """Whether op ``src`` ends a norm: a LayerNorm, or RMSNorm's last step (its output times the
    norm's own 1-D weight, as a Llama block records it)."""
    op = ops[src]
    return op.kind == "LayerNorm" or (op.kind == "ElementWise" and op.aten == "mul" and any(
        own and len(shape) == 1 for shape, own in zip(op.input_shapes, op.param_inputs)))


def cast_kernels(ops, linears, extraction_batch: int) -> tuple:
    """TE's cast-transpose kernels around the FP8 Linear operators ``linears`` (module docstring,
    Casts): per sample, ``CAST_TRANSPOSE_BYTES`` an element of each distinct input a norm did not
    write (forward, "F") and of each Linear's output gradient (backward, "I")."""
    from parsim.model.graph import Kernel

    out, seen = [], set()
    for k in linears:
        src = ops[k].inputs_from[0] if ops[k].inputs_from else None
        if src is not None and (src in seen or (src >= 0 and _norm_output(ops, src))):
            continue                # cast once for every Linear that reads it; a norm wrote it in FP8
        seen.add(src)
        elements = math.prod(ops[k].input_shapes[0]) / extraction_batch
        out.append(Kernel("F", CAST_OP, "mem", bytes=(0.0, CAST_TRANSPOSE_BYTES * elements)))
    for k in linears:
        elements = ops[k].output_elements / extraction_batch
        out.append(Kernel("I", GRAD_CAST_OP, "mem", bytes=(0.0, CAST_TRANSPOSE_BYTES * elements)))
    return tuple(out)


def _per_sample(kernels, phase: str) -> float:
    return sum(k.bytes[1] for k in kernels if k.phase == phase)


def fp8_graph(graph):
    """The graph trained with FP8 GEMMs (module docstring); the model's graph, in bf16."""
    if graph.fp8:
        return graph
    if graph.dtype != "bf16":
        raise ValueError(f"FP8 GEMMs run beside bf16, not {graph.dtype}")
    width = 2
    return replace(graph, layers=tuple(fp8_layer(layer, graph.extraction_batch, width) for layer in graph.layers),
                   fp8=True, cpu_graph=fp8_graph(graph.cpu_graph) if graph.cpu_graph is not None else None)


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
