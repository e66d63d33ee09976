"""Compute time of a layer for one micro-batch: the analytical roofline or a profiled table.

Both implement ``ComputeModel.layer_time_s(layer, kind, microbatch)`` with kind in F, B, I, W.

Analytical, per layer and micro-batch of b samples:

- kernel-level (``parsim.cost.kernels``), where the device profile has a ``kernels:`` section and
  the layer was extracted with its kernels: the sum over the layer's kernels, each GEMM priced by
  its own shape, each memory-bound kernel by its bytes, plus a launch and dispatch cost each;
- otherwise the layer-level roofline (Williams et al. 2009, "Roofline"):

    t = max(b*FLOPs / (peak * eff(b*FLOPs)), weight_bytes / BW)   matmul/conv ops: compute-bound
                                                                  unless the weights' read dominates
      + b*mem_bytes / (BW * mem_eff)                              memory-bound ops, by their bytes

Either way the GEMM engine's peak comes from the numeric mode (``parsim.hardware.numerics``).

Backward splits for zero-bubble schedules: W (weight gradient) costs one matmul of the forward's
size for a layer with parameters; I (input gradient) is the rest of B.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

import numpy as np

from parsim.errors import InputError
from parsim.cost.profile_rounds import TIME_KINDS, read_layer_rounds, read_rounds
from parsim.cost.kernels import kernel_time_s, layer_kernels_time_s
from parsim.hardware.device import Device
from parsim.hardware.numerics import MathMode, engines
from parsim.hardware.machine import Machine, warn_if_elsewhere
from parsim.inputs import Fields, load_file
from parsim.model.graph import DTYPE_BYTES, Layer


class ComputeModel(Protocol):
    includes_tp_comm: bool        # its layer times already hold the tensor-parallel collectives
    # what the gradient all-reduce added to the model's own backward where a profile measured it
    # (parsim.profile.grad_sync): a DIAGNOSTIC, never a price (the buckets are priced from the
    # cluster's collectives.interaction, else its overlap)
    grad_sync: GradSync | None
    # what ZeRO-2/3's reduce-scatters added to it (parsim.profile.grad_sync, measure_fsdp_sync)
    fsdp_sync: FsdpSync | None

    def layer_time_s(self, layer: Layer, kind: str, microbatch: int) -> float: ...

    def optimizer_time_s(self, param_count: int, bytes_per_param_moved: float) -> float: ...


def split_flops(layer: Layer, kind: str) -> tuple[float, float]:
    """(FLOPs, memory-bound bytes) per sample for kind F, B, I or W."""
    w_flops = min(layer.fwd_flops, layer.bwd_flops) if layer.param_count else 0.0
    if kind == "F":
        return layer.fwd_flops, layer.fwd_mem_bytes
    if kind == "B":
        return layer.bwd_flops, layer.bwd_mem_bytes
    if kind == "I":
        return layer.bwd_flops - w_flops, layer.bwd_mem_bytes
    if kind == "W":
        return w_flops, 0.0
    raise ValueError(f"kind must be F, B, I or W, got {kind!r}")


@dataclass(frozen=True)
class AnalyticalCompute:
    device: Device
    dtype: str = "fp32"
    math: MathMode | None = None  # numeric modes; None: torch's defaults for ``dtype``
    includes_tp_comm = False      # tensor-parallel collectives are priced by parsim.cost.layer
    grad_sync = None              # no same-workload diagnostic (the buckets are priced from the cluster)
    fsdp_sync = None              # ... nor of ZeRO-2/3's reduce-scatters
    engines: dict = field(init=False, repr=False, compare=False)   # Engine per GEMM kernel class
    # (id of a layer's kernels, its tp share, kind, b) -> (kernels, time): the planner asks for the
    # same layers at the same sizes many times; holding the kernels keeps their id unique.
    _memo: dict = field(init=False, repr=False, compare=False)
    # (b, share) -> id of a kernel -> time: layers that differ share most kernels (an
    # expert-parallel layer keeps its attention's, parsim.cost.experts), each priced once: in
    # DeepSeek-V3's search on 2,048 H100, before layers were priced by class (parsim.sim.prices),
    # 327 thousand kernel prices instead of 1.76 million (benchmarks/profile_search.py counts them).
    _kernel_memo: dict = field(init=False, repr=False, compare=False)
    _kernels_held: dict = field(init=False, repr=False, compare=False)   # id -> kernel: the ids stay theirs
    # a GEMM's (M, N, K, groups) -> parsim.cost.kernels.gemm_shape_efficiency on this device:
    # kernels that differ share shapes (DeepSeek-V3's search on 2,048 H100 prices 62,179 GEMMs of
    # 2,844 shapes, 2026-11-30)
    _shape_memo: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        mode = self.math or MathMode(self.dtype)
        if mode.dtype != self.dtype:
            raise ValueError(f"math mode dtype {mode.dtype} != {self.dtype}")
        object.__setattr__(self, "engines", engines(self.device, mode))
        object.__setattr__(self, "_memo", {})
        object.__setattr__(self, "_kernel_memo", {})
        object.__setattr__(self, "_kernels_held", {})
        object.__setattr__(self, "_shape_memo", {})

    @classmethod
    def for_training(cls, device: Device, training) -> "AnalyticalCompute":
        """The model for a model.yaml's ``training`` settings (dtype and numeric modes)."""
        return cls(device, training.dtype, MathMode(training.dtype, training.tf32_conv, training.tf32_matmul,
                                                    training.ascend_precision_mode,
                                                    training.memory_format == "channels_last",
                                                    getattr(training, "fp8", False),
                                                    getattr(training, "attention_kernel", None) or ""))

    @property
    def kernel_level(self) -> bool:
        return self.device.kernels is not None

    def layer_time_s(self, layer: Layer, kind: str, microbatch: int) -> float:
        if self.device.kernels is not None and layer.kernels:
            key = (id(layer.kernels), layer.tp_share, layer.seq_share, kind, microbatch)
            hit = self._memo.get(key)
            if hit is None:
                hit = self._memo[key] = (layer.kernels, layer_kernels_time_s(
                    layer, kind, microbatch, self.device, self.engines, self._kernel_times(microbatch)))
            return hit[1]
        flops, mem_bytes = split_flops(layer, kind)
        flops *= microbatch
        bw = self.device.achieved_bandwidth_bytes_per_s()
        t = 0.0
        if flops > 0:
            rate = self.engines["matmul"].rate_flops_per_s * self.device.compute_efficiency(flops)
            t = max(flops / rate, layer.param_bytes / bw)
        return t + microbatch * mem_bytes / bw

    def _kernel_times(self, microbatch: int):
        """Each of a list of kernels' parsim.cost.kernels.kernel_time_s at ``microbatch`` on this
        device, each kernel at each share priced once (``_kernel_memo``: a table per (micro-batch,
        share), by the kernel's id)."""
        memo, held, device, engines, shapes = (self._kernel_memo, self._kernels_held, self.device, self.engines,
                                               self._shape_memo)

        def times(kernels, share: float) -> list[float]:
            table = memo.get((microbatch, share))
            if table is None:
                table = memo[(microbatch, share)] = {}
            get = table.get
            out = [get(id(k)) for k in kernels]         # most are kept: one lookup each, then the rest
            if None in out:
                for i, k in enumerate(kernels):
                    if out[i] is None:
                        t = get(id(k))                  # a kernel listed twice: priced at its first
                        if t is None:
                            t = table[id(k)] = kernel_time_s(k, microbatch, device, engines, share, shapes)
                            held[id(k)] = k
                        out[i] = t
            return out
        return times

    def optimizer_time_s(self, param_count: int, bytes_per_param_moved: float) -> float:
        # The optimizer step is element-wise: memory-bound on parameters, gradients and states.
        return param_count * bytes_per_param_moved / self.device.achieved_bandwidth_bytes_per_s()


# ----------------------------------------------------------------------------- profiled

PROFILE_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class LayerTimes:
    fwd_s: tuple[float, ...]
    bwd_s: tuple[float, ...]
    # the split backward of zero-bubble schedules, when profiled (two autograd passes)
    bwd_input_s: tuple[float, ...] | None = None
    bwd_weight_s: tuple[float, ...] | None = None


@dataclass(frozen=True)
class GradSync:
    """The gradient all-reduce under the model's own backward, measured by ``dp`` concurrent
    profilers (parsim.profile.grad_sync): the buckets ``bucket_bytes`` (the executor's, the whole
    model as one stage) added ``added_s`` to a backward of ``microbatch_size`` samples, against
    ``all_reduce_s`` when reduced alone."""
    dp: int
    microbatch_size: int
    bucket_bytes: tuple[int, ...]
    added_s: float
    all_reduce_s: float

    def terms(self, priced_s: float) -> tuple[float, float]:
        """DIAGNOSTIC (the simulator prices from the interaction measured on synthetic kernels,
        parsim.hardware.interaction): the (overlap in [0, 1], contention >= 0) that would make the
        simulator's charge, (1 - overlap + contention) x the buckets' priced time ``priced_s``,
        equal what was measured under this model's own backward."""
        return split_added(self.added_s, priced_s)


@dataclass(frozen=True)
class FsdpSync:
    """ZeRO-2's reduce-scatters under the model's own backward, measured by ``dp`` concurrent
    profilers (parsim.profile.grad_sync.measure_fsdp_sync): FSDP2's reduce-scatters of
    ``reduce_scatter_bytes`` (each the full buffer, the whole model as one stage) and their host
    time added ``added_s`` to a backward of ``microbatch_size`` samples."""
    dp: int
    microbatch_size: int
    reduce_scatter_bytes: tuple[int, ...]
    added_s: float

    def terms(self, host_s: float, priced_s: float) -> tuple[float, float]:
        """DIAGNOSTIC, as GradSync.terms: the reduce-scatters' (overlap, contention) that make their
        host time ``host_s`` plus (1 - overlap + contention) x their priced time equal what was
        measured (hidden, (1, 0), where the host time as priced already exceeds it)."""
        return split_added(self.added_s - host_s, priced_s)


def split_added(added_s: float, priced_s: float) -> tuple[float, float]:
    """A collective of priced time ``priced_s`` that added ``added_s`` to the compute it ran
    under, as (overlap, contention): overlap = 1 - min(added, priced) / priced in [0, 1],
    contention = max(0, added - priced) / priced >= 0 (parsim.hardware.interaction)."""
    if priced_s <= 0:
        return 1.0, 0.0
    added_s = max(0.0, added_s)
    return 1.0 - min(added_s, priced_s) / priced_s, max(0.0, added_s - priced_s) / priced_s


@dataclass(frozen=True)
class ProfileTable:
    """Measured per-layer times per micro-batch size (``parsim profile`` writes it)::

        schema_version: 1
        kind: layer-profile
        model: resnet50-cifar10
        device: cpu-core          # free text: where it was measured
        dtype: fp32
        threads: 1
        concurrent_processes: 2   # profilers run at once, as the ranks of a run
        measured: "2026-11-22"
        microbatch_sizes: [1, 2, 4, 8]
        layers:
          - {name: head, fwd_s: [...], bwd_s: [...]}    # one time per micro-batch size, median
            # optional: bwd_input_s, bwd_weight_s (I and W of zero-bubble schedules), saved_bytes
            # optional, repeatability (parsim.profile.rounds): fwd_spread, bwd_spread (the width
            # of the median's 90% interval over the rounds / median, per size), proc_spread (over
            # concurrent profilers, F+B, per size), noisy (sizes whose interval reaches beyond
            # noise_threshold), nonmonotone_confirmed (pairs [b1, b2], b1 < b2, whose F+B at b2 is
            # below b1's beyond both intervals); older profiles: the spread of the repeats, and
            # falls measured twice
        optimizer: adam           # optional: the optimizer timed (the model's training.optimizer)
        optimizer_s_per_param: 2.0e-9                   # optional
        slowest_rank: [1.04, ...] # optional, concurrent profilers: per size, the slowest process's
                                  # F + B over the mean's, repeat by repeat (parsim.profile.tables.slowest_rank);
                                  # the profiled model prices every layer at it
        tp: 2                     # optional: times of the per-device shards, collectives included
        tp_layout: megatron
        ep: 2                     # optional: MoE layers timed with their experts split over ep processes,
                                  # the token all-to-alls included (parsim profile --ep)
        rounds: {kept: [[true, ...], ...], stopped: precise, precision: [...], canary_s: ..., foreign: ...,
                 steal: ..., target: 0.02, disturbed: [...], optimizer_s_per_param: [...]}
                                  # optional, profiles taken in rounds (parsim.profile.rounds): per round
                                  # and size, whether the canary kept it; each layer then has
                                  # round_s: {fwd_s: [[...per size] per round], ...}
                                  # (parsim.cost.profile_rounds replicates them for intervals)
        machine: {cpu_model: ..., cores: 2, torch: 2.5.1, numpy: ..., python: ..., date: ...}  # optional
        noise_threshold: 0.05     # optional: relative spread above which a size was re-measured
        max_remeasure: 2          # optional: at most this many more rounds per size
        remeasured: [8]           # optional: sizes measured again for noise
        grad_sync: {microbatch_size: 16, backward_s: 0.113, all_reduce_s: 0.060, both_s: 0.168, cost: 0.92,
                    cost_min: 0.72, cost_max: 1.41, repeats: 5, dp: 2, bucket_bytes: [...]}
                                  # optional: parsim.profile.grad_sync (concurrent profilers, no tp)
        fsdp_sync: {microbatch_size: 16, backward_s: 0.113, fsdp_backward_s: 0.160, added_s: 0.047,
                    added_min_s: 0.03, added_max_s: 0.08, repeats: 5, dp: 2, reduce_scatter_bytes: [...]}
                                  # optional: parsim.profile.grad_sync.measure_fsdp_sync (as grad_sync)
    """

    microbatch_sizes: tuple[int, ...]
    layers: tuple[tuple[str, LayerTimes], ...]
    dtype: str = "fp32"
    device: str = ""
    optimizer_s_per_param: float | None = None
    tp: int = 1
    tp_layout: str = ""
    machine: Machine | None = None
    noisy: tuple[tuple[str, int], ...] = ()                    # (layer, size) still noisy
    nonmonotone_confirmed: tuple[tuple[str, int, int], ...] = ()   # (layer, b1, b2)
    source: str = ""                   # the file it was read from
    threads: int = 1                   # intra-op threads per process it was measured with
    grad_sync: GradSync | None = None
    fsdp_sync: FsdpSync | None = None
    slowest_rank: tuple[float, ...] = ()      # per size; () for one profiler (factor 1)
    ep: int = 1                               # >1: MoE layers timed split over ep processes, exchanges included
    rounds: object = None                     # parsim.cost.profile_rounds.ProfileRounds; None: taken without rounds

    @cached_property
    def _by_name(self) -> dict[str, LayerTimes]:
        return dict(self.layers)

    def times(self, name: str) -> LayerTimes:
        table = self._by_name
        if name not in table:
            raise InputError(f"{self.source or 'profile'}: layers: no times for layer {name!r}; profile this model again "
                             f"(it has {', '.join(list(table)[:4])} ...)")
        return table[name]


def _sizes_field(f: Fields, key: str, allowed, pairs: bool = False) -> list:
    v = f.get(key, list, [])
    ok = all(isinstance(b, int) and b in allowed for b in v) if not pairs else all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(b, int) and b in allowed for b in p) for p in v)
    if not ok:
        raise f.fail(key, "expected " + ("pairs of " if pairs else "") + "micro-batch sizes of microbatch_sizes")
    return v


def load_profile_table(path: str | os.PathLike, here: Machine | None = None) -> ProfileTable:
    """Read a profile; one ``ProfileMachineWarning`` when it records a machine that differs from
    ``here`` (default: this one) in CPU model or torch version."""
    path = os.fspath(path)
    r = Fields(load_file(path, "a layer profile from parsim profile"), path)
    r.schema_version(PROFILE_SCHEMA_VERSION, hint="profile the model again with this parsim")
    r.choice("kind", ("layer-profile",))
    sizes = r.get("microbatch_sizes", list)
    if not sizes or any(not isinstance(b, int) or b <= 0 for b in sizes) or sizes != sorted(set(sizes)):
        raise r.fail("microbatch_sizes", "expected rising positive integers, e.g. [1, 2, 4, 8]")
    layers, noisy, nonmonotone, round_rows = [], [], [], {}
    for i, row in enumerate(r.get("layers", list)):
        f = Fields(row, path, f"layers[{i}].")
        name = f.get("name", str)
        times = []
        for key, required in (("fwd_s", True), ("bwd_s", True), ("bwd_input_s", False), ("bwd_weight_s", False)):
            v = f.get(key, list) if required else f.get(key, list, None)
            if v is None:
                times.append(None)
                continue
            if len(v) != len(sizes) or any(not isinstance(x, (int, float)) or x < 0 for x in v):
                raise f.fail(key, f"expected {len(sizes)} non-negative times, one per micro-batch size")
            times.append(tuple(float(x) for x in v))
        f.get("saved_bytes", list, [])  # recorded by the profiler; the graph's own counts are used
        for key in ("fwd_spread", "bwd_spread", "proc_spread"):     # repeatability, for the reader
            v = f.get(key, list, None)
            if v is not None and (len(v) != len(sizes) or any(not isinstance(x, (int, float)) or x < 0 for x in v)):
                raise f.fail(key, f"expected {len(sizes)} non-negative relative spreads, one per micro-batch size")
        noisy += [(name, b) for b in _sizes_field(f, "noisy", sizes)]
        nonmonotone += [(name, b1, b2) for b1, b2 in _sizes_field(f, "nonmonotone_confirmed", sizes, pairs=True)]
        round_rows[name] = read_layer_rounds(f, tuple(k for k, t in zip(TIME_KINDS, times) if t is not None),
                                             len(sizes))
        f.done()
        layers.append((name, LayerTimes(*times)))
    for key in ("model", "measured"):
        r.get(key, str, "")
    device = r.get("device", str, "")
    threads = r.get("threads", int, 1)
    processes = r.get("concurrent_processes", int, 1)
    r.get("optimizer", str, "")
    slowest = r.get("slowest_rank", list, [])
    if slowest and (len(slowest) != len(sizes) or any(not isinstance(x, (int, float)) or x < 1 for x in slowest)):
        raise r.fail("slowest_rank", f"expected {len(sizes)} factors of at least 1, one per micro-batch size")
    r.get("noise_threshold", float, None)
    r.get("max_remeasure", int, None)
    _sizes_field(r, "remeasured", sizes)
    machine = None
    if r.has("machine"):
        m = r.sub("machine")
        machine = Machine(cpu_model=m.get("cpu_model", str, ""), cores=m.get("cores", int, 0),
                          torch=m.get("torch", str, ""), numpy=m.get("numpy", str, ""),
                          python=m.get("python", str, ""), date=m.get("date", str, ""))
        m.done()
    rounds = read_rounds(r, round_rows, len(sizes), path, processes)
    grad_sync = _grad_sync(r.sub("grad_sync"), sizes) if r.has("grad_sync") else None
    fsdp_sync = _fsdp_sync(r.sub("fsdp_sync"), sizes) if r.has("fsdp_sync") else None
    table = ProfileTable(tuple(sizes), tuple(layers), r.choice("dtype", tuple(DTYPE_BYTES), "fp32"),
                         device, r.get("optimizer_s_per_param", float, None), r.positive_int("tp", 1),
                         r.get("tp_layout", str, ""), machine, tuple(noisy), tuple(nonmonotone), path, threads,
                         grad_sync, fsdp_sync, tuple(float(x) for x in slowest), r.positive_int("ep", 1), rounds)
    r.done()
    if machine is not None:
        warn_if_elsewhere(machine, path, here)
    return table


def _measured_under_backward(f: Fields, sizes, time_keys: tuple[str, ...], bytes_key: str,
                             what: str) -> tuple[int, dict[str, float], tuple[int, ...]]:
    """The fields a grad_sync and an fsdp_sync entry share: the micro-batch size (one of the
    profile's), times in seconds that must be positive, and the byte counts of ``what`` was timed."""
    b = f.positive_int("microbatch_size")
    if b not in sizes:
        raise f.fail("microbatch_size", f"expected one of microbatch_sizes {sizes}")
    times = {}
    for key in time_keys:
        times[key] = f.get(key, float)
        if times[key] <= 0:
            raise f.fail(key, "expected a positive time in seconds; profile the model again")
    nbytes = f.get(bytes_key, list)
    if not nbytes or any(not isinstance(x, int) or x <= 0 for x in nbytes):
        raise f.fail(bytes_key, f"expected the positive byte counts of {what}; profile the model again")
    return b, times, tuple(nbytes)


def _grad_sync(f: Fields, sizes) -> GradSync:
    b, times, buckets = _measured_under_backward(f, sizes, ("backward_s", "all_reduce_s", "both_s"), "bucket_bytes",
                                                 "the buckets")
    for key in ("cost", "cost_min", "cost_max"):      # for the reader: the simulator prices from the times
        f.get(key, float, None)
    f.get("repeats", int, None)
    out = GradSync(f.positive_int("dp"), b, buckets, max(0.0, times["both_s"] - times["backward_s"]),
                   times["all_reduce_s"])
    f.done()
    return out


def _fsdp_sync(f: Fields, sizes) -> FsdpSync:
    b, _, reduce_scatters = _measured_under_backward(f, sizes, ("backward_s", "fsdp_backward_s"),
                                                     "reduce_scatter_bytes", "the reduce-scatters")
    added = f.get("added_s", float)
    if added < 0:
        raise f.fail("added_s", "expected a time >= 0 in seconds; profile the model again")
    for key in ("added_min_s", "added_max_s"):       # for the reader: the simulator prices from added_s
        f.get(key, float, None)
    f.get("repeats", int, None)
    out = FsdpSync(f.positive_int("dp"), b, reduce_scatters, added)
    f.done()
    return out


# ------------------------------------------------------------------------- coverage

@dataclass(frozen=True)
class Coverage:
    """How a profiled model priced the micro-batch sizes it was asked for."""
    measured: tuple[int, ...]
    interpolated: tuple[int, ...]
    fallback: tuple[int, ...]
    profiled: tuple[int, ...]          # the profile's sizes

    def describe(self) -> str:
        def sizes(v):
            return ", ".join(map(str, v)) if v else "none"
        lo, hi = self.profiled[0], self.profiled[-1]
        return (f"micro-batch sizes priced: measured {sizes(self.measured)}; interpolated "
                f"{sizes(self.interpolated)}; by the fallback model (outside the profiled {lo}..{hi}) "
                f"{sizes(self.fallback)}")


MEASURED, INTERPOLATED, FALLBACK = "measured", "interpolated", "fallback"


@dataclass(frozen=True)
class ProfiledCompute:
    """The profile's times for the sizes it measured; linear interpolation between them (recorded:
    real profiles are not monotone in the size, so this can be well off); ``fallback`` for sizes
    outside the profiled range, and for the optimizer when the profile has no figure for it.
    ``coverage()`` says which sizes were priced how."""

    table: ProfileTable
    fallback: ComputeModel
    # sizes asked for -> how priced; a memo of a few entries, kept off equality and hashing
    _asked: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    @property
    def includes_tp_comm(self) -> bool:
        """A tensor-parallel profile timed the shards with their collectives."""
        return self.table.tp > 1

    @property
    def grad_sync(self) -> GradSync | None:
        return self.table.grad_sync

    @property
    def fsdp_sync(self) -> FsdpSync | None:
        return self.table.fsdp_sync

    def includes_tp_comm_at(self, microbatch: int) -> bool:
        """The collectives are in the profile's times, not in the fallback's."""
        return self.includes_tp_comm and self.how_priced(microbatch) != FALLBACK

    def includes_loss_at(self, microbatch: int) -> bool:
        """The layer profiler timed the last unit with the run's loss (parsim.profile.layers); the
        fallback prices the layer alone (parsim.cost.layer.loss_time_s adds the loss)."""
        return self.how_priced(microbatch) != FALLBACK

    def includes_ep_comm_at(self, microbatch: int) -> bool:
        """An expert-parallel profile (``parsim profile --ep``) timed the MoE layers with their
        token all-to-alls, the ranks waiting for each other at every one, as a run's do; its
        fallback does not."""
        return self.table.ep > 1 and self.how_priced(microbatch) != FALLBACK

    def how_priced(self, microbatch: int) -> str:
        how = self._asked.get(microbatch)
        if how is None:
            sizes = self.table.microbatch_sizes
            how = (MEASURED if microbatch in sizes else
                   INTERPOLATED if sizes[0] < microbatch < sizes[-1] else FALLBACK)
            self._asked[microbatch] = how
        return how

    def coverage(self) -> Coverage:
        by = {k: tuple(sorted(b for b, how in self._asked.items() if how == k))
              for k in (MEASURED, INTERPOLATED, FALLBACK)}
        return Coverage(by[MEASURED], by[INTERPOLATED], by[FALLBACK], self.table.microbatch_sizes)

    def layer_time_s(self, layer: Layer, kind: str, microbatch: int) -> float:
        """The profiled time; a profile of unsharded layers is scaled by the share one device of
        a tensor-parallel group does (``Layer.tp_share``), a tensor-parallel profile is taken as is;
        either by the share of each sequence one device of a context-parallel group holds
        (``Layer.seq_share``, 1/cp: parsim.cost.context); and by ``slowest_rank``.
        Outside the profiled sizes, the fallback prices the (per-device) layer itself; for a
        tensor-parallel profile that is the shard's compute, and ``parsim.cost.layer`` adds the
        collectives (``includes_tp_comm_at``)."""
        if self.how_priced(microbatch) == FALLBACK:
            return self.fallback.layer_time_s(layer, kind, microbatch)
        share = (1.0 if self.table.tp > 1 else layer.tp_share) * layer.seq_share
        return share * self._whole_layer_s(layer, kind, microbatch) * self.slowest_rank(microbatch)

    def slowest_rank(self, microbatch: int) -> float:
        """The table's ``slowest_rank`` at this size: concurrent profilers are the ranks of a
        synchronous step, which ends when the slowest of them does, so every layer is priced at
        the slowest process's pace, not the mean's (1 for a profile of one process)."""
        sizes, f = self.table.microbatch_sizes, self.table.slowest_rank
        return _interp(sizes, f, microbatch) if f else 1.0

    def _whole_layer_s(self, layer: Layer, kind: str, microbatch: int) -> float:
        t = self.table.times(layer.name)
        sizes = self.table.microbatch_sizes
        if kind == "F":
            return _interp(sizes, t.fwd_s, microbatch)
        bwd = _interp(sizes, t.bwd_s, microbatch)
        if kind == "B":
            return bwd
        if t.bwd_input_s is not None and t.bwd_weight_s is not None:    # measured as the run splits it
            return _interp(sizes, t.bwd_input_s if kind == "I" else t.bwd_weight_s, microbatch)
        # I/W not profiled: split the measured backward in the ratio of their FLOPs.
        i_flops, _ = split_flops(layer, "I")
        w_flops, _ = split_flops(layer, "W")
        share = w_flops / (i_flops + w_flops) if i_flops + w_flops else 0.0
        return bwd * (share if kind == "W" else 1 - share)

    def optimizer_time_s(self, param_count: int, bytes_per_param_moved: float) -> float:
        if self.table.optimizer_s_per_param is not None:
            return param_count * self.table.optimizer_s_per_param
        return self.fallback.optimizer_time_s(param_count, bytes_per_param_moved)


def _interp(sizes: tuple[int, ...], values: tuple[float, ...], b: int) -> float:
    """Linear between measured sizes (``ProfiledCompute`` asks only inside them)."""
    return float(np.interp(b, sizes, values))


def tp_compute_models(paths, fallback: ComputeModel) -> dict[tuple[int, str], ProfiledCompute]:
    """Profiles of tensor-parallel shards (``parsim profile --tp``), keyed by the (tp, layout)
    whose candidates each one prices."""
    models = {}
    for path in paths or []:
        table = load_profile_table(path)
        if table.tp == 1:
            raise InputError(f"{path}: tp: this profile timed unsharded layers; take one with parsim profile --tp")
        models[(table.tp, table.tp_layout)] = ProfiledCompute(table, fallback)
    return models


def ep_compute_models(paths, fallback: ComputeModel) -> dict[int, ProfiledCompute]:
    """Profiles of expert-parallel MoE layers (``parsim profile --ep``), keyed by the ep whose
    candidates each one prices."""
    models = {}
    for path in paths or []:
        table = load_profile_table(path)
        if table.ep == 1:
            raise InputError(f"{path}: ep: this profile timed MoE layers holding every expert; take one with "
                             "parsim profile --ep")
        models[table.ep] = ProfiledCompute(table, fallback)
    return models


def check_profile_ep(compute: ComputeModel, ep: int) -> None:
    """An expert-parallel profile prices only plans of its own ep: its MoE layers hold E/ep experts
    and exchange tokens with ep - 1 peers; one line saying what to change otherwise."""
    table = getattr(compute, "table", None)
    if table is not None and table.ep > 1 and table.ep != ep:
        raise InputError(f"{table.source or 'profile'}: ep: this profile timed MoE layers split over ep={table.ep}; "
                         + (f"price ep={ep} with a profile taken with parsim profile --ep {ep}" if ep > 1 else
                          "price ep=1 with a profile taken without --ep"))


def share_bounds_time(compute: ComputeModel) -> bool:
    """Whether, under ``compute``, a layer's share (the per-device layer of a tensor-parallel
    group, ``Layer.tp_share`` = s >= 1/tp of its FLOPs, each of its FLOPs, memory-bound and
    parameter bytes at least 1/tp of the whole's and at most all of it) takes at least 1/tp of the
    whole layer's time in every phase, so that the planner may bound a layout it has not built
    (parsim.search.floor.searched_floor_s):

    - the roofline (layers without kernels): each term is the share's work over a rate, and the
      GEMM rate at the share's smaller work is no higher than at the whole's where the device's
      efficiency table does not fall with the work (every shipped profile's rises);
    - kernel-level: every kernel's compute and bytes are scaled by s, its launch and dispatch are not;
    - a profile of unsharded layers: s x the whole layer's time, its fallback as above.

    A profile of tensor-parallel shards (``tp`` > 1) times what ran, in no fixed relation: False."""
    if isinstance(compute, ProfiledCompute):
        return compute.table.tp == 1 and share_bounds_time(compute.fallback)
    if isinstance(compute, AnalyticalCompute):
        rates = [e for _, e in compute.device.efficiency]
        return all(a <= b for a, b in zip(rates, rates[1:]))
    return False
