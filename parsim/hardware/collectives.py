"""A cluster's collective library, as its profile's ``collective:`` section gives it: the
all-reduce's fit and overlap, per training dtype where measured (DtypeCollectives), each op's own
fit, FSDP2's host time, the tensor-parallel overlap's units, and the interaction of collectives
and compute; read by parsim.hardware.cluster.load_profile (read_collectives), written back by
profile-comm and calibrate (collectives_flow)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from parsim.errors import InputError
from parsim.hardware.interaction import Interaction, interaction_flow, read_interaction
from parsim.inputs import Fields

COLLECTIVE_LIBRARIES = ("hccl", "nccl", "gloo")
# collective.latency_model: "" (alpha-beta steps at latency_us) or NCCL's tuning model (parsim.cost.nccl)
LATENCY_MODELS = ("", "nccl")
# The training dtypes besides fp32 (parsim.model.spec.DTYPES; hardware does not import model, a
# test keeps the two equal): those collective.dtypes may list.
REDUCED_DTYPES = ("fp16", "bf16")


@dataclass(frozen=True)
class DtypeCollectives:
    """One training dtype's all-reduce fit and overlap, where they differ from fp32's.  gloo sums
    with its generic loop, c[i] = a[i] + b[i] (gloo/math.h, ``sum<T>``, which torch's
    ProcessGroupGloo instantiates per dtype); for c10::BFloat16 each + converts both elements to
    float and back, so on CPU its all-reduce of 48 MiB takes 1.25-1.34x as long as fp32's of the
    same bytes (benchmarks/bench_allreduce_dtypes.py, README), on the cores the bf16 backward it
    overlaps runs on.  profile-comm measures both per dtype (``--dtypes``)."""

    bandwidth_efficiency: float
    latency_s: float
    overlap: float


@dataclass(frozen=True)
class Collectives:
    library: str                  # hccl | nccl | gloo
    bandwidth_efficiency: float   # bus bandwidth reached, as a fraction of the link's
    latency_s: float              # per algorithm step, on top of the link latency
    # Share of a collective that hides behind compute (1: a separate engine, as NCCL on its own
    # SMs; below 1: it takes cycles from compute, as gloo does on CPU cores).  profile-comm measures it.
    overlap: float = 1.0
    # A point-to-point transfer whose sender goes straight on computing arrives no earlier than
    # this after its post (parsim.sim.engine prices it).  gloo on CPU moves the data on an I/O
    # thread that shares the cores with the compute threads, so it waits for a core: on the 2-core
    # local-cpu, a 256 KiB send arrives 0.2-0.3 ms after its post when the sender waits, about 4 ms
    # when it computes (benchmarks/bench_p2p_busy_sender.py, README): one scheduler tick of that
    # machine's kernel (CONFIG_HZ=250 in /proc/config.gz).
    # profile-comm measures it.  0 (absent) for GPUs and Ascend: NCCL's and HCCL's transfers run on
    # the device's own engines (NCCL's P2P kernels on their own SMs, copy engines; Ascend's SDMA
    # and RoCE NIC), whatever the sender's compute stream does next.
    busy_sender_delay_s: float = 0.0
    # All-gather, reduce-scatter and all-to-all as the library runs them, when profile-comm
    # measured them: (latency_s per step on top of the link's, bandwidth_efficiency against the
    # ring or pairwise-exchange formula) per op; absent, they are priced at the all-reduce's
    # efficiency (and a gloo reduce-scatter as its all-reduce,
    # parsim.cost.comm.REDUCE_SCATTER_BY_ALL_REDUCE).
    # gloo's are far off the ring: on local-cpu its all_gather_into_tensor took as long as an
    # all-reduce of the same output, its reduce_scatter_tensor about twice that (README, ZeRO).
    op_fits: tuple[tuple[str, float, float], ...] = ()
    # Per FSDP2 unit, the host time a parameter all-gather and a gradient reduce-scatter add to
    # the forward or backward that issues them, beyond the collective itself (FSDP2's pre- and
    # post-hooks, copy-in and copy-out, and on CPU the hand-off to gloo's worker thread and back).
    # profile-comm measures it with units too small to move data; 0 (absent) for GPUs and
    # Ascend, where the host issues work ahead of the device and the hooks hide behind kernels.
    fsdp_gather_overhead_s: float = 0.0
    fsdp_reduce_scatter_overhead_s: float = 0.0
    # ... and per byte of the unit's whole (gathered) buffer, as a host rate (0: none): FSDP2's
    # copy-in and copy-out of the flat buffers, the gradient's division and accumulation into its
    # shard, and on gloo the copies around its collectives (torch.profiler on the zero set's
    # ResNet-50 on local-cpu: tens of milliseconds of them per micro-batch, README "ZeRO").
    # profile-comm measures them with units of 16 MiB beside the 4 KiB ones.
    fsdp_gather_copy_bytes_per_s: float = 0.0
    fsdp_reduce_scatter_copy_bytes_per_s: float = 0.0
    # Per training dtype other than fp32: its own all-reduce fit and overlap (bandwidth_efficiency,
    # latency_s and overlap above are fp32's, and those of any dtype not listed).  Empty for a
    # profile measured in fp32 only.
    dtypes: tuple[tuple[str, DtypeCollectives], ...] = ()
    # Tensor-parallel communication overlapped with the adjacent GEMMs (ParallelConfig.tp_comm_overlap;
    # Megatron-Core's --tp-comm-overlap, Transformer Engine's userbuffers; priced by parsim.sim.overlap):
    # the compute units (SMs) the collective's kernels take from the GEMM while they run, and the
    # chunks each collective and its GEMM are split into.  Defaults: TE's for its "pipeline"
    # (reduce-scatter) overlap, num_sm 16 and num_splits 4, set_sm_margin on (the GEMM launched on
    # the SMs left): transformer_engine/pytorch/module/base.py, initialize_ub, get_default_config.
    tp_overlap_comm_units: int = 16
    tp_overlap_chunks: int = 4
    # How collectives and compute slow each other, measured on synthetic kernels by
    # profile-comm (parsim.profile.overlap, parsim.hardware.interaction): where present, the simulator prices the
    # gradient all-reduces and ZeRO's reduce-scatters from it instead of ``overlap``.
    interaction: tuple[Interaction, ...] = ()
    # The all-reduce algorithms the library runs on this product, where they differ from the
    # library's defaults (parsim.cost.comm.LIBRARY_ALGORITHMS; its PRODUCT_ALGORITHMS says which a
    # product may add, e.g. HCCL's mesh and pipeline on Atlas A2); () : the defaults
    algorithms: tuple[str, ...] = ()
    # Whose model prices a ring's or tree's latency: "" the alpha-beta steps (latency_s a step on
    # top of the link's, as profile-comm measures it); "nccl" NCCL's own tuning model
    # (parsim.cost.nccl: a base latency, then each step at its hop's, inside a node or between),
    # for an NCCL profile whose latency nobody measured.  All-to-alls keep the alpha-beta steps.
    latency_model: str = ""
    # NCCL's network post overhead of the nodes' host CPU, which bounds a cross-node ring's steps
    # inside a node (tuning.cc, getNetOverhead: 1 us on an Intel host, 2 us on an AMD one)
    net_overhead_s: float = 0.0

    def fsdp_terms(self, op: str) -> tuple[float, float]:
        """(per-unit overhead in s, host copy rate in bytes/s; 0: not measured) of FSDP2's
        ``op``, "all_gather" or "reduce_scatter"."""
        if op == "all_gather":
            return self.fsdp_gather_overhead_s, self.fsdp_gather_copy_bytes_per_s
        return self.fsdp_reduce_scatter_overhead_s, self.fsdp_reduce_scatter_copy_bytes_per_s

    def fsdp_host_s(self, op: str, unit_bytes: float) -> float:
        """FSDP2's host time on the compute stream for one unit's ``op`` ("all_gather" or
        "reduce_scatter") of a ``unit_bytes`` buffer: the per-unit overhead plus the bytes at the
        host copy rate."""
        per_unit, rate = self.fsdp_terms(op)
        return per_unit + (unit_bytes / rate if rate else 0.0)

    def for_dtype(self, dtype: str) -> "Collectives":
        """The collectives of a run whose gradients and compute are in ``dtype`` (the executor casts
        the model: parsim.exec.precision): that dtype's fit and overlap where measured, else these.
        Every collective of the run takes them, all-gathers included, but those with a measured
        fit of their own (op_fits, measured in fp32: an all-gather sums nothing, so its dtype
        changes only its bytes).  Resolved once: the result lists no dtypes, so resolving it
        again returns it."""
        fit = dict(self.dtypes).get(dtype)
        if fit is None:
            return self
        return replace(self, bandwidth_efficiency=fit.bandwidth_efficiency, latency_s=fit.latency_s,
                       overlap=fit.overlap, dtypes=())

    def op_fit(self, op: str) -> tuple[float, float] | None:
        """(latency_s, bandwidth_efficiency) measured for ``op``, or None."""
        return next(((a, e) for o, a, e in self.op_fits if o == op), None)


# The collectives ZeRO and FSDP2 shard by (their host overhead is measured per unit too), and every
# collective profile-comm fits on its own (Collectives.op_fits): those and the MoE token
# dispatcher's all_to_all_single (parsim.exec.expert_parallel).
SHARDED_OPS = ("all_gather", "reduce_scatter")
COLLECTIVE_FIT_OPS = (*SHARDED_OPS, "all_to_all")


def _op_fit(c, op: str) -> tuple[str, float, float]:
    """collective.<op>: {latency_us, bandwidth_efficiency}, as profile-comm writes them."""
    f = c.sub(op)
    fit = (op, _step_latency_s(f, 0.0), f.fraction("bandwidth_efficiency"))
    f.done()
    return fit


def _comm_units(c: Fields) -> int:
    """``collective.tp_overlap_comm_units``: compute units an overlapped tensor-parallel collective
    takes from its GEMM, >= 0 (0: the library moves data on engines of its own, as HCCL on Ascend's
    DMA engines); default Transformer Engine's 16 SMs (Collectives.tp_overlap_comm_units)."""
    units = c.get("tp_overlap_comm_units", int, 16)
    if units < 0:
        raise c.fail("tp_overlap_comm_units", f"must be >= 0 (0: none taken from compute), got {units}")
    return units


def _algorithms(c: Fields) -> tuple[str, ...]:
    """``collective.algorithms``: a list of algorithm names (which the library implements is
    parsim.cost.comm's to check); absent, ()."""
    names = c.get("algorithms", list, [])
    if not all(isinstance(a, str) for a in names) or len(set(names)) != len(names):
        raise c.fail("algorithms", "expected a list of distinct algorithm names, e.g. [ring, halving-doubling, mesh]")
    return tuple(names)


def _step_latency_s(f: Fields, default=None) -> float:
    """A fit's ``latency_us`` per ring step (>= 0), as seconds; required unless ``default`` is given."""
    us = f.get("latency_us", float) if default is None else f.get("latency_us", float, default)
    if us < 0:
        raise f.fail("latency_us", f"must be >= 0, got {us:g}")
    return us * 1e-6


def _overlap(f: Fields, default=None) -> float:
    """A share of a collective hidden behind compute, in [0, 1]; required unless ``default`` is given."""
    overlap = f.get("overlap", float) if default is None else f.get("overlap", float, default)
    if not 0 <= overlap <= 1:
        raise f.fail("overlap", f"must be in [0, 1], got {overlap}")
    return overlap


def _microseconds(c, key: str) -> float:
    """A per-event host delay or overhead in microseconds, as seconds.  At most a second: these are
    a scheduler's wait for a core or a hook's work, milliseconds (one 250 Hz tick: 4 ms), so a
    second is a unit slip (the field is in microseconds)."""
    us = c.get(key, float, 0.0)
    if not 0 <= us <= 1e6:
        raise c.fail(key, f"must be in [0, 1e6] microseconds, got {us:g}")
    return us * 1e-6


def _rate(c, key: str) -> float:
    """A host copy rate in GB/s, as bytes per second; 0 or absent: none."""
    gb_per_s = c.get(key, float, 0.0)
    if gb_per_s < 0:
        raise c.fail(key, f"must be >= 0 GB/s (0: none), got {gb_per_s:g}")
    return gb_per_s * 1e9


def measured_dtypes(text: str) -> tuple[str, ...]:
    """profile-comm's ``--dtypes``: fp32 first (the collective section's own fit), then any of
    REDUCED_DTYPES, each once; else an InputError saying so."""
    dtypes = tuple(text.split(","))
    if dtypes[0] != "fp32" or len(set(dtypes)) != len(dtypes) or not set(dtypes) <= {"fp32", *REDUCED_DTYPES}:
        raise InputError(f"--dtypes {text}: give fp32 first (the profile's default fit), then any of "
                         f"{', '.join(REDUCED_DTYPES)}, comma-separated, each once (e.g. fp32,bf16)")
    return dtypes


def collectives_flow(c: Collectives) -> str:
    """The ``collective:`` section as one flow mapping, every field load_profile reads from it (what
    profile-comm and calibrate write)."""
    parts = [f"library: {c.library}", f"bandwidth_efficiency: {c.bandwidth_efficiency:.4g}",
             f"latency_us: {c.latency_s * 1e6:.4g}", f"overlap: {c.overlap:.3g}"]
    if c.busy_sender_delay_s:
        parts.append(f"busy_sender_delay_us: {c.busy_sender_delay_s * 1e6:.0f}")
    if c.algorithms:
        parts.append(f"algorithms: [{', '.join(c.algorithms)}]")
    if c.latency_model:
        parts.append(f"latency_model: {c.latency_model}, net_overhead_us: {c.net_overhead_s * 1e6:.4g}")
    parts += [f"{op}: {{bandwidth_efficiency: {e:.4g}, latency_us: {a * 1e6:.4g}}}" for op, a, e in c.op_fits]
    if c.fsdp_gather_overhead_s or c.fsdp_reduce_scatter_overhead_s:
        parts += [f"fsdp_gather_overhead_us: {c.fsdp_gather_overhead_s * 1e6:.0f}",
                  f"fsdp_reduce_scatter_overhead_us: {c.fsdp_reduce_scatter_overhead_s * 1e6:.0f}"]
    if c.fsdp_gather_copy_bytes_per_s or c.fsdp_reduce_scatter_copy_bytes_per_s:
        parts += [f"fsdp_gather_copy_gb_per_s: {c.fsdp_gather_copy_bytes_per_s / 1e9:.4g}",
                  f"fsdp_reduce_scatter_copy_gb_per_s: {c.fsdp_reduce_scatter_copy_bytes_per_s / 1e9:.4g}"]
    return "{" + ", ".join(parts) + dtypes_flow(c.dtypes) + interaction_flow(c.interaction) + "}"


def dtypes_flow(fits: tuple[tuple[str, DtypeCollectives], ...]) -> str:
    """``collective.dtypes`` as the last entry of the collective section's flow mapping (what
    _dtype_collectives reads), with a leading ", "; empty for none."""
    if not fits:
        return ""
    rows = ", ".join(f"{d}: {{bandwidth_efficiency: {f.bandwidth_efficiency:.3f}, latency_us: {f.latency_s * 1e6:.1f}, "
                     f"overlap: {f.overlap:.2f}}}" for d, f in fits)
    return f", dtypes: {{{rows}}}"


def _dtype_collectives(c: Fields) -> tuple[tuple[str, DtypeCollectives], ...]:
    """The ``collective.dtypes`` section: per training dtype other than fp32, its all-reduce fit
    and overlap, every field given (what profile-comm writes)."""
    if not c.has("dtypes"):
        c.get("dtypes", dict, None)
        return ()
    section = c.sub("dtypes")
    out = []
    for dtype in list(section.data):
        if dtype == "fp32":
            raise section.fail(dtype, "fp32's fit is the collective section's own bandwidth_efficiency, latency_us "
                                      "and overlap; list only other dtypes here")
        if dtype not in REDUCED_DTYPES:
            raise section.fail(dtype, f"not a training dtype; list {' or '.join(REDUCED_DTYPES)}")
        f = section.sub(dtype)
        fit = DtypeCollectives(bandwidth_efficiency=f.fraction("bandwidth_efficiency"), latency_s=_step_latency_s(f),
                               overlap=_overlap(f))
        f.done()
        out.append((dtype, fit))
    section.done()
    return tuple(out)


def read_collectives(c: Fields) -> Collectives:
    """A profile's ``collective:`` section (the module docstring of parsim.hardware.cluster)."""
    coll = Collectives(library=c.choice("library", COLLECTIVE_LIBRARIES),
                       bandwidth_efficiency=c.fraction("bandwidth_efficiency", 1.0),
                       latency_s=c.get("latency_us", float, 0.0) * 1e-6,
                       overlap=_overlap(c, 1.0),
                       busy_sender_delay_s=_microseconds(c, "busy_sender_delay_us"),
                       op_fits=tuple(_op_fit(c, op) for op in COLLECTIVE_FIT_OPS if c.has(op)),
                       fsdp_gather_overhead_s=_microseconds(c, "fsdp_gather_overhead_us"),
                       fsdp_reduce_scatter_overhead_s=_microseconds(c, "fsdp_reduce_scatter_overhead_us"),
                       fsdp_gather_copy_bytes_per_s=_rate(c, "fsdp_gather_copy_gb_per_s"),
                       fsdp_reduce_scatter_copy_bytes_per_s=_rate(c, "fsdp_reduce_scatter_copy_gb_per_s"),
                       dtypes=_dtype_collectives(c),
                       tp_overlap_comm_units=_comm_units(c),
                       tp_overlap_chunks=c.positive_int("tp_overlap_chunks", 4),
                       interaction=read_interaction(c.get("interaction", list, []),
                                                    lambda msg: InputError(f"{c.where(msg)}")),
                       algorithms=_algorithms(c),
                       latency_model=c.choice("latency_model", LATENCY_MODELS, ""),
                       net_overhead_s=_microseconds(c, "net_overhead_us"))
    c.done()
    if coll.latency_model == "nccl" and coll.library != "nccl":
        raise c.fail("latency_model", f"nccl prices NCCL's rings and trees, but the library is {coll.library}; "
                                      "remove it or set library: nccl")
    return coll
