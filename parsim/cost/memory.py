"""Memory per rank: parameters, gradients, optimizer state, activations, communication buffers.

Bytes per parameter (Rajbhandari et al. 2020, "ZeRO", Sec. 3.1; mixed precision keeps fp32
master weights in the optimizer):

    dtype  optimizer   params  grads  optimizer state          total
    fp32   sgd          4       4      0                        8
    fp32   momentum     4       4      4 (momentum)            12
    fp32   adam         4       4      8 (m, v)                16
    fp16   momentum     2       2      4 + 4 (master, mom.)    12
    fp16   adam         2       2      4 + 8 (master, m, v)    16   (ZeRO's "16 Psi")

Activations: each micro-batch in flight holds its stage's saved bytes (graph's saved_bytes x
micro-batch size) from its forward until its backward frees them (W under a split backward);
under a split backward its I also keeps, for its W, the gradients entering the operators where a weight
meets the data (parsim.model.split_backward, Layer.w_held_bytes, torch's stage_backward_input).
Workspace: while a weight op runs backward, weight-sized buffers exist beside ``.grad`` (two
in a convolution's backward on CPU: 9 MiB each for layer4's 3x3 convolution in torch.profiler's
allocation trace), with the gradients flowing in and out; the micro-batch's later operators
and layers have freed their saved activations by then, so the workspace is the largest such
working set less what was freed before it (backward_workspace_bytes); beside the weight ops, each
layer's backward as measured on meta (Layer.bwd_rise_bytes), which sees the elementwise formulas'
temporaries too (a squared ReLU's PowBackward0: backward_rise_sets).
The loss (cross-entropy in fp32, outside every layer) keeps log_softmax's result with the last
stage's activations (LayerGraph.loss_saved_bytes), and its backward, the first of the micro-batch's,
holds two more of that size (loss_workspace_bytes): the peak of a model with many classes per
sample (the GPT's 2048-token vocabulary), nothing for ResNet-50's ten classes.
Communication buffers, by the runtime whose schedules run the pipeline (Training.pipeline_runtime:
parsim.model.stacks.PIPELINE_RUNTIMES), none at pp = 1.  Megatron-LM's: a receive is a new tensor a
micro-batch, kept only as the stage's saved input, and a sent output is freed but for its autograd
node (``deallocate_output_tensor``), so one micro-batch's boundary activation is in flight per
direction (pipeline_buffer_bytes; the last stage's: its input's); the loss is computed inside the
last stage.  torch.distributed.pipelining's PipelineStage (parsim's executor, torchtitan) holds
more: a receive buffer a micro-batch for the activation a stage receives and one for the gradient
of the output it sends, kept across steps, and under 1F1B the gradient it sent last
(torch_pipeline_buffer_bytes); and each micro-batch's output until its backward beyond what
autograd saves of it, its first layer saving the receive buffer rather than a tensor of its own
(pipeline_held_bytes); under the schedules torch runs through _PipelineScheduleRuntime (interleaved,
zbh1), every output and input gradient a stage sends, until the step ends (runtime_sent_bytes); and
under a split backward its last stage frees its logits and the loss's saved bytes at the I, not the W
(last_stage_freed_at_i_bytes). The last stage's outputs do not outlive their backward: the executor
steps torch's schedules with return_outputs=False, as a training loop that reads only the losses does.
Gradients are counted once: parsim's executor keeps them as views into DDP's buckets
(``gradient_as_bucket_view=True``, as Megatron's contiguous grad buffer); torch's default (False) would
add one more gradient's worth per rank when dp > 1.

ZeRO (Rajbhandari et al. 2020, Sec. 5.1, Fig. 1: (2 + 2 + K) Psi per rank at stage 0, then
(2 + 2) Psi + K Psi / Nd, 2 Psi + (2 + K) Psi / Nd and (2 + 2 + K) Psi / Nd at stages 1, 2, 3):
stage 1 shards the optimizer state over the dp ranks, stage 2 the gradients too, stage 3 the
parameters too (zero_fractions).  What a sharded rank holds beyond its shards (the bucket being
reduce-scattered, the gathered layers of stage 3: fsdp_held_grad_bytes, fsdp_gathered_param_bytes)
is added by the simulator, layer by layer in the backward.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from parsim.cost.context import cp_buffer_bytes
from parsim.model.graph import ELEMENT_BYTES, LOSS_BACKWARD_BUFFERS, VOCAB_PARALLEL_LOSS_BACKWARD_BUFFERS

_STATE_FP32_BYTES = {"sgd": 0, "momentum": 4, "adam": 8}
_MASTER_BYTES = 4


def bytes_per_param(dtype: str, optimizer: str, grad_reduce_dtype: str | None = None) -> dict[str, int]:
    """Bytes per parameter of the parameters, gradients and optimizer state: the gradients in
    ``grad_reduce_dtype`` where given (Training.grad_reduce_dtype: fp32 under 16-bit training),
    else in ``dtype``."""
    width = {"fp32": 4, "fp16": 2, "bf16": 2}
    state = _STATE_FP32_BYTES[optimizer] + (0 if dtype == "fp32" else _MASTER_BYTES)
    return {"params": width[dtype], "grads": width[grad_reduce_dtype or dtype], "optimizer": state}


def zero_fractions(zero: int, dp: int) -> dict[str, float]:
    """The share of each static kind a rank holds under ZeRO stage ``zero`` over ``dp`` ranks
    (ZeRO Sec. 5.1: optimizer state from stage 1, gradients from 2, parameters from 3)."""
    return {"params": 1 / dp if zero >= 3 else 1.0, "grads": 1 / dp if zero >= 2 else 1.0,
            "optimizer": 1 / dp if zero >= 1 else 1.0}


def optimizer_bytes_moved_per_param(dtype: str, optimizer: str) -> float:
    """Bytes read plus written per parameter by one optimizer step (element-wise kernels)."""
    grad_read = 4 if dtype == "fp32" else 2
    states_rw = 2 * _STATE_FP32_BYTES[optimizer]            # momentum / Adam m, v: read and write
    if dtype == "fp32":
        weights = 2 * 4                                     # read and write the fp32 parameter
    else:
        weights = 2 * _MASTER_BYTES + 2                     # fp32 master read/write + fp16 copy written
    return grad_read + states_rw + weights


@dataclass(frozen=True)
class MemoryBreakdown:
    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float      # peak of the in-flight activations
    comm_buffers_bytes: float
    workspace_bytes: float = 0.0  # the backward's transient working set

    @property
    def total_bytes(self) -> float:
        return (self.params_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes
                + self.comm_buffers_bytes + self.workspace_bytes)

    def to_dict(self) -> dict:
        return {**asdict(self), "total_bytes": self.total_bytes}


def torch_pipeline_stage(runtime: str, pp: int) -> bool:
    """Whether torch's PipelineStage holds a plan's pipeline: the torch runtime
    (Training.pipeline_runtime) with pp > 1; at pp = 1 the executor runs its micro-batches in a
    plain loop (parsim.exec.train.run_step)."""
    return runtime == "torch" and pp > 1


# The schedules parsim's executor runs through torch's _PipelineScheduleRuntime (parsim.exec.stages:
# ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble; torchtitan runs the same classes).  It keeps every
# send's work, and with it the tensor sent, until the step ends (torch 2.13,
# torch/distributed/pipelining/schedules.py, _PipelineScheduleRuntime._step_microbatches: ``send_ops``, waited on
# and dropped after the last action): runtime_sent_bytes.
TORCH_RUNTIME_SCHEDULES = frozenset({"interleaved", "zbh1"})


def runtime_sent_bytes(runtime: str, pp: int, schedule: str, received_bytes: float,
                       output_bytes: float) -> tuple[float, float]:
    """(input gradient, output) a stage's micro-batch leaves allocated until the step ends, where
    torch's PipelineStage runs a TORCH_RUNTIME_SCHEDULES schedule: the gradient of its input
    (``received_bytes``, the size of the activation it receives; 0 on the first stage), sent by its
    backward (I when split), and its output (``output_bytes``; 0 on the last stage), sent by its F and
    cached until its backward, which would otherwise free it (pipeline_held_bytes).  Both held by the
    send's work until the step ends, they add up over the step's micro-batches.  (0, 0) elsewhere:
    Schedule1F1B's one held gradient is torch_pipeline_buffer_bytes', GPipe's sends end before its peak,
    Megatron-LM frees a sent output but for its autograd node.  In sample, on development runs of four
    models of sets 2026-12-06d and 2026-12-06e (results/2026-12-06g-intel-xeon/runtime-sends-insample.txt):
    interleaved ranks' mean |error| 6.90% -> 0.48%, ZB-H1's 11.91% -> 7.11% (its last stages stay off,
    +10% on decoders, -11% and -22% on convolution nets); set 2026-12-06f measures it."""
    if not torch_pipeline_stage(runtime, pp) or schedule not in TORCH_RUNTIME_SCHEDULES:
        return 0.0, 0.0
    return received_bytes, output_bytes


def last_stage_freed_at_i_bytes(runtime: str, pp: int, logits_bytes: float, loss_saved_bytes: float) -> float:
    """What torch's last pipeline stage frees at a micro-batch's I rather than at its W, under a split
    backward: the logits (``logits_bytes``), which its ``fwd_cache`` held until
    PipelineStage.backward_one_chunk popped the entry (on a last stage that is not also the first it
    detaches them besides), and what the loss saved for its backward (``loss_saved_bytes``), freed when
    stage_backward_input detaches the loss after the input gradients (torch 2.13,
    torch/distributed/pipelining/stage.py and _backward.py).  The W keeps only what the weights'
    gradients need: the layers' saved bytes and their weight operators' output gradients.  0 where
    torch_pipeline_stage does not hold.  In sample, on the development runs' seven ZB-H1 last stages
    (results/2026-12-06h-intel-xeon/zbh1-last-stage-insample.txt): three decoders' +10.3%, +10.8% and
    +10.5% become -2.3%, -2.1% and -2.2%; a fourth's +1.7% becomes -11.2% (a decoder with dropout, low on
    every plan, set 2026-12-06f's Seed-OSS-style); the three convolution nets', whose logits are ten
    classes, stay at -10.9%, -22.0% and -18.6%.  Set 2026-12-06g measures it."""
    return logits_bytes + loss_saved_bytes if torch_pipeline_stage(runtime, pp) else 0.0


def pipeline_buffer_bytes(boundary_bytes: float, pp: int) -> float:
    """A pipeline rank's send and receive buffers under Megatron-LM's schedules: one micro-batch's
    ``boundary_bytes`` per direction (unconfirmed against a Megatron run's allocation trace).
    With pp = 1 there is no pipeline (parsim.exec.train.run_step: a plain loop): none."""
    return 2 * boundary_bytes if pp > 1 else 0.0


def torch_pipeline_buffer_bytes(received_bytes: float, sent_bytes: float, microbatches: int,
                                schedule: str, warmup: int = 0) -> float:
    """A pipeline rank's receive buffers under torch's PipelineStage: for each of the
    ``microbatches``, one for the activation it receives (``received_bytes``, the previous stage's
    output; 0 on the first stage) and one for the gradient of the output it sends (``sent_bytes``;
    0 on the last), which PipelineStage allocates when its schedule first runs and keeps across
    steps (torch 2.13, torch/distributed/pipelining/stage.py: ``_setup_forward_recv_info``,
    ``_create_grad_recv_info``); only where torch_pipeline_stage holds.  Drawn from the
    committed reports' pipeline ranks (results/2026-12-06e-intel-xeon/pipeline-memory-insample.txt:
    within 10% on 121 of 126, against 98 with pipeline_buffer_bytes); on held-out set 2026-12-06d,
    11 of 12 (results/2026-12-06f-intel-xeon/heldout-1206d-memory.txt).

    Under ``schedule`` 1f1b, beside them, the gradient of its input a stage sent last (the size of
    the activation it receives): Schedule1F1B keeps it (its ``bwd_sends`` ops and ``send_work``)
    until the next backward's sends replace it, so from the second micro-batch on a stage that
    sends gradients holds one through its next forward and backward (torch 2.13,
    torch/distributed/pipelining/schedules.py, ``Schedule1F1B._step_microbatches``).  On the
    committed reports' 1F1B last stages, the rule above left 1.08-1.19 such gradients unpriced on
    every decoder since set 2026-11-27b, and with it they come within 0.1% (in sample:
    results/2026-12-06f-intel-xeon/pipeline-send-insample.txt); set 2026-12-06e measures it.
    And under 1F1B, a stage that sends its output (``sent_bytes`` > 0) and runs ``warmup`` forwards before its
    first backward (Schedule1F1B's ``warmup_chunks``, min(m, stages - stage)) keeps one sent output past its
    backward: the work of the last warmup send it fires (forward warmup - 2), waited on but held in ``send_work``
    until the cooldown's first backward send replaces it, and with it the tensor sent (gloo's send work holds its
    tensor).  It outlives its micro-batch's backward in the steady state's backwards from warmup - 2 on, which
    exist where m - warmup >= warmup - 2, each with as many micro-batches in flight as the rank's peak.  A
    development set's 1F1B first stages hold it beside two micro-batches' saved tensors at their peak (an
    ``aten::add`` output no GPipe or ZB-H1 first stage holds: results/2026-12-07e-amd-epyc/first-stage-schedules.txt).
    GPipe keeps its sent gradients until its backward ends, past the peak its forwards make; the
    runtime's schedules (interleaved, zbh1) keep every send until the step ends (runtime_sent_bytes)."""
    held = 0.0
    if schedule == "1f1b" and microbatches > 1:
        held = received_bytes
        if sent_bytes and warmup >= 2 and microbatches - warmup >= warmup - 2:
            held += sent_bytes
    return microbatches * (received_bytes + sent_bytes) + held


def pipeline_held_bytes(graph, start: int, stop: int) -> float:
    """Per sample, what torch's PipelineStage keeps of a micro-batch of layers [start, stop) from its
    forward until its backward, beyond their saved bytes (LayerGraph.stage_saved_bytes): the stage's
    output, cached for the backward (``fwd_cache``; on the last stage the logits, which the loss does
    not save: it saves log_softmax's result), less what the stage's last layer saves of it itself
    (the next layer's ``input_shared_bytes``: a ReLU keeps its result); less, on every stage but the
    first, the input its first layer saves, which is the receive buffer (torch_pipeline_buffer_bytes).
    Negative where a stage's first layer saves more of its input than its last keeps of its output."""
    layers = graph.layers
    output = layers[stop - 1].output_bytes - (layers[stop].input_shared_bytes if stop < len(layers) else 0.0)
    received = min(layers[start].input_saved_bytes, layers[start - 1].output_bytes) if start > 0 else 0.0
    return output - received


def static_memory(param_count: int, dtype: str, optimizer: str, buffer_bytes: float,
                  zero: int = 0, dp: int = 1, expert_params: int = 0,
                  expert_dp: int = 1, grad_reduce_dtype: str | None = None) -> dict[str, float]:
    """Everything but activations, for a rank holding ``param_count`` parameters (its shards of
    them under ZeRO stage ``zero`` over ``dp`` ranks) and ``buffer_bytes`` of pipeline buffers
    (pipeline_buffer_bytes, torch_pipeline_buffer_bytes).  Under
    expert parallelism ``expert_params`` of them are routed experts, sharded over the ``expert_dp``
    ranks holding the same experts instead (parsim.cost.experts; Megatron-Core's distributed
    optimizer shards the expert parameters over the expert-data-parallel group)."""
    b = bytes_per_param(dtype, optimizer, grad_reduce_dtype)
    f, fe = zero_fractions(zero, dp), zero_fractions(zero, expert_dp)
    dense = param_count - expert_params
    return {k + "_bytes": (dense * f[k] + expert_params * fe[k]) * b[k] for k in ("params", "grads", "optimizer")} | \
        {"comm_buffers_bytes": buffer_bytes}


def inflight_microbatches(schedule: str, m: int, p: int, stage: int, v: int = 1) -> float:
    """Micro-batches whose activations a stage holds at its peak (the simulator finds the exact
    value; this closed form bounds the partitioner's memory check):

    - GPipe: all m (Huang et al. 2019);
    - 1F1B and ZB-H1: min(m, p - r) on pipeline rank r (Narayanan et al. 2021; Qi et al. 2023);
    - looped schedules with v chunks: rank r's warm-up forwards (Megatron-LM,
      get_forward_backward_func for interleaving: (v-1)*p + 2*(p-1-r), and one more in steady
      state), spread over its v chunks.
    """
    r = stage % p
    if schedule == "gpipe":
        return float(m)
    if v == 1:
        return float(min(m, p - r))
    factor = 2 if schedule == "interleaved" else 1
    rounds = max(1, m // p)
    warmup = min((v - 1) * (m // rounds) + factor * (p - 1 - r), v * m)
    return min(float(m), (warmup + 1) / v)


# Weight-sized buffers alive at once in a weight's backward.  Measured on CPU (torch 2.x,
# oneDNN), ResNet-50 at 32x32, micro-batch 32 and 256: inside aten::convolution_backward of
# layer4's 3x3 convolution two 9.4 MiB buffers are alive at the step's peak (torch.profiler's
# allocation trace), the weight gradient and a second weight-sized one.  Other kinds (a matmul's
# weight gradient before it is added into .grad): one, unconfirmed.
_WEIGHT_BUFFERS = {"Conv2d": 2}


def _op_working_sets(layer, extraction_batch: int):
    """(bytes per step, bytes per sample) of each weight op's backward working set in ``layer``,
    net of what the micro-batch has freed when it runs: the op's weight-sized buffers, its input
    and output gradients, the gradient that entered the layer (held until the layer's backward
    ends, e.g. by a residual branch), less the saved outputs of this op and the ones after it in
    the layer, whose backward ran first."""
    ops = layer.ops
    for k, op in enumerate(ops):
        weights = [j for j, p in enumerate(op.param_inputs) if p]
        if not weights:
            continue
        width = ELEMENT_BYTES.get(op.dtype, 4)
        weight_bytes = max(math.prod(op.input_shapes[j]) for j in weights) * width
        grads = (math.prod(op.input_shapes[0]) + op.output_elements) * width / extraction_batch
        freed = sum(o.saved_bytes for o in ops[k:]) / extraction_batch
        yield _WEIGHT_BUFFERS.get(op.kind, 1) * weight_bytes, grads + layer.output_bytes - freed


def backward_rise_sets(graph, layer) -> list[tuple[float, float]]:
    """(bytes per step, bytes per sample) of ``layer``'s backward as measured on meta (Layer.bwd_rise_bytes: the
    gradient entering it and every temporary autograd's formulas make, net of the saved tensors its nodes free),
    where it holds for the rank: an unsharded layer (tp = cp = 1) without experts; none elsewhere (a sharded
    layer's rise is not the measured one).  The weight operators' working sets (_op_working_sets) see only the
    contractions: a squared ReLU's PowBackward0 holds three tensors of the MLP's hidden size beside the gradient
    entering it (torch/csrc/autograd/FunctionsManual.cpp, pow_backward), where a development decoder's first
    stage peaked 2.7-6.4 MiB above the priced workspace (results/2026-12-07c-amd-epyc/first-stage-trace.txt).
    Per decoder layer the meta rise is what torch allocates on a CPU, exactly; a convolution's backward on a CPU
    allocates more than meta sees (oneDNN's own buffers: ResNet-50's blocks 33% to 325% above their meta rise,
    results/2026-12-07d-amd-epyc/layer-rise-cpu.txt), which the weight ops' two buffers stand for."""
    if graph.tp == graph.cp == 1 and layer.experts is None and layer.bwd_rise_bytes:
        return [(layer.bwd_rise_fixed_bytes, layer.bwd_rise_bytes)]
    return []


def fsdp_held_grad_bytes(units: list[list[int]], unit_grad_bytes: list[float], layers: int) -> list[float]:
    """ZeRO-2 and -3: per layer position of a stage (``layers`` of them; ``units`` as
    parsim.cost.comm.fsdp_units groups them, ``unit_grad_bytes`` each unit's unsharded gradients),
    the unsharded gradients live while that layer's backward runs: its own unit's, as the backward
    makes them; the previous unit's reduce-scatter input, which FSDP2 keeps until the next
    reduce-scatter is issued (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py,
    ReduceScatterState); and the root's, reduce-scattered after the whole backward (the GPT's tied
    head makes its gradient first).  The simulator and the planner's closed form both take them
    layer by layer, beside the activations not yet freed (backward_workspace_bytes)."""
    own_unit = {u[0]: k for k, u in enumerate(units) if k}           # a layer's own (non-root) unit
    held, previous = [0.0] * layers, 0.0
    for p in range(layers - 1, -1, -1):
        mine = unit_grad_bytes[own_unit[p]] if p in own_unit else 0.0
        held[p] = unit_grad_bytes[0] + mine + previous
        previous = mine or previous
    return held


def fsdp_gathered_param_bytes(units: list[list[int]], unit_param_bytes: list[float], layers: int) -> list[float]:
    """ZeRO-3: per layer position of a stage (``units`` as parsim.cost.comm.fsdp_units groups them,
    ``unit_param_bytes`` each unit's unsharded parameters), the parameters gathered while that
    layer's backward runs: the root's, the layer's own unit's, and the unit FSDP2 prefetches next
    (the nearest earlier layer's).  Beside the activations not yet freed, as the unsharded
    gradients are (backward_workspace_bytes), not on top of the forward's peak: the root is
    resharded after the forward and the loss runs outside every unit, so at the loss's backward
    only the shards are held.  Measured (examples/gpt_small_local.yaml, dp=2 m=2,
    torch.profiler's allocation trace of parsim run): the step's peak is at layers.3's
    pre-backward, the root's 2.1 MiB, layers.3's 3 MiB and the prefetched layers.2's 3 MiB
    gathered, the head's and the loss's activations freed (gloo also stages that all-gather in a
    second 3 MiB buffer, not counted here).  On top of the forward's peak, as before, the
    gathered units over-predicted runs/s6-zero-gpt's ZeRO-3 peak by 6.0% and ResNet-50's by
    4.2%; this gives 4.2% and 1.7%, both within the passes' spread."""
    own_unit = {u[0]: k for k, u in enumerate(units) if k}           # a layer's own (non-root) unit
    out = []
    for p in range(layers):
        mine = unit_param_bytes[own_unit[p]] if p in own_unit else 0.0
        nxt = next((unit_param_bytes[own_unit[q]] for q in range(p - 1, -1, -1) if q in own_unit), 0.0)
        out.append(unit_param_bytes[0] + mine + nxt)
    return out


def backward_workspace_bytes(graph, stages, microbatch: int, held_bytes: dict[int, float] | None = None,
                             cp_mode: str = "ring", buffered_grad: bool = False) -> float:
    """What a rank's backward adds above its activations' peak: the largest, over the layers of
    ``stages`` (layer ranges of ``graph``), of one layer's backward working set, less what that
    micro-batch has already freed -- the saved bytes of the layers after it in its stage, whose
    backward ran first (autograd releases a node's saved tensors once it has run).  ``held_bytes``
    (layer -> bytes): what else is live while that layer's backward runs (ZeRO 2-3's unsharded
    gradients of the units being reduce-scattered), added to its working set.  A layer's
    working set is the largest of its weight ops' (_op_working_sets) and of its backward's rise
    as measured on meta (Layer.bwd_rise_bytes: every temporary autograd's formulas make, such as
    the three a squared ReLU's PowBackward0 holds; unsharded layers without experts), or, for a
    layer without either, one weight-gradient temporary plus its output and input gradients; a
    recomputed layer adds the activations its backward re-creates (Korthikanti et al. 2022
    Sec. 5: one layer's worth at a time).  Never below zero.

    Measured on CPU, ResNet-50 at 32x32: the step's peak is the activations plus 11.5 MB at
    micro-batch 256 and 18.1 MB at 32, both inside layer4.2's 3x3 convolution backward (two
    9.4 MB weight buffers, activation gradients, less layer4.2's later and fc's freed
    activations); this predicts 12.1 and 18.0 MB.  Counting layer1's 33.7 MB working set on top
    of every activation, as before, over-predicted the peak by 3% at 256.

    Context parallelism: a layer's ring (parsim.cost.context.ring_buffer_bytes) is one more such
    working set, alive in that layer's backward only.  Counted on top of every activation, as
    before, it over-predicted the GPT's cp=2 peak (examples/gpt_small_local.yaml) by 4 MiB: the
    ring of the last block runs after the head's backward has freed more than it holds.  Under
    all-gather cp (``cp_mode``), the gathered K, V and dK, dV in place of the ring's chunks
    (parsim.cost.context.cp_buffer_bytes).

    ``buffered_grad`` (torch's PipelineStage: torch_pipeline_stage): the gradient entering the last layer of a
    range that is not the model's last is the stage's receive buffer for its output's gradient, priced among the
    pipeline buffers (torch_pipeline_buffer_bytes; PipelineStage.backward_one_chunk hands the buffer to autograd
    as the output's gradient), not a tensor of the backward's own: that layer's working sets leave it out.  Counted
    in both, it over-priced every GPipe and ZB-H1 first stage of a development set by one stage output a micro-batch
    (+0.8% to +1.2%; results/2026-12-07e-amd-epyc/first-stage-schedules.txt)."""
    worst = 0.0
    for r in stages:
        for i in r:
            layer = graph.layers[i]
            # a tensor-parallel layer's ops describe the unsharded layer: its per-device numbers only;
            # a context-parallel rank holds 1/cp of each sample's tokens (parsim.cost.context)
            sets = list(_op_working_sets(layer, graph.extraction_batch * graph.cp)) if graph.tp == 1 else []
            sets += backward_rise_sets(graph, layer)
            if not sets:
                sets = [(layer.max_param_bytes, 2 * layer.output_bytes)]
            if layer.cp_kv_bytes:         # the ring's K, V and dK, dV chunks, beside the gradient entering
                sets.append((0.0, cp_buffer_bytes(layer, 1, graph.cp, cp_mode) + layer.output_bytes))
            # what the micro-batch's later layers (and on the last stage the loss) freed before it
            freed = graph.stage_saved_bytes(i + 1, r.stop)
            if i + 1 < r.stop:
                freed -= graph.layers[i + 1].input_shared_bytes
            held = held_bytes.get(i, 0.0) if held_bytes else 0.0
            if buffered_grad and i == r.stop - 1 and r.stop < len(graph.layers):
                freed += layer.output_bytes             # the entering gradient: the receive buffer
            for per_step, per_sample in sets:
                worst = max(worst, held + per_step + (per_sample + layer.recompute_bytes - freed) * microbatch)
        if r.stop == len(graph.layers):
            worst = max(worst, loss_workspace_bytes(graph, microbatch))
    return worst


def loss_workspace_bytes(graph, microbatch: int) -> float:
    """The loss's backward, the first of a micro-batch's (nothing freed before it): two gradients
    the size of its saved log-probabilities (parsim.model.graph.LOSS_BACKWARD_BUFFERS).  The GPT
    of examples/gpt_small_local.yaml at micro-batch 2: 4 MiB, inside LogSoftmaxBackward0, the
    step's peak with dp=2 and pp=1 (torch.profiler's allocation trace).  Vocabulary-parallel
    (LayerGraph.loss_vocab_parallel): one gradient of its slice's size
    (VOCAB_PARALLEL_LOSS_BACKWARD_BUFFERS)."""
    buffers = VOCAB_PARALLEL_LOSS_BACKWARD_BUFFERS if graph.loss_vocab_parallel else LOSS_BACKWARD_BUFFERS
    return buffers * graph.loss_saved_bytes * microbatch
