"""MindSpore: a plan as the seeds' parallel settings, a Python fragment for a training script, and such
a fragment read back (the network comes from ``--model``: MindSpore's is the user's code).

The names are MindSpore 2.x's (mindspore.set_auto_parallel_context; Cell.pipeline_stage and
Cell.pipeline_segment; nn.PipelineCell(net, micro_size); Primitive.shard(strategy)), as the seeds'
pipeline-parallel and distributed-training pages use them:

    parsim                      MindSpore
    dp x pp x tp                device_num
    pp == tp == 1               parallel_mode "data_parallel" (else "semi_auto_parallel")
    pp, bounds                  pipeline_stages; PIPELINE_STAGE: cell name -> pipeline_stage
    chunks (interleaved)        pipeline_config {"pipeline_interleave": True}; cell.pipeline_segment
    schedule gpipe / 1f1b       pipeline_config {"pipeline_scheduler": "gpipe" / "1f1b"}
    microbatches                MICRO_SIZE (nn.PipelineCell micro_size; gradient accumulation at pp = 1)
    zero k                      enable_parallel_optimizer, parallel_optimizer_config {"optimizer_level": "levelk"}
    dp_shard (HSDP)             parallel_optimizer_config {"optimizer_weight_shard_size": dp_shard}
    tp, tp_layout               SHARD: operator pattern -> strategy, the plan's layout in the seeds'
                                notation (split counts per input; a Dense's inputs X [m, k] and
                                W^T [k, n]), dp folded into the first input's first dimension
    recompute full              RECOMPUTE: the cut units (cell.recompute() on each; with
                                recompute_layers, those ParallelConfig.recomputed_layers names)
    dtype                       AMP_LEVEL "O0" (fp32) / "O2" with AMP_DTYPE float16 or bfloat16
    global batch                BATCH_SIZE per device (create_dataset's batch_size) x dp

A stage's replicas sit on consecutive devices (parsim's dp-inner: the seeds pipeline across
nodes).  ZB-H1, context and expert parallelism, tp overlap, selective recomputation and FP8 have
no name here and are refused.
"""

from __future__ import annotations

import ast
import math
import pprint

from parsim.export.common import Imported, refuse, split_arg
from parsim.errors import InputError

TARGET = "MindSpore"
AMP = {"fp32": ("O0", None), "fp16": ("O2", "float16"), "bf16": ("O2", "bfloat16")}


def export_settings(plan, spec, source: str, strategies: dict) -> dict:
    """The fragment's constants; ``strategies``: the plan's operator strategies for its tp group
    (pattern -> strategy, parsim.shard.prepare.layout_strategies), empty at tp = 1."""
    c = plan.config
    for key, bad, why in (("schedule", c.schedule == "zbh1", "schedules gpipe and 1f1b (interleaved with "
                                                            "pipeline_interleave) only"),
                          ("cp", c.cp > 1, "has no ring context parallelism"),
                          ("zero", c.fsdp_beside_pipeline,
                           "shards accumulated gradients beside a pipeline (gradient_accumulation_shard), not as "
                           "parsim prices ZeRO-2 there (torchtitan's FSDP stages); plan with --zero 1"),
                          ("ep", c.ep > 1, "shards experts through its MoE layers' config, not these settings"),
                          ("tp_comm_overlap", c.tp_comm_overlap, "has no setting for parsim's tp overlap"),
                          ("overlap_grad_reduce", not c.overlap_grad_reduce, "has no setting that holds the gradient "
                                                                             "all-reduces until the backward ends"),
                          ("recompute", c.recompute.value not in ("none", "full"),
                           "recomputes cells (cell.recompute()); plan with --recompute full or none"),
                          ("placement", c.pp > 1 and c.dp > 1 and c.placement != "dp-inner",
                           "puts a stage's replicas on consecutive devices; plan with --placement dp-inner")):
        if bad:
            raise refuse(source, "parallel." + key, str(getattr(c, key)), TARGET, why)
    if plan.fp8:
        raise refuse(source, "model.fp8", True, TARGET, "has no FP8 GEMM setting")
    context = {"parallel_mode": "data_parallel" if c.pp == 1 and c.tp == 1 else "semi_auto_parallel",
               "device_num": c.world_size, "gradients_mean": True}
    if c.pp > 1:
        context["pipeline_stages"] = c.pp
        context["pipeline_config"] = {"pipeline_interleave": c.chunks > 1,
                                      "pipeline_scheduler": "gpipe" if c.schedule == "gpipe" else "1f1b"}
    if c.zero:
        context["enable_parallel_optimizer"] = True
        context["parallel_optimizer_config"] = _optimizer_config(c)
    stage = {name: s for s in range(c.stages) for name in plan.layers[c.bounds[s]:c.bounds[s + 1]]}
    amp_level, amp_dtype = AMP[plan.dtype]
    out = {"PARALLEL_CONTEXT": context, "BATCH_SIZE": plan.global_batch_size // c.dp, "MICRO_SIZE": c.microbatches,
           "AMP_LEVEL": amp_level}
    if amp_dtype:
        out["AMP_DTYPE"] = amp_dtype
    if c.pp > 1:
        out["PIPELINE_STAGE"] = {n: s % c.pp for n, s in stage.items()}
        if c.chunks > 1:
            out["PIPELINE_SEGMENT"] = {n: s // c.pp for n, s in stage.items()}
    if c.tp > 1:
        out["SHARD"] = {k: _fold(v, c.dp) for k, v in sorted(strategies.items())}
    if c.recompute.value == "full":
        only = c.recomputed_layers(len(plan.layers))
        out["RECOMPUTE"] = [name for i, name in enumerate(plan.layers) if only is None or i in only]
    return out


def _optimizer_config(c) -> dict:
    """ZeRO as the parallel optimizer's level; HSDP's shard group as its optimizer_weight_shard_size
    (mindspore/parallel/_auto_parallel_context.py, set_parallel_optimizer_config: "the maximum group
    size across devices when the parallel optimizer is enabled"; -1, the default, shards over each
    parameter's data-parallel group)."""
    out = {"optimizer_level": f"level{c.zero}"}
    if c.hybrid_sharded:
        out["optimizer_weight_shard_size"] = c.dp_shard
    return out


def weight_shard_size(size, dp: int, source: str, key: str) -> int:
    """parsim's dp_shard of an optimizer_weight_shard_size: 0 for -1 (each parameter's whole
    data-parallel group), for a size of dp or more, and for 1 (set_optimizer_weight_shard_size warns
    that a size of 1 or less is invalid and keeps the default); a size between must divide dp, since
    MindSpore keeps the whole group where it does not ("If the size of data parallel communication
    domain of the parameter cannot be divided by optimizer_weight_shard_size, then the specified
    communication group size will not take effect": mindspore/context.py)."""
    if not isinstance(size, int) or isinstance(size, bool):
        raise InputError(f"{source}: {key}: expected a whole number (-1: the data-parallel group), got {size!r}")
    if size <= 1 or size >= dp:
        return 0
    if dp % size:
        raise refuse(source, key, size, "parsim", f"prices shard groups that divide dp = {dp}; set a divisor of {dp} "
                     "or -1")
    return size


def _fold(strategy, dp: int):
    """dp into the first input's first dimension (the rows of X [m, k]: data parallelism)."""
    rows = [list(r) for r in strategy]
    rows[0][0] *= dp
    return tuple(tuple(r) for r in rows)


APPLY = '''

def apply_plan(net, loss_fn):
    """Set the parallel context and the cells' stages on the network: call it after
    mindspore.communication.init() and before building the Model; returns the cell to train."""
    import mindspore as ms
    from mindspore import nn

    ms.set_auto_parallel_context(**PARALLEL_CONTEXT)
    cells = dict(net.cells_and_names())
    for name, stage in globals().get("PIPELINE_STAGE", {}).items():
        cells[name].pipeline_stage = stage
    for name, segment in globals().get("PIPELINE_SEGMENT", {}).items():
        cells[name].pipeline_segment = segment
    for name in globals().get("RECOMPUTE", []):
        cells[name].recompute()
    for pattern, strategy in globals().get("SHARD", {}).items():
        # a Dense runs MatMul(transpose_b=True): W is [n, k], so W^T's (k, n) splits are given reversed
        layer, _, module = pattern.partition("/")
        for name, cell in cells.items():
            if isinstance(cell, nn.Dense) and _matches(name, layer, module):
                cell.matmul.shard((strategy[0], tuple(reversed(strategy[1]))))
    with_loss = nn.WithLossCell(net, loss_fn)
    if "PIPELINE_STAGE" in globals():
        return nn.PipelineCell(with_loss, micro_size=MICRO_SIZE)
    return with_loss


def _matches(name, layer, module):
    import fnmatch

    return fnmatch.fnmatch(name, layer + "." + module if module else layer)
'''


def render(settings: dict, header: list[str]) -> str:
    lines = [f"# {h}" for h in header]
    for key, value in settings.items():
        lines.append(f"{key} = {pprint.pformat(value, width=100, sort_dicts=False)}")
    return "\n".join(lines) + "\n" + APPLY


# ----------------------------------------------------------------------------- import

def read_settings(text: str, source: str) -> dict:
    """The fragment's module-level constants (literals only; nothing is executed)."""
    try:
        tree = ast.parse(text, source)
    except SyntaxError as e:
        raise InputError(f"{source}: line {e.lineno}: not Python ({e.msg})") from None
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    if "PARALLEL_CONTEXT" not in out:
        raise InputError(f"{source}: PARALLEL_CONTEXT: missing; expected the settings `parsim export --to mindspore` "
                         "writes")
    return out


def import_settings(s: dict, source: str, names: tuple[str, ...]) -> Imported:
    """The fragment's settings as the plan they run; ``names``: the --model's cut units."""
    ctx = s["PARALLEL_CONTEXT"]
    world, pp = int(ctx.get("device_num", 1)), int(ctx.get("pipeline_stages", 1))
    pcfg = ctx.get("pipeline_config", {})
    shard = {k: tuple(tuple(r) for r in v) for k, v in s.get("SHARD", {}).items()}
    tp = max((math.prod(r) for v in shard.values() for r in v[1:]), default=1)
    dp = world // (pp * tp)
    stage_of = s.get("PIPELINE_STAGE", {})
    segment = s.get("PIPELINE_SEGMENT", {})
    if pp > 1:
        missing = [n for n in names if n not in stage_of]
        if missing:
            raise InputError(f"{source}: PIPELINE_STAGE: {missing[0]} has no stage; every cut unit of the model needs "
                             "one")
        chunks = max(segment.values(), default=0) + 1
        stages = [segment.get(n, 0) * pp + stage_of[n] for n in names]
        bounds = [0] + [i for i in range(1, len(stages)) if stages[i] != stages[i - 1]] + [len(stages)]
        if stages != sorted(stages) or len(bounds) - 1 != pp * chunks:
            raise InputError(f"{source}: PIPELINE_STAGE: stages must rise along the layers through all "
                             f"{pp * chunks} stages")
        split = split_arg(tuple(bounds))
    else:
        chunks, split = 1, None
    optimizer = ctx.get("parallel_optimizer_config", {})
    zero = int(optimizer.get("optimizer_level", "level1")[-1]) if ctx.get("enable_parallel_optimizer") else 0
    key = "PARALLEL_CONTEXT.parallel_optimizer_config.optimizer_weight_shard_size"
    dp_shard = weight_shard_size(optimizer.get("optimizer_weight_shard_size", -1), dp, source, key) if zero else 0
    amp = {v: k for k, v in AMP.items()}
    dtype = amp.get((s.get("AMP_LEVEL", "O0"), s.get("AMP_DTYPE")))
    if dtype is None:
        raise refuse(source, "AMP_LEVEL", s.get("AMP_LEVEL"), "parsim", "prices O0 (fp32) and O2 with float16 or "
                     "bfloat16")
    parallel = dict(dp=dp, pp=pp, tp=tp, chunks=chunks, split=split, zero=zero, dp_shard=dp_shard,
                    schedule=("interleaved" if chunks > 1 else pcfg.get("pipeline_scheduler", "1f1b")) if pp > 1 else "1f1b",
                    recompute="full" if s.get("RECOMPUTE") else "none",
                    placement="dp-inner" if pp > 1 else "pp-inner", microbatches=int(s.get("MICRO_SIZE", 1)))
    training = dict(dtype=dtype, global_batch_size=int(s["BATCH_SIZE"]) * dp) if "BATCH_SIZE" in s else dict(dtype=dtype)
    unfolded = {k: tuple((r[0] // dp, *r[1:]) if i == 0 else r for i, r in enumerate(v)) for k, v in shard.items()}
    return Imported(None, training, parallel, world, unfolded)
