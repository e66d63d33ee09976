"""Megatron-LM / Megatron-Core: a plan as ``pretrain_gpt.py``'s command-line arguments, and such an
argument list (or a launch script that passes one) read back.

The names are those of megatron/training/arguments.py at tag core_v0.16.1 of NVIDIA/Megatron-LM,
whose network and parallel flags are generated from megatron.core's TransformerConfig fields
(``--tensor-model-parallel-size`` is ``tensor_model_parallel_size``; argument_utils.py,
ArgumentGroupFactory):

    parsim                      Megatron-LM
    tp                          --tensor-model-parallel-size
    tp_layout megatron-sp       --sequence-parallel (megatron: without it)
    pp                          --pipeline-model-parallel-size
    chunks (interleaved)        --num-layers-per-virtual-pipeline-stage (layers / pp / chunks)
    bounds (uneven, chunks 1)   --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers
    cp, cp_mode                 --context-parallel-size, --cp-comm-type p2p | allgather
    zero 1 / 2 / 3              --use-distributed-optimizer / --use-torch-fsdp2
                                --torch-fsdp2-no-reshard-after-forward / --use-torch-fsdp2
    zero 2 / 3 with ep          --use-megatron-fsdp --data-parallel-sharding-strategy
                                optim_grads / optim_grads_params
    dp_shard (HSDP), zero 1     --num-distributed-optimizer-instances dp / dp_shard (the partial
                                distributed optimizer; read also beside --use-megatron-fsdp, whose
                                HSDP it sets: Megatron's torch FSDP2 path has no shard group)
    recompute selective / full  --recompute-granularity selective / full --recompute-method uniform
                                --recompute-num-layers 1
    recompute_layers N          --recompute-granularity full --recompute-method block
                                --recompute-num-layers N (one count for every stage)
    recompute deepseek          --recompute-granularity selective --recompute-modules layernorm
                                mla_up_proj moe_act
    recompute moe               --recompute-granularity selective --recompute-modules layernorm moe
    tp_comm_overlap             --tp-comm-overlap
    overlap_grad_reduce, zero   --overlap-grad-reduce (its DDP and distributed optimizer; without it
    0-1                         Megatron-Core reduces every bucket after the backward, its default;
                                torch FSDP2 overlaps whatever it is given)
    fp8                         --fp8-format hybrid (with --bf16)
    ep, ep_overlap              --expert-model-parallel-size, --overlap-moe-expert-parallel-comm
    etp (tp > 1, with ep or > 1) --expert-tensor-parallel-size (Megatron's default is tp)
    Mixtral experts             --num-experts, --moe-router-topk, --moe-ffn-hidden-size
    placement pp-inner          --use-tp-pp-dp-mapping (rank order tp-cp-ep-pp-dp; the default
                                tp-cp-ep-dp-pp is parsim's dp-inner: parallel_state.py)
    microbatches                --micro-batch-size = batch / (dp x microbatches), --global-batch-size

Megatron-Core runs 1F1B, interleaved with virtual stages: GPipe and ZB-H1 are refused.  The
embedding sits on the first stage and the output layer on the last, the transformer layers split
evenly unless the first or last stage's count is given.  The vocabulary is padded to a multiple of
``--make-vocab-size-divisible-by`` x tp (tokenizer.py, _vocab_size_with_padding): the export writes
1 so that Megatron runs the vocabulary parsim priced; the import pads as Megatron does.
"""

from __future__ import annotations

import math
import re
import shlex

from parsim.export.common import (Decoder, Imported, decoder_counts, decoder_of, model_mapping,
                                  refuse, split_arg)
from parsim.errors import InputError
from parsim.plan import bounds_from_counts

TARGET = "Megatron-LM"
# Flags that take no value (store_true), as arguments.py declares them; every other flag read takes one.
SWITCHES = frozenset("""sequence-parallel use-distributed-optimizer tp-comm-overlap overlap-grad-reduce bf16 fp16 swiglu
group-query-attention untie-embeddings-and-output-weights disable-bias-linear use-tp-pp-dp-mapping use-torch-fsdp2
torch-fsdp2-no-reshard-after-forward overlap-moe-expert-parallel-comm use-flash-attn checkpoint-activations
use-megatron-fsdp no-masked-softmax-fusion moe-grouped-gemm apply-query-key-layer-scaling""".split())
# parsim.model.recompute's module modes: Megatron-Core's recompute_modules (transformer_config.py;
# its default, core_attn, is the selective mode)
MODULES = {"selective": ("core_attn",), "deepseek": ("layernorm", "mla_up_proj", "moe_act"),
           "moe": ("layernorm", "moe")}
# Flags that take a list of values (nargs="*"/"+" in arguments.py), read as one space-separated value
LISTS = frozenset({"recompute-modules"})
RECOMPUTE_ONE_LAYER = ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]


def export_args(plan, spec, source: str) -> list[str]:
    """The plan as Megatron-LM arguments (a flat list: flag, value, flag, ...)."""
    c = plan.config
    d = decoder_of(spec)
    if d is None:
        raise refuse(source, "model.path", plan.model_path, TARGET, "trains GPT- and Llama-shaped decoders; this model "
                     "is neither (export it to deepspeed or mindspore)")
    args = _model_args(d, source)
    if c.tp > 1:
        args += ["--tensor-model-parallel-size", str(c.tp)]
        if c.tp_layout not in ("megatron", "megatron-sp"):
            raise refuse(source, "parallel.tp_layout", c.tp_layout, TARGET, "shards a layer only as Megatron's layout "
                         "(with or without --sequence-parallel); plan with --tp-layout megatron or megatron-sp")
        args += ["--sequence-parallel"] if c.tp_layout == "megatron-sp" else []
    if c.schedule not in ("1f1b", "interleaved") and c.pp > 1:
        raise refuse(source, "parallel.schedule", c.schedule, TARGET, "runs 1F1B and interleaved 1F1B only; plan "
                     "with --schedule 1f1b or interleaved")
    if c.pp > 1:
        args += ["--pipeline-model-parallel-size", str(c.pp)]
    args += _split_args(c, plan.layers, d.layers, source)
    if c.cp > 1:
        args += ["--context-parallel-size", str(c.cp), "--cp-comm-type", {"ring": "p2p", "allgather": "allgather"}[c.cp_mode]]
    if c.ep > 1:
        args += ["--expert-model-parallel-size", str(c.ep)]
        args += ["--overlap-moe-expert-parallel-comm"] if c.ep_overlap else []
    if c.tp > 1 and (c.ep > 1 or c.etp > 1):    # Megatron's own default is etp = tp (arguments.py)
        args += ["--expert-tensor-parallel-size", str(c.etp)]
    args += _zero_args(c, source)
    if c.recompute_every:
        raise refuse(source, "parallel.recompute_every", c.recompute_every, TARGET, "recomputes the first N layers "
                     "of each stage (--recompute-method block) or every layer, not every N-th")
    if c.recompute_layers and len(set(c.recompute_layers)) > 1:
        raise refuse(source, "parallel.recompute_layers", list(c.recompute_layers), TARGET, "recomputes the same "
                     "number of layers in every stage (--recompute-num-layers)")
    modules = ["--recompute-granularity", "selective", "--recompute-modules"]
    args += ({"none": [], "selective": ["--recompute-granularity", "selective"], "full": RECOMPUTE_ONE_LAYER,
              "deepseek": modules + list(MODULES["deepseek"]), "moe": modules + list(MODULES["moe"])}[c.recompute.value]
             if not c.recompute_layers else
             ["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers",
              str(c.recompute_layers[0])])
    args += ["--tp-comm-overlap"] if c.tp_comm_overlap else []
    args += ["--overlap-grad-reduce"] if c.overlap_grad_reduce and c.zero < 2 else []
    if c.placement == "pp-inner" and c.pp > 1 and c.dp * c.cp > 1:
        args += ["--use-tp-pp-dp-mapping"]
    args += {"fp32": [], "bf16": ["--bf16"], "fp16": ["--fp16"]}[plan.dtype]
    args += ["--fp8-format", "hybrid"] if plan.fp8 else []
    args += _optimizer_args(plan.optimizer)
    args += ["--micro-batch-size", str(c.microbatch_size(plan.global_batch_size)),
             "--global-batch-size", str(plan.global_batch_size)]
    return args


def render(args: list[str], header: list[str]) -> str:
    """One flag (and its value) a line, after ``#`` comments: a file that Megatron users paste into
    their launch script and that ``parsim simulate --from megatron`` reads back."""
    lines = [f"# {h}" for h in header]
    i = 0
    while i < len(args):
        takes = 0                    # its values: one, or a list flag's every one (LISTS)
        while i + 1 + takes < len(args) and not args[i + 1 + takes].startswith("--") and \
                (takes == 0 or args[i][2:] in LISTS):
            takes += 1
        lines.append(shlex.join(args[i:i + 1 + takes]))
        i += 1 + takes
    return "\n".join(lines) + "\n"


def _model_args(d: Decoder, source: str) -> list[str]:
    a = ["--num-layers", d.layers, "--hidden-size", d.hidden, "--ffn-hidden-size", d.ffn,
         "--num-attention-heads", d.heads, "--seq-length", d.seq_len, "--max-position-embeddings", d.seq_len,
         "--vocab-size", d.vocab, "--make-vocab-size-divisible-by", 1]
    if d.attention == "eager":
        raise refuse(source, "model.args.attention", "eager", TARGET, "has no attention backend that keeps the "
                     "s x s scores as eager attention does; use sdpa (its fused kernels) or megatron (unfused)")
    a += ["--attention-backend", "unfused"] if d.attention == "megatron" else []
    if d.window:
        raise refuse(source, "model.hf.sliding_window", d.window, TARGET, "export writes no --window-size: the run "
                     "would attend over the whole sequence the plan priced windowed; export a model without a window")
    if d.kind == "llama":
        a += ["--swiglu", "--normalization", "RMSNorm", "--position-embedding-type", "rope", "--rotary-base",
              _num(d.rope_theta), "--norm-epsilon", _num(d.norm_eps), "--disable-bias-linear"]
        a += ["--group-query-attention", "--num-query-groups", d.kv_heads] if d.kv_heads != d.heads else []
        a += [] if d.tied else ["--untie-embeddings-and-output-weights"]
        if d.experts:
            a += ["--num-experts", d.experts, "--moe-router-topk", d.topk, "--moe-ffn-hidden-size", d.ffn]
    else:                                   # Megatron's dropouts default to 0.1, the zoo GPT's too
        a += ["--hidden-dropout", _num(d.dropout), "--attention-dropout", _num(d.dropout)]
    return [str(x) for x in a]


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _split_args(c, names, layers: int, source: str) -> list[str]:
    counts = decoder_counts(c.bounds, names, source, TARGET)
    args = []
    if c.chunks > 1:
        if len(set(counts)) > 1:
            raise refuse(source, "parallel.bounds", list(c.bounds), TARGET, "splits the layers of an interleaved "
                         "pipeline evenly over pp x chunks virtual stages; plan with an even split")
        args += ["--num-layers-per-virtual-pipeline-stage", str(counts[0])]
    elif len(set(counts)) > 1:
        middle = counts[1:-1]
        if len(set(middle)) > 1:
            raise refuse(source, "parallel.bounds", list(c.bounds), TARGET, "names the first and last stages' layer "
                         "counts and splits the rest evenly; this split has uneven middle stages")
        even = middle[0] if middle else None
        if counts[0] != even:
            args += ["--decoder-first-pipeline-num-layers", str(counts[0])]
        if counts[-1] != even:
            args += ["--decoder-last-pipeline-num-layers", str(counts[-1])]
    return args


def _zero_args(c, source: str) -> list[str]:
    """ZeRO as Megatron's data-parallel flags (arguments.py): 1 its distributed optimizer, 2 and 3
    torch FSDP2.  HSDP at zero 1 is the partial distributed optimizer: dp / dp_shard instances, each
    sharding over dp_shard x cp consecutive ranks of the dp x cp group (parallel_state.py,
    initialize_model_parallel; DistributedDataParallelConfig.num_distributed_optimizer_instances, "the
    factor by which the DP domain is sharded"; param_and_grad_buffer.py reduce-scatters the gradients
    within an instance, then all-reduces the shard across the instances)."""
    if c.zero == 2 and not c.overlap_grad_reduce:
        raise refuse(source, "parallel.overlap_grad_reduce", False, TARGET, "runs ZeRO-2 as torch FSDP2, which "
                     "reduce-scatters under the backward on its own stream, not on the compute stream (DeepSpeed's "
                     "overlap_comm false); plan with --overlap-grad-reduce")
    if c.fsdp_beside_pipeline:
        # parsim prices FSDP beside a pipeline as torch.distributed.pipelining's FSDP2 stages run
        # (torchtitan); Megatron's own pipeline schedules drive its gradient sync instead
        raise refuse(source, "parallel.zero", c.zero, TARGET, "runs its own pipeline schedules, not torch's FSDP2 "
                     "stages as parsim prices ZeRO-2 beside pp (torchtitan); plan with --zero 1 (its distributed "
                     "optimizer) or export to torchtitan")
    if c.hybrid_sharded and c.zero > 1:
        # training.py builds torch FSDP2's config from reshard_after_forward alone, its mesh the whole
        # dp x cp group (torch_fully_sharded_data_parallel.py); Megatron-FSDP's HSDP is another code path
        raise refuse(source, "parallel.dp_shard", c.dp_shard, TARGET, f"shards ZeRO {c.zero} with torch FSDP2 "
                     "(--use-torch-fsdp2) over the whole data-parallel group; plan with --zero 1 (its partial "
                     "distributed optimizer) or without --dp-shard")
    if c.zero > 1 and c.ep > 1:
        # ZeRO 2-3 beside expert parallelism: Megatron-FSDP, which shards the experts over the expert
        # data-parallel group (megatron/core/distributed/fsdp/mcore_fsdp_adapter.py takes expt_dp_group
        # = parallel_state.get_expert_data_parallel_group(); fully_shard_model's expt_device_mesh), as
        # parsim prices it (parsim.sim.expert_grads.FsdpExperts); the flags of Megatron-Core's parallelism
        # guide ("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params")
        return ["--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                "optim_grads" if c.zero == 2 else "optim_grads_params"]
    args = {0: [], 1: ["--use-distributed-optimizer"],
            2: ["--use-torch-fsdp2", "--torch-fsdp2-no-reshard-after-forward"], 3: ["--use-torch-fsdp2"]}[c.zero]
    return args + (["--num-distributed-optimizer-instances", str(c.shard_replicas)] if c.hybrid_sharded else [])


def _optimizer_args(optimizer: str) -> list[str]:
    # Megatron's sgd is momentum SGD (--sgd-momentum, default 0.9); Adam is its default optimizer
    return {"adam": [], "momentum": ["--optimizer", "sgd"], "sgd": ["--optimizer", "sgd", "--sgd-momentum", "0"]}[optimizer]


# ----------------------------------------------------------------------------- import

def parse_args_text(text: str, source: str) -> dict[str, str | bool]:
    """Megatron flags from an argument list or a launch script: comments dropped, lines joined,
    ``NAME=value`` assignments substituted for ``$NAME`` / ``${NAME}``; a switch maps to True."""
    text = text.replace("\\\n", " ")
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError as e:
        raise InputError(f"{source}: not a command line Megatron reads ({e}); check its quotes") from None
    env: dict[str, str] = {}
    flags: dict[str, str | bool] = {}
    i = 0
    while i < len(tokens):
        tok = _substitute(tokens[i], env)
        i += 1
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", tok)
        if m and not m.group(2).endswith("("):
            env[m.group(1)] = m.group(2)
            continue
        if not tok.startswith("--"):
            continue
        name, eq, value = tok[2:].partition("=")
        name = name.replace("_", "-")
        if eq:
            flags[name] = value
        elif name in SWITCHES or i >= len(tokens) or tokens[i].startswith("--") or tokens[i] == ")":
            flags[name] = True
        elif name in LISTS:                  # every value up to the next flag
            values = []
            while i < len(tokens) and not tokens[i].startswith("--") and tokens[i] != ")":
                values.append(_substitute(tokens[i], env))
                i += 1
            flags[name] = " ".join(values)
        else:
            flags[name] = _substitute(tokens[i], env)
            i += 1
    return flags


def _substitute(token: str, env: dict) -> str:
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), m.group(0)), token)


class _Flags:
    def __init__(self, flags: dict, source: str):
        self.flags, self.source = flags, source

    def int(self, name: str, default=None) -> int | None:
        v = self.flags.get(name)
        if v is None:
            if default is None and name in _REQUIRED:
                raise InputError(f"{self.source}: --{name}: missing; Megatron needs it, add --{name} N")
            return default
        if v is True or not re.fullmatch(r"\d+", str(v)):
            raise InputError(f"{self.source}: --{name}: expected a positive integer, got {v!r}"
                             + ("; define the shell variable it names, or write the number" if "$" in str(v) else ""))
        return int(v)

    def str(self, name: str, default: str | None = None) -> str | None:
        v = self.flags.get(name, default)
        if v is True:
            raise InputError(f"{self.source}: --{name}: expected a value")
        return v

    def on(self, name: str) -> bool:
        return self.flags.get(name) is True


_REQUIRED = ("num-layers", "hidden-size", "num-attention-heads", "seq-length", "micro-batch-size")


def import_args(text: str, source: str) -> Imported:
    """A Megatron argument list (or script) as the plan it runs."""
    f = _Flags(parse_args_text(text, source), source)
    tp, pp, cp = f.int("tensor-model-parallel-size", 1), f.int("pipeline-model-parallel-size", 1), f.int("context-parallel-size", 1)
    d = _decoder(f, tp, source)
    layers = d.layers
    v = f.int("num-virtual-stages-per-pipeline-rank") or None
    per_virtual = f.int("num-layers-per-virtual-pipeline-stage")
    if per_virtual:
        if layers % (pp * per_virtual):
            raise InputError(f"{source}: --num-layers-per-virtual-pipeline-stage: {per_virtual} x pp {pp} does not "
                             f"divide --num-layers {layers}")
        v = layers // (pp * per_virtual)
    chunks = v or 1
    counts = _counts(f, layers, pp, chunks, source)
    recompute, recompute_layers = _recompute(f, source, layers // (pp * chunks))
    gran = f.str("cp-comm-type", "p2p")
    if gran not in ("p2p", "allgather", "all_gather"):
        raise refuse(source, "--cp-comm-type", gran, "parsim", "prices p2p (a ring) and allgather only")
    zero = 1 if f.on("use-distributed-optimizer") else 0
    if f.on("use-torch-fsdp2") or f.on("use-megatron-fsdp"):
        strategy = f.str("data-parallel-sharding-strategy", "optim_grads_params")
        zero = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}.get(strategy, 3)
        zero = 2 if f.on("torch-fsdp2-no-reshard-after-forward") else zero
    dtype = "bf16" if f.on("bf16") else "fp16" if f.on("fp16") else "fp32"
    fp8 = f.str("fp8-format") is not None
    optimizer = f.str("optimizer", "adam")
    if optimizer not in ("adam", "sgd"):
        raise refuse(source, "--optimizer", optimizer, "parsim", "prices adam and sgd")
    if optimizer == "sgd":
        optimizer = "sgd" if float(f.str("sgd-momentum", "0.9")) == 0 else "momentum"
    gbs, mbs = f.int("global-batch-size"), f.int("micro-batch-size")
    ep = f.int("expert-model-parallel-size", 1)
    hsdp = _replicas(f, zero, ep, source)
    # Megatron's expert tp defaults to tp (arguments.py); parsim's is 1, which a dense model keeps
    etp = f.int("expert-tensor-parallel-size", tp if ep > 1 else 1)
    parallel = dict(tp=tp, pp=pp, cp=cp, ep=ep, etp=etp, chunks=chunks,
                    schedule="interleaved" if chunks > 1 else "1f1b", split=split_arg(bounds_from_counts(counts)),
                    tp_layout=("megatron-sp" if f.on("sequence-parallel") else "megatron") if tp > 1 else None,
                    recompute=recompute, **({"recompute_layers": recompute_layers} if recompute_layers else {}),
                    zero=zero, tp_comm_overlap=f.on("tp-comm-overlap"),
                    overlap_grad_reduce=f.on("overlap-grad-reduce") or zero >= 2,
                    cp_mode=("allgather" if gran != "p2p" else "ring") if cp > 1 else None, ep_overlap=f.on("overlap-moe-expert-parallel-comm"),
                    placement="pp-inner" if f.on("use-tp-pp-dp-mapping") else "dp-inner", microbatch_size=mbs, **hsdp)
    training = dict(dtype=dtype, optimizer=optimizer, fp8=fp8, **({"global_batch_size": gbs} if gbs else {}))
    return Imported(model_mapping(d, "megatron-" + _stem(source)), training, parallel)


def _replicas(f: _Flags, zero: int, ep: int, source: str) -> dict:
    """HSDP's replicas, ``dp_replicate`` (parsim.export.commands divides the cluster's dp by them):
    --num-distributed-optimizer-instances R > 1 beside the distributed optimizer or Megatron-FSDP
    (megatron/core/distributed/fsdp/mcore_fsdp_adapter.py: enable_hsdp, the outer dimension
    replicating under --outer-dp-sharding-strategy no_shard).  Plain DDP and torch FSDP2 ignore it
    (param_and_grad_buffer.py all-reduces over the whole dp group without the distributed optimizer;
    training.py gives torch FSDP2 no instance count)."""
    r = f.int("num-distributed-optimizer-instances", 1)
    if r == 1 or zero == 0 or f.on("use-torch-fsdp2"):
        return {}
    if ep > 1:
        raise refuse(source, "--num-distributed-optimizer-instances", r, "parsim", "prices hybrid sharding without "
                     "expert parallelism; drop it or --expert-model-parallel-size")
    outer = f.str("outer-dp-sharding-strategy", "no_shard")
    if outer != "no_shard":
        raise refuse(source, "--outer-dp-sharding-strategy", outer, "parsim", "prices hybrid sharding whose replicas "
                     "hold whole shards (no_shard); drop it")
    return {"dp_replicate": r}


def _decoder(f: _Flags, tp: int, source: str) -> Decoder:
    hidden, heads, layers = f.int("hidden-size"), f.int("num-attention-heads"), f.int("num-layers")
    seq = f.int("seq-length")
    vocab = f.int("vocab-size")
    if vocab is None:
        raise InputError(f"{source}: --vocab-size: missing; parsim cannot read the tokenizer's vocabulary, add "
                         "--vocab-size N (the tokenizer's size)")
    vocab = int(math.ceil(vocab / (f.int("make-vocab-size-divisible-by", 128) * tp)) * f.int("make-vocab-size-divisible-by", 128) * tp)
    swiglu = f.on("swiglu")
    rope = f.str("position-embedding-type", "learned_absolute") == "rope"
    rms = f.str("normalization", "LayerNorm") == "RMSNorm"
    backend = f.str("attention-backend", "auto")
    attention = "megatron" if backend in ("unfused", "local") else "sdpa"
    tied = not f.on("untie-embeddings-and-output-weights")
    if swiglu and rope and rms:
        kv = f.int("num-query-groups", heads) if f.on("group-query-attention") else heads
        experts = f.int("num-experts", 0)
        ffn = f.int("moe-ffn-hidden-size") or f.int("ffn-hidden-size", 4 * hidden) if experts else \
            f.int("ffn-hidden-size", 4 * hidden)
        return Decoder("llama", layers, hidden, heads, kv, ffn, vocab, seq, tied, attention,
                       float(f.str("rotary-base", "10000")), float(f.str("norm-epsilon", "1e-5")), experts=experts,
                       topk=f.int("moe-router-topk", 2) if experts else 0)
    if f.int("num-experts", 0):
        raise refuse(source, "--num-experts", f.flags["num-experts"], "parsim's Megatron reader", "builds mixtures "
                     "of experts as Mixtral (with --swiglu, --normalization RMSNorm, --position-embedding-type rope)")
    if swiglu or rope or rms or f.on("group-query-attention"):
        raise refuse(source, "--swiglu/--position-embedding-type/--normalization", "a mix", "parsim's Megatron reader",
                     "builds GPT (LayerNorm, learned positions, GeLU) or Llama (RMSNorm, rope, SwiGLU) decoders; "
                     "give all three of Llama's flags or none")
    if f.int("ffn-hidden-size", 4 * hidden) != 4 * hidden:
        raise refuse(source, "--ffn-hidden-size", f.int("ffn-hidden-size"), "parsim's GPT", f"has ffn = 4 x hidden "
                     f"({4 * hidden}); describe this model in a model.yaml")
    if not tied:
        raise refuse(source, "--untie-embeddings-and-output-weights", True, "parsim's GPT", "ties its embedding and head")
    hidden_dropout, attention_dropout = float(f.str("hidden-dropout", "0.1")), float(f.str("attention-dropout", "0.1"))
    if hidden_dropout != attention_dropout:
        raise refuse(source, "--attention-dropout", attention_dropout, "parsim's GPT", "has one dropout rate; "
                     f"--hidden-dropout is {hidden_dropout}")
    return Decoder("gpt", layers, hidden, heads, heads, 4 * hidden, vocab, seq, True, attention, dropout=hidden_dropout)


def _counts(f: _Flags, layers: int, pp: int, chunks: int, source: str) -> list[int]:
    first, last = f.int("decoder-first-pipeline-num-layers"), f.int("decoder-last-pipeline-num-layers")
    stages = pp * chunks
    if first is None and last is None or pp == 1:
        if layers % stages:
            raise InputError(f"{source}: --num-layers: {layers} layers do not split evenly over {stages} pipeline "
                             "stages; give --decoder-first-pipeline-num-layers or change the sizes")
        return [layers // stages] * stages
    if chunks > 1:
        raise refuse(source, "--decoder-first-pipeline-num-layers", first, "parsim's Megatron reader", "reads uneven "
                     "splits without virtual stages only")
    fixed = {0: first, pp - 1: last} if pp > 1 else {0: first}
    fixed = {k: x for k, x in fixed.items() if x is not None}
    rest, middle = layers - sum(fixed.values()), pp - len(fixed)
    if middle == 0 and rest or middle and rest % middle:
        raise InputError(f"{source}: --decoder-first/last-pipeline-num-layers: the other {middle} stages cannot share "
                         f"the remaining {rest} of {layers} layers evenly")
    return [fixed.get(s, rest // middle if middle else 0) for s in range(pp)]


def _recompute(f: _Flags, source: str, per_stage: int) -> tuple[str, int]:
    """(parsim's recompute mode, layers recomputed per stage: 0 every one) of the recompute flags;
    ``per_stage``: the transformer layers of a (virtual) pipeline stage."""
    if f.on("checkpoint-activations"):        # the 2021 name of full recomputation (Megatron-LM's sc21 scripts)
        return "full", 0
    gran = f.str("recompute-granularity")
    if gran is None:
        return "none", 0
    if gran == "selective":
        modules = tuple(f.str("recompute-modules", "core_attn").replace(",", " ").split())
        mode = next((m for m, listed in MODULES.items() if sorted(listed) == sorted(modules)), None)
        if mode is None:
            raise refuse(source, "--recompute-modules", " ".join(modules), "parsim", "prices "
                         + ", ".join(f"{' '.join(listed)} ({m})" for m, listed in MODULES.items()))
        return mode, 0
    if gran != "full":
        raise refuse(source, "--recompute-granularity", gran, "Megatron-LM", "takes full or selective")
    method = f.str("recompute-method", "uniform")
    n = f.int("recompute-num-layers", 1)
    if method == "block" and n < per_stage:      # the first n layers of each (virtual) stage
        return "full", n
    return "full", 0


def _stem(source: str) -> str:
    import os

    return os.path.splitext(os.path.basename(source))[0]
