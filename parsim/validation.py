"""``parsim validate``: predict a set of plans with the profiled cost model, run each with the
executor, and compare, plan by plan and overall.

The default set (2 ranks x 1 thread on this 2-core machine), for ResNet-50 at CIFAR-10 size:
a single process; dp=2; pp=2 with m in {1, 2, 4, 8} under GPipe and under 1F1B; pp=2, m=4 under
interleaved 1F1B (v = 2) and under ZB-H1; the seeds' split (head..layer2 | layer3..fc); and the
planner's own pick.  ``quick`` keeps three of them, for the notebook and the test suite;
``schedules`` keeps pp=2, m=4 under 1F1B, interleaved and ZB-H1 (plus the pick).  For the GPT (tensor parallelism): a single process, dp=2,
tp=2 with m in {1, 2}, cp=2 (context parallelism: the K, V ring, parsim.exec.context_parallel), and
the planner's pick among what the executor runs (pp=1, the megatron layout, cp=1); tensor-parallel
plans also compare their collectives per step, counted in the run,
with the simulator's, which is what a run with more ranks than cores can still check.

Every plan is priced from measured micro-batch sizes: the profiles must hold the fixed plans'
samples per micro-batch (``case_microbatch_sizes``; ``parsim validate`` profiles exactly those,
with --microbatch-sizes), and the planner's pick is restricted to sizes every profile measured.
(The alternative, profiling the pick's size in a second round, could change the pick again.)
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from parsim.cost.compute import AnalyticalCompute, ep_compute_models, load_profile_table, tp_compute_models
from parsim.cost.experts import check_ep
from parsim.errors import InfeasibleError, InputError
from parsim.exec.launch import launch
from parsim.fileio import write_json, write_text
from parsim.hardware import load_cluster
from parsim.hardware.cluster import load_profile, with_measured_fits
from parsim.hardware.machine import this_machine
from parsim.model.spec import load_model
from parsim.profile.calibrate import leave_size_out, profiled_compute
from parsim.profile.host import PhaseWatch, disturbed_phases
from parsim.plan import ParallelConfig, bounds_from_assignment, plan_from_candidate
from parsim.report import validation as report
from parsim.search.noise import TOP, reranker
from parsim.search.planner import Constraints, plan
from parsim.search.resolve import resolve_config
from parsim.shard.graph import collective_counts
from parsim.shard.prepare import auto_memory_bytes, check_shard_section, per_device_graph
from parsim.validation_sets import is_set_file, load_plan_set
from parsim.sim import simulate
from parsim.sim.interval import profiled_intervals, replicate_models

SEEDS_MODEL = "examples/resnet50_cifar10_seeds_split.yaml"


@dataclass(frozen=True)
class Case:
    label: str
    config: ParallelConfig


def _fixed_shapes(spec, which: str) -> list[tuple[str, int, int, int, str, int, int, int, int]]:
    """(label, dp, pp, microbatches, schedule, tp, cp, zero, ep) of the set's plans other than the
    planner's pick: the one table both the cases and the sizes to profile come from.  ``which``:
    a built-in set's name, or a set file (parsim.validation_sets), whose plans for this model."""
    if is_set_file(which):
        return [p.shape() for p in load_plan_set(which).plans_for(spec.path)]
    if which == "zero":            # ZeRO 0-3 side by side: dp=2, two micro-batches (reduce-scatters per micro-batch)
        return [(f"dp2-m2-zero{z}" if z else "dp2-m2", 2, 1, 2, "1f1b", 1, 1, z, 1) for z in (0, 1, 2, 3)]
    # the schedules torch runs from a pipeline_order: interleaved 1F1B (v = 2) and ZB-H1
    schedules = [("pp2-interleaved-m4", 1, 2, 4, "interleaved", 1, 1), ("pp2-zbh1-m4", 1, 2, 4, "zbh1", 1, 1)]
    if spec.source.target == "gpt":
        # pp=2 splits the tied embedding and head over two ranks (parsim.exec.grad_sync.TiedGrads)
        shapes = [("single", 1, 1, 1, "1f1b", 1, 1), ("dp2", 2, 1, 1, "1f1b", 1, 1), ("tp2", 1, 1, 1, "1f1b", 2, 1),
                  ("tp2-m2", 1, 1, 2, "1f1b", 2, 1), ("cp2", 1, 1, 1, "1f1b", 1, 2),
                  ("pp2-1f1b-m4", 1, 2, 4, "1f1b", 1, 1), *schedules]
        keep = {"dp2", "tp2", "pp2-1f1b-m4"}
    else:
        shapes = [("single", 1, 1, 1, "1f1b", 1, 1), ("dp2", 2, 1, 1, "1f1b", 1, 1)]
        shapes += [(f"pp2-{s}-m{m}", 1, 2, m, s, 1, 1) for s in ("gpipe", "1f1b") for m in (1, 2, 4, 8)]
        shapes += [*schedules, ("seeds", 1, 2, 2, "1f1b", 1, 1)]
        keep = {"dp2", "pp2-1f1b-m4"}
    if which == "schedules":       # the pipeline schedules side by side at one size
        keep = {"pp2-1f1b-m4", "pp2-interleaved-m4", "pp2-zbh1-m4"}
    shapes = [(*shape, 0, 1) for shape in shapes]
    return [s for s in shapes if s[0] in keep] if which in ("quick", "schedules") else shapes


def case_microbatch_sizes(spec, which: str = "default") -> list[int]:
    """Samples per micro-batch (global batch / dp / microbatches) of the set's fixed plans: the
    sizes a profile must have measured to price them (the planner's pick is kept to the profiled
    sizes, ``Constraints.microbatch_sizes``)."""
    batch = spec.training.global_batch_size
    return sorted({batch // (dp * m) for _, dp, _, m, *_ in _fixed_shapes(spec, which) if batch % (dp * m) == 0})


def default_cases(spec, cluster, compute, which: str = "default", skipped: list | None = None,
                  tp_compute: dict | None = None, profiled_sizes: tuple[int, ...] | None = None,
                  ep_compute: dict | None = None) -> list[Case]:
    """The set's plans; the planner picks among ``profiled_sizes`` when given, so that every plan is
    priced from measured micro-batch sizes, and prices each candidate as the validation will
    (``tp_compute``, ``ep_compute``: the profiles of the shards and of the split experts)."""
    g = spec.graph
    skipped = skipped if skipped is not None else []
    whole = (0, len(g))
    cases = []
    for label, dp, pp, m, schedule, tp, cp, zero, ep in _fixed_shapes(spec, which):
        if label == "seeds":
            seeds = load_model(SEEDS_MODEL)
            if seeds.graph.names == g.names and seeds.manual_stages:
                cases.append(Case(label, ParallelConfig(dp, pp, m, schedule, 1,
                                                        bounds_from_assignment(seeds.manual_stages))))
        elif pp == 1:
            cases.append(Case(label, ParallelConfig(dp, pp, m, schedule, 1, whole, tp=tp,
                                                    tp_layout="megatron" if tp > 1 else "", cp=cp, zero=zero, ep=ep)))
        else:
            try:
                cfg = resolve_config(spec, cluster, compute, dp=dp, pp=pp, microbatches=m, schedule=schedule,
                                     split="balanced", chunks=2 if schedule == "interleaved" else None)
                cases.append(Case(label, replace(cfg, ep=ep)))
            except InfeasibleError as e:       # e.g. 1F1B with m < pp: torch cannot run it
                skipped.append({"plan": label, "why": str(e)})
    # the pick among what the executor runs: tensor parallelism on the GPT only (Megatron's layout), no
    # recomputation, no context parallelism (its fixed plan measures it); ZeRO searched in the zero set
    # only (the other sets keep the plans they were measured on)
    zero = dict(zero=None if which == "zero" else 0, cp=1)
    extra = (dict(tp_layout="megatron", recompute=False, **zero) if spec.source.target == "gpt"
             else dict(tp=1, recompute=False, **zero))
    tp_compute = tp_compute if spec.source.target == "gpt" else None
    rerank = reranker(spec, cluster, compute, tp_compute, ep_compute)      # under the profile's noise
    picked = plan(spec, cluster, compute, Constraints(top=TOP if rerank else 1, microbatch_sizes=profiled_sizes,
                                                      **extra),
                  progress=False, tp_compute=tp_compute, ep_compute=ep_compute, rerank=rerank).chosen.config
    cases.append(Case("planner", picked))
    return cases


def run_order(labels: list[str], passes: int) -> list[tuple[int, str]]:
    """(pass, plan) in the order validate runs them: the plans alternate (every pass runs each
    once, A B C, B C A, ...), so that a drift of the machine over the session falls on every plan
    alike, and each pass starts one plan later, so that over len(labels) passes every plan takes
    every position once (the first run after a pass's profiling, say, is no plan's alone)."""
    n = len(labels)
    return [(k, labels[(k + i) % n]) for k in range(passes) for i in range(n)]


def sizes_to_profile(spec, asked, which: str = "default") -> list[int]:
    """What ``parsim validate`` profiles: exactly the sizes the set's plans run, and those asked
    for (the planner's pick chooses among them) that a plan could run: none larger than the
    global batch."""
    batch = spec.training.global_batch_size
    return sorted({b for b in asked if b <= batch} | set(case_microbatch_sizes(spec, which)))


def measure_this_machine(model_path: str, spec, sizes, per_node: int, out_dir: str, collectives: bool = True,
                         log=print) -> Measured:
    """Profile the model as the runs will run it, into ``out_dir``: alone and with ``per_node``
    processes at once, the GPT's tensor-parallel shards (tp=2, Megatron's layout) too, an ``hf:``
    mixture of experts' MoE layers split over ep=2 too (their exchanges timed as a run's ranks
    make them), and, with ``collectives``, the links and collectives with ``parsim profile-comm``."""
    from parsim.profile.comm import launch_profile_comm
    from parsim.profile.layers import launch_profilers

    os.makedirs(out_dir, exist_ok=True)
    layers, tp, ep = {}, [], []
    jobs = [(n, os.path.join(out_dir, f"layers.{n}proc.profile.json"), 1, 1) for n in sorted({1, per_node})]
    if spec.source.kind == "builtin" and spec.source.target == "gpt" and per_node >= 2:     # tp=2 plans
        jobs.append((2, os.path.join(out_dir, "layers.tp2.profile.json"), 2, 1))
    if spec.source.kind == "hf" and per_node >= 2 and experts_split_over(spec, 2):            # ep=2 plans
        jobs.append((2, os.path.join(out_dir, "layers.ep2.profile.json"), 1, 2))
    for n, path, t, e in jobs:
        what = ("tensor-parallel shards (tp=2, megatron)" if t > 1 else
                "MoE layers split over ep=2, all-to-alls included" if e > 1 else "model")
        log(f"profiling the {what} with {n} process(es) at once (micro-batch sizes {list(sizes)}) -> {path}")
        if launch_profilers(model_path, sizes, path, n, tp=t, ep=e):
            raise InputError(f"validate: profiling into {path} failed; see the lines above")
        if t > 1:
            tp.append(path)
        elif e > 1:
            ep.append(path)
        else:
            layers[n] = path
    measured = None
    if collectives:
        measured = os.path.join(out_dir, "collectives.profile.yaml")
        log(f"measuring links and collectives with {per_node} processes (parsim profile-comm) -> {measured}")
        # once more on a failure: gloo on this machine has aborted a rank of it (signal 6) once in
        # fifteen runs, 2026-11-24, which would otherwise lose the validation's earlier passes
        if launch_profile_comm(measured, per_node, quiet=True) and launch_profile_comm(measured, per_node, quiet=True):
            raise InputError(f"validate: parsim profile-comm -o {measured} failed twice; run it alone to see why")
    return Measured(layers, tuple(tp), measured, tuple(ep))


def experts_split_over(spec, ep: int) -> bool:
    """Whether every MoE layer's routed experts split over ``ep`` > 1 (False for a dense model):
    parsim.cost.experts.check_ep's rule, over ep ranks."""
    try:
        check_ep(spec.graph, ep)
    except InfeasibleError:
        return False
    return True


def check_profiled_sizes(spec, which: str, model_path: str, profiles: dict[str, tuple[tuple[int, ...], str]]) -> None:
    """Every profile (path -> (its sizes, the ``parsim profile`` flags that took it)) must hold the
    set's micro-batch sizes; else one line naming the missing sizes and the command that adds them."""
    need = case_microbatch_sizes(spec, which)
    for path, (sizes, flags) in profiles.items():
        missing = sorted(set(need) - set(sizes))
        if missing:
            both = ",".join(map(str, sorted(set(need) | set(sizes))))
            raise InputError(f"{path}: microbatch_sizes: lacks {', '.join(map(str, missing))}, the samples per "
                             f"micro-batch of the validation plans; profile them: parsim profile {model_path} "
                             f"--microbatch-sizes {both}{flags} -o {path}")


@dataclass(frozen=True)
class Measured:
    """What one pass's predictions are priced from: layer profiles by processes per node (a plan
    with n ranks on a node takes the one taken with n running at once: cores share caches and
    memory bandwidth, or the nearest one given), profiles of tensor-parallel shards (``parsim
    profile --tp``), each pricing the plans of its tp and layout (a tensor-parallel plan without
    one is priced from the unsharded layers, scaled by their share), and the collectives as
    ``parsim profile-comm`` measured them (None: the cluster profile's own;
    ``hardware.cluster.with_measured_fits``)."""

    layers: dict[int, str]
    tp: tuple[str, ...] = ()
    collectives: str | None = None
    ep: tuple[str, ...] = ()          # profiles of expert-parallel MoE layers (parsim profile --ep), each its ep's


class Pricing:
    """The cluster and cost models of one Measured, and which model prices a plan."""

    def __init__(self, spec, cluster_spec: str, which: str, model_path: str, m: Measured):
        self.measured = m
        self._left_out: dict = {}
        self._replicates: dict = {}
        self.cluster = load_cluster(cluster_spec)
        if m.collectives:
            self.cluster = with_measured_fits(self.cluster, load_profile(m.collectives), m.collectives)
        analytical = AnalyticalCompute.for_training(self.cluster.device, spec.training)
        tables = {n: load_profile_table(path) for n, path in m.layers.items()}
        self.tp_models = tp_compute_models(m.tp, analytical)
        self.ep_models = ep_compute_models(m.ep, analytical)
        check_profiled_sizes(spec, which, model_path,
                             {**{path: (tables[n].microbatch_sizes, f" --nproc {n}") for n, path in m.layers.items()},
                              **{path: (t.table.microbatch_sizes, f" --nproc {t.table.tp} --tp {t.table.tp}")
                                 for path, t in zip(m.tp, self.tp_models.values())},
                              **{path: (t.table.microbatch_sizes, f" --nproc {t.table.ep} --ep {t.table.ep}")
                                 for path, t in zip(m.ep, self.ep_models.values())}})
        self.models = {n: profiled_compute(t, spec.graph, self.cluster.device, spec.training.dtype)
                       for n, t in tables.items()}
        self.profiled = tuple(sorted(set.intersection(*(set(t.table.microbatch_sizes)
                                                        for t in [*self.models.values(), *self.tp_models.values(),
                                                                  *self.ep_models.values()]))))

    def replicates(self, model) -> list:
        """The compute models of ``model``'s profile replicates (parsim.sim.interval), made once."""
        key = id(model)
        if key not in self._replicates:
            self._replicates[key] = replicate_models(model)
        return self._replicates[key]

    def compute_for(self, cfg: ParallelConfig):
        if (cfg.tp, cfg.tp_layout) in self.tp_models:
            return self.tp_models[(cfg.tp, cfg.tp_layout)]
        if cfg.ep in self.ep_models:
            return self.ep_models[cfg.ep]
        n = min(cfg.world_size, self.cluster.devices_per_node)
        return self.models[min(self.models, key=lambda k: (abs(k - n), -k))]

    def analytical_for(self, spec, cfg: ParallelConfig):
        """Leave-one-size-out: the analytical model calibrated to the plan's profile at every size
        but the plan's own (profile.calibrate.leave_size_out), so that the analytical column is
        judged on a size its fit did not see.  A tensor-parallel profile's fallback is the device
        as it stands (never fitted to the profile), used as it is."""
        model = self.compute_for(cfg)
        if model.table.tp > 1 or model.table.ep > 1:
            return model.fallback
        size = cfg.microbatch_size(spec.training.global_batch_size)
        key = (id(model), size)
        if key not in self._left_out:
            self._left_out[key] = leave_size_out(spec.graph, model.table, self.cluster.device, size,
                                                 spec.training.dtype)
        return self._left_out[key]

    def coverage_lines(self) -> list[str]:
        named = [*((self.measured.layers[n], m) for n, m in self.models.items()),
                 *zip(self.measured.tp, self.tp_models.values()), *zip(self.measured.ep, self.ep_models.values())]
        from parsim.sim.simulate import fsdp_sync_overlap, grad_sync_overlap

        colls = self.cluster.profile.collectives
        group = list(range(min(2, self.cluster.devices_per_node)))
        priced_from = ("the interaction measured on synthetic kernels (profile-comm)" if colls.interaction
                       else f"the cluster's overlap {colls.overlap:.2f} (no interaction measured)")
        return [f"{name}: {m.coverage().describe()}" for name, m in named] + [
            f"{self.measured.layers[n]}: DIAGNOSTIC, same workload, not used for pricing: the gradient all-reduce "
            f"(dp={g.dp}, {sum(g.bucket_bytes) / 2**20:.1f} MiB) added {g.added_s * 1e3:.1f} ms to the backward of "
            f"{g.microbatch_size} samples, {g.added_s / g.all_reduce_s:.2f}x its {g.all_reduce_s * 1e3:.1f} ms alone "
            f"(overlap {o:.2f}, contention {c:.2f} as priced); the buckets are priced from {priced_from}"
            for n, m in self.models.items() if (g := m.table.grad_sync) is not None
            for o, c in [grad_sync_overlap(g, self.cluster, group, "auto")]] + [
            f"{self.measured.layers[n]}: DIAGNOSTIC, same workload, not used for pricing: ZeRO-2's reduce-scatters "
            f"(dp={f.dp}, {len(f.reduce_scatter_bytes)} units, {sum(f.reduce_scatter_bytes) / 2**20:.1f} MiB) added "
            f"{f.added_s * 1e3:.1f} ms to the backward of {f.microbatch_size} samples (overlap {o:.2f}, contention "
            f"{c:.2f} as priced); they are priced from {priced_from}"
            for n, m in self.models.items() if (f := m.table.fsdp_sync) is not None
            for o, c in [fsdp_sync_overlap(f, self.cluster, group, "auto")]]


def predict(spec, priced: Pricing, cfg: ParallelConfig, analytical: bool = False):
    """The plan's estimate from the profiled model, with its intervals (parsim.sim.interval); with
    ``analytical``, from the analytical model calibrated to the same profile without the plan's
    micro-batch size (``Pricing.analytical_for``), or None where no other size was profiled."""
    model = priced.analytical_for(spec, cfg) if analytical else priced.compute_for(cfg)
    if model is None:
        return None
    est = simulate(spec.graph, spec.training, priced.cluster, cfg, model, strategies=spec.shard,
                   keep_timeline=not analytical)
    if analytical:
        return est
    step, memory = profiled_intervals(spec, priced.cluster, cfg, model, est.step_time_s,
                                      replicates=priced.replicates(model))
    return replace(est, step_time_band=step, peak_memory_band=memory)


def validate(model_path: str, cluster_spec: str, profiles: dict[int, str] | Callable[[int], Measured], out_dir: str,
             steps: int = 12, which: str = "default", timeout_s: float = 300.0, passes: int = 1, log=print,
             tp_profiles: list[str] | None = None, results_root: str | None = None) -> dict:
    """``profiles``: the layer profiles by processes per node (``Measured.layers``; with
    ``tp_profiles``, its ``tp``), which price every pass; or a function that measures pass k's
    (k = 0, 1, ...) right before its runs, so that each pass is predicted from a profile taken
    minutes before it, never from the runs: a machine that drifts between passes then shows as
    spread in the predictions (``predicted_spread``) instead of as error.  The set's plans (the
    planner's pick included) are chosen with pass 0's.  With ``results_root``, the evidence (the
    small files and the profiles) is copied under it too (``write_evidence``)."""
    spec = check_shard_section(load_model(model_path))
    # the executor runs a pipeline on torch's PipelineStage: its buffers priced (Training.pipeline_runtime)
    spec = replace(spec, training=replace(spec.training, pipeline_runtime="torch"))
    if callable(profiles):
        measure = profiles
    else:
        fixed = Measured(dict(profiles), tuple(tp_profiles or ()))
        measure = lambda k: fixed             # noqa: E731
    pricing = [Pricing(spec, cluster_spec, which, model_path, measure(0))]
    first = pricing[0]
    os.makedirs(out_dir, exist_ok=True)
    rows, results = [], []
    skipped: list[dict] = []
    cases = default_cases(spec, first.cluster, first.compute_for(ParallelConfig(first.cluster.devices_per_node, 1, 1)),
                          which, skipped, first.tp_models, first.profiled, first.ep_models)
    for item in skipped:
        log(f"skipped {item['plan']}: {item['why']}")
    # Passes run the whole set in turn (run_order), so that slow drifts of the shared machine fall on
    # every plan alike; a plan's measurement is its median over passes, and the spread is reported.
    runs: dict[str, list[tuple[int, dict]]] = {c.label: [] for c in cases}
    # the host's counters over each run (its ranks' own CPU time apart): a run that other processes
    # or the hypervisor took CPU from is named, not silently counted as the model's error.  No canary:
    # timed before a run (after the idle gap between runs) it moved by 20-60% on a quiet VM and named
    # runs no slower than the rest while missing one 18% slower (results/2026-11-28-amd-epyc/
    # validate-host-watch/)
    watch = PhaseWatch(children=True, canary=False)
    order = run_order([c.label for c in cases], passes)
    estimates: list[dict] = []                  # per pass: label -> (Estimate, analytical step s)
    for k in range(passes):
        if k:
            m = measure(k)
            pricing.append(pricing[-1] if m == pricing[-1].measured else Pricing(spec, cluster_spec, which,
                                                                                    model_path, m))
        priced = pricing[k]
        # Beside each, the analytical model calibrated to the same profile without the plan's own
        # size (leave-one-size-out): how far a plan at a size nobody profiled would be off.
        estimates.append({c.label: (predict(spec, priced, c.config),
                                    getattr(predict(spec, priced, c.config, analytical=True), "step_time_s", math.nan))
                          for c in cases})
        if k == 0:            # what every pass runs: the plan, with pass 0's prediction in it
            for case in cases:
                write_json(os.path.join(out_dir, f"{case.label}.plan.json"),
                           plan_from_candidate(spec, first.cluster, case.config,
                                               estimates[0][case.label][0].to_json()).to_json())
        if k == 0 or priced is not pricing[k - 1]:
            for line in priced.coverage_lines():        # the sizes this pass's predictions looked up
                log(line)
        by_label = {c.label: c for c in cases}
        for i, (_, label) in enumerate(o for o in order if o[0] == k):
            case = by_label[label]
            cfg, est = case.config, estimates[k][case.label][0]
            run_dir = os.path.join(out_dir, case.label if passes == 1 else f"{case.label}.pass{k + 1}")
            log(f"[pass {k + 1}/{passes}, {i + 1}/{len(cases)}] {case.label}: dp={cfg.dp} pp={cfg.pp} tp={cfg.tp} "
                f"cp={cfg.cp} " + (f"ep={cfg.ep} " if cfg.ep > 1 else "") +
                f"m={cfg.microbatches} {cfg.schedule}, predicted {est.step_time_s:.4f} s ...")
            code = watch(f"pass {k + 1} {case.label}", lambda: launch(
                [os.path.join(out_dir, f"{case.label}.plan.json"), "--steps", str(steps), "--out", run_dir, "--json",
                 "--timeout", str(timeout_s)], cfg.world_size, timeout_s, module="parsim.run", quiet=True))
            if code:
                raise InputError(f"validate: the run of {case.label} failed (exit {code}); see {run_dir}")
            with open(os.path.join(run_dir, "measured.json")) as f:
                runs[case.label].append((k, json.load(f)))
            log(f"      measured {runs[case.label][-1][1]['step_time_s']:.4f} s")
    disturbed = disturbed_phases(watch.phases)
    for line in disturbed:
        log(f"parsim: warning: the host was disturbed during the run of {line}; its time is kept, and "
            "counts as error")
    for case in cases:
        cfg, measured_runs = case.config, runs[case.label]
        times = sorted(m["step_time_s"] for _, m in measured_runs)
        # each run's timed steps (after its warm-up), in pass order: what the error bars resample
        steps = tuple(tuple(t for t in m.get("step_times_s", ())[m.get("warmup", 0):] if t == t) or (m["step_time_s"],)
                      for _, m in sorted(measured_runs, key=lambda km: km[0]))
        k, measured = sorted(measured_runs, key=lambda km: km[1]["step_time_s"])[len(measured_runs) // 2]
        est = estimates[k][case.label][0]            # the median run's pass: its memory, phases and timeline
        predicted = sorted(estimates[j][case.label][0].step_time_s for j in range(passes))
        peak = [p for p in measured["peak_memory_bytes"] if p]
        row = report.Row(
            label=case.label, dp=cfg.dp, pp=cfg.pp, microbatches=cfg.microbatches, schedule=cfg.schedule,
            analytical_step_s=statistics.median(estimates[j][case.label][1] for j in range(passes)),
            split=cfg.describe_split(spec.graph.names), predicted_step_s=statistics.median(predicted),
            measured_step_s=statistics.median(times), predicted_peak_bytes=max(est.peak_memory_bytes),
            measured_peak_bytes=max(peak) if peak else 0.0,
            predicted_compute_frac=sum(r.busy_s for r in est.ranks) / (len(est.ranks) * est.step_time_s),
            predicted_bubble_frac=est.bubble_fraction, predicted_exposed_comm_frac=est.exposed_comm_fraction,
            predicted_sync_wait_frac=est.sync_wait_fraction,
            measured_compute_frac=report.measured_compute_fraction(measured),
            measured_spread=(times[-1] - times[0]) / statistics.median(times) if len(times) > 1 else 0.0,
            predicted_spread=(predicted[-1] - predicted[0]) / statistics.median(predicted),
            measured_steps_s=steps, predicted_runs_s=tuple(estimates[j][case.label][0].step_time_s for j, _ in
                                                           sorted(measured_runs, key=lambda km: km[0])),
            predicted_intervals_s=tuple(_bounds(estimates[j][case.label][0].step_time_band)
                                        for j, _ in sorted(measured_runs, key=lambda km: km[0])),
            memory_interval_bytes=_bounds(est.peak_memory_band),
            interval_level=est.step_time_band.level if est.step_time_band is not None else math.nan,
            tp=cfg.tp, ep=cfg.ep, measured_collectives=report.collectives_text(measured.get("tp_collectives_per_step") or {}),
            predicted_collectives=report.collectives_text(collective_counts(
                per_device_graph(spec.graph, cfg.tp, cfg.tp_layout, cfg.recompute, spec.shard, first.cluster,
                                 spec.training, cfg.microbatch_size(spec.training.global_batch_size),
                                 auto_memory_bytes(first.cluster, cfg.pp), etp=cfg.etp,
                                 recompute_only=cfg.recomputed_layers(len(spec.graph))), cfg.microbatches,
                cfg.rank_layers(0))))
        rows.append(row)
        results.append((case, est, measured))
    out = report.summary(rows)
    breakdown = [row for case, est, measured in results for row in report.memory_breakdown(case.label, est, measured)]
    out.update(model=model_path, cluster=cluster_spec, profiles={str(n): v for n, v in first.measured.layers.items()},
               tp_profiles=list(first.measured.tp), ep_profiles=list(first.measured.ep),
               collectives=first.measured.collectives,
               measured_per_pass=[asdict(p.measured) for p in pricing],
               steps=steps, set=which, passes=passes, run_order=[list(o) for o in order],
               set_definition=asdict(load_plan_set(which)) if is_set_file(which) else None, skipped=skipped,
               memory_breakdown=breakdown, pipeline_rank_memory=report.pipeline_rank_memory_line(breakdown),
               disturbed_runs=disturbed, runs_watched=len(watch.phases),
               runs_host=[{"run": name, "foreign_cores": h.foreign, "steal_cores": h.steal}
                          for name, _, h in watch.phases],
               machine=asdict(this_machine()))      # where it was measured, for a plan report
    write_json(os.path.join(out_dir, "validation.json"), out)
    write_text(os.path.join(out_dir, "validation.csv"), report.table(rows).to_csv(index=False))   # pooled rows
    write_text(os.path.join(out_dir, "memory_breakdown.csv"), report.memory_table(breakdown).to_csv(index=False))
    report.scatter(report.pooled(rows)[0], os.path.join(out_dir, "scatter.png"))
    for case, est, measured in results:
        report.overlay(est, measured, os.path.join(out_dir, f"overlay_{case.label}.png"),
                       f"{case.label}: {case.config.describe_split(spec.graph.names)}")
    if results_root:
        out["evidence"] = write_evidence(results_root, out, spec, which, out_dir)
        log(f"evidence (commit it): {out['evidence']}")
    out["table"] = report.table(rows)
    return out


def _bounds(interval) -> tuple:
    return () if interval is None else (interval.low, interval.high)


def write_evidence(root: str, out: dict, spec, which: str, out_dir: str) -> str:
    """Copy the small files behind the figures, and the profiles that priced them, to
    ``root/<date>-<cpu>/<set>/<model>/`` (parsim.report.evidence); returns that folder.  The
    copied validation.json names the profiles by their copies."""
    import shutil

    from parsim.report.evidence import FILES, evidence_dir, profile_copies

    machine = out["machine"]
    set_name = load_plan_set(which).name if is_set_file(which) else which
    where = evidence_dir(root, machine["date"], machine["cpu_model"], set_name, spec.name)
    os.makedirs(where, exist_ok=True)
    copies = profile_copies(out["measured_per_pass"])
    for src, name in copies.items():
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(where, "profiles", name)), exist_ok=True)
            shutil.copyfile(src, os.path.join(where, "profiles", name))
    for name in FILES[1:]:
        shutil.copyfile(os.path.join(out_dir, name), os.path.join(where, name))
    rename = lambda p: f"profiles/{copies[p]}" if p in copies else p       # noqa: E731
    evidence = {**out, "profiles": {n: rename(p) for n, p in out["profiles"].items()},
                "tp_profiles": [rename(p) for p in out["tp_profiles"]],
                "ep_profiles": [rename(p) for p in out.get("ep_profiles", [])],
                "collectives": rename(out["collectives"]) if out["collectives"] else None,
                "measured_per_pass": [{"layers": {n: rename(p) for n, p in m["layers"].items()},
                                       "tp": [rename(p) for p in m["tp"]],
                                       "ep": [rename(p) for p in m.get("ep", [])],
                                       "collectives": rename(m["collectives"]) if m["collectives"] else None}
                                      for m in out["measured_per_pass"]]}
    write_json(os.path.join(where, FILES[0]), evidence)
    return where
