"""torchtitan: a plan as its TOML job config, and such a TOML read back.

The TOML job config is torchtitan's up to release 0.2.2 (2026-02-20; torchtitan/config/job_config.py,
read by ConfigManager with ``--job.config_file``); 0.3.0 replaced it by a Python config registry
(pytorch/torchtitan #2386), so the [torchtitan] extra pins 0.2.2.  The reader also takes the keys of
the 2024 configs (``training.batch_size``, the degrees under ``[training]`` and ``[experimental]``,
``[float8] enable_float8_linear``), as the December 2024 benchmarks ran them.

    parsim                      torchtitan
    dp, zero 3 (2 with pp > 1)  parallelism.data_parallel_shard_degree (FSDP2); fsdp_reshard_after_forward
    dp, zero 0                  parallelism.data_parallel_replicate_degree (DDP)
    dp_shard (HSDP)             data_parallel_shard_degree = dp_shard beside data_parallel_replicate_degree
                                = dp / dp_shard (FSDP2 on the mesh dp_replicate x fsdp)
    tp, tp_comm_overlap         parallelism.tensor_parallel_degree (sequence-parallel norms: megatron-sp),
                                enable_async_tensor_parallel
    pp, schedule                parallelism.pipeline_parallel_degree, pipeline_parallel_schedule
                                (gpipe GPipe, 1f1b 1F1B, interleaved Interleaved1F1B, zbh1 InterleavedZeroBubble)
    microbatches                training.local_batch_size / parallelism.pipeline_parallel_microbatch_size
                                (pp = 1: training.global_batch_size over local x dp, gradient accumulation)
    bounds                      parallelism.module_fqns_per_model_part (where not torchtitan's own split)
    cp, cp_mode                 parallelism.context_parallel_degree, context_parallel_rotate_method
                                (ring: alltoall, allgather: allgather)
    recompute                   activation_checkpoint.mode (none, selective, full)
    recompute_every N           activation_checkpoint.mode selective, selective_ac_option "N" (every N-th
                                block fully checkpointed; torchtitan's default option is "2")
    fp8                         model.converters ["quantize.linear.float8"]
    dtype bf16 / fp32           training.mixed_precision_param bfloat16 / float32

The model is torchtitan's ``llama3`` by flavor (torchtitan/models/llama3/__init__.py, v0.2.2).  The
device mesh is ["pp", "dp_replicate", "dp_shard", "cp", "tp"] (tp innermost, pp outermost:
parsim's dp-inner placement).  ZeRO 1 and 2 without pp, fp16 and optimizers other than Adam(W)
have no torchtitan name and are refused.
"""

from __future__ import annotations

from parsim.export.common import (Decoder, Imported, decoder_counts, decoder_of, model_mapping,
                                  refuse, split_arg)
from parsim.errors import InputError
from parsim.model.recompute import MODULE_MODES
from parsim.plan import bounds_from_counts

TARGET = "torchtitan"
SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B", "zbh1": "InterleavedZeroBubble"}
SINGLE_STAGE = ("GPipe", "1F1B")
FP8 = "quantize.linear.float8"


def _ffn(dim: int, multiplier: float | None, multiple_of: int) -> int:
    """torchtitan's FeedForward width (models/llama3/model/model.py): 2/3 of 4 dim, times the
    multiplier, rounded up to a multiple."""
    hidden = int(2 * 4 * dim / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


# torchtitan's llama3 flavors (models/llama3/__init__.py, v0.2.2): dim, layers, heads, kv heads,
# ffn_dim_multiplier, multiple_of, vocabulary (TransformerModelArgs.vocab_size defaults to 128,256,
# the Llama 3 tokenizer's); rope_theta 500,000, norm_eps 1e-5, untied output.
FLAVORS = {
    "debugmodel": (256, 6, 16, 16, None, 256, 2048),
    "8B": (4096, 32, 32, 8, 1.3, 1024, 128256),
    "70B": (8192, 80, 64, 8, 1.3, 4096, 128256),
    "405B": (16384, 126, 128, 8, 1.2, 4096, 128256),
}


def flavor_decoder(flavor: str, seq_len: int) -> Decoder:
    dim, layers, heads, kv, mult, multiple, vocab = FLAVORS[flavor]
    return Decoder("llama", layers, dim, heads, kv, _ffn(dim, mult, multiple), vocab, seq_len, False, "sdpa",
                   500000.0, 1e-5)


def _flavor_of(d: Decoder) -> str | None:
    for name in FLAVORS:
        f = flavor_decoder(name, d.seq_len)
        if f == Decoder(d.kind, d.layers, d.hidden, d.heads, d.kv_heads, d.ffn, d.vocab, d.seq_len, d.tied,
                        d.attention, d.rope_theta, d.norm_eps):
            return name
    return None


def default_split(stages: int, layers: int, first_less: int = 1, last_less: int = 1) -> list[int]:
    """torchtitan's split of ``layers`` transformer layers over ``stages`` (distributed/pipeline_parallel.py,
    generate_llm_fqn_per_model_part): the embedding weighs ``first_less`` layers and the output
    ``last_less``, the total spread evenly, earlier stages taking the remainder."""
    if stages == 1:
        return [layers]
    total = layers + first_less + last_less
    per, extra = divmod(total, stages)
    counts = [per + (s < extra) for s in range(stages)]
    counts[0] -= first_less
    counts[-1] -= last_less
    return counts


def _fqns(counts: list[int]) -> list[list[str]]:
    out, at = [], 0
    for s, c in enumerate(counts):
        names = ["tok_embeddings"] if s == 0 else []
        names += [f"layers.{i}" for i in range(at, at + c)]
        names += ["norm", "output"] if s == len(counts) - 1 else []
        out.append(names)
        at += c
    return out


def export_config(plan, spec, source: str) -> dict:
    """The plan as torchtitan's job config (sections of keys)."""
    c = plan.config
    d = decoder_of(spec)
    flavor = _flavor_of(d) if d else None
    if flavor is None:
        raise refuse(source, "model.path", plan.model_path, TARGET, "trains its llama3 flavors (" + ", ".join(FLAVORS)
                     + "); this model is none of them")
    if plan.dtype == "fp16":
        raise refuse(source, "model.dtype", "fp16", TARGET, "trains in bfloat16 or float32 (training.mixed_precision_param)")
    if plan.optimizer != "adam":
        raise refuse(source, "model.optimizer", plan.optimizer, TARGET, "builds Adam and AdamW; plan with optimizer adam")
    if c.tp > 1 and c.tp_layout != "megatron-sp":
        raise refuse(source, "parallel.tp_layout", c.tp_layout, TARGET, "shards a layer as Megatron's layout with "
                     "sequence-parallel norms (megatron-sp) only")
    if c.pp > 1 and c.dp * c.cp > 1 and c.placement != "dp-inner":
        raise refuse(source, "parallel.placement", c.placement, TARGET, "places pp outermost in its device mesh "
                     "(pp, dp_replicate, dp_shard, cp, tp): plan with --placement dp-inner")
    if c.ep > 1:
        raise refuse(source, "parallel.ep", c.ep, TARGET, "has no expert-parallel llama3 (dense) flavor")
    if not c.overlap_grad_reduce:
        raise refuse(source, "parallel.overlap_grad_reduce", False, TARGET, "reduces gradients with torch DDP or FSDP2, "
                     "which overlap them with the backward; plan without --no-overlap-grad-reduce")
    if c.recompute in MODULE_MODES:
        raise refuse(source, "parallel.recompute", c.recompute.value, TARGET, "checkpoints whole blocks (full) or "
                     "selected ops (selective)")
    if c.recompute_layers:
        raise refuse(source, "parallel.recompute_layers", list(c.recompute_layers), TARGET, "checkpoints every "
                     "block or every N-th block (selective_ac_option N, parsim's recompute_every), not the first N of "
                     "each stage; plan with --recompute full or none")
    if c.schedule == "zbh1" and c.chunks == 1 and c.pp > 1:
        raise refuse(source, "parallel.schedule", "zbh1 with 1 chunk", TARGET, "runs zero bubble interleaved "
                     "(InterleavedZeroBubble, 2 or more stages a rank) only")
    b = c.microbatch_size(plan.global_batch_size)
    par = {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": 1}
    if c.zero == 0:
        if c.cp > 1:
            raise refuse(source, "parallel.zero", 0, TARGET, "shards with FSDP2 whenever cp > 1; plan with --zero 3")
        par["data_parallel_replicate_degree"] = c.dp
    elif c.zero == 3 or (c.zero == 2 and c.pp > 1):
        # FSDP2 over the dp ranks; with dp_shard, HSDP (job_config.py, Parallelism.data_parallel_replicate_degree:
        # "If data_parallel_shard_degree is also greater than 1, the parallelism method used is HSDP")
        par["data_parallel_replicate_degree"] = c.shard_replicas
        par["data_parallel_shard_degree"] = c.dp // c.shard_replicas
        # FSDP2 without resharding after forward keeps the parameters for the backward (ZeRO-2, and
        # torchtitan's "default" under pp); "default" reshards at pp = 1 (ZeRO-3; simulate refuses it under pp)
        par["fsdp_reshard_after_forward"] = "never" if c.zero == 2 else "default"
    else:
        raise refuse(source, "parallel.zero", c.zero, TARGET, "replicates (DDP, zero 0) or shards with FSDP2 "
                     "(zero 3; zero 2 under pp); plan with --zero 0 or 3")
    training = {"seq_len": d.seq_len, "mixed_precision_param": "bfloat16" if plan.dtype == "bf16" else "float32"}
    if c.pp > 1:
        training["local_batch_size"] = plan.global_batch_size // c.dp
        par.update(pipeline_parallel_degree=c.pp, pipeline_parallel_schedule=SCHEDULES[c.schedule],
                   pipeline_parallel_microbatch_size=b)
        counts = decoder_counts(c.bounds, plan.layers, source, TARGET)
        if c.chunks > 1 or counts != default_split(c.stages, d.layers):
            par["module_fqns_per_model_part"] = _fqns(counts)
    else:
        training.update(local_batch_size=b, global_batch_size=plan.global_batch_size)
    if c.tp > 1:
        par["tensor_parallel_degree"] = c.tp
        par["enable_async_tensor_parallel"] = c.tp_comm_overlap
    if c.cp > 1:
        par["context_parallel_degree"] = c.cp
        par["context_parallel_rotate_method"] = "alltoall" if c.cp_mode == "ring" else "allgather"
    model = {"name": "llama3", "flavor": flavor}
    if plan.fp8:
        model["converters"] = [FP8]
    ac = {"mode": c.recompute.value}
    if c.recompute.value == "selective":
        ac["selective_ac_option"] = "op"
    elif c.recompute_every:          # torchtitan's layer SAC: full checkpointing of every N-th block
        ac = {"mode": "selective", "selective_ac_option": str(c.recompute_every)}
    return {"model": model, "optimizer": {"name": "AdamW"}, "training": training, "parallelism": par,
            "activation_checkpoint": ac}


def render(config: dict, header: list[str]) -> str:
    """TOML text of a two-level config (tables of scalars and lists)."""
    lines = [f"# {h}" for h in header]
    for section, keys in config.items():
        lines += ["", f"[{section}]"] + [f"{k} = {_toml(v)}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


def _toml(v) -> str:
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, str, int, float)):
        return json.dumps(v)
    raise TypeError(type(v))


# ----------------------------------------------------------------------------- import

def _get(cfg: dict, source: str, keys: tuple[str, ...], types, default):
    """The first of ``section.key`` found (the 0.2 name first, then the 2024 ones)."""
    for dotted in keys:
        section, key = dotted.split(".")
        sec = cfg.get(section, {})
        if isinstance(sec, dict) and key in sec:
            v = sec[key]
            if not isinstance(v, types) or isinstance(v, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
                raise InputError(f"{source}: {dotted}: expected {getattr(types, '__name__', types)}, got {v!r}")
            return v
    return default


def import_config(cfg: dict, source: str) -> Imported:
    """A torchtitan job config (the TOML's tables) as the plan it runs."""
    g = lambda keys, types, default: _get(cfg, source, keys, types, default)      # noqa: E731
    name = g(("model.name",), str, "llama3")
    flavor = g(("model.flavor",), str, "debugmodel")
    if name != "llama3" or flavor not in FLAVORS:
        raise refuse(source, "model.flavor", f"{name} {flavor}", "parsim's torchtitan reader", "knows llama3's "
                     + ", ".join(FLAVORS) + "; describe other models in a model.yaml and pass it with --model")
    seq = g(("training.seq_len",), int, 2048)
    d = flavor_decoder(flavor, seq)
    replicate = g(("parallelism.data_parallel_replicate_degree", "training.data_parallel_replicate_degree"), int, 1)
    shard = g(("parallelism.data_parallel_shard_degree", "training.data_parallel_shard_degree"), int, -1)
    tp = g(("parallelism.tensor_parallel_degree", "training.tensor_parallel_degree"), int, 1)
    pp = g(("parallelism.pipeline_parallel_degree", "experimental.pipeline_parallel_degree"), int, 1)
    cp = g(("parallelism.context_parallel_degree", "experimental.context_parallel_degree"), int, 1)
    ep = g(("parallelism.expert_parallel_degree",), int, 1)
    if ep > 1:
        raise refuse(source, "parallelism.expert_parallel_degree", ep, "torchtitan's llama3", "has no experts")
    reshard = g(("parallelism.fsdp_reshard_after_forward",), str, "default")
    sharded = shard != 1 or cp > 1
    if sharded and pp > 1 and reshard == "always":
        raise refuse(source, "parallelism.fsdp_reshard_after_forward", reshard, "parsim", "prices FSDP beside a "
                     "pipeline with the gathered parameters kept through the step (torchtitan's default under pp); "
                     "set it to default or never")
    zero = 0 if not sharded else 2 if reshard == "never" or (reshard == "default" and pp > 1) else 3
    schedule_name = g(("parallelism.pipeline_parallel_schedule", "experimental.pipeline_parallel_schedule"), str, "1F1B")
    by_name = {v.lower(): k for k, v in SCHEDULES.items()}
    if pp > 1 and schedule_name.lower() not in by_name:
        raise refuse(source, "parallelism.pipeline_parallel_schedule", schedule_name, "parsim", "prices "
                     + ", ".join(SCHEDULES.values()))
    schedule = by_name.get(schedule_name.lower(), "1f1b") if pp > 1 else "1f1b"
    counts = _split(cfg, source, d.layers, pp, SCHEDULES[schedule] in SINGLE_STAGE, g)
    local = g(("training.local_batch_size", "training.batch_size"), int, 8)
    gbs = g(("training.global_batch_size",), int, -1)
    mbs = g(("parallelism.pipeline_parallel_microbatch_size",), int, 1) if pp > 1 else local
    mode = g(("activation_checkpoint.mode",), str, "selective")
    if mode not in ("none", "selective", "full"):
        raise refuse(source, "activation_checkpoint.mode", mode, "parsim", "prices none, selective and full")
    # selective with an integer option is torchtitan's layer SAC, full checkpointing of every N-th
    # block (its default option, "2"; 0 and 1: every block); "op" its op-level SAC, priced as
    # parsim's selective
    option = g(("activation_checkpoint.selective_ac_option",), str, "2") if mode == "selective" else "op"
    if option != "op" and not option.isdigit():
        raise refuse(source, "activation_checkpoint.selective_ac_option", option, "torchtitan", "takes a whole "
                     "number (every N-th layer) or op")
    every = max(1, int(option)) if option.isdigit() else 0
    if every:
        mode = "full"
    converters = g(("model.converters",), list, [])
    fp8 = any(x in (FP8, "float8") for x in converters) or g(("float8.enable_float8_linear",), bool, False)
    precision = g(("training.mixed_precision_param",), str, "bfloat16")
    parallel = dict(**_data_parallel(replicate, shard, sharded), tp=tp, pp=pp, cp=cp, chunks=len(counts) // pp,
                    schedule=schedule,
                    split=split_arg(bounds_from_counts(counts)), tp_layout="megatron-sp" if tp > 1 else None,
                    recompute=mode, **({"recompute_every": every} if every else {}), zero=zero,
                    tp_comm_overlap=g(("parallelism.enable_async_tensor_parallel", "experimental.enable_async_tensor_parallel"), bool, False),
                    cp_mode=("ring" if g(("parallelism.context_parallel_rotate_method",), str, "allgather") == "alltoall"
                             else "allgather") if cp > 1 else None,
                    placement="dp-inner" if pp > 1 else "pp-inner", microbatch_size=mbs, local_batch_size=local)
    training = dict(dtype="bf16" if precision == "bfloat16" else "fp32", optimizer="adam", fp8=fp8,
                    **({"global_batch_size": gbs} if gbs > 0 else {}))
    return Imported(model_mapping(d, f"torchtitan-llama3-{flavor}"), training, parallel)


def _data_parallel(replicate: int, shard: int, sharded: bool) -> dict:
    """parsim's dp, and HSDP's dp_shard, of torchtitan's two data-parallel degrees
    (distributed/parallel_dims.py, ParallelDims: a shard degree of -1 takes the devices the other
    degrees leave; FSDP2 runs where dp_shard x cp > 1, ``sharded``): DDP over the replicas; FSDP2
    over the shard ranks; both, HSDP (models/llama3/infra/parallelize.py: fully_shard on the mesh
    ["dp_replicate", "fsdp"]), each shard group dp_shard x cp ranks.  With a shard degree of -1
    beside replicas, the dp is known from the cluster only: ``dp_replicate`` hands the replicas to
    parsim.export.commands, which divides that dp by them."""
    if not sharded:
        return {"dp": replicate}
    if replicate == 1:
        return {"dp": shard if shard > 0 else None}      # None: the remaining devices
    if shard > 0:
        return {"dp": replicate * shard, "dp_shard": shard}
    return {"dp": None, "dp_replicate": replicate}


def _split(cfg, source, layers: int, pp: int, single: bool, g) -> list[int]:
    fqns = g(("parallelism.module_fqns_per_model_part",), list, None)
    if fqns:
        counts = [sum(1 for n in part if str(n).startswith("layers.")) for part in fqns]
        if len(counts) % pp or sum(counts) != layers:
            raise InputError(f"{source}: parallelism.module_fqns_per_model_part: {len(counts)} parts holding "
                             f"{sum(counts)} layers; expected a multiple of pp {pp} parts holding all {layers} layers")
        return counts
    first = g(("parallelism.pipeline_parallel_first_stage_less_layers",), int, 1)
    last = g(("parallelism.pipeline_parallel_last_stage_less_layers",), int, 1)
    per_stage = g(("parallelism.pipeline_parallel_layers_per_stage",), int, None)
    if per_stage:
        stages = -(-(layers + first + last) // per_stage)
    else:
        stages = pp * (1 if single else 2)
    if pp == 1:
        stages = 1
    return default_split(stages, layers, first, last)


def load_toml(path: str) -> dict:
    try:
        import tomllib                       # Python 3.11+
    except ImportError:                      # Python 3.10: tomli, the same parser
        try:
            import tomli as tomllib
        except ImportError:
            raise InputError(f"{path}: reading TOML on Python 3.10 needs tomli: pip install tomli") from None

    from parsim.inputs import read_text

    try:
        return tomllib.loads(read_text(path, "a torchtitan TOML job config"))
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML ({e})") from None
