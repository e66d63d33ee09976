"""MindFormers: a run YAML (configs/<model>/pretrain_*.yaml in mindspore-lab/mindformers) read as the
plan it runs, for Llama-style models (``model.model_config.type`` LlamaConfig).

    MindFormers                                     parsim
    parallel_config.data_parallel                   dp
    parallel_config.model_parallel                  tp (Megatron's layout; use_seq_parallel: megatron-sp)
    parallel_config.pipeline_stage                  pp (embedding first, head last, layers split
                                                    evenly, model_config.offset added per stage)
    model_config.pp_interleave_num                  chunks (interleaved)
    parallel_config.micro_batch_num x               micro-batches per replica
      runner_config.gradient_accumulation_steps
    runner_config.batch_size x                      micro-batch size (unconfirmed against MindFormers'
      micro_batch_interleave_num                    trainer: its documented global batch formula)
    parallel.enable_parallel_optimizer              zero 1 (2 with gradient_accumulation_shard)
    parallel.parallel_optimizer_config.             dp_shard (HSDP: MindSpore's shard group; -1 or
      optimizer_weight_shard_size                   dp: every dp rank)
    recompute_config.recompute / select_recompute   recompute full / selective; recompute: [4, 0]
                                                    (layers per stage): recompute_layers
    model_config.compute_dtype                      dtype (float16 fp16, bfloat16 bf16)
    model_config: num_layers, hidden_size, num_heads, n_kv_heads, intermediate_size (or
      multiple_of, ffn_dim_multiplier as Meta's Llama), vocab_size, seq_length, theta, rms_norm_eps
"""

from __future__ import annotations

from parsim.export.common import Decoder, Imported, model_mapping, refuse, split_arg
from parsim.export.mindspore import weight_shard_size
from parsim.export.torchtitan import _ffn
from parsim.errors import InputError
from parsim.inputs import Fields
from parsim.plan import bounds_from_counts

LLAMA_TYPES = ("LlamaConfig",)


def import_config(raw: dict, source: str) -> Imported:
    """A MindFormers YAML as the plan it runs (the keys that do not change the plan are not read)."""
    model = Fields(raw, source).sub("model").sub("model_config")
    kind = model.get("type", str, "LlamaConfig")
    if kind not in LLAMA_TYPES:
        raise refuse(source, "model.model_config.type", kind, "parsim's MindFormers reader", "reads Llama-style "
                     "models (LlamaConfig); describe this model in a model.yaml and give the parallel flags by hand")
    hidden, heads, layers = model.positive_int("hidden_size"), model.positive_int("num_heads"), model.positive_int("num_layers")
    ffn = model.positive_int("intermediate_size", None) or _ffn(hidden, model.get("ffn_dim_multiplier", float, None),
                                                               model.positive_int("multiple_of", 256))
    seq = model.positive_int("seq_length")
    dtype = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}.get(model.get("compute_dtype", str, "float16"))
    if dtype is None:
        raise model.fail("compute_dtype", "expected float16, bfloat16 or float32")
    d = Decoder("llama", layers, hidden, heads, model.positive_int("n_kv_heads", None) or heads, ffn,
                model.positive_int("vocab_size"), seq, False, "sdpa", model.get("theta", float, 10000.0),
                model.get("rms_norm_eps", float, 1e-5))
    pc = Fields(raw, source).sub("parallel_config", required=False)
    dp, tp, pp = pc.positive_int("data_parallel", 1), pc.positive_int("model_parallel", 1), pc.positive_int("pipeline_stage", 1)
    chunks = model.positive_int("pp_interleave_num", 1) if pp > 1 else 1
    counts = _counts(model.get("offset", (int, list), 0), layers, pp * chunks, source)
    runner = Fields(raw, source).sub("runner_config", required=False)
    mbs = runner.positive_int("batch_size", 1) * Fields(raw, source).positive_int("micro_batch_interleave_num", 1)
    m = (pc.positive_int("micro_batch_num", 1) if pp > 1 else 1) * runner.positive_int("gradient_accumulation_steps", 1)
    par = Fields(raw, source).sub("parallel", required=False)
    zero, dp_shard = 0, 0
    if par.get("enable_parallel_optimizer", bool, False):
        optimizer = par.sub("parallel_optimizer_config", required=False)
        zero = 2 if optimizer.get("gradient_accumulation_shard", bool, False) else 1
        if zero == 2 and pp > 1:
            # MindSpore shards the accumulated gradients and reduce-scatters every micro-batch; parsim
            # prices ZeRO-2 beside a pipeline as torchtitan runs it (unsharded, reduced once a step)
            raise refuse(source, "parallel.parallel_optimizer_config.gradient_accumulation_shard", True,
                         "parsim's MindFormers reader", "reads it without pipeline stages only: beside a pipeline "
                         "parsim prices ZeRO-2 as torchtitan runs it; set it false (ZeRO-1)")
        # MindSpore's shard group (parsim.export.mindspore.weight_shard_size); MindSpore Transformers'
        # docs: "the number of replicas ... is data_parallel/optimizer_weight_shard_size"
        dp_shard = weight_shard_size(optimizer.get("optimizer_weight_shard_size", int, -1), dp, source,
                                     "parallel.parallel_optimizer_config.optimizer_weight_shard_size")
    rc = Fields(raw, source).sub("recompute_config", required=False)
    full = rc.get("recompute", (bool, list), False)
    recompute = "full" if full else "selective" if rc.get("select_recompute", (bool, list), False) else "none"
    layers_per_stage = ()           # a list: the layers each stage recomputes fully (the first of its own)
    if isinstance(full, list):
        if chunks > 1 or len(full) != pp or any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in full):
            raise refuse(source, "recompute_config.recompute", full, "parsim's MindFormers reader",
                         f"reads a list of one count of layers per pipeline stage ({pp}), without pp_interleave_num")
        layers_per_stage = tuple(full)
    opt = Fields(raw, source).sub("optimizer", required=False).get("type", str, "AdamW")
    if "adam" not in opt.lower():
        raise refuse(source, "optimizer.type", opt, "parsim's MindFormers reader", "prices Adam-family optimizers")
    parallel = dict(dp=dp, tp=tp, pp=pp, chunks=chunks, schedule="interleaved" if chunks > 1 else "1f1b",
                    split=split_arg(bounds_from_counts(counts)),
                    tp_layout=("megatron-sp" if pc.get("use_seq_parallel", bool, False) else "megatron") if tp > 1 else None,
                    recompute=recompute, zero=zero, dp_shard=dp_shard, placement="dp-inner" if pp > 1 else "pp-inner",
                    microbatch_size=mbs, microbatches=m,
                    **({"recompute_layers": layers_per_stage} if layers_per_stage else {}))
    return Imported(model_mapping(d, "mindformers-" + str(Fields(raw, source).sub("trainer", required=False)
                                                          .get("model_name", str, "llama"))),
                    dict(dtype=dtype, optimizer="adam", global_batch_size=mbs * m * dp), parallel, dp * tp * pp)


def _counts(offset, layers: int, stages: int, source: str) -> list[int]:
    """Layers per stage: an even split plus MindFormers' per-stage ``offset``."""
    base = layers // stages
    extra = [offset] * stages if isinstance(offset, int) else list(offset)
    if isinstance(offset, int) and offset == 0:
        extra = [0] * stages
    if len(extra) != stages or any(not isinstance(x, int) for x in extra):
        raise InputError(f"{source}: model.model_config.offset: expected 0 or one integer per stage ({stages})")
    counts = [base + x for x in extra]
    if sum(counts) != layers or min(counts) < 0:
        raise InputError(f"{source}: model.model_config.offset: {offset} leaves {sum(counts)} of {layers} layers over "
                         f"{stages} stages of {base}; make the offsets add up to {layers - base * stages}")
    return counts
