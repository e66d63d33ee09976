"""A run's measurement: the memory a rank holds and allocates (static_bytes, profiled_peak_bytes),
every rank's numbers gathered on rank 0 into measured.json (record_run), and the plan's prediction
beside them (predicted_against_measured).  What is measured and how: parsim.exec.train."""

from __future__ import annotations

import json
import os
import statistics
import tempfile

import torch
import torch.distributed as dist

from parsim.exec import groups, tensor_parallel
from parsim.fileio import write_json
from parsim.schedule.actions import Action


def pipeline_receive_buffers(stages) -> list:
    """The receive buffers torch.distributed.pipelining keeps across steps: a PipelineStage
    allocates one for its input on every stage but the first, and one for its output's gradient on
    every stage but the last, for each micro-batch, when its schedule first runs (torch 2.13,
    torch/distributed/pipelining/stage.py: ``_setup_forward_recv_info``, ``_create_grad_recv_info``).
    The input's buffer is the tensor the stage's forward runs on, and so what its first operator
    saves for the backward."""
    infos = (info for st in stages for table in (st.args_recv_info, st.grad_recv_info)
             for received in table.values() for info in received)
    return [info.buffer for info in infos if info.buffer is not None]


def static_bytes(modules, optimizers, stages=()) -> dict[str, int]:
    """Bytes held between steps, by kind, each storage once (the first kind that holds it).
    ``stages``: the rank's PipelineStages, whose receive buffers (``pipeline_receive_buffers``)
    are held from the first step on.  Until 2026-12-06 they were not counted, and as they are
    allocated before the step, the step's profiled peak did not see them either: a pp = 2 run's
    measured peak left out m boundary tensors on each rank (DenseNet-BC of set 2026-12-06b at
    GPipe m = 2: its last stage measured 178 MiB without its 16 MiB of receive buffers;
    results/2026-12-06e-intel-xeon/pipeline-memory-insample.txt)."""
    kinds = {
        "params_bytes": [p for m in modules for p in m.parameters()],
        "buffers_bytes": [b for m in modules for b in m.buffers()],
        "optimizer_bytes": [v for o in optimizers for st in o.state.values() for v in st.values() if torch.is_tensor(v)],
        "grads_bytes": [p.grad for m in modules for p in m.parameters() if p.grad is not None],
        "pipeline_buffers_bytes": pipeline_receive_buffers(stages),
    }
    seen, out = set(), {}
    for kind, tensors in kinds.items():
        out[kind] = 0
        for t in tensors:
            t = tensor_parallel.local(t)
            key = t.untyped_storage().data_ptr()
            if key not in seen:
                seen.add(key)
                out[kind] += t.untyped_storage().nbytes()
    return out


def profiled_events(step_fn) -> list[dict]:
    """torch.profiler's trace of ``step_fn`` on CPU, as its Chrome-trace events: the operators (``ph``
    "X", with ``ts`` and ``dur``) and the allocator's ``[memory]`` events (``args``: ``Bytes``, ``Addr``,
    ``Total Allocated``)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step_fn()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f)["traceEvents"]


def profiled_peak_bytes(step_fn) -> int:
    """Peak of bytes allocated during ``step_fn`` on CPU, from torch.profiler memory events."""
    totals = [e["args"].get("Total Allocated", 0) for e in profiled_events(step_fn) if e.get("name") == "[memory]"]
    return int(max(totals, default=0))


def reserved_against_allocated(allocated: list, reserved: list) -> dict:
    """measured.json's CUDA memory fields: per rank the caching allocator's pool at its peak
    (``max_memory_reserved``) and the share of it no tensor held at the peak, 1 - allocated /
    reserved, the quantity a profile's ``memory_reserved.fragmentation_fraction`` stands for.
    None where not measured (CPU: no caching allocator)."""
    if any(r is None for r in reserved):
        return {"peak_memory_reserved_bytes": None, "allocator_fragmentation": None}
    return {"peak_memory_reserved_bytes": list(reserved),
            "allocator_fragmentation": [1.0 - a / r if r else 0.0 for a, r in zip(allocated, reserved)]}


def record_run(opts, plan, cfg, env, where, step_times, losses, actions, peak, b, start, kind, collectives,
               comm: dict, on_measured=None) -> None:
    """Gather every rank's numbers on rank 0 into measured.json in ``opts.out``, and hand them to
    ``on_measured(out, records, names, out_dir, as_json)``, which reports them (replica 0's timed
    actions as records, the pipeline ranks' names): the executor hands its data to the report."""

    pipe_rank, replica, tp_rank, cp_rank = where
    peak_bytes, peak_parts, reserved_bytes = peak
    mine = {"rank": env.rank, "pipe_rank": pipe_rank, "replica": replica, "tp_rank": tp_rank, "cp_rank": cp_rank,
            "peak_memory_bytes": peak_bytes, "peak_reserved_bytes": reserved_bytes,
            "peak_parts": peak_parts, **comm,
            "step_times_s": step_times, "actions": [[r, str(a), s, t0, t1] for r, a, s, t0, t1 in actions]}
    gathered = [None] * env.world_size
    dist.all_gather_object(gathered, mine)
    if env.rank != 0:
        return
    # a step ends when its slowest rank does (as the simulator counts it)
    step_times = [float("nan") if any(t != t for t in ts) else max(ts)
                  for ts in zip(*(g["step_times_s"] for g in gathered))]
    timed = [t for i, t in enumerate(step_times) if i >= opts.warmup and t == t]
    replica0 = sorted((g for g in gathered if g["replica"] == 0 and g["tp_rank"] == 0 and g["cp_rank"] == 0),
                      key=lambda g: g["pipe_rank"])
    records = [(r, Action.parse(a), s, t0, t1) for g in replica0 for r, a, s, t0, t1 in g["actions"]]
    by_rank = sorted(gathered, key=lambda g: g["rank"])
    out = {
        "schema_version": 1, "kind": "parsim-measurement", "plan": opts.plan, "world_size": env.world_size,
        "backend": env.backend, "device": env.device.type, "threads": torch.get_num_threads(),
        "steps": opts.steps, "first_step": start, "warmup": opts.warmup, "step_times_s": step_times,
        "step_time_s": statistics.median(timed) if timed else None, "loss": losses,
        # each rank's own, by global rank: how far the slowest rank, which sets the step, is ahead of the rest
        "rank_step_times_s": [g["step_times_s"] for g in by_rank],
        "peak_memory_bytes": [g["peak_memory_bytes"] for g in by_rank],
        "peak_memory_parts": [g["peak_parts"] for g in by_rank],
        **reserved_against_allocated([g["peak_memory_bytes"] for g in by_rank], [g["peak_reserved_bytes"] for g in by_rank]),
        "memory_method": ("torch.cuda.max_memory_allocated (reserved: torch.cuda.max_memory_reserved)"
                          if env.device.type == "cuda" else
                          "parameters + buffers + gradients + optimizer state + the input batch before the step, plus the "
                          "peak of torch.profiler 'Total Allocated' during the last warm-up step"),
        "microbatch_size": b, "batchnorm_batch": b if kind[0] == "image" else None,
        "tp_collectives_per_step": collectives,     # rank 0's, counted on the first step
        # replica 0's (tp rank 0's) per pipeline rank: each rank's stages' collectives
        "tp_collectives_per_pipe_rank": [g["tp_collectives"] for g in replica0],
        # replica 0's (tp rank 0's) data-parallel all-reduces per stage, bytes each, on the last step
        "grad_buckets_bytes": [next((g["grad_buckets_bytes"][s] for g in replica0 if s in g["grad_buckets_bytes"]), [])
                               for s in range(cfg.stages)],
        # ZeRO: replica 0's reduce-scatters and all-gathers per stage, [collective, bytes] in launch order
        "sharded_collectives": [next(([list(c) for c in g["sharded_collectives"][s]] for g in replica0
                                      if s in g["sharded_collectives"]), []) for s in range(cfg.stages)],
        # replica 0's (tp rank 0's) all-reduce of tied weights' gradients across stages, bytes per stage
        "tied_grad_bytes": {str(s): n for g in replica0 for s, n in sorted(g["tied_grad_bytes"].items())},
        # cp: replica 0's (tp and cp rank 0's) bytes sent around its ring per stage, on the last step
        "cp_ring_bytes": [next((g["cp_ring_bytes"][s] for g in replica0 if s in g["cp_ring_bytes"]), 0)
                          for s in range(cfg.stages)],
        # ep: per rank, the bytes of every token all_to_all_single's input buffer on the last step,
        # forward and backward, by kind (parsim.exec.expert_parallel.Exchanges.summary); None without ep
        "ep_all_to_all": [g["ep_all_to_all"] for g in by_rank] if cfg.ep > 1 else None,
        # ep with more than one rank per expert: replica 0's expert-gradient all-reduces per stage
        "expert_grad_buckets_bytes": [next((g["expert_grad_buckets_bytes"][s] for g in replica0
                                            if s in g["expert_grad_buckets_bytes"]), []) for s in range(cfg.stages)],
        "actions": [[r, str(a), s, t0, t1] for r, a, s, t0, t1 in records],
        "config": {"dp": cfg.dp, "pp": cfg.pp, "tp": cfg.tp, "cp": cfg.cp, "ep": cfg.ep, "tp_layout": cfg.tp_layout,
                   "microbatches": cfg.microbatches, "schedule": cfg.schedule,
                   "chunks": cfg.chunks, "bounds": list(cfg.bounds), "placement": cfg.placement},
    }
    out["predicted"] = predicted_against_measured(plan, out, env.backend)
    if opts.data and kind[0] == "image" and os.path.isfile(os.path.join(opts.data, "test_batch.bin")):
        from parsim.exec.reference import assemble_model, evaluate
        out["accuracy"] = evaluate(assemble_model(opts.out, opts.plan, opts.seed), opts.data, kind[1])
        if not opts.json:
            print(f"accuracy on {os.path.join(opts.data, 'test_batch.bin')}: {out['accuracy']:.4f}")
    os.makedirs(opts.out, exist_ok=True)
    write_json(os.path.join(opts.out, "measured.json"), out)
    if on_measured is not None:          # what reports it (parsim.report.measured, given by parsim.run)
        names = {g["pipe_rank"]: f"measured rank {g['pipe_rank']} (global {g['rank']})" for g in replica0}
        on_measured(out, records, names, opts.out, opts.json)


def predicted_against_measured(plan, out: dict, backend: str) -> dict:
    """The plan's prediction beside the run's measurement: step time and the fullest rank's peak
    memory, each error (predicted - measured) / measured (as parsim validate counts it); None where
    the run timed no step.  ``same_cluster``: whether the plan was made for this machine's kind of
    devices (under --force it may not be: then its prediction is not this machine's)."""
    est = plan.estimate or {}
    step_p, peaks_p = est.get("step_time_s"), est.get("peak_memory_bytes") or []
    # None where no peak was measured (on CPU, only on the last of at least 3 warm-up steps)
    step_m, peak_m = out["step_time_s"], max((b for b in out["peak_memory_bytes"] if b is not None), default=None)
    peak_p = max(peaks_p) if peaks_p else None

    def error(p, m):
        return (p - m) / m if p is not None and m else None
    return {"cluster": plan.cluster,
            "same_cluster": groups.cluster_mismatch(plan.cluster, backend, plan.cluster) is None,
            "step_time_s": step_p, "peak_memory_bytes": peak_p,
            "measured_step_time_s": step_m, "measured_peak_memory_bytes": peak_m,
            "step_time_error": error(step_p, step_m), "peak_memory_error": error(peak_p, peak_m)}
