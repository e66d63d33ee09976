"""The command line's side of the adapters: ``parsim export``, and the model, cluster and parallel
configuration of ``parsim simulate --from`` / ``parsim plan --from``."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from parsim.errors import InputError
from parsim.export import Imported, read_config


def cmd_export(args) -> int:
    from parsim.export import default_output, export_text
    from parsim.fileio import check_output, write_text
    from parsim.plan import load_plan_and_model

    check_output(args.output, "-o")
    plan, spec = load_plan_and_model(args.plan)
    text = export_text(plan, spec, args.to, args.plan)
    if args.output == "-":
        print(text, end="")
        return 0
    out = args.output or default_output(args.plan, args.to)
    write_text(out, text)
    print(f"wrote {out}")
    return 0


@dataclass(frozen=True)
class FromConfig:
    """A read config completed: the model it trains, the cluster, the parallel configuration, and
    the model.yaml mapping it was built from (for a plan.json written from it)."""

    spec: object
    cluster: object
    compute: object
    config: object
    mapping: dict


def imported_config(args, compute_model) -> FromConfig:
    """``args.model`` read as ``args.from_framework``'s config (``--model``, ``--cluster``, ``--set``
    beside it); ``compute_model(args, cluster, spec)``: the CLI's cost model choice."""
    from parsim.hardware import load_cluster
    from parsim.inputs import load_file
    from parsim.model.spec import load_model, model_from_mapping
    from parsim.search.resolve import resolve_config

    path, framework = args.model, args.from_framework
    if not framework:
        raise InputError(f"--model/--set: {path}: they go with --from FRAMEWORK; add --from (megatron, torchtitan, "
                         "deepspeed, mindformers, mindspore) or remove them")
    cluster = load_cluster(args.cluster)
    if framework in ("deepspeed", "mindspore") and not args.from_model:
        raise InputError(f"{path}: a {framework} config names no model; give the model.yaml it trains with --model")
    names = tuple(load_model(args.from_model).graph.names) if args.from_model else None
    imported = read_config(framework, path, args.set or [], names)
    mapping = dict(load_file(args.from_model, "a model.yaml")) if args.from_model else dict(imported.model)
    model_path = args.from_model or path
    p = dict(imported.parallel)
    for key in ("split", "schedule", "chunks", "recompute", "zero", "tp_layout", "cp_mode", "tp_comm_overlap"):
        if getattr(args, key, None) is not None:          # a flag given beside --from overrides the config
            p[key] = getattr(args, key)
    # simulate's --recompute-layers / --recompute-every, or another recompute mode, override the
    # config's partial recomputation
    given = [key for key in ("recompute_layers", "recompute_every") if getattr(args, key, None)]
    if given or p.get("recompute", "full") != "full":
        p.pop("recompute_layers", None)
        p.pop("recompute_every", None)
    for key in given:
        p[key] = getattr(args, key)
    world = cluster.world_size
    if imported.world_size and imported.world_size != world:
        raise InputError(f"--cluster {cluster.spec}: {world} devices, but {path} runs on {imported.world_size}; give "
                         f"a cluster of {imported.world_size} devices")
    width = p.get("pp", 1) * p.get("tp", 1) * p.get("cp", 1)
    dp = p.pop("dp", None) or world // width
    if dp * width != world:
        raise InputError(f"--cluster {cluster.spec}: {world} devices do not hold dp {dp} x pp x tp x cp {width} from "
                         f"{path}; give a cluster of {dp * width} devices or change the config")
    _shard_group(p, dp, framework, path, cluster.spec)
    if getattr(args, "dp_shard", 0):                   # simulate's --dp-shard overrides the config's HSDP
        p["dp_shard"] = args.dp_shard
    batch, m = _batch(imported, p, dp, path)
    # the stack the config is written for, where the model.yaml states none (the band's stack check), and
    # torchtitan's pipeline runtime, torch.distributed.pipelining's (parsim.model.stacks.PIPELINE_RUNTIMES)
    runtime = {"pipeline_runtime": "torch"} if framework == "torchtitan" else {}
    mapping["training"] = {"stack": FRAMEWORK_STACK[framework], **runtime, **mapping.get("training", {}),
                           **imported.training, "global_batch_size": batch}
    mapping.pop("parallel", None)              # the config's parallel settings, not the model.yaml's hint
    spec = model_from_mapping(mapping, model_path)
    compute = compute_model(args, cluster, spec)
    if imported.shard:
        spec, p["tp_layout"] = _layout(spec, cluster, imported.shard, p, batch // (dp * m))
    cfg = resolve_config(spec, cluster, compute, dp=dp, microbatches=m, **p)
    return FromConfig(spec, cluster, compute, cfg, mapping)


# The stack (parsim.model.stacks.STACKS) each reader's framework runs: torchtitan is torch's FSDP2, and
# MindFormers runs on MindSpore.
FRAMEWORK_STACK = {"megatron": "megatron", "torchtitan": "torch-fsdp", "deepspeed": "deepspeed",
                   "mindformers": "mindspore", "mindspore": "mindspore"}

# The config key of a reader's ``dp_replicate``: HSDP's replicas where the config leaves the dp to the
# cluster (torchtitan's data_parallel_shard_degree -1; Megatron's dp, world / (tp x pp x cp)).
REPLICATE_KEYS = {"torchtitan": "parallelism.data_parallel_replicate_degree",
                  "megatron": "--num-distributed-optimizer-instances"}


def _shard_group(p: dict, dp: int, framework: str, path: str, cluster: str) -> None:
    """HSDP's dp_shard = dp / replicas where the config gives the replicas (``dp_replicate``) and the
    cluster the dp.  A shard group of one rank (and cp 1) shards nothing: plain data parallelism
    (torchtitan's ParallelDims.fsdp_enabled is false, and it runs DDP; Megatron's distributed
    optimizer instances of one rank each all-reduce the whole gradient)."""
    replicas = p.pop("dp_replicate", None)
    if not replicas:
        return
    key = REPLICATE_KEYS[framework]
    if dp % replicas:
        raise InputError(f"{path}: {key}: {replicas} replicas do not divide the {dp} data-parallel ranks --cluster "
                         f"{cluster} leaves; set {key} to a divisor of {dp} or give another cluster")
    if dp // replicas * p.get("cp", 1) == 1:
        p["zero"] = 0
    else:
        p["dp_shard"] = dp // replicas


def _batch(imported: Imported, p: dict, dp: int, path: str) -> tuple[int, int]:
    """(global batch, micro-batches per replica) from what the config gives: a global batch, a
    per-replica (local) batch, a micro-batch size, a micro-batch count."""
    mbs, local, m = p.pop("microbatch_size", None), p.pop("local_batch_size", None), p.pop("microbatches", None)
    batch = imported.training.get("global_batch_size") or (local * dp if local else None) \
        or (mbs * m * dp if mbs and m else None)
    if batch is None:
        raise InputError(f"{path}: the global batch: the config gives neither a global nor a per-device batch; add one")
    if m is None:
        if not mbs or batch % (dp * mbs):
            raise InputError(f"{path}: the micro-batch size {mbs} x dp {dp} does not divide the global batch {batch}")
        m = batch // (dp * mbs)
    if batch % (dp * m) or (mbs and batch != mbs * m * dp):
        raise InputError(f"{path}: the global batch {batch} is not dp {dp} x {m} micro-batches"
                         + (f" of {mbs}" if mbs else "") + "; correct the batch sizes")
    return batch, m


def _layout(spec, cluster, shard: dict, p: dict, microbatch: int):
    """The tp layout whose strategies the config lists: the model's shard:, a built-in, or else the
    listed strategies as the model's."""
    from parsim.errors import ParsimError
    from parsim.shard.prepare import layout_strategies

    tp = p.get("tp", 1)
    for layout in ("model", "megatron", "megatron-sp"):
        try:
            if layout_strategies(spec.graph, tp, layout, spec.shard) == shard:
                return spec, layout
        except ParsimError:
            continue
    return replace(spec, shard=dict(shard)), "model"


def write_model_beside(output: str, from_config: FromConfig):
    """For a plan.json written from a read config: the model.yaml it names, written beside it."""
    import yaml

    from parsim.fileio import write_text

    if from_config.spec.path.endswith((".yaml", ".yml")):       # --model named it
        return from_config.spec
    path = os.path.splitext(output)[0] + ".model.yaml"
    write_text(path, "# the model parsim read from " + from_config.spec.path + "\n"
               + yaml.safe_dump(from_config.mapping, sort_keys=False))
    return replace(from_config.spec, path=path)


def add_from_options(p) -> None:
    from parsim.export import READERS

    p.add_argument("--from", dest="from_framework", choices=READERS,
                   help="read MODEL as this framework's config (a Megatron argument list or script, a torchtitan "
                        "TOML, a DeepSpeed JSON, a MindFormers YAML, a MindSpore fragment from parsim export)")
    p.add_argument("--model", dest="from_model", metavar="MODEL_YAML",
                   help="with --from: the model it trains (DeepSpeed and MindSpore configs name none)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="with --from: override one of the config's keys (training.local_batch_size=2; Megatron: "
                        "micro-batch-size=2), as the framework's own command line does; repeatable")


def better_lines(given, chosen, after_backward_s: float | None = None) -> list[str]:
    """What the planner's pick gains over the config as given; ``after_backward_s``: the pick's step
    with its gradient buckets after the backward, where the config reduces them so and the pick
    overlaps them (the share of the margin that is that setting alone)."""
    a, b = given.step_time_s, chosen.estimate.step_time_s
    c = chosen.config
    if b <= 0:
        return ["as given: the pick could not be priced"]
    out = [f"as given: {a:.4g} s a step; parsim's pick (dp {c.dp} x pp {c.pp} x tp {c.tp} x cp {c.cp}, "
           f"{c.microbatches} micro-batches, {c.schedule}, zero {c.zero}, recompute {c.recompute.value}): "
           f"{b:.4g} s a step, {a / b:.2f}x the throughput"]
    if after_backward_s is not None:
        where = "on the compute stream" if c.zero == 2 else "after the backward"
        out.append("the pick reduces its gradients under the backward, which the config as given does not (the "
                   "export asks for it where the framework can: Megatron's --overlap-grad-reduce, DeepSpeed's "
                   f"overlap_comm): with its buckets {where} it takes {after_backward_s:.4g} s, "
                   f"{a / after_backward_s:.2f}x; plan with --no-overlap-grad-reduce to search as the config runs")
    return out
