"""model.yaml: the versioned description of a model and its training settings.

Schema version 1 (every key is checked; unknown keys are errors)::

    schema_version: 1
    name: resnet50-cifar10            # optional, defaults to the file name
    # exactly one of model / module / hf / layers:
    model: resnet50                   # a built-in: resnet50 | gpt
    args: {num_classes: 10, image_size: 32, stem: imagenet}
                                      # gpt: {preset: gpt3-175b, attention: sdpa | eager | megatron} (sdpa:
                                      # fused attention, the default; parsim.model.attention)
    hf: llama3_8b/config.json         # a Hugging Face config.json (relative to this file) or its fields
                                      # inline; args: {seq_len: 8192, attn_implementation: sdpa | eager,
                                      # mtp_layers: 0 | 1, fused_ops: false} (default sdpa; mtp_layers: DeepSeek-V3's
                                      # multi-token prediction, default the config's num_nextn_predict_layers;
                                      # fused_ops: true, or a list of rms_norm, rope, swiglu, prices those as
                                      # Megatron-Core's fused kernels, parsim.model.fused_ops; parsim.model.hf;
                                      # needs the [hf] extra)
    module: "pkg.mod:factory"         # any torch model: factory(**args) -> nn.Module
    input: {shape: [3, 32, 32], dtype: float32}   # one sample, with `module`
    layers:                           # a model that exists only on paper
      - {name: l0, fwd_flops: 1.0e9, params: 1000000, output_bytes: 4096, saved_bytes: 16384}
    training:
      global_batch_size: 32
      dtype: fp32                     # fp32 | fp16 | bf16 (fp16/bf16: mixed precision, fp32 master weights)
      optimizer: momentum             # momentum | sgd | adam
      fp8: false                      # with dtype bf16: Linear GEMMs in FP8 as Transformer Engine runs them
                                      # (parsim.model.fp8; devices with an fp8 peak: H100)
      moe_imbalance: 1.25             # mixtures of experts: the busiest expert-parallel rank's routed tokens
                                      # over the mean, >= 1 (default 1.25: parsim.cost.comm.ROUTING_IMBALANCE)
      moe_dispatcher: alltoall        # | flex: a token sent once per destination node (DeepEP, HybridEP)
      moe_capacity_factor: 1.0        # token dropping at this capacity (default none: dropless);
      moe_pad_to_capacity: true       #   every expert's input padded to it (Megatron's pad-to-capacity)
      recompute: selective            # activation recomputation: none | selective | full (true / false: full /
                                      # none; parsim.model.recompute); planner: tries all three if unset
      tf32: {conv: true, matmul: false}   # fp32 GEMMs on TF32 tensor cores where the device has them
                                      # (torch's defaults: cudnn.allow_tf32 on, cuda.matmul.allow_tf32 off)
      ascend_precision_mode: allow_fp32_to_fp16   # | must_keep_origin_dtype (CANN precision_mode)
      memory_format: channels_last    # | nchw (torch.channels_last: NHWC, what tensor cores take; default
                                      # channels_last under fp16/bf16, nchw under fp32: default_memory_format)
      attention_kernel: fa2           # the fused attention's kernel: fa2, FlashAttention-2; triton, FlashAttention in
                                      # Triton (2022-23 stacks) (default: the device's production kernel,
                                      # parsim.hardware.device.KernelExecution.attention_efficiency)
      grad_reduce_dtype: fp32         # the dtype data-parallel gradients are held and reduced in (default: dtype):
                                      # FSDP MixedPrecision(reduce_dtype=float32), Megatron's grad_reduce_in_fp32
      fsdp_backward_prefetch: post    # ZeRO-3: when the backward's next all-gather is issued: pre (default: torch
                                      # FSDP's BACKWARD_PRE, FSDP2's prefetch) | post (BACKWARD_POST, Composer's)
      pipeline_runtime: torch         # whose schedules run pp > 1: megatron (default) | torch (torch.distributed.
                                      # pipelining: parsim's executor, torchtitan); its buffers (parsim.cost.memory)
    parallel:                         # optional: a hand-chosen plan, like MindSpore's auto_parallel_context
      dp: 4
      pp: 2
      microbatches: 8
      schedule: 1f1b
      tp: 2                           # tensor-parallel group size
      tp_layout: megatron             # megatron | megatron-sp (the zoo's GPT) | auto (searched) | model (shard: below)
      zero: 1                         # ZeRO stage 0..3 over the dp ranks (planner: searched if unset)
      cp: 2                           # context-parallel group size: s/cp tokens per rank, ring attention
                                      # (models with attention; 2 x cp must divide the sequence)
      ep: 8                           # expert-parallel group size (mixtures of experts; divides dp x cp and
                                      # every MoE layer's experts; planner: searched if unset)
    shard:                            # optional: per-operator strategies (MindSpore's SEMI_AUTO_PARALLEL)
      "layers.*/fc1": [[1, 1], [1, 2]]    # <layer>/<module>[:<aten>]: split counts per input (parsim.shard.graph)
    pipeline_stage:                   # optional: MindSpore-style `cell.pipeline_stage = k`
      head: 0                         # a unit name, or a prefix of names ("layer1" = layer1.0..layer1.2)
      layer1: 0
      layer2.0..layer2.3: 0           # or an inclusive range of units
"""

from __future__ import annotations

import math
import importlib
import os
from dataclasses import dataclass, field, replace
from typing import Any

from parsim.errors import InfeasibleError, InputError
from parsim.inputs import Fields, load_file
from parsim.model import extracted
from parsim.model.attention import KINDS as ATTENTION_KINDS, ZOO_KINDS
from parsim.model.graph import DTYPE_BYTES, Layer, LayerGraph
from parsim.model.recompute import Recompute, read_recompute
from parsim.model.stacks import PIPELINE_RUNTIMES, STACKS

SCHEMA_VERSION = 1
DTYPES = ("fp32", "fp16", "bf16")
OPTIMIZERS = ("sgd", "momentum", "adam")
SCHEDULE_NAMES = ("gpipe", "1f1b", "interleaved", "zbh1")
MEMORY_FORMATS = ("nchw", "channels_last")
ATTENTION_KERNELS = ("fa2", "triton")
MOE_DISPATCHERS = ("alltoall", "flex")   # parsim.cost.experts: every row by NCCL, or once per destination node
FSDP_BACKWARD_PREFETCH = ("pre", "post")  # torch FSDP's BackwardPrefetch: BACKWARD_PRE | BACKWARD_POST (parsim.cost.comm)


def default_memory_format(dtype: str) -> str:
    """training.memory_format when a model.yaml leaves it out: channels_last (NHWC) under fp16 and
    bf16, as NVIDIA's mixed-precision recipe runs convolutions (tensor cores take NHWC: NVIDIA,
    "Convolutional Layers User's Guide", "Tensor Layouts In Memory: NCHW vs NHWC"; its
    DeepLearningExamples ResNet-50 trains AMP with --memory-format nhwc, torch.channels_last);
    torch's own default NCHW in fp32.  Only 4-d tensors take it: a model without convolutions
    is unchanged."""
    return "channels_last" if dtype in ("fp16", "bf16") else "nchw"


ASCEND_PRECISION_MODES = ("allow_fp32_to_fp16", "must_keep_origin_dtype")
ZERO_STAGES = (0, 1, 2, 3)   # ZeRO: none; optimizer state; + gradients; + parameters (Rajbhandari et al. 2020)
TP_LAYOUTS = ("megatron", "megatron-sp", "auto", "model")   # parsim.shard.builtin's, searched, the model's shard:
# The largest global batch parsim takes, in samples.  The largest published ones are 65,536 (BERT with LAMB:
# You et al. 2020, "Large Batch Optimization for Deep Learning") and 81,920 (ResNet-50 on ImageNet: Yamazaki
# et al. 2019, "Yet Another Accelerated SGD"); 2^20 leaves 12x headroom, and bounds the planner's divisors.
MAX_GLOBAL_BATCH = 2**20


# Why an HSDP shard group of n data-parallel ranks does not apply, in a line saying what to change:
# model.yaml's parallel.dp_shard at load time, and parsim.refusals.shard_refusal for any ParallelConfig
def shard_not_dividing(n: int, dp: int) -> str:
    return (f"{n} does not divide dp = {dp} (the shard groups replicate one another); choose dp_shard among the "
            f"divisors of {dp}")


def shard_without_zero(n: int) -> str:
    return (f"{n}: hybrid sharding shards ZeRO's states within groups of dp_shard ranks, and zero is 0; set zero "
            f"1, 2 or 3, or drop dp_shard")


@dataclass(frozen=True)
class Training:
    global_batch_size: int
    dtype: str = "fp32"
    optimizer: str = "momentum"
    recompute: Recompute | None = None   # none | selective | full (parsim.model.recompute); None: the planner decides
    # Numeric modes (parsim.hardware.numerics): which engine runs fp32 convolutions and matmuls.
    # torch defaults: torch.backends.cudnn.allow_tf32 = True, torch.backends.cuda.matmul.allow_tf32
    # = False since torch 1.12 (torch docs, "TensorFloat-32 (TF32) on Ampere (and later) devices").
    tf32_conv: bool = True
    tf32_matmul: bool = False
    # CANN's precision_mode: allow_fp32_to_fp16 runs fp32 convolutions and matmuls on the fp16 Cube
    # where the operator has no fp32 implementation (Ascend CANN docs; the default for training
    # per MindSpore's and the TF adapter's docs: unconfirmed for torch_npu).
    ascend_precision_mode: str = "allow_fp32_to_fp16"
    # torch's default is NCHW (torch.contiguous_format); channels_last is NHWC.  On NVIDIA tensor
    # cores an NCHW convolution pays transposes (parsim.hardware.numerics).
    memory_format: str = "nchw"
    # FP8 GEMMs of the Linear layers beside bf16 elsewhere (NVIDIA Transformer Engine; Megatron-LM's
    # --bf16 --fp8-format hybrid): parsim.model.fp8.  Needs dtype bf16.
    fp8: bool = False
    # Mixtures of experts under expert parallelism: the busiest ep rank's routed tokens over the
    # mean (>= 1; parsim.cost.experts).  None: parsim.cost.comm.ROUTING_IMBALANCE, 1.25 (Switch
    # Transformer's capacity factor); 1.0 balanced routing; a measured value where one is known.
    moe_imbalance: float | None = None
    # The dtype the data-parallel gradients are held and reduced in (all-reduced, or reduce-
    # scattered under ZeRO); None: ``dtype``.  fp32 under a 16-bit dtype is torch FSDP's
    # MixedPrecision(param_dtype=bfloat16, reduce_dtype=float32) (Composer's and llm-foundry's
    # ``mixed_precision: DEFAULT``) and Megatron's ``grad_reduce_in_fp32``: 4 bytes a gradient in
    # memory and on the wire, the parameters still gathered in ``dtype``.
    grad_reduce_dtype: str | None = None
    # The fused attention kernel: None, the device's production one (parsim.hardware.device:
    # FlashAttention-2 on Ampere, cuDNN's fused attention on Hopper, what Transformer Engine and
    # torch's SDPA run there today); "fa2", FlashAttention-2's on any device (flash-attn 2.x,
    # torch's SDPA before its cuDNN backend), what 2023-era stacks ran on Hopper; "triton",
    # FlashAttention in Triton (the Triton port of FlashAttention that 2022-23 stacks such as
    # llm-foundry's attn_impl: triton ran, before FlashAttention-2).
    attention_kernel: str | None = None
    # The token dispatcher's kind (Megatron-Core's --moe-token-dispatcher-type): "alltoall", NCCL's
    # all_to_all_single of every (token, expert) row (the executor's; parsim.cost.comm), or "flex",
    # one copy of a token per destination node fanned out over NVLink there (DeepEP, HybridEP,
    # DeepSeek-V3's own kernels).  Default alltoall: Megatron-Bridge's Qwen3 recipes
    # (results/published/moe_figures.yaml's source_config moe_token_dispatcher_type).
    moe_dispatcher: str = "alltoall"
    # Token dropping (Megatron's --moe-expert-capacity-factor, --moe-pad-expert-input-to-capacity):
    # each expert takes at most capacity_factor x the mean tokens, every rank's rows padded up to it
    # where moe_pad_to_capacity; None: dropless (parsim.cost.experts.routing_imbalance)
    moe_capacity_factor: float | None = None
    moe_pad_to_capacity: bool = False
    # ZeRO-3's backward: when a unit's parameters are all-gathered for the next unit's backward
    # (torch FSDP's BackwardPrefetch; parsim.cost.comm.prefetched_gather_s).  "pre" (default): as
    # the current unit's backward starts, beside its compute: torch FSDP1's default BACKWARD_PRE
    # (torch.distributed.fsdp.FullyShardedDataParallel, backward_prefetch=BackwardPrefetch.
    # BACKWARD_PRE) and what FSDP2's implicit backward prefetch and parsim's executor
    # (parsim.exec.fsdp) do.  "post": after it, in its post-backward hook, ahead of its
    # reduce-scatter on NCCL's queue, so the next backward waits for the gather: BACKWARD_POST,
    # MosaicML Composer's default (composer/trainer/dist_strategy.py, prepare_fsdp_module:
    # fsdp_config.get('backward_prefetch', 'BACKWARD_POST')), which llm-foundry's benchmarks ran.
    fsdp_backward_prefetch: str = "pre"
    # The stack the plan will run on (parsim.model.stacks.STACKS); None: unstated.  It prices nothing:
    # the step's band says how the public families on that stack ran against parsim's prices.
    stack: str | None = None
    # Whose schedules run a pipeline: megatron | torch (parsim.model.stacks.PIPELINE_RUNTIMES; its buffers)
    pipeline_runtime: str = "megatron"


@dataclass(frozen=True)
class ParallelHint:
    """A user's hand-chosen plan from model.yaml; any field may be None (left to the planner)."""

    dp: int | None = None
    pp: int | None = None
    microbatches: int | None = None
    schedule: str | None = None
    chunks: int | None = None
    tp: int | None = None
    tp_layout: str | None = None
    zero: int | None = None         # ZeRO stage 0..3 (parsim.plan.ParallelConfig.zero); None: searched
    cp: int | None = None           # context-parallel group size (parsim.plan.ParallelConfig.cp); None: searched
    ep: int | None = None           # expert-parallel group size (parsim.plan.ParallelConfig.ep); None: searched
    etp: int | None = None          # expert tensor-parallel size, 1 or tp (ParallelConfig.etp); None: searched
    dp_shard: int | None = None     # HSDP's shard group (ParallelConfig.dp_shard); None: every dp rank


@dataclass(frozen=True)
class ModelSource:
    """How to build the torch module again (the executor needs it); kind: builtin | module | hf | layers
    (hf: ``target`` is the config's JSON text, ``args`` the sequence length)."""

    kind: str
    target: str
    args: tuple = ()

    @property
    def kwargs(self) -> dict:
        return dict(self.args)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    graph: LayerGraph
    training: Training
    source: ModelSource
    parallel: ParallelHint = field(default_factory=ParallelHint)
    manual_stages: tuple[int, ...] | None = None   # stage per layer, from pipeline_stage
    path: str = ""
    input: object = None                            # extract.InputSpec of one sample (None for a layers: table)
    shard: dict = field(default_factory=dict)       # operator pattern -> strategy (tuple of tuples)


def with_fp8(spec: ModelSpec, where: str = "--fp8") -> ModelSpec:
    """The model trained with FP8 GEMMs (``training.fp8: true``, parsim.model.fp8), as asked on the
    command line; a bf16 model only."""
    if spec.training.fp8:
        return spec
    if spec.training.dtype != "bf16":
        raise InputError(f"{where}: FP8 GEMMs run beside bf16 (Transformer Engine), but {spec.path or spec.name} has "
                         f"training.dtype: {spec.training.dtype}; set it to bf16")
    from parsim.model.fp8 import fp8_graph

    return replace(spec, training=replace(spec.training, fp8=True), graph=fp8_graph(spec.graph))


# ----------------------------------------------------------------------------- builders

def _builtin(name: str, args: Fields):
    """(module factory, InputSpec) for a built-in model; args are read strictly."""
    from parsim.model.extract import InputSpec
    from parsim.model.zoo import GPT_PRESETS, gpt, resnet50

    if name == "resnet50":
        num_classes = args.positive_int("num_classes", 1000)
        size = args.positive_int("image_size", 224)
        stem = args.choice("stem", ("imagenet", "cifar"), "imagenet")
        args.done()
        return (lambda: resnet50(num_classes, stem)), InputSpec((3, size, size))
    if name == "gpt":
        preset = args.choice("preset", tuple(GPT_PRESETS), None) if args.has("preset") else None
        over = {}
        for key in ("layers", "hidden", "heads", "seq_len", "vocab"):
            if args.has(key):
                over[key] = args.positive_int(key)
        if args.has("dropout"):
            over["dropout"] = args.get("dropout", float)
        if args.has("attention"):
            over["attention"] = args.choice("attention", ZOO_KINDS)
        args.done()
        if preset is None and len(over) < 5:
            raise args.fail("preset", f"give a preset ({', '.join(GPT_PRESETS)}) or all of layers, hidden, heads, "
                                      "seq_len, vocab")
        base = GPT_PRESETS[preset].__dict__ if preset else {}
        cfg = {**base, **over}
        if cfg["hidden"] % cfg["heads"]:
            raise args.fail("heads", f"hidden ({cfg['hidden']}) must be a multiple of heads ({cfg['heads']})")
        return (lambda: gpt(preset, **over)), InputSpec((cfg["seq_len"],), "int64")
    raise InputError(f"{args.source}: model: unknown built-in {name!r}; choose resnet50 or gpt, "
                     "or give module: 'pkg.mod:factory'")


def _hf(r: Fields, args: Fields, path: str):
    """(module factory, InputSpec, ModelSource) of ``hf:`` (parsim.model.hf)."""
    import json

    from parsim.model.extract import InputSpec
    from parsim.model.fused_ops import fused_ops_arg
    from parsim.model.hf import causal_lm, mtp_depths, read_config, require_transformers

    cfg = read_config(r.get("hf", (str, dict)), os.path.dirname(os.path.abspath(path)), path)
    default = cfg.get("max_position_embeddings")
    seq_len = args.positive_int("seq_len", default) if default else args.positive_int("seq_len")
    attn = args.choice("attn_implementation", ATTENTION_KINDS, "sdpa")     # transformers' default
    stated = mtp_depths(cfg)
    if stated > 1:
        raise args.fail("mtp_layers", f"the config states {stated} multi-token-prediction depths "
                                      "(num_nextn_predict_layers); parsim prices one (DeepSeek-V3's): give 0 or 1")
    mtp = args.choice("mtp_layers", (0, 1), stated)
    if mtp and not stated:
        raise args.fail("mtp_layers", "the config states no multi-token-prediction module (DeepSeek-V3's "
                                      "num_nextn_predict_layers); leave mtp_layers out or give 0")
    fused = fused_ops_arg(args)
    args.done()
    require_transformers(path)
    kwargs = ((("attn_implementation", attn), ("seq_len", seq_len)) + ((("mtp_layers", mtp),) if mtp else ())
              + ((("fused_ops", fused),) if fused else ()))
    source = ModelSource("hf", json.dumps(cfg, sort_keys=True), kwargs)
    return ((lambda: causal_lm(cfg, seq_len, attn, grouped_experts=True, mtp_layers=mtp, fused_ops=fused)),
            InputSpec((seq_len,), "int64"), source)


def _import_factory(target: str, where: str):
    if ":" not in target:
        raise InputError(f"{where}: expected 'package.module:factory', got {target!r}")
    mod_name, attr = target.split(":", 1)
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:  # any import failure is the user's path to fix
        raise InputError(f"{where}: cannot import {mod_name!r} ({type(e).__name__}: {e}); "
                         "check the module path and PYTHONPATH") from None
    factory = getattr(mod, attr, None)
    if not callable(factory):
        raise InputError(f"{where}: {mod_name!r} has no callable {attr!r}")
    return factory


def build_module(source: ModelSource, where: str = "model"):
    """The torch module for ``source`` (on the current default device)."""
    if source.kind == "builtin":
        factory, _ = _builtin(source.target, Fields(source.kwargs, where, "args."))
        return factory()
    if source.kind == "module":
        return _import_factory(source.target, f"{where}: module")(**source.kwargs)
    if source.kind == "hf":
        from parsim.model.hf import causal_lm

        return causal_lm(source.target, source.kwargs["seq_len"], source.kwargs["attn_implementation"],
                         mtp_layers=source.kwargs.get("mtp_layers", 0))
    raise InputError(f"{where}: a `layers:` table describes no torch module; give model:, module: or hf: to run it")


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _layers_table(rows: Any, r: Fields, dtype: str) -> tuple[Layer, ...]:
    if not isinstance(rows, list) or not rows:
        raise r.fail("layers", "expected a non-empty list of layer mappings")
    layers = []
    for i, row in enumerate(rows):
        f = Fields(row, r.source, f"layers[{i}].")
        name = f.get("name", str)
        fwd = f.positive_float("fwd_flops")
        params = f.get("params", int, 0)
        if params < 0:
            raise f.fail("params", f"must be >= 0, got {params}")
        layers.append(Layer(
            name=name, fwd_flops=fwd, bwd_flops=f.positive_float("bwd_flops", 2 * fwd),
            param_count=params, param_bytes=params * DTYPE_BYTES[dtype],
            output_bytes=f.positive_float("output_bytes"), saved_bytes=f.positive_float("saved_bytes"),
            fwd_mem_bytes=f.get("fwd_mem_bytes", float, 0.0), bwd_mem_bytes=f.get("bwd_mem_bytes", float, 0.0)))
        f.done()
    return tuple(layers)


def _stage_assignment(mapping: Fields, names: list[str]) -> tuple[int, ...]:
    """Resolve `pipeline_stage` keys (names, prefixes or a..b ranges) to a stage per layer."""
    stages: list[int | None] = [None] * len(names)
    for key in list(mapping.data):
        stage = mapping.get(key, int)
        if stage < 0:
            raise mapping.fail(key, f"stage must be >= 0, got {stage}")
        if ".." in key:
            first, last = key.split("..", 1)
            if first not in names or last not in names or names.index(first) > names.index(last):
                raise mapping.fail(key, f"range must be 'first..last' of layer names in order; layers are "
                                        f"{names[0]} ... {names[-1]}")
            idx = range(names.index(first), names.index(last) + 1)
        else:
            idx = [i for i, n in enumerate(names) if n == key or n.startswith(key + ".")]
            if not idx:
                raise mapping.fail(key, f"names no layer; layers are {', '.join(names[:6])}{' ...' if len(names) > 6 else ''}")
        for i in idx:
            stages[i] = stage
    missing = [n for n, s in zip(names, stages) if s is None]
    if missing:
        raise mapping.fail(missing[0], "has no stage; every layer needs one (as MindSpore requires for every Cell "
                                       "with parameters)")
    if stages[0] != 0 or any(b not in (a, a + 1) for a, b in zip(stages, stages[1:])):
        raise InputError(f"{mapping.source}: pipeline_stage: stages must start at 0 and rise by at most 1 along "
                         f"the layers; got {stages}")
    return tuple(stages)  # type: ignore[arg-type]


def spec_sha256(path: str | os.PathLike) -> str:
    """A digest of a model.yaml's content as parsed (keys sorted; comments, spacing and key order
    ignored), which plan.json records so that ``parsim run`` can tell a model changed since its
    plan.  A ``module:`` model's Python source is not part of it."""
    import hashlib
    import json

    content = load_file(path, "a model.yaml")
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


def load_model(path: str | os.PathLike) -> ModelSpec:
    """Read and check a model.yaml, extract its LayerGraph on the meta device."""
    path = os.fspath(path)
    return model_from_mapping(load_file(path, "a model.yaml"), path)


def model_from_mapping(raw: Any, path: str, prefix: str = "") -> ModelSpec:
    """A model.yaml's mapping, read from ``path`` (at ``prefix`` within it, e.g. ``figures[3].model.``,
    for a model written inline in another file: errors name both), checked and extracted."""
    r = Fields(raw, path, prefix)
    r.schema_version(SCHEMA_VERSION)
    name = r.get("name", str, os.path.splitext(os.path.basename(path))[0])

    t = r.sub("training")
    batch = t.positive_int("global_batch_size", at_most=MAX_GLOBAL_BATCH,
                           why="2^20 samples, 12x the largest published training batch")
    dtype = t.choice("dtype", DTYPES, "fp32")
    training = Training(global_batch_size=batch,
                        dtype=dtype, optimizer=t.choice("optimizer", OPTIMIZERS, "momentum"),
                        recompute=read_recompute(t, "recompute", None),
                        ascend_precision_mode=t.choice("ascend_precision_mode", ASCEND_PRECISION_MODES,
                                                       "allow_fp32_to_fp16"),
                        memory_format=t.choice("memory_format", MEMORY_FORMATS, default_memory_format(dtype)),
                        fp8=t.get("fp8", bool, False), moe_imbalance=t.get("moe_imbalance", float, None),
                        grad_reduce_dtype=t.choice("grad_reduce_dtype", DTYPES, None),
                        attention_kernel=t.choice("attention_kernel", ATTENTION_KERNELS, None),
                        moe_dispatcher=t.choice("moe_dispatcher", MOE_DISPATCHERS, "alltoall"),
                        moe_capacity_factor=t.positive_float("moe_capacity_factor", None),
                        moe_pad_to_capacity=t.get("moe_pad_to_capacity", bool, False),
                        fsdp_backward_prefetch=t.choice("fsdp_backward_prefetch", FSDP_BACKWARD_PREFETCH, "pre"),
                        stack=t.choice("stack", STACKS, None),
                        pipeline_runtime=t.choice("pipeline_runtime", PIPELINE_RUNTIMES, "megatron"))
    if training.grad_reduce_dtype not in (None, "fp32", training.dtype):
        raise t.fail("grad_reduce_dtype", f"gradients are reduced in the training dtype ({training.dtype}) or in "
                                          f"fp32, not {training.grad_reduce_dtype}; use fp32 or drop it")
    if training.moe_pad_to_capacity and training.moe_capacity_factor is None:
        raise t.fail("moe_pad_to_capacity", "pads each expert's input up to its capacity, which "
                                            "training.moe_capacity_factor sets; give it, or drop moe_pad_to_capacity")
    if training.moe_imbalance is not None and training.moe_imbalance < 1:
        raise t.fail("moe_imbalance", f"the busiest expert-parallel rank's routed tokens over the mean is at least "
                                      f"1 (1: balanced routing), got {training.moe_imbalance}; set a value >= 1")
    if training.fp8 and training.dtype != "bf16":
        raise t.fail("fp8", f"FP8 GEMMs run beside bf16 (Transformer Engine), not {training.dtype}; "
                            "set training.dtype: bf16 or fp8: false")
    if t.has("tf32"):
        tf = t.sub("tf32")
        training = replace(training, tf32_conv=tf.get("conv", bool, True), tf32_matmul=tf.get("matmul", bool, False))
        tf.done()
    t.done()

    parallel = ParallelHint()
    if r.has("parallel"):
        p = r.sub("parallel")
        parallel = ParallelHint(dp=p.positive_int("dp", None), pp=p.positive_int("pp", None),
                                microbatches=p.positive_int("microbatches", None),
                                schedule=p.choice("schedule", SCHEDULE_NAMES, None),
                                chunks=p.positive_int("chunks", None), tp=p.positive_int("tp", None),
                                tp_layout=p.choice("tp_layout", TP_LAYOUTS, None),
                                zero=p.choice("zero", ZERO_STAGES, None), cp=p.positive_int("cp", None),
                                ep=p.positive_int("ep", None), etp=p.positive_int("etp", None),
                                dp_shard=p.positive_int("dp_shard", None))
        p.done()
        dp, m = parallel.dp or 1, parallel.microbatches or 1
        if parallel.dp_shard and parallel.zero == 0:
            raise p.fail("dp_shard", shard_without_zero(parallel.dp_shard))
        if parallel.dp_shard and parallel.dp and parallel.dp % parallel.dp_shard:
            raise p.fail("dp_shard", shard_not_dividing(parallel.dp_shard, parallel.dp))
        if training.global_batch_size % (dp * m):
            raise t.fail("global_batch_size", f"{training.global_batch_size} does not divide into dp={dp} x "
                                              f"microbatches={m}; use a multiple of {dp * m}")

    given = [k for k in ("model", "module", "hf", "layers") if r.has(k)]
    if len(given) != 1:
        raise InputError(f"{path}: give exactly one of model:, module:, hf: or layers: "
                         f"(found {', '.join(given) or 'none'})")
    kind = given[0]
    input_spec = None
    if kind == "layers":
        layers = _layers_table(r.get("layers", list), r, training.dtype)
        graph = LayerGraph(name, layers, training.dtype, r.positive_float("input_bytes", layers[0].output_bytes))
        source = ModelSource("layers", name)
    else:
        import torch
        from parsim.model.extract import InputSpec, extract_graph

        args = r.get("args", dict, {})
        if kind == "model":
            target = r.get("model", str)
            factory, input_spec = _builtin(target, Fields(args, path, f"{prefix}args."))
            source = ModelSource("builtin", target, _freeze(args))
        elif kind == "hf":
            factory, input_spec, source = _hf(r, Fields(args, path, "args."), path)
        else:
            target = r.get("module", str)
            factory = _import_factory(target, f"{path}: module")
            inp = r.sub("input")
            shape = inp.get("shape", list)
            if not shape or any(not isinstance(s, int) or isinstance(s, bool) or s <= 0 for s in shape):
                raise inp.fail("shape", f"expected a list of positive integers (one sample, no batch), got {shape}")
            input_spec = InputSpec(tuple(shape), inp.choice("dtype", ("float32", "int64", "int32"), "float32"))
            inp.done()
            source = ModelSource("module", target, _freeze(args))
            factory = (lambda f=factory, a=args: f(**a))
        # a built-in or Hugging Face model is its ModelSource (the zoo's code, the config's text):
        # extracted once per process (parsim.model.extracted); a module: model's code is the user's, so never kept
        key = (source, input_spec, name, training.dtype) if source.kind in ("builtin", "hf") else None
        graph = extracted.kept(key) if key is not None else None
        if graph is None:
            try:
                with torch.device("meta"):
                    module = factory()
            except InputError:
                raise
            except Exception as e:
                raise InputError(f"{path}: {kind}: building the model failed ({type(e).__name__}: "
                                 f"{' '.join(str(e).split())}); check args") from None
            try:
                graph = extract_graph(module, input_spec, name=name, dtype=training.dtype)
            except Exception as e:
                raise InputError(f"{path}: {kind}: running the model on an input of shape {list(input_spec.shape)} "
                                 f"failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                                 "check input.shape") from None
            if key is not None:
                extracted.keep(key, graph)

    if training.fp8:
        from parsim.model.fp8 import fp8_graph

        graph = fp8_graph(graph)
    moe_keys = [k for k, on in (("training.moe_imbalance", training.moe_imbalance is not None),
                                ("training.moe_dispatcher", training.moe_dispatcher != "alltoall"),
                                ("training.moe_capacity_factor", training.moe_capacity_factor is not None),
                                ("parallel.ep", (parallel.ep or 1) > 1), ("parallel.etp", (parallel.etp or 1) > 1))
                if on]
    if moe_keys and not graph.moe:
        key = moe_keys[0]
        raise InputError(f"{path}: {key}: {name} has no mixture-of-experts layer; remove {key}")
    if parallel.ep and parallel.ep > 1:
        counts = sorted({layer.experts.experts for layer in graph.layers if layer.experts is not None})
        if any(e % parallel.ep for e in counts):
            raise InputError(f"{path}: parallel.ep: {parallel.ep} does not divide the MoE layers' routed experts "
                             f"({', '.join(map(str, counts))}); choose ep dividing {counts[0]}")
    if parallel.cp and parallel.cp > 1:
        from parsim.model.attention import check_cp

        try:
            check_cp(graph, parallel.cp, f"{path}: parallel.cp: {parallel.cp}")
        except InfeasibleError as e:
            raise InputError(str(e)) from None
    manual = None
    if r.has("pipeline_stage"):
        manual = _stage_assignment(r.sub("pipeline_stage"), graph.names)
    shard: dict = {}
    if r.has("shard"):
        shard, parallel = _shard_section(r.sub("shard"), parallel)
    elif parallel.tp_layout == "model":
        raise InputError(f"{path}: parallel.tp_layout: 'model' needs a shard: section; add one or use megatron")
    r.done()
    return ModelSpec(name=name, graph=graph, training=training, source=source, parallel=parallel,
                     manual_stages=manual, path=path, input=input_spec, shard=shard)


def _shard_section(f: Fields, parallel: ParallelHint) -> tuple[dict, ParallelHint]:
    """Read ``shard:`` (pattern -> strategy): lists of split counts, on a tensor-parallel group of
    ``parallel.tp`` devices (default: the most devices any strategy uses).  That each names
    operators and divides their shapes is the shard layer's to check, above this one
    (parsim.shard.prepare.check_shard_section: the commands check it as they load the model)."""
    from dataclasses import replace

    strategies = {}
    for key in list(f.data):
        value = f.get(key, list)
        if not value or not all(isinstance(row, list) and row and all(isinstance(x, int) and not isinstance(x, bool)
                                                                      and x > 0 for x in row) for row in value):
            raise f.fail(key, f"expected a list of split counts per input, e.g. [[1, 1], [1, 2]]; got {value}")
        strategies[key] = tuple(tuple(row) for row in value)
    used = max(max(math.prod(row) for row in s) for s in strategies.values())
    tp = parallel.tp or used
    if tp % used:
        raise InputError(f"{f.source}: parallel.tp: {tp} devices, but a strategy in shard: uses {used}; "
                         f"make tp a multiple of {used}")
    if parallel.tp_layout not in (None, "model"):
        raise InputError(f"{f.source}: parallel.tp_layout: {parallel.tp_layout!r} conflicts with the shard: "
                         "section; remove one of them or set tp_layout: model")
    return strategies, replace(parallel, tp=tp, tp_layout="model")

