"""DeepSpeed: a plan as its JSON config, and such a JSON read back (the model comes from ``--model``:
a DeepSpeed config names none).

The keys are DeepSpeed 0.19's (deepspeed/runtime/config.py, DeepSpeedConfig; zero/config.py;
tensor_parallel/config.py; activation_checkpointing/config.py):

    parsim                  DeepSpeed
    global batch            train_batch_size = train_micro_batch_size_per_gpu x
    microbatches            gradient_accumulation_steps x dp (checked by DeepSpeedConfig)
    zero                    zero_optimization.stage
    dtype                   bf16.enabled / fp16.enabled (fp32: neither)
    optimizer               optimizer.type Adam; SGD with params.momentum 0.9 (momentum) or 0 (sgd)
    pp, bounds              pipeline.stages, pipeline.partition "uniform" (runtime/utils.py,
                            partition_uniform over the cut units: earlier stages take the remainder)
    tp, tp_layout megatron  tensor_parallel.autotp_size (AutoTP: Linear layers column then row split)
    recompute full          activation_checkpointing (the model checkpoints each layer through
                            deepspeed.checkpointing)

DeepSpeed's pipeline engine runs 1F1B (runtime/pipe/schedule.py, TrainSchedule) over the mesh
(pipe, data, model) with pipe outermost (parsim's dp-inner) and takes ZeRO stage 0 or 1 only
(runtime/pipe/engine.py).  GPipe, interleaved and ZB-H1 schedules, ZeRO 2 and 3 under pp, uneven
splits, selective recomputation, context and expert parallelism, sequence-parallel layouts, FP8
and hybrid sharding (dp_shard) have no name in its JSON and are refused.  DeepSpeed's ZeRO shards
over the whole data-parallel group: ZeRO++'s hpZ (zero_optimization.zero_hpz_partition_size) keeps
only a secondary copy of the parameters within a node (runtime/zero/stage3.py), and MiCS, which
sharded within groups of mics_shard_size, is removed in 0.19 (runtime/config.py,
_REMOVED_ZERO_CONFIG_KEYS rejects its keys; the reader refuses them too).
"""

from __future__ import annotations

from parsim.export.common import Imported, refuse, split_arg
from parsim.inputs import Fields

TARGET = "DeepSpeed"
# Where DeepSpeed 0.19 reduces the gradients after the backward, whatever overlap_comm says: at
# ZeRO stage 0 (DeepSpeedEngine.backward calls allreduce_gradients at the accumulation boundary;
# no hooks) and under its pipeline engine at any stage (PipelineEngine sets
# enable_backward_allreduce False and reduces at its ReduceGrads instruction, after the last
# micro-batch's backward; is_gradient_accumulation_boundary is false until then, so ZeRO-1's
# hooks reduce nothing: runtime/pipe/engine.py, runtime/zero/stage_1_and_2.py).
AFTER_BACKWARD = "reduces gradients after the backward at ZeRO stage 0 and under its pipeline engine"


def partition_uniform(items: int, parts: int) -> tuple[int, ...]:
    """DeepSpeed's uniform partition (runtime/utils.py, partition_uniform), as boundaries."""
    if items <= parts:
        return tuple(min(p, items) for p in range(parts + 1))
    chunk, residual = divmod(items, parts)
    return tuple(p * chunk + min(p, residual) for p in range(parts + 1))


def export_config(plan, spec, source: str) -> dict:
    c = plan.config
    if c.pp > 1 and c.schedule != "1f1b":
        raise refuse(source, "parallel.schedule", c.schedule, TARGET, "pipelines with 1F1B only (TrainSchedule); "
                     "plan with --schedule 1f1b")
    if c.chunks > 1:
        raise refuse(source, "parallel.chunks", c.chunks, TARGET, "holds one stage a pipeline rank")
    if c.pp > 1 and c.zero > 1:
        raise refuse(source, "parallel.zero", c.zero, TARGET, "runs ZeRO stage 0 or 1 under pipeline parallelism")
    if c.pp > 1 and tuple(c.bounds) != partition_uniform(len(plan.layers), c.pp):
        raise refuse(source, "parallel.bounds", list(c.bounds), TARGET, "splits layers uniformly (partition "
                     f"'uniform': {list(partition_uniform(len(plan.layers), c.pp))}) or by parameters, not "
                     "at given boundaries; plan with that split (--split)")
    if c.pp > 1 and c.dp * c.tp > 1 and c.placement != "dp-inner":
        raise refuse(source, "parallel.placement", c.placement, TARGET, "places pipe outermost in its topology "
                     "(pipe, data, model); plan with --placement dp-inner")
    for key, bad, why in (("cp", c.cp > 1, "has no ring context parallelism (its Ulysses sequence parallelism is "
                                            "all-to-all attention heads)"),
                          ("ep", c.ep > 1, "configures experts in the model code, not the JSON"),
                          ("tp_layout", c.tp > 1 and c.tp_layout != "megatron",
                           "shards with AutoTP (Megatron's column-then-row Linear layout) only"),
                          ("tp_comm_overlap", c.tp_comm_overlap, "has no sequence-parallel tp overlap"),
                          ("recompute", c.recompute.value not in ("none", "full"),
                           "recomputes whole layers (deepspeed.checkpointing)"),
                          ("recompute_layers", bool(c.recompute_layers), "checkpoints the layers the model code "
                                                                        "wraps, set in no JSON key"),
                          ("recompute_every", bool(c.recompute_every), "checkpoints the layers the model code "
                                                                      "wraps, set in no JSON key"),
                          ("dp_shard", c.hybrid_sharded, "shards ZeRO over the whole data-parallel group (hpZ "
                                                             "shards a secondary parameter copy only; 0.19 removed "
                                                             "MiCS); plan without --dp-shard")):
        if bad:
            raise refuse(source, "parallel." + key, getattr(c, key).__str__(), TARGET, why)
    if plan.fp8:
        raise refuse(source, "model.fp8", True, TARGET, "turns on no FP8 GEMMs from its JSON")
    if c.overlap_grad_reduce and c.grad_ranks > 1 and (c.zero == 0 or c.pp > 1):
        raise refuse(source, "parallel.overlap_grad_reduce", True, TARGET, AFTER_BACKWARD + "; plan with "
                     "--no-overlap-grad-reduce" + ("" if c.pp > 1 else ", or ZeRO-1 (--zero 1, overlap_comm)"))
    b = c.microbatch_size(plan.global_batch_size)
    out: dict = {"train_batch_size": plan.global_batch_size, "train_micro_batch_size_per_gpu": b,
                 "gradient_accumulation_steps": c.microbatches, "zero_optimization": {"stage": c.zero}}
    if c.zero in (1, 2):       # its bucket reduction under the backward, off by default at stages 1-2 (DeepSpeed's
        # config docs, zero_optimization.overlap_comm): as the plan was priced
        out["zero_optimization"]["overlap_comm"] = c.overlap_grad_reduce
    if plan.dtype != "fp32":
        out[plan.dtype] = {"enabled": True}
    out["optimizer"] = ({"type": "Adam"} if plan.optimizer == "adam" else
                        {"type": "SGD", "params": {"momentum": 0.9 if plan.optimizer == "momentum" else 0.0}})
    if c.pp > 1:
        out["pipeline"] = {"stages": c.pp, "partition": "uniform"}
    if c.tp > 1:
        out["tensor_parallel"] = {"autotp_size": c.tp}
    if c.recompute.value == "full":
        out["activation_checkpointing"] = {"partition_activations": False, "cpu_checkpointing": False}
    return out


def import_config(raw: dict, source: str, units: int | None) -> Imported:
    """A DeepSpeed JSON as the plan it runs; ``units``: the cut units of the model given with
    --model (for the pipeline's uniform split)."""
    r = Fields(raw, source)
    for key in list(raw):                   # DeepSpeed's other keys (logging, scheduler, ...) do not change the plan
        if key not in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                       "zero_optimization", "bf16", "fp16", "optimizer", "pipeline", "tensor_parallel",
                       "activation_checkpointing", "sequence_parallel_size", "fp8"):
            r.get(key, (object, bool), None)
    gbs = r.positive_int("train_batch_size", None)
    mbs = r.positive_int("train_micro_batch_size_per_gpu", None)
    gas = r.positive_int("gradient_accumulation_steps", None)
    if sum(x is not None for x in (gbs, mbs, gas)) < 2:
        raise r.fail("train_batch_size", "give two of train_batch_size, train_micro_batch_size_per_gpu and "
                                         "gradient_accumulation_steps (DeepSpeed derives the third)")
    zero = r.sub("zero_optimization", required=False)
    stage = zero.choice("stage", (0, 1, 2, 3), 0)
    for key in ("mics_shard_size", "mics_hierarchical_params_gather"):
        if zero.has(key):           # DeepSpeed 0.19 rejects them (runtime/config.py, _REMOVED_ZERO_CONFIG_KEYS)
            raise refuse(source, "zero_optimization." + key, zero.data[key], "DeepSpeed 0.19", "removed MiCS and "
                         "rejects this key; drop it, and give --dp-shard N to price shard groups of N")
    # at stage 1 (no pipeline) under the backward only with overlap_comm (stage_1_and_2.py hooks the
    # gradients where partition_gradients or overlap_comm; config.py's default: stage 3 only); at
    # stage 2 every micro-batch's buckets as the backward readies them (partition_gradients), on the
    # compute stream without overlap_comm (reduce_ipg_grads, average_tensor: current_stream());
    # stage 3's reduce-scatters are priced under the backward (FSDP) alone
    overlap_comm = zero.get("overlap_comm", bool, stage == 3)
    if stage == 3 and not overlap_comm:
        raise refuse(source, "zero_optimization.overlap_comm", False, "parsim", "prices ZeRO-3's reduce-scatters "
                     "overlapped with the backward; set overlap_comm true, or give stage 2")
    for key in list(zero.data):
        zero.get(key, (object, bool), None)
    dtype = "fp32"
    for name in ("bf16", "fp16"):
        sec = r.sub(name, required=False)
        if sec.get("enabled", (bool, str), False) in (True, "auto"):
            dtype = name
        for key in list(sec.data):
            sec.get(key, (object, bool), None)
    opt = r.sub("optimizer", required=False)
    kind = opt.get("type", str, "Adam")
    params = opt.sub("params", required=False)
    if kind.lower() in ("adam", "adamw", "fusedadam"):
        optimizer = "adam"
    elif kind.lower() == "sgd":
        optimizer = "momentum" if params.get("momentum", float, 0.0) > 0 else "sgd"
    else:
        raise refuse(source, "optimizer.type", kind, "parsim", "prices Adam, AdamW and SGD")
    for key in list(params.data):
        params.get(key, (object, bool), None)
    pipe = r.sub("pipeline", required=False)
    pp = pipe.get("stages", (int, str), 1)
    pp = 1 if pp == "auto" else pp
    partition = pipe.get("partition", str, "uniform")
    for key in list(pipe.data):
        pipe.get(key, (object, bool), None)
    if pp > 1 and stage > 1:
        raise refuse(source, "zero_optimization.stage", stage, TARGET, "runs ZeRO stage 0 or 1 under its "
                     "pipeline engine (runtime/pipe/engine.py); give stage 0 or 1, or no pipeline")
    if pp > 1 and partition != "uniform":
        raise refuse(source, "pipeline.partition", partition, "parsim's DeepSpeed reader", "splits 'uniform' only; "
                     "give the split with --split")
    tp_sec = r.sub("tensor_parallel", required=False)
    tp = tp_sec.get("autotp_size", int, 0) or 1
    for key in list(tp_sec.data):
        tp_sec.get(key, (object, bool), None)
    if r.get("sequence_parallel_size", int, 1) > 1:
        raise refuse(source, "sequence_parallel_size", raw["sequence_parallel_size"], "parsim", "prices ring and "
                     "all-gather context parallelism, not Ulysses' all-to-all")
    if r.has("fp8"):
        raise refuse(source, "fp8", raw["fp8"], "parsim's DeepSpeed reader", "does not read FP8 settings")
    recompute = "full" if r.has("activation_checkpointing") else "none"
    r.get("activation_checkpointing", dict, {})
    r.done()
    split = split_arg(partition_uniform(units, pp)) if units and pp > 1 else None
    overlap = overlap_comm and stage > 0 and pp == 1        # AFTER_BACKWARD
    parallel = dict(tp=tp, pp=pp, schedule="1f1b", split=split, tp_layout="megatron" if tp > 1 else None,
                    recompute=recompute, zero=stage, placement="dp-inner" if pp > 1 else "pp-inner",
                    overlap_grad_reduce=overlap,
                    microbatch_size=mbs, microbatches=gas)
    training = dict(dtype=dtype, optimizer=optimizer, **({"global_batch_size": gbs} if gbs else {}))
    return Imported(None, training, parallel)

