"""One rank of a training run: build this rank's stages from the plan, train, measure.

Training follows the seeds:
- Momentum SGD, lr 0.01, momentum 0.9 (``Momentum(net.infer_param_pipeline_stage(), 0.01, 0.9)``),
  or the model's ``training.optimizer`` (plain SGD; Adam, lr 1e-3, on fp32 models).
  Each rank's optimizers hold only its own stages' parameters.
- The loss of a step is the sum over micro-batches of each micro-batch's mean cross-entropy,
  as MindSpore's PipelineCell sums micro-batch losses. torch's schedules therefore run with
  ``scale_grads=False``.
- Data-parallel replicas average their gradients (``gradients_mean=True``) in the buckets the
  simulator prices, each all-reduce started from gradient hooks as soon as its gradients are
  final (parsim.exec.grad_sync): the same mechanism under every schedule, a split backward
  (ZB-H1) and tensor parallelism included.
- The GPT (the zoo's) trains on synthetic tokens, the loss over every next-token prediction;
  tensor parallelism is parsim.exec.tensor_parallel (Megatron's layouts) or
  parsim.exec.op_parallel (the model's and the searched per-operator layouts); context
  parallelism (each rank of a cp group on its zigzag tokens of every sequence, gradients averaged
  over dp x cp) parsim.exec.context_parallel.
- Expert parallelism (ep > 1, ``hf:`` mixtures of experts): each rank keeps E/ep of every MoE
  layer's routed experts, tokens dispatched to them and combined back by all_to_all_single over
  the ep group (parsim.exec.expert_parallel); the dense gradients are averaged over dp x cp in the
  buckets, the experts' apart, over their expert-data-parallel group.
- ``recompute``: full: every cut unit is checkpointed (torch.utils.checkpoint), the simulator's
  full recomputation (LayerGraph.with_recompute); selective: the built-in GPT's eager attention
  cores only (stages.recompute_attention).
- BatchNorm normalises over each micro-batch: its effective batch is the micro-batch size, not
  the global batch. A warning is printed below 16 samples.
- A step whose loss is NaN or infinite stops every rank before it is checkpointed (check_loss);
  --resume starts from the newest checkpoint that verifies on every rank (parsim.exec.checkpoint).

Measured, as the simulator predicts it:
- step wall time per step, with the warm-up steps excluded from the median;
- per-action compute times on each rank, named as the simulator names them (``1F3``);
- with tensor parallelism, the collectives of one step (counted on the first step), to compare
  with parsim.shard.graph.collective_counts;
- peak memory per rank. On CUDA it comes from the allocator (``max_memory_allocated``), with
  the caching allocator's pool at its peak beside it (``max_memory_reserved``): what the pool
  holds beyond the tensors is the fragmentation a profile's ``memory_reserved`` allows for. On
  CPU it is the bytes of parameters, buffers, gradients, optimizer state and the step's input
  batch held before a step, plus the peak of the bytes the step allocates, from torch.profiler's memory events
  ("Total Allocated"), measured on the last warm-up step (the third step by default: the
  first builds the optimizer state). Gradients persist between steps
  (``zero_grad(set_to_none=False)``). With dp > 1 they are views into their buckets' flat
  buffers, so they are counted once;
- with dp > 1, the bytes of each gradient all-reduce issued per step, per stage, to compare with
  the simulator's ``grad_buckets_bytes`` (with ep > 1, the experts' apart: ``expert_grad_buckets_bytes``);
- with ep > 1, per rank the bytes of every token all-to-all's input buffer on the last step, by
  kind (``ep_all_to_all``), to compare with parsim.model.moe.Experts.all_to_all_bytes.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from parsim.errors import InputError, RunError
from parsim.exec import (checkpoint, context_parallel, expert_parallel, faults, folding, fsdp, groups, heartbeat,
                         op_parallel, precision, tensor_parallel, vocab_parallel)
from parsim.exec.data import check_data, input_kind, make_loader
from parsim.exec.grad_sync import GradBuckets, TiedGrads, tied_holders
from parsim.exec.measure import profiled_peak_bytes, record_run, static_bytes
from parsim.exec.objective import loss_fn
from parsim.exec.stages import (MULTI_STAGE, Recorder, build_units, check_order_matches, instrument, local_stages,
                                 memory_format, model_input, recompute_attention, recompute_units, recomputed_children,
                                 schedule_class, stage_module)
from parsim.model.recompute import MODULE_MODES, Recompute
from parsim.plan import load_plan_and_model
from parsim.progress import print_above, progress_bar
from parsim.schedule import build_schedule
from parsim.schedule.actions import Action, Kind
from parsim.shard.prepare import check_shard_section

BN_WARN_BELOW = 16


@dataclass(frozen=True)
class RunOptions:
    plan: str
    steps: int = 10
    warmup: int = 3
    data: str | None = None
    out: str = "runs/latest"
    seed: int = 0
    timeout_s: float = 300.0
    resume: bool = False
    dry_run: bool = False
    json: bool = False
    checkpoint_every: int = 0
    synthetic_size: int = 50_000
    force: bool = False          # run a plan made for another cluster, or for a model file since changed


def check_run(opts: RunOptions):
    """(plan, spec, input kind) once everything a run can check without starting a process holds:
    the plan, its model, what the executor supports, the data, and that the plan is this machine's
    and its model's (run_warnings).  ``parsim run`` calls it before it launches anything; each rank
    calls it again."""
    plan, spec = load_plan_and_model(opts.plan)
    check_shard_section(spec)
    cfg = plan.config
    if plan.fp8:
        raise InputError(f"{opts.plan}: model.fp8: the executor has no FP8 GEMMs (Transformer Engine on FP8 tensor "
                         "cores); plan with training.fp8: false to run it in bf16")
    if spec.training.grad_reduce_dtype not in (None, spec.training.dtype):
        raise InputError(f"{spec.path or opts.plan}: training.grad_reduce_dtype: the executor reduces gradients in the "
                         f"training dtype ({spec.training.dtype}); drop grad_reduce_dtype to run the plan")
    if spec.training.fsdp_backward_prefetch != "pre":
        raise InputError(f"{spec.path or opts.plan}: training.fsdp_backward_prefetch: the executor's FSDP2 prefetches "
                         "the backward's next all-gather before the current unit's backward (pre); drop "
                         "fsdp_backward_prefetch to run the plan")
    if cfg.zero > 2 and cfg.pp > 1:   # parsim.sim refuses it too (check_config): not written by parsim
        raise InputError(f"{opts.plan}: parallel.zero: ZeRO-{cfg.zero} runs with pp=1 only; beside a pipeline "
                         "FSDP keeps the gathered parameters through the step, as torchtitan runs it: plan with "
                         "--zero 2")
    if cfg.zero >= 2 and not cfg.overlap_grad_reduce:
        raise InputError(f"{opts.plan}: parallel.overlap_grad_reduce: false with zero {cfg.zero}: the executor runs "
                         "ZeRO-2 with torch FSDP2, which reduce-scatters on its own stream under the backward, not on "
                         "the compute stream (DeepSpeed's overlap_comm false); run the plan with DeepSpeed "
                         "(parsim export deepspeed), or plan with --overlap-grad-reduce")
    if cfg.tp_comm_overlap:           # TE's userbuffers are CUDA kernels; gloo's collectives cannot pipeline with GEMMs
        raise InputError(f"{opts.plan}: parallel.tp_comm_overlap: the executor runs tensor-parallel collectives "
                         "blocking (gloo has no GEMM-overlapped collectives); plan with --no-tp-comm-overlap")
    check_trainable(spec)
    tensor_parallel.check_supported(plan, spec, opts.plan)
    context_parallel.check_supported(cfg, spec, opts.plan)
    expert_parallel.check_supported(cfg, spec, opts.plan)
    if (cfg.recompute is Recompute.SELECTIVE and not (spec.source.kind == "builtin" and spec.source.target == "gpt")
            and any(layer.recompute_bytes for layer in spec.graph.with_recompute(cfg.recompute).layers)):
        raise InputError(f"{opts.plan}: parallel.recompute: selective: the executor recomputes the attention of the "
                         "built-in gpt only; plan with --recompute full or --no-recompute")
    if cfg.recompute in MODULE_MODES:
        raise InputError(f"{opts.plan}: parallel.recompute: {cfg.recompute}: the executor does not recompute "
                         "modules apart (norms, up-projections, SwiGLUs, MoE blocks; the simulator prices it); plan "
                         "with --recompute full, selective or none")
    run_warnings(opts, plan)          # after what no --force can run: a stale or foreign plan
    kind = input_kind(spec)
    check_data(opts.data, kind, plan.global_batch_size, opts.synthetic_size)
    return plan, spec, kind


def run_warnings(opts: RunOptions, plan) -> list[str]:
    """What would make the run not the one the plan predicts, each in one line.  Refused (an
    InputError) unless ``--force``, then returned as warnings:
    - a model.yaml changed since the plan was made (parsim.plan.model_changed): the split, the
      batch and the prediction were computed for the old content;
    - a plan made for another kind of cluster than this machine's (groups.cluster_mismatch): an
      ascend910:1x8 plan started here would run 8 gloo ranks on this CPU, and its prediction is
      not this machine's.
    Always a warning: --steps not above --warmup (no step is timed, so there is no step time)."""
    from parsim.plan import model_changed

    found = [why for why in (model_changed(plan, opts.plan),
                             groups.cluster_mismatch(plan.cluster, groups.detect_device(0)[1], opts.plan)) if why]
    if found and not opts.force:
        raise InputError(f"{found[0]}, or pass --force to run it anyway")
    warnings = [f"{why} (running it anyway: --force)" for why in found]
    if opts.steps <= opts.warmup and not opts.dry_run:
        warnings.append(f"--steps {opts.steps} is not above --warmup {opts.warmup}: every step is a warm-up step, so "
                        f"no step time is measured (step_time_s: null); use --steps {opts.warmup + 1} or more")
    return warnings


def check_trainable(spec) -> None:
    """The built-in resnet50 and gpt, ``module:`` models fed CIFAR-shaped images, and language
    models on synthetic tokens: ``hf:`` and ``module:`` models taking token ids [T] (data.input_kind)."""
    if spec.source.kind == "builtin" and spec.source.target in ("resnet50", "gpt"):
        return
    shape = tuple(spec.input.shape) if spec.input is not None else ()
    tokens = spec.source.kind in ("module", "hf") and len(shape) == 1 and spec.input.dtype.startswith("int")
    images = spec.source.kind == "module" and len(shape) == 3 and shape[0] == 3 and shape[1] == shape[2]
    if not (tokens or images):
        raise InputError(f"{spec.path}: model: the executor trains the built-in resnet50 and gpt, module: models "
                         f"taking CIFAR-shaped images [3, S, S], and hf: or module: models taking token ids [T] "
                         f"(got {spec.source.kind} with input {list(shape)})")


def train(opts: RunOptions, on_measured=None) -> int:
    """Run ``opts``'s plan on this rank; rank 0 writes measured.json and hands the measurement to
    ``on_measured`` (parsim.exec.measure.record_run: parsim.run passes the report's)."""
    plan, spec, kind = check_run(opts)
    cfg = plan.config

    env = groups.init(opts.timeout_s)
    try:
        return _train(opts, plan, spec, cfg, env, kind, on_measured)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _train(opts, plan, spec, cfg, env, kind, on_measured=None) -> int:
    beats = heartbeat.Beats(env.rank)     # the points every rank passes, for the launcher to name a hung one
    beats.beat("start-up")
    groups.preflight(env, cfg, opts.plan)
    precision.check_supported(plan.dtype, env.device, opts.plan)
    dtype = precision.TORCH_DTYPES[plan.dtype]
    mesh = groups.mesh_for(cfg, env.device)
    dp_mesh, fsdp_mesh = groups.data_parallel_meshes(cfg, mesh)
    dp_group, pp_group = dp_mesh.get_group(), mesh.get_group("pp")
    replica, pipe_rank, tp_rank, cp_rank = cfg.coordinates(env.rank)
    is_root = env.rank == 0
    if is_root:
        for line in run_warnings(opts, plan):
            print(f"parsim: warning: {line}", file=sys.stderr)
    b = cfg.microbatch_size(plan.global_batch_size)
    per_replica = b * cfg.microbatches
    if is_root and b < BN_WARN_BELOW and kind[0] == "image":
        print(f"parsim: warning: BatchNorm normalises over each micro-batch of {b} samples (not the global batch "
              f"of {plan.global_batch_size}); below {BN_WARN_BELOW} its statistics are noisy. Use fewer micro-batches "
              "or a larger batch.", file=sys.stderr)

    units = build_units(spec, plan, opts.seed, opts.plan)
    stage_ids = local_stages(cfg, pipe_rank)
    fmt = memory_format(spec)
    modules = [stage_module(units, cfg, s, fmt).to(env.device, dtype) for s in stage_ids]
    holders = tied_holders(units)
    partial_grads: list = []          # sequence-parallel norms and positions: summed over the tp group
    if cfg.tp > 1 and cfg.tp_layout in op_parallel.LAYOUTS:          # per-operator DTensor plans
        partial_grads += op_parallel.parallelize_stages(modules, stage_ids, units, spec, plan, mesh["tp"], dtype,
                                                        env.device)
    elif cfg.tp > 1 and spec.source.kind == "hf" and spec.graph.moe:  # experts beside tp (MoE Parallel Folding)
        for m in modules:
            partial_grads += folding.parallelize(m, mesh["tp"])
    elif cfg.tp > 1:
        for m in modules:
            partial_grads += tensor_parallel.parallelize(m, mesh["tp"], cfg.tp_layout == "megatron-sp")
    del units                         # the other stages' units: the per-operator plans probe through them
    if cfg.recompute is Recompute.FULL:
        names = recomputed_children(cfg, spec.graph.names)
        for m in modules:
            recompute_units(m, names)
    elif cfg.recompute is Recompute.SELECTIVE:
        for m in modules:
            recompute_attention(m)
    ring = None
    if cfg.cp > 1:
        ring = context_parallel.Ring(cfg.cp_group(replica, pipe_rank, tp_rank), env.rank, mesh.get_group("cp"))
        for m in modules:
            context_parallel.parallelize(m, ring, kind[1], cfg.cp_mode)   # kind: ("tokens", seq_len, vocab)
    exchanges, expert_params = None, frozenset()
    if cfg.ep > 1:                    # each rank keeps E/ep experts per MoE layer; tokens travel by all-to-all
        ep_group, ep_rank, expert_dp_group = expert_parallel.ep_groups(cfg, env.rank)
        exchanges = expert_parallel.Exchanges(ep_group, cfg.ep, ep_rank)
        expert_params = frozenset(p for m in modules for p in expert_parallel.parallelize(m, exchanges))
    first, last = 0 in stage_ids, cfg.stages - 1 in stage_ids
    if cfg.zero >= 2:                 # FSDP2's units; it reduce-scatters and gathers itself (parsim.exec.fsdp)
        for m in modules:
            fsdp.shard_stage(m, fsdp_mesh, cfg.zero)
    # gradients averaged over the dp x cp ranks holding the same parameters (ParallelConfig.grad_group)
    grad_group = dp_group if cfg.cp == 1 else groups.grad_group(cfg, pipe_rank, tp_rank)
    # HSDP: ZeRO's buckets over the shard group, each slice then over its replicas (grad_sync)
    replicas = None
    if cfg.hybrid_sharded and cfg.zero == 1:
        grad_group, replicas = groups.shard_groups(cfg, env.rank)
    tied = TiedGrads(holders, cfg, stage_ids, modules, (replica, pipe_rank, tp_rank), opts.plan)
    # dense parameters over grad_group; with ep > 1 the experts apart, over their expert-data-parallel group
    grad_syncs = ([GradBuckets(m, grad_group, cfg.shard_ranks, cfg.microbatches,
                               cfg.zero, frozenset(p for t, p, _ in tied.reductions if t == s),
                               keep=(lambda p: p not in expert_params) if expert_params else None,
                               mean_over=cfg.grad_ranks, replicas=replicas, overlap=cfg.overlap_grad_reduce)
                   for s, m in zip(stage_ids, modules)]
                  if cfg.grad_ranks > 1 and cfg.zero < 2 else [])
    expert_grads = (expert_parallel.ExpertGrads(modules, expert_dp_group, cfg.expert_dp, cfg.grad_ranks,
                                                cfg.microbatches, cfg.overlap_grad_reduce) if cfg.ep > 1 else None)
    expert_buckets: list = []         # ep: the last step's expert-gradient all-reduces, bytes each, per local stage
    ep_bytes: dict = {}               # ep: the last step's all-to-alls (Exchanges.summary)
    tied_bytes: dict[int, int] = {}   # the last step's tied-gradient all-reduce, bytes, per local stage
    # ZeRO-1: each rank's optimizer holds its slices of the buckets only (GradBuckets.shard_params);
    # ZeRO 2-3: its shards of FSDP2's sharded parameters
    held = [sync.shard_params() for sync in grad_syncs] if cfg.zero == 1 else [m.parameters() for m in modules]
    optimizers = [precision.make_optimizer(plan.optimizer, params) for params in held]
    sharded: list = []                # ZeRO: the last step's (collective, bytes) per local stage
    scaler = precision.DynamicLossScaler() if plan.dtype == "fp16" else None
    loss_scale = [1.0]                # this step's; fp16 multiplies the loss by it before the backward

    vocab_group = vocab_parallel.loss_group(modules)     # the logits split by vocabulary: taken where they lie

    def scaled_loss(logits, target):
        return loss_fn(logits, target, vocab_group) * loss_scale[0]

    loader = sampler = dataset = None
    if first or last:
        loader, sampler, dataset = make_loader(opts.data, per_replica, cfg.dp, replica, kind, opts.seed,
                                               opts.synthetic_size)
    steps_per_epoch = (len(loader) if loader is not None else 0)
    counts = torch.tensor([steps_per_epoch], device=env.device)
    dist.all_reduce(counts, op=dist.ReduceOp.MAX)
    steps_per_epoch = int(counts.item())

    rec = Recorder(pipe_rank)
    sched, stages = None, []
    if cfg.pp > 1:
        from torch.distributed.pipelining import PipelineStage

        stages = [PipelineStage(m, s, cfg.stages, env.device, group=pp_group) for s, m in zip(stage_ids, modules)]
        for st in stages:
            instrument(st, rec)
        cls = schedule_class(cfg.schedule)
        sched = cls(stages if cfg.schedule in MULTI_STAGE else stages[0], cfg.microbatches,
                    loss_fn=scaled_loss, scale_grads=False)
        if cfg.schedule in MULTI_STAGE:    # these run their pipeline_order as data; check it is the plan's
            check_order_matches(sched, build_schedule(cfg.schedule, cfg.pp, cfg.microbatches, cfg.chunks), pipe_rank)

    start = saved = 0                     # saved: the step of the newest checkpoint on disk (0: none)
    if opts.resume:
        beats.beat("the resume check")
        state = _resume_state(opts, env)
        for m, sd in zip(modules, state["stages"]):
            tensor_parallel.load_whole(m, expert_parallel.local_state(m, sd))   # whole tensors in, this rank's shards kept
        for o, sd in zip(optimizers, state["optimizers"]):
            o.load_state_dict(sd)
        if scaler is not None:
            scaler.scale = loss_scale[0] = optimizers[0].scale
        start = saved = state["step"]
    if opts.dry_run:
        dist.barrier()
        if is_root:
            print(f"dry run: {opts.plan} OK: {env.world_size} ranks ({env.backend}), dp={cfg.dp} pp={cfg.pp} tp={cfg.tp} "
                  f"cp={cfg.cp} " + (f"ep={cfg.ep} " if cfg.ep > 1 else "") +
                  f"m={cfg.microbatches} {cfg.schedule}; stages per rank built; data "
                  f"{'synthetic' if not opts.data else opts.data}, {steps_per_epoch} steps per epoch")
        return 0

    dp_buckets: list = []             # the last step's gradient all-reduces, bytes each, per local stage
    ring_bytes: list = []             # cp: the last step's bytes sent around the ring

    def run_step(x, y) -> list:
        if ring is not None:
            ring.sent_bytes = 0
        if exchanges is not None:
            exchanges.reset()
        for o in optimizers:
            o.zero_grad(set_to_none=False)   # gradients persist between steps, counted as static memory
        tensor_parallel.expect_partial(partial_grads)
        losses: list = []
        if cfg.pp == 1:
            model = modules[0]
            for i, (xi, yi) in enumerate(zip(x.chunk(cfg.microbatches), y.chunk(cfg.microbatches))):
                fsdp.before_microbatch(model, cfg.zero, i, cfg.microbatches, cfg.no_sync)
                with rec.action(Action(0, Kind.F, i)):
                    loss = scaled_loss(model(xi), yi)
                with rec.action(Action(0, Kind.B, i)):
                    loss.backward()
                losses.append(loss.detach())
        # return_outputs=False: the last stage keeps no micro-batch's output after its backward (torch
        # keeps them all in output_chunks for step()'s merged result otherwise: every micro-batch's
        # logits until the step ends, which no training loop reads and Megatron does not hold)
        elif first:
            sched.step(x, return_outputs=False)
        elif last:
            sched.step(target=y, losses=losses, return_outputs=False)
        else:
            sched.step(return_outputs=False)
        losses = [loss / loss_scale[0] for loss in losses]
        # the dp mean before the tp sum of partial gradients: both are linear, so they commute
        issued = [sync.finish() for sync in grad_syncs]
        if issued:
            dp_buckets[:] = issued
        if expert_grads is not None:
            expert_buckets[:] = expert_grads.finish()
            ep_bytes.update(exchanges.summary())
        # the tp sum of partial gradients, then the tied weights' sum over stages, as Megatron's
        # finalize_model_grads orders them: a copy whose gradient is a partial sum (the GPT's head
        # under the searched layout) is completed over its group before its stages add theirs
        tensor_parallel.reduce_partial_grads(partial_grads, mesh.get_group("tp"))
        for s in tied.stages:             # after the dp buckets, as Megatron's finalize_model_grads
            with rec.action(Action(s, Kind.REDUCE_TIED), stream="dp"):
                tied_bytes[s] = tied.reduce(s)
        take = True
        if scaler is not None:            # every rank skips an overflowed step together
            finite = torch.tensor([float(all(o.grads_finite() for o in optimizers))], device=env.device)
            dist.all_reduce(finite, op=dist.ReduceOp.MIN)
            take = scaler.update(bool(finite.item()))
        for s, o in zip(stage_ids, optimizers):
            o.scale = loss_scale[0]
            with rec.action(Action(s, Kind.OPTIMIZER)):
                if take:
                    o.step()
        if cfg.zero == 1:                 # the updated slices to every replica, after the optimizer
            for sync in grad_syncs:
                sync.gather_params()
            sharded[:] = [sync.take_issued() for sync in grad_syncs]
        if scaler is not None:
            loss_scale[0] = scaler.scale
        if ring is not None:
            ring_bytes[:] = [ring.sent_bytes]
        return losses

    step_times, losses_by_step, actions = [], [], []
    peak_bytes = None
    peak_parts: dict = {}
    reserved_bytes = None                  # CUDA only: the caching allocator's pool at its peak
    collectives: dict = {}
    it = None
    bar = progress_bar(opts.steps, "training", rank=env.rank, initial=start, unit="step")
    for step in range(start, opts.steps):
        n = step + 1                      # the step's number, from 1, as the log counts
        epoch, pos = divmod(step, steps_per_epoch)
        if loader is not None and (pos == 0 or it is None):
            sampler.set_epoch(epoch)
            dataset.set_epoch(epoch)
            it = iter(loader)
            for _ in range(pos):          # resume mid-epoch at the same batch
                next(it)
        x, y = (None, None)
        if loader is not None:
            x, y = next(it)
            x, y = model_input(x.to(env.device), fmt, dtype), y.to(env.device)
            if ring is not None:          # this rank's zigzag tokens of every sequence, and their targets
                x, y = (context_parallel.split_sequence(t, cfg.cp, ring.rank) for t in (x, y))
        if faults.injected("hang", n, env.rank):          # test hook: a rank that stops answering
            time.sleep(10 ** 6)
        if faults.injected("nan", n, env.rank):           # test hook: a step whose loss is NaN
            with torch.no_grad():
                for p in (p for m in modules for p in m.parameters()):
                    tensor_parallel.local(p).fill_(float("nan"))
        beats.beat(f"step {n}'s barrier")
        # memory is measured on the last warm-up step, and only from the third step on: step 1
        # builds the optimizer state
        profile_memory = step == start + opts.warmup - 1 and opts.warmup >= 3
        if env.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(env.device)
        if profile_memory and env.device.type == "cpu":
            held = static_bytes(modules, optimizers, stages)
            # the batch this rank read (first stage: images, last: labels) is resident during the step
            # but allocated before it, so the profiler does not see it
            held["inputs_bytes"] = sum(t.untyped_storage().nbytes() for t in (x, y) if t is not None)
            static = sum(held.values())
            holder = {}
            peak_step = profiled_peak_bytes(lambda: holder.setdefault("l", run_step(x, y)))
            losses = holder["l"]
            peak_bytes = static + peak_step
            peak_parts = {"static_bytes": static, "step_peak_bytes": peak_step, **held}
            dist.barrier()
            t = float("nan")
        elif step == start and (cfg.tp > 1 or cfg.zero >= 2):
            dist.barrier()                 # the first step counts the tp and FSDP collectives (untimed)
            across = fsdp_mesh.get_group("dp_replicate") if cfg.hybrid_sharded else None   # HSDP's all-reduces
            with tensor_parallel.CollectiveCounter() as counter, \
                    fsdp.ShardedCollectives(across, lambda: rec.stage) as issued:
                losses = run_step(x, y)
            collectives = dict(counter.counts) if cfg.tp > 1 else {}
            if cfg.zero >= 2:              # each local stage's own (an interleaved pipeline holds several)
                sharded[:] = issued.take(stage_ids)
            t = float("nan")
        else:
            dist.barrier()                 # every rank starts the step together, as the simulator does
            groups.synchronize(env.device)   # a GPU's step is timed from an idle device to an idle device
            rec.start()
            t0 = time.perf_counter()
            losses = run_step(x, y)
            groups.synchronize(env.device)
            t = time.perf_counter() - t0
            if step >= start + opts.warmup:
                actions = list(rec.records)
        if env.device.type == "cuda":
            peak_bytes = torch.cuda.max_memory_allocated(env.device)
            reserved_bytes = torch.cuda.max_memory_reserved(env.device)
        step_times.append(t)
        counts_loss = last and tp_rank == 0          # one rank of each tensor-parallel group reports
        # each cp rank's loss is the mean over its tokens: the step's is their mean
        mine = float(sum(l.item() for l in losses)) / cfg.grad_ranks if counts_loss else 0.0
        # the step's loss, then per rank 1 where its loss is NaN and 2 where it is infinite
        total = torch.zeros(1 + env.world_size, device=env.device)
        total[0] = mine
        total[1 + env.rank] = 0.0 if math.isfinite(mine) else 1.0 if math.isnan(mine) else 2.0
        beats.beat(f"step {n}'s loss all-reduce")
        dist.all_reduce(total)            # the loss travels from the last stage to rank 0
        losses_by_step.append(total[0].item())
        if is_root:                       # with --json, stdout carries the JSON alone
            line = f"epoch: {epoch + 1} step: {pos + 1}, loss is {total[0].item():.7f}"
            print_above(line, sys.stderr if opts.json else sys.stdout)
        bar.update()
        check_loss(n, total[1:].tolist(), cfg, saved)    # every rank stops together, before checkpointing it
        if opts.checkpoint_every and n % opts.checkpoint_every == 0:
            beats.beat(f"step {n}'s checkpoint")
            saved = _save(opts, env, modules, optimizers, n)
    bar.close()
    beats.beat("the final checkpoint")
    if saved != opts.steps:
        _save(opts, env, modules, optimizers, opts.steps)
    dist.barrier()                         # every rank's checkpoint is on disk
    record_run(opts, plan, cfg, env, (pipe_rank, replica, tp_rank, cp_rank), step_times, losses_by_step, actions,
               (peak_bytes, peak_parts, reserved_bytes), b, start, kind, collectives,
               {"grad_buckets_bytes": dict(zip(stage_ids, dp_buckets)), "tied_grad_bytes": tied_bytes,
                "sharded_collectives": dict(zip(stage_ids, sharded)),
                "cp_ring_bytes": dict(zip(stage_ids, ring_bytes)), "tp_collectives": collectives,
                "ep_all_to_all": ep_bytes or None, "expert_grad_buckets_bytes": dict(zip(stage_ids, expert_buckets))},
               on_measured)
    return 0


def check_loss(step: int, flags: list[float], cfg, saved: int) -> None:
    """Stop on a step whose loss is not finite, naming the step and the rank that computed it
    (``flags``: per rank, 1 for NaN, 2 for infinite).  Every rank has the flags from the step's
    all-reduce, so every rank stops here, before the step is checkpointed."""
    bad = [(r, int(f)) for r, f in enumerate(flags) if f]
    if not bad:
        return
    r, f = bad[0]
    replica, pipe_rank = groups.coordinates(cfg, r)
    others = f" (and on rank{'s' if len(bad) > 2 else ''} {', '.join(str(b) for b, _ in bad[1:])})" if bad[1:] else ""
    kept = (f"the checkpoint of step {saved} is the last one, --resume continues from it" if saved else
            "no checkpoint was written before it (--checkpoint-every N keeps one every N steps)")
    raise RunError(f"step {step}: the loss is {'nan' if f == 1 else 'inf'} on rank {r}{others}, the last pipeline "
                   f"stage (pipeline rank {pipe_rank}) of replica {replica}; the run stopped before saving the step: "
                   f"{kept}")


def _resume_state(opts, env) -> dict:
    """This rank's checkpoint of the newest step that verifies on every rank; rank 0 names, in one
    line, any newer checkpoint passed over (corrupt, truncated, missing)."""
    scans = [None] * env.world_size
    dist.all_gather_object(scans, checkpoint.scan(opts.out, env.rank))
    step, passed_over = checkpoint.agree(scans, opts.out)
    if passed_over and env.rank == 0:
        print(f"parsim: warning: {passed_over}", file=sys.stderr)
    state = checkpoint.load(opts.out, env.rank, step)
    checkpoint.drop_after(opts.out, env.rank, step)
    return state


def _save(opts, env, modules, optimizers, step) -> int:
    """Every rank writes its stages; tensor-parallel ranks write whole tensors (gathered, so every
    rank of a group holds the model its replica trains) and their local optimizer state."""
    stages = [expert_parallel.whole_state(m, {k: tensor_parallel.full(v) for k, v in m.state_dict().items()})
              for m in modules]
    opt_states = [_local_state(o.state_dict()) for o in optimizers]
    checkpoint.save(opts.out, env.rank, step, {"step": step, "stages": stages, "optimizers": opt_states})
    return step


def _local_state(state):
    if isinstance(state, dict):
        return {k: _local_state(v) for k, v in state.items()}
    if isinstance(state, list):
        return [_local_state(v) for v in state]
    return tensor_parallel.local(state) if torch.is_tensor(state) else state
