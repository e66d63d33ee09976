"""``parsim profile``: time every cut unit's forward and backward per micro-batch size.

Taken the way a pipeline stage runs (``parsim.exec.runtime.configure_process``: one thread,
the same allocator settings): the units run in sequence, each on the detached output of the one
before (a stage boundary), forward through the chain then backward through it, with the loss
at the end.  The sizes are measured in interleaved rounds, a canary kernel and the host's CPU
counters watching each measurement, until every size's chain is known within ``--target`` or the
``--budget`` runs out; each time is the median over the undisturbed rounds, with an interval,
and the rounds are kept for the predictions' intervals (``parsim.profile.rounds``; the file says
why it stopped and what disturbed it).  With ``--nproc N`` (default 2,
the ranks of a run on this machine), N profilers run at once in lock-step, one per core, so
that the caches and memory bandwidth are shared as in a run; the table is their mean, with the
slowest process's pace beside it (``slowest_rank``: a synchronous step waits for its slowest
rank).  (One process alone measured compute about 8-10% faster than the same stages inside a
2-rank run.)  The run's optimizer step is timed too (seconds per parameter), and saved-activation bytes are recorded per unit from
``saved_tensors_hooks`` on the real tensors.  Concurrent profilers without tp are a
data-parallel group: they also measure the gradient all-reduce under the model's own backward
(``parsim.profile.grad_sync``), which prices a data-parallel plan's buckets.

With ``--tp t`` (t processes, the executor's tensor-parallel layout), every unit is the
per-device shard a tensor-parallel run executes, and its times include the collectives it
issues; the table records tp and the layout, and the profiled cost model then adds no
tensor-parallel communication of its own.  I and W are not split then (the FLOP share is used).

Writes the ProfileTable format of ``parsim.cost.compute`` (the profiled cost model reads it).
"""

from __future__ import annotations

import datetime
import platform
import statistics
import time
from dataclasses import asdict

import torch

from parsim.hardware.machine import this_machine
from parsim.errors import InputError, ParsimError
from parsim.exec.objective import loss_fn
from parsim.exec.precision import TORCH_DTYPES, MasterWeightOptimizer, make_optimizer
from parsim.exec.precision import check_supported as check_precision
from parsim.exec.stages import in_memory_format, memory_format, not_a_view
from parsim.exec.tensor_parallel import local
from parsim.exec.vocab_parallel import loss_group
from parsim.model.extract import SavedStorages, cut_units
from parsim.model.graph import DTYPE_BYTES
from parsim.model.spec import ModelSpec, build_module
from parsim.profile.host import HostCounter, canary_s
from parsim.profile.rounds import RoundsPolicy, falls, measure_rounds
from parsim.profile.tables import fwd_plus_bwd, mean_tables, widths


OPTIMIZER_REPEATS = 15        # optimizer steps timed at least (each a few tens of ms on the CPU)


def _sample_input(spec: ModelSpec, b: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of b samples and targets: images and class labels, or tokens and next tokens.
    Class and vocabulary counts come from the last layer's output size."""
    if spec.input is None:
        raise InputError(f"{spec.path}: layers: a model given as a table has no module to profile")
    per_sample = int(spec.graph.layers[-1].output_bytes // DTYPE_BYTES[spec.graph.dtype])   # logits per sample
    if spec.input.dtype.startswith("int"):
        seq = spec.input.shape[0]
        tokens = torch.randint(0, per_sample // seq, (b, seq), device=device)
        return tokens, tokens.roll(-1, dims=1)
    images = in_memory_format(torch.randn(b, *spec.input.shape, device=device, dtype=TORCH_DTYPES[spec.graph.dtype]),
                              memory_format(spec))
    return images, torch.randint(0, per_sample, (b,), device=device)


def _loss(out: torch.Tensor, y: torch.Tensor, vocab_group=None) -> torch.Tensor:
    """The executor's loss: in fp32, over every prediction; vocabulary-parallel where the units'
    output is split by classes (``vocab_group``, vocab_parallel.loss_group)."""
    return loss_fn(out, y, vocab_group)


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(device, run):
    """(the seconds ``run()`` takes between two synchronisations of ``device``, what it returned):
    every interval the profiler records, so that a GPU's queued kernels are inside it."""
    _sync(device)
    t0 = time.perf_counter()
    out = run()
    _sync(device)
    return time.perf_counter() - t0, out


def _split_backward_times(units, x, y, reps: int, dev, at: dict) -> tuple[dict, dict]:
    """I and W per unit, timed with the functions torch's zero-bubble schedules call
    (stage_backward_input, then stage_backward_weight): two autograd passes, not one.  A unit's
    output that is a view (``Flatten``, ``transpose``...) is handed over as an alias that is not
    (stages.not_a_view, made before the clock starts, no copy): stage_backward_input detaches its
    outputs in place, which torch refuses for a view.  A unit nothing flows back through takes 0.
    The model's first unit takes no I and its whole backward as its W, as torch's first stage
    runs them (until 2026-12-04 both came to about nothing: results/2026-11-28-amd-epyc's
    resnet18 profiles price its first unit's I + W at 40 us against a backward of 0.36 ms)."""
    from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight

    names = [n for n, _ in units]
    last = len(units) - 1
    times_i = {n: [] for n in names}
    times_w = {n: [] for n in names}
    for _ in range(reps):
        chain, h = [], x
        for i, (n, m) in enumerate(units):
            at.update(unit=n, phase="forward")
            inp = h.detach().requires_grad_(h.is_floating_point() and i > 0)
            h = m(inp)
            chain.append((inp, h))
        grad = None
        for i in range(last, -1, -1):
            n, m = units[i]
            inp, out = chain[i]
            if _nothing_flows_back(i, last, out, grad):
                times_i[n].append(0.0)
                times_w[n].append(0.0)
                grad = None
                continue
            outputs, grads = ([_loss(out, y)], None) if i == last else ([not_a_view(out)], [grad])
            if not inp.requires_grad:
                # the model's first unit: torch's first pipeline stage runs no I and its whole backward
                # as its W (PipelineStage.backward_one_chunk, backward_weight_one_chunk: "full").  Timed
                # with stage_backward_input, its I and W both came to nothing (its W has no parameter
                # groups without an input to start from), and torch 2.11 refused the empty input list
                at.update(unit=n, phase="backward (the first unit's, whole, as its W)")
                times_i[n].append(0.0)
                times_w[n].append(_timed(dev, lambda: torch.autograd.backward(outputs, grads))[0])
                grad = None
                continue
            at.update(unit=n, phase="backward (input gradient, stage_backward_input)")
            seconds, (grads_in, param_groups) = _timed(
                dev, lambda: stage_backward_input(outputs, grads, [inp], m.parameters()))
            times_i[n].append(seconds)
            at.update(unit=n, phase="backward (weight gradient, stage_backward_weight)")
            times_w[n].append(_timed(dev, lambda: stage_backward_weight(m.parameters(), param_groups))[0])
            grad = grads_in[0]
        for _, m in units:
            m.zero_grad(set_to_none=False)
    return times_i, times_w


def _nothing_flows_back(i: int, last: int, out: torch.Tensor, grad) -> bool:
    """Whether unit i has no backward to time: not the last unit (whose loss starts the backward),
    and its output needs no gradient (a ``Flatten`` of the input batch) or none came back to it."""
    return i < last and (grad is None or not out.requires_grad)


def _measure_size(units, spec, b: int, dev, warmup: int, repeats: int, split: bool,
                  vocab_group=None, at: dict | None = None) -> tuple[dict, dict, list]:
    """One round at micro-batch size b: {(unit, key): repeat times} for fwd_s, bwd_s (and, when
    ``split``, bwd_input_s, bwd_weight_s), warm-up dropped; {unit: saved bytes per sample}; and
    each repeat's F + B summed over the units (the chain's time, for ``slowest_rank``).  ``at``
    is kept pointing at the unit and pass that runs (for ``unit_failed``)."""
    at = {} if at is None else at
    x, y = _sample_input(spec, b, dev)
    names = [n for n, _ in units]
    times_f = {n: [] for n in names}
    times_b = {n: [] for n in names}
    saved = {}
    for _ in range(warmup + repeats):
        chain = []
        h = x
        for i, (n, m) in enumerate(units):
            at.update(unit=n, phase="forward")
            inp = h.detach().requires_grad_(h.is_floating_point() and i > 0)
            # storages saved for backward, parameters and buffers excluded (parsim.model.extract)
            recorded = SavedStorages({local(p).untyped_storage()._cdata for p in m.parameters()}
                                     | {local(t).untyped_storage()._cdata for t in m.buffers()},
                                     storage_of=lambda t: local(t).untyped_storage())
            with torch.autograd.graph.saved_tensors_hooks(recorded.pack, lambda t: t):
                seconds, h = _timed(dev, lambda: m(inp))
            times_f[n].append(seconds)
            chain.append((inp, h))
            saved[n] = sum(recorded.nbytes.values()) / b
            del recorded
        grad, last = None, len(units) - 1
        for i in range(last, -1, -1):
            n = names[i]
            inp, out = chain[i]
            if _nothing_flows_back(i, last, out, grad):
                times_b[n].append(0.0)
                grad = None
                continue
            at.update(unit=n, phase="backward")
            run = (lambda: _loss(out, y, vocab_group).backward()) if i == last else (lambda: out.backward(grad))
            times_b[n].append(_timed(dev, run)[0])
            grad = inp.grad if inp.requires_grad else None
        for m in (m for _, m in units):
            m.zero_grad(set_to_none=False)
    chain_s = [sum(times_f[n][i] + times_b[n][i] for n in names) for i in range(warmup, warmup + repeats)]
    out = {}
    for n in names:
        out[(n, "fwd_s")] = times_f[n][warmup:]
        out[(n, "bwd_s")] = times_b[n][warmup:]
    if split:
        times_i, times_w = _split_backward_times(units, x, y, warmup + repeats, dev, at)
        for n in names:
            out[(n, "bwd_input_s")] = times_i[n][warmup:]
            out[(n, "bwd_weight_s")] = times_w[n][warmup:]
    return out, saved, chain_s


def unit_failed(spec: ModelSpec, units, at: dict, b: int, error: Exception) -> InputError:
    """The error a profiler reports when a unit's own code raised: one line naming the unit, its
    class, the pass, the micro-batch size and the root cause, and what to change."""
    while error.__cause__ is not None:           # torch's pipelining wraps the cause in a multi-line message
        error = error.__cause__
    cause = next((ln.strip() for ln in str(error).splitlines() if ln.strip()), "")
    kind = next((type(m).__name__ for n, m in units if n == at.get("unit")), "?")
    change = ("profile smaller sizes (--microbatch-sizes)" if isinstance(error, torch.OutOfMemoryError) else
              "every cut unit must run on its own, on the output of the unit before it (as a pipeline stage "
              "receives it): fix the unit, or put it and its neighbours in one module so that no cut falls between them")
    return InputError(f"{spec.path}: unit '{at.get('unit', '?')}' ({kind}) failed in its {at.get('phase', 'forward')} "
                      f"at micro-batch size {b}: {type(error).__name__}: {cause[:300]}; {change}")


def _run_optimizer(spec: ModelSpec, params) -> MasterWeightOptimizer:
    """The optimizer a run of this model steps (``parsim.exec.precision.make_optimizer``: Adam,
    momentum or plain SGD, on fp32 masters if mixed).  Until 2026-11-27 every profile timed
    momentum SGD, and Adam models' optimizer steps (torch's Adam, one parameter at a time) were
    priced at about half what their runs measured (bert-mini of set 2026-11-27: 4.1 ms priced,
    8.6 ms measured; results/2026-11-27-amd-epyc/diagnosis-bert-mini).  Until 2026-12-04 the
    executor did not run Adam on a bf16 or fp16 model, and its profiles timed momentum SGD."""
    return make_optimizer(spec.training.optimizer, params)


def profile_layers(spec: ModelSpec, sizes: list[int], device: str = "cpu", policy: RoundsPolicy = RoundsPolicy(),
                   warmup: int = 1, seed: int = 0, barrier=lambda: None, tp_mesh=None, tp_layout: str = "",
                   ep_exchanges=None, agree=lambda s: s, grad_sync: bool = False, profilers: int = 1) -> dict:
    """The profile of one process, measured in rounds (``parsim.profile.rounds``; every decision to
    go on goes through ``agree``, the union over the ``profilers`` concurrent processes).  With
    ``grad_sync`` (concurrent profilers, no tp: a data-parallel group), also the gradient
    all-reduce under the model's own backward (``parsim.profile.grad_sync``).  With
    ``ep_exchanges`` (parsim.exec.expert_parallel.Exchanges over this profiler's ep group), every
    MoE layer keeps its E/ep experts and exchanges tokens with the group, as a run's rank does
    (``expert_exchanges``)."""
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is visible; use --device cpu")
    check_precision(spec.graph.dtype, dev, spec.path)
    dtype = TORCH_DTYPES[spec.graph.dtype]
    torch.manual_seed(seed)
    units = [(n, m.to(dev, dtype, memory_format=memory_format(spec)).train())     # the run's dtype and layout
             for n, m in cut_units(build_module(spec.source, spec.path))]
    tp = tp_mesh.size() if tp_mesh is not None else 1
    if tp > 1:
        from parsim.exec.stages import sequential
        from parsim.exec.tensor_parallel import parallelize

        parallelize(sequential(units), tp_mesh, tp_layout == "megatron-sp")   # the units, sharded in place
    if ep_exchanges is not None:       # each MoE layer keeps E/ep experts and exchanges tokens, as a run's rank does
        from parsim.exec.expert_parallel import parallelize as split_experts
        from parsim.exec.stages import sequential

        split_experts(sequential(units), ep_exchanges)
    vocab_group = loss_group(m for _, m in units) if tp > 1 else None     # the executor's rule
    names = [n for n, _ in units]
    saved, chains = {}, {b: [] for b in sizes}
    repeats = policy.repeats

    def canary():
        barrier()                      # concurrent profilers measure the same size at once
        return canary_s()

    def measure(b):
        at: dict = {}
        try:
            times, saved[b], chain = _measure_size(units, spec, b, dev, warmup, repeats, tp == 1, vocab_group, at)
        except ParsimError:
            raise
        except Exception as e:         # the model's own code failed: one line naming the unit
            raise unit_failed(spec, units, at, b, e) from None
        chains[b] += chain
        return times

    host = HostCounter(profilers)
    got = measure_rounds(list(sizes), measure, canary, host.sample, policy.target, policy.min_rounds,
                         policy.max_rounds, policy.budget_s, time.perf_counter, agree)
    medians, intervals = got.median_s, got.interval_s
    barrier()
    params = list({id(p): p for _, m in units for p in m.parameters()}.values())   # a tied weight once
    opt = _run_optimizer(spec, params)
    for p in params:
        p.grad = torch.zeros_like(p)
    # Every step starts together on the concurrent profilers, as the ranks of a data-parallel run
    # step at once after their last all-reduce: the step is memory-bound, and two stepping at once
    # share the bandwidth.  Without the barrier the profilers drifted apart over the repeats, and
    # the 2-process profiles of 2026-11-23/24 priced ResNet-50's step at 16.7 and 21.0 ms where
    # dp=2 runs measured 22.0-23.4 ms (the README's measurement log, "Closing the loop":
    # `git show b68a234:README.md`).
    # Timed with the zeroing of the gradients that opens every step of a run (parsim.exec.train:
    # zero_grad(set_to_none=False), a write of every gradient: about 5 ms of ResNet-50's fp32 steps
    # here, before their first forward, priced nowhere before).  The simulator charges both at the
    # optimizer: the same step at pp = 1; with pp > 1 a later stage zeroes while it waits for its
    # first input, so its share is charged where it would have hidden.
    def opt_step():
        opt.zero_grad(set_to_none=False)
        opt.step()
    opt_times = []
    for _ in range(warmup + OPTIMIZER_REPEATS):
        barrier()
        opt_times.append(_timed(dev, opt_step)[0])      # with its queued kernels (until 2026-12-04 a GPU's
                                                        # optimizer was timed to its last launch)
    count = sum(local(p).numel() for p in params)
    kinds = ("fwd_s", "bwd_s") + (("bwd_input_s", "bwd_weight_s") if tp == 1 else ())
    sync = fsdp = None
    if grad_sync and tp == 1:
        from parsim.profile.grad_sync import measure_fsdp_sync, measure_grad_sync

        backward_s = {b: sum(medians[(n, "bwd_s")][i] for n in names) for i, b in enumerate(sizes)}
        loss_of, sample = (lambda stage, x, y: _loss(stage(x), y)), (lambda b: _sample_input(spec, b, dev))
        sync = measure_grad_sync(units, loss_of, sample, sizes, backward_s, repeats)
        fsdp = measure_fsdp_sync(units, loss_of, sample, sync["microbatch_size"], repeats)

    confirmed = falls(got, fwd_plus_bwd)

    def row(n):
        return {"name": n, **{k: medians[(n, k)] for k in kinds},
                "saved_bytes": [saved[b][n] for b in sizes],
                "fwd_spread": widths(intervals[(n, "fwd_s")], medians[(n, "fwd_s")]),
                "bwd_spread": widths(intervals[(n, "bwd_s")], medians[(n, "bwd_s")]),
                **({"nonmonotone_confirmed": [list(p) for p in confirmed[n]]} if n in confirmed else {}),
                "round_s": {k: got.round_s[(n, k)] for k in kinds}}
    return {
        "schema_version": 1, "kind": "layer-profile", "model": spec.name,
        **({"tp": tp, "tp_layout": tp_layout} if tp > 1 else {}),
        **({"ep": ep_exchanges.ep} if ep_exchanges is not None else {}),
        "device": f"{dev.type}: {platform.processor() or platform.machine()}",
        "machine": asdict(this_machine()),
        "dtype": spec.graph.dtype, "threads": torch.get_num_threads(),
        "measured": datetime.date.today().isoformat(),
        "microbatch_sizes": list(sizes),
        "noise_threshold": policy.noise_threshold,
        "layers": [row(n) for n in names],
        "rounds": {"count": len(got.kept), "kept": [list(k) for k in got.kept], "stopped": got.stopped,
                   "target": policy.target, "precision": got.precision,
                   "canary_s": [list(c) for c in got.canary_s],
                   "foreign": [[h.foreign for h in row] for row in got.host],
                   "steal": [[h.steal for h in row] for row in got.host], "disturbed": got.disturbed,
                   "optimizer_s_per_param": [t / count for t in opt_times[warmup:]]},
        "optimizer": spec.training.optimizer,
        "optimizer_s_per_param": statistics.median(opt_times[warmup:]) / count,
        "chain_s": [chains[b] for b in sizes],
        **({"grad_sync": sync} if sync else {}),
        **({"fsdp_sync": fsdp} if fsdp else {}),
    }


def launch_profilers(model: str, sizes, out: str, nproc: int, policy: RoundsPolicy = RoundsPolicy(),
                     device: str = "cpu", threads: int = 1, quiet: bool = False, tp: int = 1,
                     tp_layout: str = "megatron", ep: int = 1) -> int:
    """Run ``nproc`` profilers of ``model`` at once (this module's ``main`` as the worker); rank 0
    writes their mean table to ``out``.  With tp > 1, the nproc processes form tensor-parallel
    groups of tp; with ep > 1, expert-parallel groups of ep.  Returns the exit code."""
    from parsim.exec.launch import launch

    flags = ["--tp", str(tp), "--tp-layout", tp_layout] if tp > 1 else []
    flags += ["--ep", str(ep)] if ep > 1 else []
    timeout_s = max(600.0, 2 * policy.budget_s)        # a collective waits out the longest measuring
    return launch([model, "--sizes", ",".join(map(str, sizes)), "--device", device, *policy.argv(),
                   "-o", out, *flags], nproc, timeout_s=timeout_s, threads=threads, module="parsim.profile.layers",
                  quiet=quiet)


def check_ep_flags(spec, ep: int, tp: int, nproc: int, source: str) -> None:
    """``--ep``: the ``nproc`` processes form whole groups of ep, tp is 1, and ``source`` is an
    ``hf:`` mixture of experts whose every MoE layer's experts split over ep
    (parsim.cost.experts.check_ep); one line naming the flag otherwise.  ``parsim profile`` checks
    before it starts a process, each profiler again before it builds its group."""
    if ep == 1:
        return
    from parsim.cost.experts import check_ep
    from parsim.errors import InfeasibleError

    if nproc % ep:
        raise InputError(f"--ep {ep}: the {nproc} processes (--nproc) must form whole groups of {ep}")
    if tp > 1 or spec.source.kind != "hf":
        raise InputError(f"--ep {ep}: profiles the MoE layers of an hf: model with --tp 1 ({source})")
    try:
        check_ep(spec.graph, ep)
    except InfeasibleError as e:
        raise InputError(f"--ep {ep}: {e}") from None


def expert_exchanges(spec, ep: int, tp: int, rank: int, world: int, source: str):
    """This profiler's ep group (consecutive ranks, as ParallelConfig.ep_group carves them from the
    data-parallel ranks of one node) as parsim.exec.expert_parallel.Exchanges; one line naming
    the flag where the model's experts cannot split over ep (``check_ep_flags``)."""
    import torch.distributed as dist

    from parsim.exec.expert_parallel import Exchanges

    check_ep_flags(spec, ep, tp, world, source)
    mine = None
    for first in range(0, world, ep):            # every rank creates every group, in the same order
        group = dist.new_group(list(range(first, first + ep)))
        if first <= rank < first + ep:
            mine = group
    return Exchanges(mine, ep, rank % ep)


def main(argv=None) -> int:
    """Worker: ``python -m parsim.profile.layers MODEL --sizes 2,4 -o out.json`` under the launcher."""
    import argparse
    import os
    import sys

    import torch.distributed as dist

    from parsim.exec.runtime import configure_process
    from parsim.fileio import write_json
    from parsim.model.spec import load_model

    p = argparse.ArgumentParser(prog="python -m parsim.profile.layers")
    p.add_argument("model")
    p.add_argument("--sizes", required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--tp-layout", default="megatron")
    p.add_argument("--ep", type=int, default=1)
    default = RoundsPolicy()
    p.add_argument("--repeats", type=int, default=default.repeats)
    p.add_argument("--min-rounds", type=int, default=default.min_rounds)
    p.add_argument("--max-rounds", type=int, default=default.max_rounds)
    p.add_argument("--target", type=float, default=default.target)
    p.add_argument("--budget", type=float, default=default.budget_s)
    p.add_argument("--noise-threshold", type=float, default=default.noise_threshold)
    args = p.parse_args(argv)
    policy = RoundsPolicy(args.repeats, args.min_rounds, args.max_rounds, args.target, args.budget,
                          args.noise_threshold)
    rank = os.environ.get("RANK", "0")
    try:
        configure_process(int(os.environ.get("OMP_NUM_THREADS", "1")))
        spec = load_model(args.model)
        distributed = "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1
        tp_mesh = ep_exchanges = None
        if distributed:
            from parsim.exec import groups
            env = groups.init(timeout_s=600)
            if args.tp > 1:
                from parsim.exec.tensor_parallel import EXECUTABLE_LAYOUTS
                from torch.distributed.device_mesh import init_device_mesh

                if env.world_size % args.tp or args.tp_layout not in EXECUTABLE_LAYOUTS:
                    raise InputError(f"--tp {args.tp}: needs a multiple of {args.tp} processes and a layout the "
                                     f"executor runs ({', '.join(EXECUTABLE_LAYOUTS)})")
                tp_mesh = init_device_mesh(env.device.type, (env.world_size // args.tp, args.tp),
                                           mesh_dim_names=("dp", "tp"))["tp"]
            if args.ep > 1:
                ep_exchanges = expert_exchanges(spec, args.ep, args.tp, env.rank, env.world_size, args.model)
        elif args.tp > 1:
            raise InputError(f"--tp {args.tp}: profile tensor parallelism with --nproc {args.tp}")
        elif args.ep > 1:
            raise InputError(f"--ep {args.ep}: profile expert parallelism with --nproc {args.ep}")
        def agree(local: set) -> set:           # the union over the concurrent profilers
            if not distributed:
                return local
            everyone = [None] * dist.get_world_size()
            dist.all_gather_object(everyone, sorted(local))
            return {b for part in everyone for b in part}
        table = profile_layers(spec, [int(x) for x in args.sizes.split(",")], args.device, policy,
                               barrier=dist.barrier if distributed else (lambda: None), tp_mesh=tp_mesh,
                               tp_layout=args.tp_layout, ep_exchanges=ep_exchanges, agree=agree,
                               grad_sync=distributed and args.tp == 1 and args.ep == 1,
                               profilers=int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        tables = [table]
        if distributed:
            tables = [None] * dist.get_world_size()
            dist.all_gather_object(tables, table)
            dist.destroy_process_group()
        if rank == "0":
            write_json(args.output, mean_tables(tables))
    except ParsimError as e:
        print(f"parsim: error: rank {rank}: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    from parsim.exec.runtime import exit_without_teardown

    exit_without_teardown(main())
