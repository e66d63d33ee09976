"""Hand one exported file to the framework's own parser or config objects, in a process of its own
(DeepSpeed initialises torch.distributed; MindSpore sets a global context), and print what the
framework read as JSON.  A rejection is a non-zero exit with the framework's message.

    python tests/framework_checks.py deepspeed ds.json DP [REFUSED_DP]
    python tests/framework_checks.py megatron plan.args
    python tests/framework_checks.py torchtitan plan.toml [WORLD]
    python tests/framework_checks.py mindspore plan.py   (on a MindSpore copy of examples/mlp_module.py)
"""

from __future__ import annotations

import json
import os
import shlex
import sys


def deepspeed(path: str, dp: str, refused_dp: str | None = None) -> dict:
    """DeepSpeedConfig with a data-parallel group of dp ranks: its batch rule, ZeRO, precision,
    pipeline, AutoTP and optimizer sections (deepspeed/runtime/config.py).  With ``refused_dp``,
    also what DeepSpeedConfig says of the same file under that many ranks (``refused``: its
    message, None where it accepts it), in the same process: importing DeepSpeed twice cost the
    suite 25 s."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("DS_CHECK_PORT", "29731"), RANK="0",
                      WORLD_SIZE="1", LOCAL_RANK="0")
    import importlib

    import deepspeed as ds
    from deepspeed.runtime.config import DeepSpeedConfig

    # init_distributed on a CPU JIT-compiles DeepSpeed's shared-memory all-reduce (about 40 s of
    # the suite, again in every fresh venv: the build's flags name the venv); nothing here
    # communicates, so it is not built (the module by name: deepspeed.comm's attribute ``torch``
    # is torch itself)
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    ds.init_distributed(dist_backend="gloo")

    class Mpu:            # what DeepSpeedConfig asks of a model-parallel unit
        def __init__(self, ranks: str):
            self.ranks = int(ranks)

        def get_data_parallel_world_size(self):
            return self.ranks

        def get_data_parallel_rank(self):
            return 0

        def get_model_parallel_world_size(self):
            return 1

        def get_model_parallel_rank(self):
            return 0

    with open(path) as f:
        config = json.load(f)
    c = DeepSpeedConfig(dict(config), mpu=Mpu(dp))
    out = {"train_batch_size": c.train_batch_size, "micro": c.train_micro_batch_size_per_gpu,
           "accumulation": c.gradient_accumulation_steps, "zero": int(c.zero_optimization_stage),
           "bf16": c.bfloat16_config.enabled, "pipeline_stages": c.pipeline["stages"],
           "autotp_size": c.tensor_parallel_config.autotp_size, "optimizer": c.optimizer_name,
           "world_size": c.world_size}
    if refused_dp is not None:
        try:
            DeepSpeedConfig(dict(config), mpu=Mpu(refused_dp))
            out["refused"] = None
        except Exception as e:          # DeepSpeed asserts its batch rule
            out["refused"] = f"{type(e).__name__}: {e}"
    return out


# Megatron-LM flags that arguments.py (tag core_v0.16.1) declares by hand, or from training-side
# dataclasses the megatron-core wheel does not ship (training_config.py: micro_batch_size,
# global_batch_size), or that training.py copies into megatron.core's DistributedDataParallelConfig
# (overlap-grad-reduce: checked there, _megatron_ddp); every other exported flag must be a
# megatron.core TransformerConfig field.
MEGATRON_TRAINING_FLAGS = {
    "micro-batch-size", "global-batch-size", "seq-length", "max-position-embeddings", "vocab-size",
    "make-vocab-size-divisible-by", "swiglu", "position-embedding-type", "rotary-base",
    "untie-embeddings-and-output-weights", "group-query-attention", "num-layers-per-virtual-pipeline-stage",
    "decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers", "use-distributed-optimizer",
    "use-torch-fsdp2", "torch-fsdp2-no-reshard-after-forward", "cp-comm-type", "use-tp-pp-dp-mapping", "optimizer",
    "sgd-momentum", "num-experts", "num-distributed-optimizer-instances", "overlap-grad-reduce", "use-megatron-fsdp",
    "data-parallel-sharding-strategy"}


def _number(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def megatron(path: str) -> dict:
    """The exported flags as Megatron-LM names them, built into megatron.core's TransformerConfig
    (its __post_init__ checks the parallel sizes, sequence parallelism, recomputation, FP8) as
    Megatron-LM's core_transformer_config_from_args copies them, and the batch through
    megatron.core's micro-batch calculator."""
    import dataclasses

    import torch
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator
    from megatron.core.transformer import TransformerConfig

    names = {}
    for f in dataclasses.fields(TransformerConfig):
        for flag in (f.metadata.get("argparse_meta") or {}).get("arg_names", ["--" + f.name.replace("_", "-")]):
            names[flag[2:]] = f.name
    with open(path) as fh:
        tokens = shlex.split(fh.read(), comments=True)
    flags, i = {}, 0
    while i < len(tokens):
        name = tokens[i][2:]
        value = True if i + 1 == len(tokens) or tokens[i + 1].startswith("--") else tokens[i + 1]
        flags[name] = value
        i += 1 if value is True else 2
    unknown = sorted(set(flags) - set(names) - MEGATRON_TRAINING_FLAGS)
    if unknown:
        raise SystemExit(f"not Megatron-LM flags: {unknown}")
    kw = {}
    for name, value in flags.items():
        if name in names and name not in MEGATRON_TRAINING_FLAGS:
            field = names[name]
            if name == "disable-bias-linear":
                value = False
            elif name == "swiglu":
                field, value = "gated_linear_unit", True
            elif value is not True:
                value = _number(value)
            kw[field] = value
    if flags.get("swiglu"):
        kw["gated_linear_unit"] = True
    if "num-experts" in flags:                  # arguments.py's --num-experts is TransformerConfig.num_moe_experts
        kw["num_moe_experts"] = int(flags["num-experts"])
    if "num-query-groups" not in flags:
        kw["num_query_groups"] = kw["num_attention_heads"]
    pp = kw.get("pipeline_model_parallel_size", 1)
    layers_per_virtual = flags.get("num-layers-per-virtual-pipeline-stage")
    if layers_per_virtual:
        kw["virtual_pipeline_model_parallel_size"] = kw["num_layers"] // pp // int(layers_per_virtual)
    for which in ("first", "last"):
        if f"decoder-{which}-pipeline-num-layers" in flags:
            kw[f"num_layers_in_{which}_pipeline_stage"] = int(flags[f"decoder-{which}-pipeline-num-layers"])
    kw["pipeline_dtype"] = torch.bfloat16 if flags.get("bf16") else torch.float16 if flags.get("fp16") else torch.float32
    if "cp-comm-type" in flags:
        kw["cp_comm_type"] = flags["cp-comm-type"]
    c = TransformerConfig(**kw)
    world = int(os.environ.get("MEGATRON_CHECK_WORLD", "1"))
    dp = world // (c.tensor_model_parallel_size * pp * c.context_parallel_size)
    m = ConstantNumMicroBatchesCalculator(int(flags["global-batch-size"]), int(flags["micro-batch-size"]), dp, None, 0)
    return {**_megatron_ddp(flags, dp * c.context_parallel_size),
            "tp": c.tensor_model_parallel_size, "pp": c.pipeline_model_parallel_size,
            "vpp": c.virtual_pipeline_model_parallel_size, "sequence_parallel": c.sequence_parallel,
            "recompute_granularity": c.recompute_granularity, "recompute_method": c.recompute_method,
            "recompute_num_layers": c.recompute_num_layers, "microbatches": m.get(), "fp8": c.fp8,
            "ep": c.expert_model_parallel_size, "experts": c.num_moe_experts, "topk": c.moe_router_topk,
            "etp": c.expert_tensor_parallel_size}


def _megatron_ddp(flags: dict, dp_cp: int) -> dict:
    """megatron.core's DistributedDataParallelConfig from the flags, as Megatron-LM's training.py
    copies its fields from the arguments (torch FSDP2 aside), and the partial distributed optimizer's
    instance size as parallel_state.py's initialize_model_parallel checks and computes it."""
    from megatron.core.distributed import DistributedDataParallelConfig

    ddp = DistributedDataParallelConfig(use_distributed_optimizer=bool(flags.get("use-distributed-optimizer")),
                                        num_distributed_optimizer_instances=int(
                                            flags.get("num-distributed-optimizer-instances", 1)),
                                        overlap_grad_reduce=bool(flags.get("overlap-grad-reduce")),
                                        use_megatron_fsdp=bool(flags.get("use-megatron-fsdp")),
                                        data_parallel_sharding_strategy=flags.get("data-parallel-sharding-strategy",
                                                                                  "no_shard"))
    instances = ddp.num_distributed_optimizer_instances
    if dp_cp % instances:
        raise SystemExit("Data parallel size should be divisible by partial DistOpt shard factor")
    return {"distributed_optimizer": ddp.use_distributed_optimizer, "instances": instances,
            "instance_ranks": dp_cp // instances, "overlap_grad_reduce": ddp.overlap_grad_reduce,
            "megatron_fsdp": ddp.use_megatron_fsdp, "sharding_strategy": ddp.data_parallel_sharding_strategy}


def torchtitan(path: str, world: str | None = None) -> dict:
    """torchtitan's ConfigManager (0.2.2) reading the TOML into its JobConfig (tyro refuses an
    unknown key or a wrong type), and the llama3 flavor's arguments; with ``world``, also its
    ParallelDims on that many devices as train.py builds them (it checks the degrees multiply to
    the world and resolves a shard degree of -1; fsdp_enabled: FSDP2, with dp_replicate HSDP)."""
    from torchtitan.config import ConfigManager
    from torchtitan.models.llama3 import llama3_args

    c = ConfigManager().parse_args(["--job.config_file", path])
    p, a = c.parallelism, llama3_args[c.model.flavor]
    dims = {}
    if world is not None:
        from torchtitan.distributed import ParallelDims

        d = ParallelDims(dp_shard=p.data_parallel_shard_degree, dp_replicate=p.data_parallel_replicate_degree,
                         cp=p.context_parallel_degree, tp=p.tensor_parallel_degree, pp=p.pipeline_parallel_degree,
                         ep=p.expert_parallel_degree, etp=p.expert_tensor_parallel_degree, world_size=int(world))
        dims = {"dims": {"dp_replicate": d.dp_replicate, "dp_shard": d.dp_shard, "fsdp_enabled": d.fsdp_enabled}}
    return {**dims, "replicate": p.data_parallel_replicate_degree, "shard": p.data_parallel_shard_degree,
            "tp": p.tensor_parallel_degree, "pp": p.pipeline_parallel_degree, "schedule": p.pipeline_parallel_schedule,
            "microbatch_size": p.pipeline_parallel_microbatch_size, "local_batch_size": c.training.local_batch_size,
            "ac": c.activation_checkpoint.mode, "parts": p.module_fqns_per_model_part,
            "dim": a.dim, "n_layers": a.n_layers, "converters": list(c.model.converters)}


def mindspore(path: str) -> dict:
    """The fragment run against MindSpore: set_auto_parallel_context with its settings, the cells'
    pipeline stages, the Dense layers' MatMul shard strategies and nn.PipelineCell, on a MindSpore
    copy of examples/mlp_module.py (cell names 0..9 as torch's Sequential)."""
    import mindspore as ms
    from mindspore import nn

    layers = [nn.Flatten(), nn.Dense(3 * 32 * 32, 256), nn.ReLU()]
    for _ in range(3):
        layers += [nn.Dense(256, 256), nn.ReLU()]
    net = nn.SequentialCell(layers + [nn.Dense(256, 10)])
    ns: dict = {}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), ns)
    cell = ns["apply_plan"](net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"))
    cells = dict(net.cells_and_names())
    return {"cell": type(cell).__name__, "device_num": ms.get_auto_parallel_context("device_num"),
            "pipeline_stages": ms.get_auto_parallel_context("pipeline_stages"),
            "parallel_mode": ms.get_auto_parallel_context("parallel_mode"),
            "parallel_optimizer": ms.get_auto_parallel_context("enable_parallel_optimizer"),
            "optimizer_weight_shard_size": ms.get_auto_parallel_context("optimizer_weight_shard_size"),
            "stages": {n: getattr(cells[n], "pipeline_stage", None) for n in ns.get("PIPELINE_STAGE", {})},
            "shards": {n: cells[n].matmul.attrs.get("in_strategy") for n in ns.get("SHARD", {})}}


if __name__ == "__main__":
    framework, *rest = sys.argv[1:]
    print(json.dumps({"deepspeed": deepspeed, "megatron": megatron, "torchtitan": torchtitan,
                      "mindspore": mindspore}[framework](*rest), default=str))
