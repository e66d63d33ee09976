"""A pipeline rank's memory as the simulator charges it, and how much of it is known before the
simulation runs.

A rank holds (parsim.cost.memory for each rule): the parameters, gradients and optimizer state
of its layers, with the copies of tied weights and ZeRO's shares (static_memory; under expert
parallelism its share of the routed experts, ZeRO-sharded over the expert_dp ranks); its pipeline
buffers; the backward's workspace (backward_workspace_bytes); and, at its peak, the activations
of its micro-batches in flight.  That peak follows from the order of the rank's compute actions
alone, not from their times (activation_peaks): a micro-batch's F adds its stage's saved bytes, a split
backward's I adds what it holds for its W, and the backward that frees them (B, or W when split) removes
both; under torch's runtime schedules the sends a backward leaves until the step ends stay
(runtime_sent_bytes).

So every term but ZeRO's collective buffers is known from the plan without running it:
peak_floor_bytes, the planner's last check before it simulates.  The simulator adds those
buffers on top (parsim.sim.simulate: ZeRO-2/3 units' unsharded gradients and ZeRO-3's gathered
parameters in the backward, ZeRO-1's bucket copies where the library reduce-scatters by
all-reduce), each >= 0, so the floor never exceeds the simulated peak, and equals it without
them.
"""

from __future__ import annotations

import math
from itertools import compress, repeat
from operator import is_not

import numpy as np

from parsim.cost.experts import expert_param_count
from parsim.cost.memory import (MemoryBreakdown, backward_workspace_bytes, bytes_per_param, inflight_microbatches,
                                last_stage_freed_at_i_bytes, pipeline_buffer_bytes, pipeline_held_bytes,
                                runtime_sent_bytes, static_memory, torch_pipeline_buffer_bytes, torch_pipeline_stage)
from parsim.model.fp8 import fp8_static_bytes
from parsim.schedule.actions import Kind, Schedule, whole_backward_in_w


def boundary_bytes(graph, cfg, b: int) -> tuple[list[float], list[float]]:
    """Per stage, at ``b`` samples per micro-batch: (the activation it receives, the previous stage's
    output, 0 on the first stage; its output, 0 on the last): what crosses each pipeline boundary."""
    S, layers = cfg.stages, graph.layers
    return ([layers[cfg.bounds[s] - 1].output_bytes * b if s else 0.0 for s in range(S)],
            [layers[cfg.bounds[s + 1] - 1].output_bytes * b if s < S - 1 else 0.0 for s in range(S)])


def stage_activation_bytes(graph, cfg, b: int, split: bool,
                           runtime: str) -> tuple[dict[int, float], dict[int, float], dict[int, tuple[float, float]]]:
    """Per stage, at ``b`` samples per micro-batch, under the pipeline ``runtime``
    (parsim.model.stacks.PIPELINE_RUNTIMES): (saved bytes a micro-batch keeps from its F until its
    backward, bytes a split backward's I keeps until its W, the input gradient and output its backward
    leaves until the step ends: engine.Costs' saved_bytes, w_held_bytes and sent_bytes).  The I's bytes
    are net of what it frees: below zero on torch's last stage (last_stage_freed_at_i_bytes)."""
    S, layers = cfg.stages, graph.layers
    torch_stage = torch_pipeline_stage(runtime, cfg.pp)
    # torch's PipelineStage keeps a micro-batch's output besides, less the received input its first layer
    # saves (parsim.cost.memory.pipeline_held_bytes)
    held = (lambda r: pipeline_held_bytes(graph, r.start, r.stop)) if torch_stage else (lambda r: 0.0)
    saved = {s: (graph.stage_saved_bytes(r.start, r.stop) + held(r)) * b
             for s, r in ((s, cfg.stage_layers(s)) for s in range(S))}
    received, output = boundary_bytes(graph, cfg, b)
    # Under a split backward, a micro-batch's I keeps until its W the gradient that arrived for the
    # stage's output (in torch's PipelineStage, its receive buffer: torch_pipeline_buffer_bytes) and,
    # except where the I is empty and the W runs the whole backward (whole_backward_in_w), the weight
    # operators' output gradients (PipelineStage.backward_one_chunk).
    w_held = {s: (0.0 if whole_backward_in_w(s, split)
                  else sum(layers[i].w_held_bytes for i in cfg.stage_layers(s)) * b)
              + (0.0 if torch_stage else output[s]) for s in range(S)} if split else {}
    if split:
        # torch's last stage frees at the I its logits and what the loss saved, which the W freed before
        w_held[S - 1] -= last_stage_freed_at_i_bytes(runtime, cfg.pp, layers[-1].output_bytes * b,
                                                     graph.loss_saved_bytes * b)
    sent = {s: runtime_sent_bytes(runtime, cfg.pp, cfg.schedule, received[s], output[s]) for s in range(S)}
    return saved, w_held, {s: v for s, v in sent.items() if any(v)}


def activation_deltas(num_stages: int, split_backward: bool, saved_bytes: dict, w_held_bytes: dict,
                      sent_bytes: dict | None = None) -> dict[Kind, tuple[float, ...]]:
    """What each compute action changes in its rank's activations, per kind, per stage (the
    arguments as stage_activation_bytes gives them): an F adds its stage's saved bytes, a split
    backward's I what it holds for its W, and the backward that frees them (B, or W when split) removes
    both; where ``sent_bytes`` names a stage (torch's runtime schedules: runtime_sent_bytes), its
    backward (I when split) adds the input gradient it sends and the freeing one leaves its output.  The
    one rule: activation_peaks replays it over a rank's order, the engine's
    Timeline.activation_changes over its timed compute records."""
    stages = range(num_stages)
    saved = [saved_bytes.get(s, 0.0) for s in stages]
    w_held = [w_held_bytes.get(s, 0.0) for s in stages]
    grad, output = zip(*((sent_bytes or {}).get(s, (0.0, 0.0)) for s in stages)) if num_stages else ((), ())
    free = tuple(output[s] - (saved[s] + w_held[s]) for s in stages)
    if not split_backward:
        return {Kind.F: tuple(saved), Kind.B: tuple(f + g for f, g in zip(free, grad))}
    return {Kind.F: tuple(saved), Kind.I: tuple(h + g for h, g in zip(w_held, grad)), Kind.W: free}


def activation_peaks(schedule: Schedule, saved_bytes: dict, w_held_bytes: dict, sent_bytes: dict | None = None,
                     prices=None) -> tuple[list[float], list[int]]:
    """Per rank, (the peak of its activations in bytes, the most micro-batches in flight), by
    replaying its compute actions in order (the arguments as stage_activation_bytes gives them;
    each action's bytes from activation_deltas): a running sum of each action's bytes (np.cumsum
    adds along a row in order, as a loop would), its peak taken after every action (a backward
    frees, but under torch's runtime schedules one that sends may add).  ``prices``: the run's
    pricing context (parsim.sim.prices), which keeps each schedule's events."""
    split = schedule.split_backward
    deltas = activation_deltas(schedule.num_stages, split, saved_bytes, w_held_bytes, sent_bytes)
    zeros = (0.0,) * schedule.num_stages
    # per action code (_events): what it adds to the rank's activations; code 3 pads
    adds = np.array([deltas[Kind.F], deltas.get(Kind.I, zeros), deltas[Kind.W if split else Kind.B], zeros])
    stage, code = _events(schedule) if prices is None else _kept(prices.table("activation events"), schedule)
    act = np.cumsum(adds[code, stage], axis=1)
    peaks = np.maximum(act.max(axis=1, initial=0.0), 0.0)
    inflight = np.cumsum(_INFLIGHT[code], axis=1).max(axis=1, initial=0)
    return peaks.tolist(), inflight.tolist()


_INFLIGHT = np.array([1, 0, -1, 0])       # per action code: micro-batches it puts in flight


def _kept(table: dict, schedule: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """_events, once per schedule of a run (the simulator's are built once per shape: the planner's
    memory floor and its simulation ask for the same ones), the schedule held in the entry."""
    hit = table.get(id(schedule))
    if hit is None:
        hit = table[id(schedule)] = (schedule, _events(schedule))
    return hit[1]


def _events(schedule: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """(stage, code) of each rank's actions that change its activations, in order, one row per
    rank: code 0 an F, 1 a split backward's I, 2 the backward that frees them (B, or W when
    split), 3 padding to the longest row."""
    code = {Kind.F: 0, Kind.I: 1, Kind.W if schedule.split_backward else Kind.B: 2}
    rows = []
    for r in range(schedule.num_ranks):
        stages, kinds, _ = schedule.columns(r)
        codes = list(map(code.get, kinds))
        kept = list(map(is_not, codes, repeat(None)))
        rows.append((list(compress(stages, kept)), list(compress(codes, kept))))
    width = max((len(row[0]) for row in rows), default=0)
    stage = np.zeros((len(rows), width), dtype=np.intp)
    action = np.full((len(rows), width), 3, dtype=np.intp)
    for r, (stages, codes) in enumerate(rows):
        stage[r, :len(stages)] = stages
        action[r, :len(codes)] = codes
    return stage, action


def rank_memory(graph, training, cfg, b: int, pipe_rank: int, held: set[int],
                prices=None) -> tuple[dict[str, float], float]:
    """(static bytes by kind, as MemoryBreakdown names them; the backward's workspace) of a
    pipeline rank holding the layers ``held`` (cfg.rank_layers), before ZeRO's collective buffers;
    ``prices``: the run's pricing context, which keeps the workspaces."""
    layers, S = graph.layers, cfg.stages
    stages = range(pipe_rank, S, cfg.pp)
    received, output = boundary_bytes(graph, cfg, b)
    if torch_pipeline_stage(training.pipeline_runtime, cfg.pp):
        # each stage's receive buffers, one a micro-batch: the activation it receives (all but the first),
        # the gradient of the output it sends (all but the last)
        # under 1F1B a rank's forwards before its first backward (Schedule1F1B's warmup_chunks) are its micro-batches
        # in flight at its peak
        warmup = int(inflight_microbatches("1f1b", cfg.microbatches, cfg.pp, pipe_rank))
        buffers = torch_pipeline_buffer_bytes(sum(received[s] for s in stages), sum(output[s] for s in stages),
                                              cfg.microbatches, cfg.schedule, warmup)
    else:   # a stage's buffers hold its output's activation and gradient; the last stage's, its input's
        buffers = pipeline_buffer_bytes(max(output[s] if s < S - 1 else received[s] for s in stages), cfg.pp)
    static = static_memory(graph.held_param_count(held), training.dtype, training.optimizer, buffers, cfg.zero,
                           cfg.shard_ranks, sum(expert_param_count(layers[i], graph) for i in held),
                           cfg.expert_dp, training.grad_reduce_dtype)
    if cfg.zero == 2:       # FSDP2 gathers unsharded copies, held through the step, beside the shards it keeps
        static["params_bytes"] *= 1 + 1 / cfg.shard_ranks
    if cfg.grads_reduced_once:  # the unsharded gradients accumulated through the step, beside the shards reduced into:
        # in the parameters' dtype, as FSDP's unsharded parameters make them (FSDP2's param_dtype; the reduce
        # dtype is the reduce-scatter's, at the last micro-batch)
        width = bytes_per_param(training.dtype, training.optimizer)["params"]
        static["grads_bytes"] += graph.held_param_count(held) * width
    static["params_bytes"] += fp8_static_bytes(graph, held)      # FP8 weight copies and scaling state
    return static, _workspace_bytes(graph, tuple(cfg.stage_layers(s) for s in stages), b, cfg.cp_mode, prices,
                                    torch_pipeline_stage(training.pipeline_runtime, cfg.pp))


def _workspace_bytes(graph, ranges: tuple[range, ...], b: int, cp_mode: str = "ring", prices=None,
                     buffered_grad: bool = False) -> float:
    """backward_workspace_bytes, kept in the run's pricing context where there is one: the
    planner's floor and the simulation of the same plan ask for the same ranks, and candidates
    that differ in placement or ZeRO share splits (each layer's working set walks its
    operators).  Keyed by the graph's id, the graph held in the entry."""
    if prices is None:
        return backward_workspace_bytes(graph, list(ranges), b, cp_mode=cp_mode, buffered_grad=buffered_grad)
    table = prices.table("backward workspaces")
    key = (id(graph), ranges, b, cp_mode, buffered_grad)
    hit = table.get(key)
    if hit is None:
        hit = table[key] = (graph, backward_workspace_bytes(graph, list(ranges), b, cp_mode=cp_mode,
                                                            buffered_grad=buffered_grad))
    return hit[1]


def peak_floor_bytes(graph, training, cfg, schedule: Schedule, stop_above: float = math.inf, prices=None) -> float:
    """The simulated peak of ``cfg`` (its bounds set; ``graph`` its per-device graph, ``schedule``
    its built schedule) less ZeRO's collective buffers: at most the simulated peak, and equal to
    it without them (above).  With ``stop_above``, the first rank's found above it, ranks taken
    by their activations' peak, the largest first (the planner asks only whether a plan fits);
    ``prices``: the run's pricing context (parsim.sim.prices)."""
    b = cfg.microbatch_size(training.global_batch_size)
    peaks = _activation_peaks(graph, training, cfg, schedule, b, prices)
    worst = 0.0
    for r in sorted(range(cfg.pp), key=lambda r: -peaks[r]):
        worst = max(worst, _rank_floor_bytes(graph, training, cfg, b, r, peaks[r], prices))
        if worst > stop_above:
            break
    return worst


def rank_floors_bytes(graph, training, cfg, schedule: Schedule, prices=None) -> list[float]:
    """Each pipeline rank's term of peak_floor_bytes (their largest is it)."""
    b = cfg.microbatch_size(training.global_batch_size)
    peaks = _activation_peaks(graph, training, cfg, schedule, b, prices)
    return [_rank_floor_bytes(graph, training, cfg, b, r, peaks[r], prices) for r in range(cfg.pp)]


def _activation_peaks(graph, training, cfg, schedule: Schedule, b: int, prices) -> list[float]:
    """Each rank's activation peak, from its order of compute actions (activation_peaks)."""
    saved, w_held, sent = stage_activation_bytes(graph, cfg, b, schedule.split_backward, training.pipeline_runtime)
    return activation_peaks(schedule, saved, w_held, sent, prices)[0]


def _rank_floor_bytes(graph, training, cfg, b: int, r: int, activations_bytes: float, prices) -> float:
    static, workspace = rank_memory(graph, training, cfg, b, r, cfg.rank_layers(r), prices)
    return MemoryBreakdown(activations_bytes=activations_bytes, workspace_bytes=workspace, **static).total_bytes
