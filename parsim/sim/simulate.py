"""simulate(): price a parallel configuration with the cost model and run it through the engine."""

from __future__ import annotations

from collections import defaultdict

from parsim.cost.comm import (DDP_BUCKET_BYTES, REDUCE_SCATTER_BY_ALL_REDUCE, collective_time_s, ddp_buckets,
                              first_bucket_bytes, fsdp_unit_s, fsdp_units, library_algorithms, p2p_time_s,
                              prefetched_gather_s, serial_group, shard_padded_bytes)
from parsim.cost.compute import AnalyticalCompute, ComputeModel, FsdpSync, GradSync, check_profile_ep
from parsim.cost.context import allgather_exposed_s, ring_exposed_s, ring_sent_bytes
from parsim.cost.experts import a2a_bytes, a2a_overlap_cost, check_ep, expert_param_count
from parsim.cost.input import input_cost, loader_ready_s
from parsim.cost.memory import (MemoryBreakdown, backward_workspace_bytes, bytes_per_param, fsdp_gathered_param_bytes,
                                fsdp_held_grad_bytes, optimizer_bytes_moved_per_param, torch_pipeline_stage)
from parsim.errors import InfeasibleError
from parsim.hardware.cluster import Cluster
from parsim.hardware.interaction import interaction_at
from parsim.model.graph import DTYPE_BYTES, LayerGraph
from parsim.model.spec import Training
from parsim.plan import CP_MODES, ParallelConfig
from parsim.refusals import fold_refusal, grad_reduce_refusal, no_sync_refusal, shard_refusal
from parsim.schedule.actions import Kind, whole_backward_in_w
from parsim.schedule.generators import check_feasible
from parsim.sim import engine, steady
from parsim.sim.memory import rank_memory, stage_activation_bytes
from parsim.sim.overlap import check_tp_overlap, layer_time_s
from parsim.shard.prepare import auto_memory_bytes, per_device_graph
from parsim.sim.estimate import Estimate, RankEstimate
from parsim.sim.expert_grads import FsdpExperts, ddp_expert_buckets
from parsim.sim.prices import Prices


def check_fold(graph: LayerGraph, cfg: ParallelConfig) -> None:
    """InfeasibleError, one line, where cfg's ep and etp do not fold into its ranks
    (parsim.refusals.fold_refusal) or do not shard the model's experts (parsim.cost.experts.check_ep)."""
    why = fold_refusal(cfg)
    if why:
        raise InfeasibleError(f"{why[0]}={why[1]}")
    check_ep(graph, cfg.ep, cfg.etp)


def check_config(graph: LayerGraph, training: Training, cluster: Cluster, cfg: ParallelConfig) -> int:
    """Raise InfeasibleError saying what to change; returns the micro-batch size."""
    if cfg.world_size > cluster.world_size:
        cp = f" x cp={cfg.cp}" if cfg.cp > 1 else ""
        raise InfeasibleError(f"dp={cfg.dp} x pp={cfg.pp}{cp} x tp={cfg.tp} = {cfg.world_size} ranks, but the cluster "
                              f"has {cluster.world_size} devices; lower dp{', pp or cp' if cp else ' or pp'}")
    b = cfg.microbatch_size(training.global_batch_size)
    if b < graph.min_microbatch:
        raise InfeasibleError(f"micro-batches of {b} sample(s): {graph.min_microbatch_reason}; use fewer "
                              f"micro-batches (at most {training.global_batch_size // (cfg.dp * graph.min_microbatch)})")
    if cfg.zero and cfg.grad_ranks == 1:
        raise InfeasibleError(f"zero={cfg.zero} shards over the data-parallel (x context-parallel) ranks, but "
                              "dp=cp=1 leaves nothing to shard; use zero 0 or dp > 1")
    why = shard_refusal(cfg) or grad_reduce_refusal(cfg) or no_sync_refusal(cfg)
    if why:
        raise InfeasibleError(f"{why[0]}={why[1]}")
    if cfg.dp_shard and graph.moe and cfg.experts_apart:
        raise InfeasibleError(f"dp_shard={cfg.dp_shard}: the routed experts shard over their own expert-data-parallel "
                              "group, which parsim does not price beside hybrid sharding; drop dp_shard")
    if cfg.fsdp_beside_pipeline:
        # FSDP beside a pipeline is priced as torchtitan runs it: FSDP2 stages driven by
        # torch.distributed.pipelining, the parameters gathered at the step's first forward and kept
        # (torchtitan's reshard_after_forward policy "default": False when pp is enabled, "to avoid
        # per-microbatch all-gathers"), the gradients reduced once after the stage's last backward
        # (ParallelConfig.grads_reduced_once).  DeepSpeed's pipeline engine refuses ZeRO-2/3
        # (deepspeed/runtime/pipe/engine.py), and parsim.export refuses it for each framework but torchtitan.
        if cfg.zero == 3:
            raise InfeasibleError(f"zero=3 with pp={cfg.pp}: beside a pipeline parsim prices FSDP as torchtitan runs "
                                  "it, the gathered parameters kept through the step (reshard_after_forward off "
                                  "under pp), which is zero 2; use zero 2, zero 1 or pp=1")
        if not cfg.overlap_grad_reduce:
            raise InfeasibleError(f"overlap_grad_reduce=false with zero 2 and pp={cfg.pp}: beside a pipeline FSDP "
                                  "reduce-scatters once after each stage's last backward, on its own stream; leave "
                                  "overlap_grad_reduce true")
    check_tp_overlap(cfg, cluster)
    check_fold(graph, cfg)
    if cfg.ep_overlap and cfg.ep == 1:
        raise InfeasibleError("ep_overlap hides the all-to-alls of expert parallelism; with ep=1 there are none: "
                              "use ep > 1 or drop --ep-overlap")
    if cfg.ep_overlap:
        a2a_overlap_cost(cluster)
    if cfg.cp_mode not in CP_MODES or (cfg.cp_mode != "ring" and cfg.cp == 1):
        raise InfeasibleError(f"cp_mode {cfg.cp_mode!r} with cp={cfg.cp}: choose one of {', '.join(CP_MODES)}, "
                              "and allgather only with cp > 1")
    if len(cfg.bounds) != cfg.stages + 1 or cfg.bounds[0] != 0 or cfg.bounds[-1] != len(graph) \
            or any(x >= y for x, y in zip(cfg.bounds, cfg.bounds[1:])):
        even = ",".join(str(round(i * len(graph) / cfg.stages)) for i in range(cfg.stages + 1))
        raise InfeasibleError(f"split {list(cfg.bounds)} is not {cfg.stages} non-empty stage(s) over {len(graph)} "
                              f"layers: give {cfg.stages + 1} rising boundaries from 0 to {len(graph)}, e.g. "
                              f"--split {even}, or --split balanced")
    return b


def simulate(graph: LayerGraph, training: Training, cluster: Cluster, cfg: ParallelConfig,
             compute: ComputeModel | None = None, *, algorithm: str = "auto", keep_timeline: bool = True,
             strategies: dict | None = None, prices: Prices | None = None) -> Estimate:
    """Predict one training step of ``cfg``; see parsim.sim.engine for the execution semantics.
    ``graph`` is the model's (or already its per-device graph for cfg); ``strategies`` are the
    model.yaml's ``shard:`` strategies, used when cfg.tp_layout is "model"; ``prices``: the run's
    pricing context (parsim.sim.prices: the planner's, on ``cluster`` resolved for the run's dtype),
    else this call's own."""
    library_algorithms(cluster, algorithm)          # an algorithm the library lacks: InputError
    if prices is None:                              # its collectives' fit and overlap in the run's dtype
        prices = Prices(cluster.for_dtype(training.dtype))
    cluster = prices.cluster
    if graph.ep == 1:                               # the model's graph: ep's constraints before its per-device one
        check_fold(graph, cfg)
    graph = per_device_graph(graph, cfg.tp, cfg.tp_layout, cfg.recompute, strategies, cluster, training,
                             max(1, training.global_batch_size // (cfg.dp * cfg.microbatches)),
                             auto_memory_bytes(cluster, cfg.pp), cp=cfg.cp, ep=cfg.ep, etp=cfg.etp, memo=prices.shard,
                             recompute_only=cfg.recomputed_layers(len(graph)))
    return _simulate(graph, training, prices, cfg, compute, algorithm, keep_timeline)


def backward_intensity(graph, layer_indices, b: int) -> float:
    """FLOPs per byte of a micro-batch's backward over ``layer_indices`` (FLOPs = 2 x MACs): its
    FLOPs over the bytes it moves as the graph counts them, the memory-bound operators' traffic
    and the saved activations it reads (per sample, times b) plus the parameters read and the
    gradients written once each.  A proxy for where the backward sits between the synthetic loads
    profile-comm measured (parsim.profile.overlap: a GEMM, a streaming add; parsim.hardware.interaction)."""
    layers = [graph.layers[i] for i in layer_indices]
    flops = b * sum(layer.bwd_flops for layer in layers)
    moved = b * sum(layer.bwd_mem_bytes + layer.saved_bytes for layer in layers) + \
        2 * sum(layer.param_bytes for layer in layers)
    return flops / moved if moved > 0 else 1.0


def grad_sync_overlap(sync: GradSync, cluster: Cluster, group, algorithm: str) -> tuple[float, float]:
    """DIAGNOSTIC, not used for pricing: the (overlap, contention) that a profile's measurement of
    the gradient buckets under the model's own backward (parsim.profile.grad_sync) implies, its
    buckets priced over ``group`` as this simulator prices a bucket (GradSync.terms), to hold
    beside what the interaction measured on synthetic kernels gives."""
    priced = sum(collective_time_s(cluster, group, x, "all_reduce", algorithm) for x in sync.bucket_bytes)
    return sync.terms(priced)


def fsdp_sync_overlap(sync: FsdpSync, cluster: Cluster, group, algorithm: str) -> tuple[float, float]:
    """DIAGNOSTIC, not used for pricing: the (overlap, contention) of ZeRO-2/3's reduce-scatters
    that a measurement under the model's own backward implies (parsim.profile.grad_sync.
    measure_fsdp_sync), beside their FSDP2 host time (Collectives.fsdp_host_s; FsdpSync.terms)."""
    colls = cluster.profile.collectives
    host = sum(colls.fsdp_host_s("reduce_scatter", x) for x in sync.reduce_scatter_bytes)
    priced = sum(collective_time_s(cluster, group, x, "reduce_scatter", algorithm) for x in sync.reduce_scatter_bytes)
    return sync.terms(host, priced)


def tied_reductions(graph, cfg, held: list[set[int]]) -> list[tuple[str, tuple[int, ...], int]]:
    """(group, stages, parameters per device) of each tied weight whose copies sit on more than
    one pipeline rank: the owner's stage and the stages of the layers holding a copy
    (LayerGraph.tied_copies).  Its gradient is summed over them once per step (Megatron's
    embedding group)."""
    stage_of = cfg.layer_stages()
    groups: dict[str, tuple[list[int], int]] = {}
    for i in range(len(graph.layers)):
        for owner, count in graph.tied_copies(i, held[stage_of[i] % cfg.pp]):
            stages, _ = groups.setdefault(owner, ([stage_of[graph.index(owner)]], count))
            if count and stage_of[i] not in stages:
                stages.append(stage_of[i])
    out = [(owner, tuple(stages), count) for owner, (stages, count) in groups.items() if len(stages) > 1]
    in_two = [s for s in range(cfg.stages) if sum(s in st for _, st, _ in out) > 1]
    if in_two:       # the engine keeps one REDUCE_TIED per stage; the zoo's models tie one weight
        raise ValueError(f"stage {in_two[0]} holds copies of two tied weights; parsim prices one per stage")
    return out


def tied_layers(graph, cfg, held: list[set[int]], tied) -> dict[int, int]:
    """Layer -> parameters of the weight tied over pipeline ranks it holds (``tied`` from
    tied_reductions): the owner's layer and each layer holding a copy."""
    stage_of = cfg.layer_stages()
    out = {}
    for owner, stages, count in tied:
        for i in range(len(graph.layers)):
            copies = graph.tied_copies(i, held[stage_of[i] % cfg.pp])
            if stage_of[i] in stages and (i == graph.index(owner) or any(o == owner for o, _ in copies)):
                out[i] = count
    return out


def idle_by_cause(tl: engine.Timeline) -> tuple[list[float], list[float]]:
    """Per rank, (pipeline bubble, waiting on others) in seconds, as RankEstimate defines them.

    The step ends at T, when the last rank does; the pipeline drains at D, when the last F, B, I
    or W on any rank does.  A rank ending at e idles in RECVs (tl.idle_s, all before its last
    compute, so before D), then from e until T: the part before D is the cool-down, bubble;
    the rest, T - max(e, D), is waiting on others.  After its last compute a rank reduces
    gradients and steps the optimizer, which the engine counts as exposed or busy; the one idle
    there is a REDUCE_TIED waiting for its partners (tl.collective_waits), split at D the same
    way: the part before the drain is bubble, the rest waiting on others."""
    T, D = max(tl.end_s), max(tl.last_compute_end_s)
    bubble, sync = [], []
    for idle, e, waits in zip(tl.idle_s, tl.end_s, tl.collective_waits):
        before = sum(max(0.0, min(b, D) - a) for a, b in waits)
        bubble.append(idle + max(0.0, D - e) + before)
        sync.append(T - max(e, D) + sum(b - a for a, b in waits) - before)
    return bubble, sync


def _reduction(nbytes: float, n: int, replicas: int) -> list[tuple[str, float]]:
    """The collectives ZeRO's reduction of one gradient buffer issues (Estimate.sharded_collectives):
    its reduce-scatter over the n ranks of a shard group, and under HSDP the all-reduce of the
    shard over its replicas."""
    return [("reduce_scatter", nbytes)] + ([("all_reduce", nbytes / n)] if replicas > 1 else [])


def _simulate(graph, training, prices, cfg, compute, algorithm, keep_timeline) -> Estimate:
    cluster = prices.cluster
    b = check_config(graph, training, cluster, cfg)
    compute = compute or AnalyticalCompute.for_training(cluster.device, training)
    check_profile_ep(compute, cfg.ep)
    check_feasible(cfg.schedule, cfg.pp, cfg.microbatches, cfg.chunks)
    # the schedule's kind of backward, read off a short one (a long step is not built: parsim.sim.steady)
    split = prices.schedule(cfg.schedule, cfg.pp, cfg.pp, cfg.chunks).split_backward
    if cfg.zero == 3 and split:
        raise InfeasibleError(f"zero=3 with {cfg.schedule}'s split backward is not priced (the gathered parameters "
                              "would be held from I to W); use zero <= 2 or another schedule")
    # gradients over the dp x cp ranks holding the same parameters; ZeRO's shards over n of them
    # (all, or HSDP's shard group: ParallelConfig.dp_shard), in R = dp / n groups that replicate
    # one another
    zero, dp, m = cfg.zero, cfg.grad_ranks, cfg.microbatches
    n, R = cfg.shard_ranks, cfg.shard_replicas        # dp and 1 without dp_shard (check_config: it needs zero)
    cp, replicas = cfg.cp, cfg.dp * cfg.cp * cfg.tp       # ranks per pipeline rank
    S, layers = cfg.stages, graph.layers
    grank = [cfg.global_rank(0, r) for r in range(cfg.pp)]          # replica 0's ranks
    per_param = bytes_per_param(training.dtype, training.optimizer, training.grad_reduce_dtype)
    opt_moved = optimizer_bytes_moved_per_param(training.dtype, training.optimizer)

    # layers each pipeline rank holds, for the copies of tied weights (LayerGraph.held_param_count)
    held = [cfg.rank_layers(r) for r in range(cfg.pp)]
    tied = tied_reductions(graph, cfg, held)
    tied_count = tied_layers(graph, cfg, held, tied)
    compute_s: dict = {}
    transfer_s: dict = {}
    bucket: dict = {}
    buckets_per_stage: dict[int, int] = {}
    bucket_bytes: dict[int, tuple[float, ...]] = {}
    comm_bytes: dict[str, float] = defaultdict(float)
    # ZeRO: per stage, each collective a rank issues per step, (op, bytes); after-optimizer and
    # per-(stage, kind) gathers; per stage, the gathered parameters' working set (ZeRO-3)
    sharded: dict[int, list[tuple[str, float]]] = defaultdict(list)
    after_opt: dict[int, float] = {}
    gather_s: dict = {}
    hooks_s: dict = {}                             # ZeRO 2-3: FSDP2's per-unit host time, every micro-batch
    reduce_buffer_bytes: dict[int, dict] = {}      # ZeRO 2-3: per layer, the unsharded gradients live in its backward
    gathered_bytes: dict[int, dict] = {}           # ZeRO-3: per layer, the parameters gathered in its backward
    width = per_param["grads"]          # bytes per gradient element, as reduced (Training.grad_reduce_dtype)
    # the parameters' bytes over the gradients' (gathers move parameters: 1/2 under fp32 reduction)
    param_share = per_param["params"] / per_param["grads"]
    overlap = cluster.profile.collectives.overlap
    kinds = ("F", "I", "W") if split else ("F", "B")
    ring_bytes: dict[int, float] = {}                 # cp: per stage, bytes one rank sends around its ring per step
    # ep: per stage, one rank's all-to-all seconds (exposed) and the bytes its all-to-alls scatter, per step
    ep_comm_s: dict[int, float] = {}
    a2a_s: dict = {}                                  # ep: per (stage, kind), the all-to-alls inside the action
    ep_bytes: dict[int, float] = {}
    expert_buckets: dict[int, tuple[float, ...]] = {}    # ep: per stage, expert gradient buckets (expert_dp group)
    for s in range(S):
        idx = cfg.stage_layers(s)
        # torch's first stage runs no I and its whole backward as its W: priced as a 1F1B B, then
        # placed in W (parsim.schedule.actions.whole_backward_in_w)
        whole_w = whole_backward_in_w(s, split)
        stage_kinds = ("F", "B") if whole_w else kinds
        me, prev_rank, next_rank = grank[s % cfg.pp], grank[(s - 1) % cfg.pp], grank[(s + 1) % cfg.pp]
        per_layer = {k: prices.layer_times(compute, graph, k, b, me, cfg.tp_comm_overlap, layer_time_s, idx.start,
                                           idx.stop) for k in stage_kinds}
        if cp > 1 and cfg.cp_mode == "allgather":     # K, V all-gathered, dK, dV reduce-scattered: exposed
            ring = cfg.cp_group(0, s % cfg.pp)
            for k in stage_kinds:
                per_layer[k] = [t + allgather_exposed_s(layers[i], k, b, cp, cluster, ring)
                                for t, i in zip(per_layer[k], idx)]
            ring_bytes[s] = m * sum(ring_sent_bytes(layers[i], k, b, cp) for i in idx for k in stage_kinds)
            comm_bytes[prices.link_class(ring)] += ring_bytes[s] * replicas
        elif cp > 1:       # the KV ring of each attention layer, overlapped with its chunks (parsim.cost.context)
            ring = cfg.cp_group(0, s % cfg.pp)
            link = cluster.link_for(prices.link_class(ring))
            delay = cluster.profile.collectives.busy_sender_delay_s
            for k in stage_kinds:
                per_layer[k] = [t + ring_exposed_s(compute, layers[i], k, b, cp, link, overlap, delay)
                                for t, i in zip(per_layer[k], idx)]
            ring_bytes[s] = m * sum(ring_sent_bytes(layers[i], k, b, cp) for i in idx for k in stage_kinds)
            comm_bytes[prices.link_class(ring)] += ring_bytes[s] * replicas
        if cfg.ep > 1:      # the MoE layers' token all-to-alls over the ep group, exposed (parsim.cost.experts)
            group = prices.group(cfg, "ep", s % cfg.pp)
            # an expert-parallel profile's MoE layer times hold them already (parsim profile --ep)
            timed = getattr(compute, "includes_ep_comm_at", lambda _: False)(b)
            a2a = {k: [0.0 if timed else prices.a2a_s(graph, i, k, b, group, training.moe_dispatcher) for i in idx]
                   for k in stage_kinds}
            for k in stage_kinds:
                per_layer[k] = [t + x for t, x in zip(per_layer[k], a2a[k])]
                a2a_s[(s, Kind(k))] = sum(a2a[k])
            ep_comm_s[s] = m * sum(sum(v) for v in a2a.values())
            ep_bytes[s] = m * sum(a2a_bytes(layers[i], k, b, graph.dtype) for i in idx for k in stage_kinds)
            comm_bytes[prices.link_class(group)] += ep_bytes[s] * (cfg.ep - 1) / cfg.ep * replicas
        if whole_w:
            per_layer["W"], per_layer["I"] = per_layer.pop("B"), [0.0] * len(idx)
            if (s, Kind.B) in a2a_s:
                a2a_s[(s, Kind.W)], a2a_s[(s, Kind.I)] = a2a_s.pop((s, Kind.B)), 0.0
        for k in kinds:
            compute_s[(s, Kind(k))] = sum(per_layer[k])
        mine = held[s % cfg.pp]
        own = [layers[i].param_count + sum(n for _, n in graph.tied_copies(i, mine)) for i in idx]   # with copies
        params = sum(own)
        # ep: the routed experts a rank holds, their gradients and ZeRO shards over the expert_dp ranks
        expert_own = [expert_param_count(layers[i], graph) for i in idx]
        experts = sum(expert_own)
        # ZeRO >= 1: a rank steps its shard of the parameters (ZeRO Sec. 5.1)
        stepped = (params - experts) / n + experts / cfg.expert_dp if zero else params
        compute_s[(s, Kind.OPTIMIZER)] = compute.optimizer_time_s(stepped, opt_moved) + \
            sum(prices.tp_comm_s(layers[i], "grad", b, me) for i in idx)
        if s < S - 1:
            nbytes = layers[idx[-1]].output_bytes * b
            transfer_s[(s, Kind.SEND_F)] = p2p_time_s(cluster, me, next_rank, nbytes)
            comm_bytes[cluster.link_class(me, next_rank)] += nbytes * cfg.microbatches * replicas
        if s > 0:
            nbytes = layers[idx[0] - 1].output_bytes * b
            transfer_s[(s, Kind.SEND_B)] = p2p_time_s(cluster, me, prev_rank, nbytes)
            comm_bytes[cluster.link_class(me, prev_rank)] += nbytes * cfg.microbatches * replicas
        if dp > 1 and params:            # dp: the dp x cp ranks holding the stage's parameters
            # ZeRO: a shard group (every dp x cp rank but under HSDP); HSDP: the shard's replicas
            group = prices.group(cfg, "shard" if zero else "grad", s % cfg.pp)
            link = prices.link_class(group)
            across = prices.group(cfg, "replicate", s % cfg.pp) if R > 1 else None

            def reduced_s(nbytes: float) -> float:
                """ZeRO's reduction of a gradient buffer: reduce-scattered over the shard group and,
                under HSDP, the shard all-reduced over its replicas, after it on the same stream
                (FSDP2's foreach_reduce; Megatron's partial distributed optimizer)."""
                t = prices.collective_s(group, nbytes, "reduce_scatter", algorithm)
                return t + (prices.collective_s(across, nbytes / n, "all_reduce", algorithm) if across else 0.0)

            def reduced_bytes(sizes, runs: int = 1) -> None:
                """Ring bytes of ``runs`` reduced_s of each buffer, over every rank: (n-1) x the buffer
                in each of R shard groups, and 2 (R-1) x each shard in each of n replica groups."""
                comm_bytes[link] += (dp - R) * sum(sizes) * cfg.tp * runs
                if across:
                    comm_bytes[prices.link_class(across)] += 2 * (R - 1) * sum(sizes) * cfg.tp * runs
            last = per_layer["W" if split else "B"][::-1]
            total = sum(last) or 1.0
            if zero >= 2:        # FSDP2's units (parsim.exec.fsdp), reduce-scattered every micro-batch
                syncs = 1 if cfg.grads_reduced_once else m    # or once (no_sync, a pipeline's: the sum of all)
                shared = graph.sharing(idx)
                units = fsdp_units(own, [i in shared for i in idx])
                sizes = tuple(sum(own[i] for i in u) * per_param["grads"] for u in units)
                # ep: each unit's routed experts, a unit of their own over the expert_dp ranks
                fsdp_experts = FsdpExperts(cfg, prices, s, units, expert_own, per_param, width, algorithm)
                dense = tuple(x - e for x, e in zip(sizes, fsdp_experts.grads))     # each unit's but its experts
                unit_bytes = tuple(shard_padded_bytes(x, width, n) for x in dense)
                # backward order: each unit after its layer's backward, the root's after the whole one
                order = [k for k in range(len(units) - 1, 0, -1)] + ([0] if units[0] else [])
                bucket_bytes[s] = tuple(unit_bytes[k] for k in order)
                for pos, k in enumerate(order):
                    ready = 1.0 if k == 0 else sum(last[: len(idx) - units[k][0]]) / total
                    bucket[(s, pos)] = (ready, reduced_s(unit_bytes[k]) + fsdp_experts.reduce_s[k])
                buckets_per_stage[s] = len(order)
                reduced_bytes(bucket_bytes[s], syncs)
                sharded[s] += [c for x in bucket_bytes[s] for c in _reduction(x, n, R)] * syncs
                if fsdp_experts.on:
                    expert_buckets[s] = tuple(fsdp_experts.shard_bytes[k] for k in order if fsdp_experts.shard_bytes[k])
                # the unsharded gradients live in each layer's backward (fsdp_held_grad_bytes)
                reduce_buffer_bytes[s] = dict(zip(idx, fsdp_held_grad_bytes(units, sizes, len(idx))))
                # gathers: before the step's first forward (ZeRO-2, kept over the micro-batches) or
                # before every forward and every backward (ZeRO-3); each unit's gather is timed at its
                # first layer, the root's as its forward (backward) opens, prefetched one layer ahead
                # gathers move the parameters, in the training dtype, whatever the gradients' dtype
                gather_bytes = tuple(shard_padded_bytes(x * param_share, per_param["params"], n) for x in dense)
                gathers = [prices.collective_s(group, x, "all_gather") + e
                           for x, e in zip(gather_bytes, fsdp_experts.gather_s)]
                own_unit = {u[0]: k for k, u in enumerate(units) if k}       # a layer's own (non-root) unit
                per_layer_gather = [gathers[own_unit[i]] if i in own_unit else 0.0 for i in range(len(idx))]
                root_s = gathers[0] if units[0] else 0.0
                fwd = list(per_layer_gather)
                fwd[0] += root_s
                # FSDP2's host time and copies per unit around its collectives (fsdp_unit_s): on
                # the compute stream, so not hidden by prefetching; every micro-batch's backward
                # reduce-scatters every unit, its copy-in reading the gradients in the parameters'
                # dtype (as gathered) and writing them in the reduce dtype
                gather_host_s = sum(fsdp_unit_s(cluster, "all_gather", gather_bytes[k], gather_bytes[k])
                                    for k, u in enumerate(units) if u) + fsdp_experts.gather_host_s
                gather_s[(s, Kind.F)] = prefetched_gather_s(fwd, per_layer["F"], overlap) + gather_host_s
                hooks_s[(s, Kind.B)] = sum(fsdp_unit_s(cluster, "reduce_scatter", x, x * per_param["params"] / width)
                                           for x in bucket_bytes[s]) + fsdp_experts.reduce_host_s
                runs_f = 1 if zero == 2 else m
                comm_bytes[link] += (dp - R) * sum(x for x in gather_bytes if x) * cfg.tp * runs_f
                sharded[s] += [("all_gather", x) for x in gather_bytes if x] * runs_f
                fsdp_experts.count_bytes(comm_bytes, syncs, runs_f + (m if zero == 3 else 0))
                if zero == 3:    # the root too (reshard_after_forward=True on it): its gather opens the backward
                    bwd = per_layer_gather[::-1]
                    bwd[0] += root_s
                    # each layer's own unit reduce-scatters as its backward ends, on the gathers' group
                    reduces = None
                    if serial_group(cluster):      # the gathers' group: HSDP's all-reduces run on the replicas'
                        unit_rs = {units[k][0]: prices.collective_s(group, unit_bytes[k], "reduce_scatter", algorithm)
                                   + fsdp_experts.reduce_s[k] for k in order if k}
                        reduces = [unit_rs.get(i, 0.0) for i in range(len(idx))][::-1]
                    gather_s[(s, Kind.B)] = prefetched_gather_s(bwd, per_layer["B"][::-1], overlap, reduces,
                                                                training.fsdp_backward_prefetch) + gather_host_s
                    comm_bytes[link] += (dp - R) * sum(x for x in gather_bytes if x) * cfg.tp * m
                    sharded[s] += [("all_gather", x) for x in gather_bytes if x] * m
                    # the root's, the running and the prefetched unit's (fsdp_gathered_param_bytes)
                    full = [sum(own[i] for i in u) * per_param["params"] for u in units]
                    gathered_bytes[s] = dict(zip(idx, fsdp_gathered_param_bytes(units, full, len(idx))))
            else:
                # DDP buckets fill in backward order; bucket k is ready once its layers' gradients are.
                # Under ZeRO-1 a weight tied over pipeline stages is an entry of its own, after the
                # rest of its layer, in a bucket of its own (ddp_buckets' ``alone``)
                entries = []                                 # (layer position in backward order, params, tied)
                for p, i in enumerate(reversed(idx)):
                    n_tied = tied_count.get(i, 0) if zero else 0
                    entries.append((p, own[i - idx.start] - expert_own[i - idx.start] - n_tied, False))
                    if n_tied:
                        entries.append((p, n_tied, True))
                position = [p for p, _, _ in entries]
                grads = [n * per_param["grads"] for _, n, _ in entries]
                groups = ddp_buckets(grads, DDP_BUCKET_BYTES, frozenset(j for j, e in enumerate(entries) if e[2]),
                                     first_bucket_bytes(zero))
                sizes = tuple(sum(grads[j] for j in members) for members in groups)
                bucket_bytes[s] = tuple(shard_padded_bytes(x, width, n) for x in sizes) if zero else sizes
                # ZeRO-1: reduce-scatter, (n-1)/n S per rank, the ring all-reduce's first half
                for k, members in enumerate(groups):
                    nbytes = bucket_bytes[s][k]
                    ready = sum(last[: position[members[-1]] + 1]) / total
                    secs = reduced_s(nbytes) if zero else prices.collective_s(group, nbytes, "all_reduce", algorithm)
                    bucket[(s, k)] = (ready, secs)
                if zero:
                    reduced_bytes(bucket_bytes[s])
                else:
                    comm_bytes[link] += 2 * (dp - 1) * sum(bucket_bytes[s]) * cfg.tp   # ring, all ranks
                buckets_per_stage[s] = len(groups)
                if zero == 1:    # the updated shards, gathered bucket by bucket after the optimizer
                    sharded[s] += [c for x in bucket_bytes[s] for c in _reduction(x, n, R)]
                    gathered = [x * param_share for x in bucket_bytes[s]]        # parameters, not gradients
                    after_opt[s] = sum(prices.collective_s(group, x, "all_gather") for x in gathered)
                    comm_bytes[link] += (dp - R) * sum(gathered) * cfg.tp
                    sharded[s] += [("all_gather", x) for x in gathered]
                if experts and cfg.expert_dp > 1:       # ep: the experts' own buckets over the expert_dp ranks
                    expert_buckets[s] = ddp_expert_buckets(s, cfg, prices, idx, expert_own, last, total, per_param,
                                                        width, zero, algorithm, bucket, buckets_per_stage, after_opt,
                                                        comm_bytes)
        if cfg.tp > 1:     # tensor-parallel steps, every device of every replica (bytes per device)
            runs = {"grad": 1, "B": b * cfg.microbatches, "loss": b * cfg.microbatches,
                    "F": b * cfg.microbatches}
            # a fully recomputed layer's backward runs its forward's steps again (selective: none)
            tp_bytes = sum(step.bytes_per_device * runs[ph] * (2 if ph == "F" and layers[i].recomputes_forward else 1)
                           for i in idx for ph, step, _ in layers[i].tp_comm if step.communicates)
            comm_bytes[prices.link_class(cfg.tp_group(0, s % cfg.pp))] += tp_bytes * replicas

    tied_s = {}
    for group, stages, count in tied:     # every (replica, tp rank) runs its own, at once
        ranks = [grank[s % cfg.pp] for s in stages]
        nbytes = count * per_param["grads"]
        secs = prices.collective_s(ranks, nbytes, "all_reduce", algorithm)
        tied_s.update((s, (group, secs)) for s in stages)
        n = len(ranks)
        comm_bytes[prices.link_class(ranks)] += 2 * (n - 1) * nbytes * replicas   # ring, all ranks
    # The gradient all-reduces (ZeRO-2/3: the reduce-scatters) against the compute they run under:
    # from the interaction profile-comm measured on synthetic kernels, at the size of replica
    # 0's buckets and the intensity of its first rank's backward; never from the model's own
    # workload (a layer profile's grad_sync and fsdp_sync entries are diagnostics only).
    contention, colls = 0.0, cluster.profile.collectives
    if dp > 1 and colls.interaction and any(bucket_bytes.get(s) for s in range(S)):
        sizes = [x for s in range(S) for x in bucket_bytes.get(s, ())]
        kernels = cluster.device.kernels
        terms = interaction_at(colls.interaction, "reduce_scatter" if zero >= 2 else "all_reduce",
                               sum(sizes) / len(sizes), backward_intensity(graph, sorted(cfg.rank_layers(0)), b),
                               kernels.cpu_threads if kernels is not None and kernels.cpu_threads else 1)
        if terms is not None:
            overlap, contention = terms
    saved, w_held, sent = stage_activation_bytes(graph, cfg, b, split, training.pipeline_runtime)
    buckets_of, tied_stages = tuple(sorted(buckets_per_stage.items())), tuple(sorted(tied_s))
    # every bucket after the rank's backward (engine): without overlap below ZeRO-2, and FSDP beside a
    # pipeline (torch.distributed.pipelining's perform_reduce_grad, after the stage's last backward)
    after_backward = (not cfg.overlap_grad_reduce and zero < 2) or cfg.fsdp_beside_pipeline
    if not cfg.overlap_grad_reduce and zero >= 2:
        # ZeRO-2 without overlap (DeepSpeed's overlap_comm false, ParallelConfig.overlap_grad_reduce):
        # each bucket as the backward readies it, on the compute stream, which waits for all of it
        # (Costs.overlap 0: a bucket's whole time charged to compute; nothing runs beside it to contend)
        overlap, contention = 0.0, 0.0

    def lowered(k: int):
        """The lowered schedule of k micro-batches."""
        return prices.lowered(cfg.schedule, cfg.pp, k, cfg.chunks, buckets_of, tied_stages, after_backward)
    costs = engine.Costs(compute_s, transfer_s, bucket, saved, overlap, contention=contention, tied=tied_s,
                         w_held_bytes=w_held, sent_bytes=sent, reduce_after_backward=after_backward,
                         buckets_every_microbatch=zero >= 2 and not cfg.grads_reduced_once, after_optimizer_s=after_opt,
                         gather_s=gather_s,
                         gather_first_microbatch_only=zero == 2, hooks_s=hooks_s,
                         busy_sender_delay_s=cluster.profile.collectives.busy_sender_delay_s,
                         a2a_s=a2a_s, a2a_overlap_cost=a2a_overlap_cost(cluster) if cfg.ep_overlap else None)
    # stage 0's ranks read input, listed only where the profile prices loading (ResNet-50 at
    # dp=1,024: 0.04 s of a profiled search listed them for nothing)
    load = None
    if cluster.profile.input_pipeline is not None:
        readers = [cfg.global_rank(d, 0, t, c) for d in range(cfg.dp) for c in range(cp) for t in range(cfg.tp)]
        load = input_cost(cluster.profile.input_pipeline, cluster, readers, b,
                          round(graph.input_bytes / DTYPE_BYTES[graph.dtype]))
    if load is not None and not load.overlap:
        costs.input_s = load.microbatch_s
    tl = None
    if not keep_timeline and not (load is not None and load.overlap) and S * m >= steady.FROM_ACTIONS:
        tl = steady.run(lowered, costs, m, S, steady.round_of(cfg.schedule, cfg.pp, cfg.chunks), prices)
    if tl is None:
        tl = engine.run(lowered(m), costs, keep_records=keep_timeline, prices=prices)
    T = max(tl.end_s)
    input_bound = False
    if load is not None and load.overlap:
        ready = loader_ready_s(load.microbatch_s, cfg.microbatches, tl.first_forward_s, T)
        if any(x > 0 for x in ready):      # the loader is slower than compute: run again, waiting on it
            costs.input_ready_s = tuple(ready)
            tl = engine.run(lowered(m), costs, keep_records=keep_timeline, prices=prices)
            T = max(tl.end_s)
            input_bound = True

    bubble, sync_wait = idle_by_cause(tl)
    ranks = []
    for r in range(cfg.pp):
        stages = tuple(s for s in range(S) if s % cfg.pp == r)
        static, workspace = rank_memory(graph, training, cfg, b, r, held[r], prices)
        ranges = [cfg.stage_layers(s) for s in stages]
        if zero >= 2:       # the units' gradients being reduce-scattered: what they add to the backward's peak
            held_grads = {i: x for s in stages for i, x in reduce_buffer_bytes.get(s, {}).items()}
            buffered = torch_pipeline_stage(training.pipeline_runtime, cfg.pp)
            with_grads = backward_workspace_bytes(graph, ranges, b, held_grads, cfg.cp_mode, buffered)
            static["comm_buffers_bytes"] += with_grads - workspace
        if zero == 3:       # and the gathered units' parameters, beside the shards
            gathered = {i: x + held_grads.get(i, 0.0) for s in stages for i, x in gathered_bytes.get(s, {}).items()}
            static["params_bytes"] += backward_workspace_bytes(graph, ranges, b, gathered, cfg.cp_mode,
                                                               buffered) - with_grads
        if zero == 1 and cluster.profile.collectives.library in REDUCE_SCATTER_BY_ALL_REDUCE:
            # the library reduce-scatters a copy of each bucket (cost.comm), and the executor waits on
            # the buckets only after the backward (parsim.exec.grad_sync.finish): every copy is live
            # then, when the activations are freed; a second peak, counted where it exceeds the first
            copies = max((sum(bucket_bytes.get(s, ())) for s in stages), default=0.0)
            static["comm_buffers_bytes"] += max(0.0, copies - tl.peak_activation_bytes[r] - workspace)
        mem = MemoryBreakdown(activations_bytes=tl.peak_activation_bytes[r],
                              workspace_bytes=workspace,
                              **static)
        busy, exposed, inp = tl.busy_s[r], tl.exposed_comm_s[r], tl.input_s[r]
        # the all-to-alls ran inside the MoE layers' compute actions: exposed communication, not compute
        a2a_exposed = sum(ep_comm_s.get(s, 0.0) for s in stages) - (tl.a2a_hidden_s[r] if cfg.ep_overlap else 0.0)
        ranks.append(RankEstimate(rank=r, global_rank=grank[r], stages=stages, busy_s=busy - a2a_exposed,
                                  bubble_s=bubble[r], sync_wait_s=sync_wait[r], exposed_comm_s=exposed + a2a_exposed,
                                  memory=mem, max_inflight_microbatches=tl.max_inflight[r], input_s=inp,
                                  ep_comm_s=a2a_exposed))
    config = {"dp": cfg.dp, "pp": cfg.pp, "tp": cfg.tp, "cp": cfg.cp, "ep": cfg.ep, "ep_overlap": cfg.ep_overlap, "tp_layout": cfg.tp_layout,
              **({"etp": cfg.etp} if cfg.etp != 1 else {}),
              "recompute": cfg.recompute.value, **({"recompute_layers": list(cfg.recompute_layers)}
                                                   if cfg.recompute_layers else {}),
              **({"recompute_every": cfg.recompute_every} if cfg.recompute_every else {}),
              "tp_comm_overlap": cfg.tp_comm_overlap, "cp_mode": cfg.cp_mode, "zero": cfg.zero,
              **({"dp_shard": cfg.dp_shard} if cfg.dp_shard else {}),
              **({"overlap_grad_reduce": False} if not cfg.overlap_grad_reduce else {}),
              **({"no_sync": True} if cfg.grads_reduced_once else {}),     # the sync as run
              "microbatches": cfg.microbatches, "microbatch_size": b,
              "schedule": cfg.schedule, "chunks": cfg.chunks, "bounds": list(cfg.bounds), "placement": cfg.placement,
              "split": cfg.describe_split(graph.names), "cluster": cluster.spec, "model": graph.name}
    return Estimate(step_time_s=T, global_batch_size=training.global_batch_size, ranks=tuple(ranks),
                    comm_bytes=dict(comm_bytes), config=config, input_bound=input_bound,
                    input=None if load is None else {"overlap": load.overlap, "microbatch_s": load.microbatch_s,
                                                     "readers_on_node": load.readers_on_node},
                    stage_saved_bytes=tuple(saved[s] for s in range(S)), timeline=tl if keep_timeline else None,
                    grad_buckets_bytes=tuple(bucket_bytes.get(s, ()) for s in range(S)),
                    sharded_collectives=tuple(tuple(sharded.get(s, ())) for s in range(S)),
                    cp_ring_bytes=tuple(ring_bytes.get(s, 0.0) for s in range(S)),
                    ep_a2a_bytes=tuple(ep_bytes.get(s, 0.0) for s in range(S)) if cfg.ep > 1 else (),
                    expert_grad_buckets_bytes=tuple(expert_buckets.get(s, ()) for s in range(S)) if cfg.ep > 1 else (),
                    tied_grad_bytes={s: count * per_param["grads"] for _, stages, count in tied for s in stages})
