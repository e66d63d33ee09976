"""Clusters: a hardware profile times a node count (``ascend910:4x8``), a profile YAML, or an
Ascend rank table (parsim.hardware.ranktable; parsim.hardware.load reads every form).  Rank r
sits on node r // devices_per_node, local index r % devices_per_node.

Profile YAML, schema version 1 (every number cites its source in a comment in the file)::

    schema_version: 1
    name: ascend910
    description: ...
    device:
      name: Ascend 910
      memory: 32GiB
      memory_bandwidth_gb_per_s: 1200
      memory_efficiency: 0.8
      peak_tflops: {fp16: 256, fp32: 64}
      efficiency: [[1.0e8, 0.2], [1.0e10, 0.5], [1.0e12, 0.7]]   # (work FLOPs, fraction of peak)
      memory_reserved:                         # optional; absent: nothing reserved (MemoryReserve)
        runtime_context: 400MB                 # device runtime (CUDA context, CANN), before any tensor
        collective_buffers: 1600MB             # the communicators' buffers a rank holds (NCCL, HCCL)
        fragmentation_fraction: 0.15           # share of the allocator's pool lost at the peak
    node:
      devices: 8
      groups: [[0, 1, 2, 3], [4, 5, 6, 7]]     # optional; default one group
      group_topology: full-mesh                # optional: switch (default) | full-mesh (Profile.group_topology)
      group_link: {bandwidth_gb_per_s: 30, latency_us: 5}
      node_link: {bandwidth_gb_per_s: 32, latency_us: 10}   # needed when there are several groups
    network:
      nics_per_node: 8
      nic_bandwidth_gb_per_s: 12.5
      latency_us: 10
      rail_optimized: true                     # optional tiers (parsim.hardware.fabric): NIC i on leaf i
      pod_nodes: 32                            # nodes under one set of leaves
      spine: {oversubscription: 1.0, latency_us: 1}   # across pods
      scale_up: {nodes: 18, bandwidth_gb_per_s: 900, latency_us: 3}   # optional: a scale-up domain across nodes
    collective: {library: hccl, bandwidth_efficiency: 0.7, latency_us: 10, overlap: 1.0}
    # collective.busy_sender_delay_us: optional, 0 if absent (Collectives.busy_sender_delay_s)
    # collective.dtypes: optional, per training dtype other than fp32, its own all-reduce fit and
    #   overlap (DtypeCollectives), e.g. dtypes: {bf16: {bandwidth_efficiency: 0.4, latency_us: 120, overlap: 0.05}};
    #   the three fields above are fp32's, and any dtype's not listed
    nodes: 1                                   # optional default node count
    input_pipeline:                            # optional; absent: loading is never a bottleneck
      overlap: true                            # loader workers run ahead of the step (DataLoader workers, DALI)
      host_samples_per_s: 12000                # per node, shared by the node's input-reading devices
      sample_elements: 150528                  # optional: the input it is for (3 x 224 x 224); others unpriced
    # or, for a loader inline in the training process:  {overlap: false, per_sample_s: 2.0e-4}
    calibrated:                                # optional provenance of `parsim calibrate --published`
      command: "parsim calibrate --published results/published/figures.yaml --cluster ..."
      figures_file: results/published/figures.yaml
      date: "2026-11-27"
      fields: {device.kernels.conv_efficiency: 0.52}   # the fitted fields, set above in the file
      rows: ["<figure id>: <source, row, measured value, fitted prediction>"]
      # or, written by benchmarks/bench_published.py --write-profiles (parsim.profile.loso):
      # fit_spec: results/published/fit.yaml, parameters: {memory: 0.8}, scored: <its out-of-sample report>

A profile may start from another in the same folder: ``extends: dgx-h100`` takes that file's
sections, and each top-level key given here replaces the base's whole key (``network:`` all of it);
``patch: {device: {memory: 141GB}}`` changes single fields of the base's sections instead (a
mapping merged into a mapping, key by key).  It names itself (``name:``); the base may extend
another in turn, MAX_EXTENDS profiles in all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from parsim.errors import InputError
from parsim.hardware.device import Device, KernelExecution, MemoryReserve
from parsim.hardware.extend import extended
from parsim.hardware.fabric import Fabric, read_fabric
from parsim.hardware.collectives import Collectives, read_collectives
from parsim.hardware.links import LINK_CLASSES, Link
from parsim.hardware.machine import Machine, warn_if_elsewhere
from parsim.inputs import Fields, load_file

SCHEMA_VERSION = 1
# The largest cluster parsim models, in devices: the one bound on every cluster it reads (a spec,
# a profile's nodes x devices, a rank table).  The largest published training run used 16,384
# H100 GPUs (Llama 3 405B: Dubey et al. 2024, "The Llama 3 Herd of Models", Sec. 3.3.1); 2^20
# leaves 64x headroom.  Above it a spec is a typo (ascend910:99999999999x8), refused before
# anything is sized by it.
MAX_WORLD_SIZE = 2**20
_BOUND = f"parsim models clusters of at most {MAX_WORLD_SIZE:,} devices"
# A link at least this share of the group link's bandwidth is as fast for tensor parallelism
# (Cluster.fast_span): parsim's own threshold, not a hardware figure.  CloudMatrix384's node and
# UB links are 196 / 224 = 0.875 of its SIO pairs'; the 910's PCIe between HCCS groups, 16 / 30.
FAST_LINK_RATIO = 0.8

GROUP_TOPOLOGIES = ("switch", "full-mesh")


@dataclass(frozen=True)
class InputPipeline:
    """Reading, decoding and augmenting the input samples (priced in parsim.cost.input).

    overlap true: loader workers run ahead of the step in parallel with it, delivering
    ``host_samples_per_s`` per node, shared by the node's input-reading ranks; it shows only
    where it is slower than compute.  overlap false: the training process loads inline,
    ``per_sample_s`` per sample on the compute stream of the rank that reads the input."""

    overlap: bool
    host_samples_per_s: float = 0.0     # overlap true
    per_sample_s: float = 0.0           # overlap false
    # The input the figure is for, in elements per sample (C x H x W: 3072 for CIFAR); a model
    # whose input differs is not priced by it (a CIFAR loader says nothing about token loading).
    # 0: every model.
    sample_elements: int = 0


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    device: Device
    devices_per_node: int
    groups: tuple[tuple[int, ...], ...]
    links: tuple[tuple[str, Link], ...]     # (link class, Link)
    nics_per_node: int
    collectives: Collectives
    default_nodes: int = 1
    source: str = ""
    input_pipeline: InputPipeline | None = None    # None: loading is not a bottleneck
    fabric: Fabric = Fabric()                      # the tiers above the NICs; default one tier
    # How a group's devices are wired (GROUP_TOPOLOGIES): "switch", each device's group_link is its
    # port into a switch (NVSwitch), one link whatever the peer; "full-mesh", group_link is one of
    # the direct links each device has to every other member (Ascend 910B's HCCS: HCCL's Mesh
    # algorithm drives them all at once, parsim.cost.comm)
    group_topology: str = "switch"

    def link(self, link_class: str) -> Link:
        return dict(self.links)[link_class]


@dataclass(frozen=True)
class Cluster:
    profile: Profile
    num_nodes: int
    devices_per_node: int
    # (host, device_id) per rank when read from a rank table; empty otherwise.
    rank_devices: tuple[tuple[str, int], ...] = ()
    spec: str = ""

    @property
    def world_size(self) -> int:
        return self.num_nodes * self.devices_per_node

    @property
    def device(self) -> Device:
        return self.profile.device

    def node_of(self, rank: int) -> int:
        return rank // self.devices_per_node

    def local_of(self, rank: int) -> int:
        """The device index on its node: a rank table says which physical chip a rank runs on;
        else ranks fill devices in order."""
        return self.rank_devices[rank][1] if self.rank_devices else rank % self.devices_per_node

    def rail_of(self, rank: int) -> int:
        """The NIC, and so the rail, a rank's traffic leaves on: its device's share of the NICs."""
        return self.local_of(rank) * self.profile.nics_per_node // self.profile.devices_per_node

    def group_of(self, rank: int) -> int:
        local = self.local_of(rank)
        g = self.group_at[local] if local < len(self.group_at) else -1
        if g < 0:
            raise ValueError(f"local device {local} is in no group")
        return g

    @cached_property
    def group_at(self) -> tuple[int, ...]:
        """Per local device index, its group (-1: none): group_of reads it for every rank of every
        group the planner prices (GPT-3 175B on 1,024 A100s: 8.5 million times)."""
        at = [-1] * max((d + 1 for g in self.groups for d in g), default=0)
        for k, members in reversed(list(enumerate(self.groups))):     # the first group holding it
            for d in members:
                at[d] = k
        return tuple(at)

    @cached_property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        """Groups restricted to the devices in use on each node (worked out once: group_of asks
        for them per rank, thousands of times in a planner run)."""
        groups = tuple(tuple(d for d in g if d < self.devices_per_node) for g in self.profile.groups)
        return tuple(g for g in groups if g)

    def span_class(self, ranks) -> str:
        """The farthest link class between any two of ``ranks`` (what a ring over them crosses):
        the one place a tier is decided; link_class and parsim.cost.comm ask it."""
        per_node = self.devices_per_node
        first = ranks[0] // per_node                    # node_of, inline and in plain loops: the planner
        for r in ranks:                                 # asks for every stage boundary of every candidate
            if r // per_node != first:
                fabric = self.profile.fabric
                if not fabric.spans_nodes:
                    return "network"
                return fabric.tier({r // per_node for r in ranks},
                                   {self.rail_of(r) for r in ranks} if fabric.rail_optimized else ())
        group = self.group_of(ranks[0])
        for r in ranks[1:]:
            if self.group_of(r) != group:
                return "node"
        return "group"

    def link_class(self, a: int, b: int) -> str:
        return self.span_class((a, b))

    def fast_span(self) -> int:
        """The most devices one tensor-parallel group may span: its fast-link group, widened to
        the whole node where the node's link is as fast (within FAST_LINK_RATIO of the group
        link's bandwidth: CloudMatrix384's HCCS between its SIO pairs), and to the scale-up domain
        across nodes where the domain's link is (NVL72's 18 trays, the UB supernode's 48 servers).
        A PCIe hop between HCCS groups (the 910's Atlas 800) or a NIC is not."""
        span = max(len(g) for g in self.groups) if self.groups else self.devices_per_node
        group = self.link_for("group")
        fast = lambda link: (link.bandwidth_bytes_per_s * link.efficiency
                             >= FAST_LINK_RATIO * group.bandwidth_bytes_per_s * group.efficiency)
        if span < self.devices_per_node and fast(self.link_for("node")):
            span = self.devices_per_node
        domain = self.profile.fabric.domain_nodes
        if span == self.devices_per_node and domain and self.num_nodes > 1 and fast(self.link_for("domain")):
            span = self.devices_per_node * min(domain, self.num_nodes)
        return span

    def link(self, a: int, b: int) -> Link:
        return self.link_for(self.link_class(a, b))

    def link_for(self, link_class: str) -> Link:
        return self.profile.link(link_class)

    def for_dtype(self, dtype: str) -> "Cluster":
        """This cluster with its collectives priced for a run in ``dtype`` (Collectives.for_dtype);
        itself where the profile has nothing for that dtype, and for a cluster already resolved
        (its collectives list no dtypes), so that a run resolves it once and keeps the object."""
        if not self.profile.collectives.dtypes:
            return self
        coll = self.profile.collectives.for_dtype(dtype)
        if coll is self.profile.collectives:
            return self
        return replace(self, profile=replace(self.profile, collectives=coll))

    def describe(self) -> dict:
        p = self.profile
        return {
            "cluster": self.spec or f"{p.name}:{self.num_nodes}x{self.devices_per_node}",
            "profile": p.name, "description": p.description, "world_size": self.world_size,
            "nodes": self.num_nodes, "devices_per_node": self.devices_per_node,
            "groups_per_node": [list(g) for g in self.groups], "group_topology": p.group_topology,
            "device": {"name": p.device.name, "memory_bytes": p.device.memory_bytes,
                       "usable_memory_bytes": p.device.usable_memory_bytes,
                       "memory_reserved": {"runtime_context_bytes": p.device.reserve.runtime_context_bytes,
                                           "collective_buffers_bytes": p.device.reserve.collective_buffers_bytes,
                                           "fragmentation_fraction": p.device.reserve.fragmentation_fraction},
                       "memory_bandwidth_bytes_per_s": p.device.memory_bandwidth_bytes_per_s,
                       "peak_flops_per_s": dict(p.device.peak_flops_per_s)},
            "links": {c: {"bandwidth_bytes_per_s": link.bandwidth_bytes_per_s, "latency_s": link.latency_s}
                      for c, link in p.links},
            "nics_per_node": p.nics_per_node,
            "fabric": p.fabric.describe(),
            "collective_library": p.collectives.library,
            "collective_latency_model": p.collectives.latency_model,
            "rank_devices": [list(rd) for rd in self.rank_devices],
            "input_pipeline": None if p.input_pipeline is None else {
                "overlap": p.input_pipeline.overlap, "host_samples_per_s": p.input_pipeline.host_samples_per_s,
                "per_sample_s": p.input_pipeline.per_sample_s},
        }


def with_measured_fits(cluster: Cluster, measured: Profile, where: str) -> Cluster:
    """``cluster`` with the fits that ``parsim profile-comm`` just took on the machine its runs use
    (``measured``, read from ``where``): the links' bandwidth and latency, the all-reduce's
    efficiency and latency in every dtype measured, and the all-gather's and reduce-scatter's.
    A node's links only: one node measures nothing beyond it.  They drift between days
    (local-cpu's all-reduce reached 1.27-1.51 GB/s of bus bandwidth on 2026-11-23/24, README
    "parsim validate"), so a validation that profiles its layers takes them too.
    The readings that do not repeat from one run of profile-comm to the next stay the profile's:
    the overlap (read 0.00-0.71 on an idle machine), the busy sender's delay, FSDP2's host time.
    The interaction table (profile-comm, medians over its repeats) is taken where measured."""
    p, c, m = cluster.profile, cluster.profile.collectives, measured.collectives
    if (measured.devices_per_node, measured.groups) != (p.devices_per_node, p.groups):
        raise InputError(f"{where}: node: measured {measured.devices_per_node} devices per node in groups "
                         f"{list(map(list, measured.groups))}, where {p.name} has {p.devices_per_node} in "
                         f"{list(map(list, p.groups))}; measure with as many processes as the cluster has per node")
    overlap = dict(c.dtypes)
    dtypes = tuple((d, replace(fit, overlap=overlap[d].overlap if d in overlap else c.overlap))
                   for d, fit in m.dtypes)
    coll = replace(c, bandwidth_efficiency=m.bandwidth_efficiency, latency_s=m.latency_s, op_fits=m.op_fits,
                   dtypes=dtypes, interaction=m.interaction or c.interaction)
    inside = dict(measured.links)           # a node's links; those beyond it (NICs, fabric) stay the profile's
    links = tuple((k, inside[k] if k in ("group", "node") else link) for k, link in p.links)
    return replace(cluster, profile=replace(p, links=links, collectives=coll))


# ----------------------------------------------------------------------------- profiles

def profiles_dir() -> Path:
    """$PARSIM_PROFILES, else hardware_profiles/ of the source tree (editable installs), else the
    copy a regular install puts in <prefix>/share/parsim/hardware_profiles."""
    import sys

    env = os.environ.get("PARSIM_PROFILES")
    if env:
        return Path(env)
    tree = Path(__file__).resolve().parents[2] / "hardware_profiles"
    if tree.is_dir():
        return tree
    return Path(sys.prefix) / "share" / "parsim" / "hardware_profiles"


def available_profiles() -> list[str]:
    return sorted(p.stem for p in profiles_dir().glob("*.yaml"))


def _link(f: Fields, key: str) -> Link:
    s = f.sub(key)
    link = Link(bandwidth_bytes_per_s=s.positive_float("bandwidth_gb_per_s") * 1e9,
                latency_s=s.get("latency_us", float, 0.0) * 1e-6, efficiency=s.fraction("efficiency", 1.0))
    s.done()
    return link


def _points_field(k: Fields, key: str) -> tuple[tuple[float, float], ...]:
    """A list of [size, fraction] pairs with rising sizes and fractions in (0, 1]."""
    v = k.get(key, list, [])
    if any(not isinstance(p, list) or len(p) != 2 or not all(isinstance(x, (int, float)) for x in p)
           or p[0] <= 0 or not 0 < p[1] <= 1 for p in v) or [p[0] for p in v] != sorted(set(p[0] for p in v)):
        raise k.fail(key, "expected [[rows, fraction of peak], ...] with rising rows and fractions in (0, 1]")
    return tuple((float(a), float(e)) for a, e in v)


def _memory_families(k: Fields) -> tuple[tuple[str, float], ...]:
    """``memory_family_efficiency``: {family: fraction of the memory bandwidth}, families as
    parsim.cost.kernels.memory_family names them."""
    v = k.get("memory_family_efficiency", dict, {})
    known = ("norm", "norm_backward", "pool", "pool_backward", "elementwise")
    for fam, e in v.items():
        if fam not in known or not isinstance(e, (int, float)) or not e > 0:
            raise k.fail("memory_family_efficiency", f"expected {{family: fraction > 0}} with families among "
                                                     f"{', '.join(known)}; got {fam}: {e}")
    return tuple((fam, float(e)) for fam, e in v.items())


def _kernel_execution(k: Fields) -> KernelExecution:
    """The ``device.kernels`` section (parsim.hardware.device.KernelExecution)."""
    tiles = k.get("tiles", list, [[1, 1]])
    if not tiles or any(not isinstance(t, list) or len(t) != 2 or any(not isinstance(x, int) or x <= 0 for x in t)
                        for t in tiles):
        raise k.fail("tiles", "expected a list of [rows, columns] of positive integers, e.g. [[256, 128], [128, 128]]")
    ex = KernelExecution(compute_units=k.positive_int("compute_units", 1), tiles=tuple((t[0], t[1]) for t in tiles),
                         gemm_efficiency=k.fraction("gemm_efficiency", 1.0),
                         conv_efficiency=k.fraction("conv_efficiency", None),
                         vector_conv_efficiency=k.fraction("vector_conv_efficiency", None),
                         attention_efficiency=k.fraction("attention_efficiency", None),
                         attention_efficiency_fa2=k.fraction("attention_efficiency_fa2", None),
                         attention_efficiency_triton=k.fraction("attention_efficiency_triton", None),
                         attention_head_fill=k.fraction("attention_head_fill", None),
                         fp8_gemm_efficiency=k.fraction("fp8_gemm_efficiency", None),
                         k_half=k.get("k_half", (int, float), 0.0),
                         m_half=k.get("m_half", (int, float), 0.0),
                         conv_k_half=k.get("conv_k_half", (int, float), 0.0),
                         launch_s=k.get("launch_us", (int, float), 0.0) * 1e-6,
                         gemm_latency_s=k.get("gemm_latency_us", (int, float), 0.0) * 1e-6,
                         host_dispatch_s=k.get("host_dispatch_us", (int, float), 0.0) * 1e-6,
                         layer_call_s=k.get("layer_call_us", (int, float), 0.0) * 1e-6,
                         asynchronous=k.get("asynchronous", bool, False),
                         vector_gemm_efficiency=k.fraction("vector_gemm_efficiency", None),
                         nhwc_matrix_engine=k.get("nhwc_matrix_engine", bool, False),
                         cpu_threads=k.get("cpu_threads", int, 0),
                         per_sample_gemm_efficiency=_points_field(k, "per_sample_gemm_efficiency"),
                         weight_touch_bytes_per_s=k.get("weight_touch_gb_per_s", (int, float), 0.0) * 1e9,
                         backward_weight_touch_bytes_per_s=k.get("backward_weight_touch_gb_per_s", (int, float),
                                                                 0.0) * 1e9,
                         memory_family_efficiency=_memory_families(k),
                         gemm_memory_efficiency=k.fraction("gemm_memory_efficiency", None))
    for key, value in (("k_half", ex.k_half), ("m_half", ex.m_half), ("conv_k_half", ex.conv_k_half),
                       ("launch_us", ex.launch_s), ("gemm_latency_us", ex.gemm_latency_s),
                       ("host_dispatch_us", ex.host_dispatch_s), ("layer_call_us", ex.layer_call_s),
                       ("cpu_threads", ex.cpu_threads),
                       ("weight_touch_gb_per_s", ex.weight_touch_bytes_per_s),
                       ("backward_weight_touch_gb_per_s", ex.backward_weight_touch_bytes_per_s)):
        if value < 0:
            raise k.fail(key, "must be >= 0")
    k.done()
    return ex


def _memory_reserve(d: Fields, memory_bytes: int) -> MemoryReserve:
    """The ``device.memory_reserved`` section (parsim.hardware.device.MemoryReserve)."""
    if not d.has("memory_reserved"):
        d.get("memory_reserved", dict, None)
        return MemoryReserve()
    m = d.sub("memory_reserved")
    reserve = MemoryReserve(runtime_context_bytes=m.size_bytes("runtime_context", 0, allow_zero=True),
                            collective_buffers_bytes=m.size_bytes("collective_buffers", 0, allow_zero=True),
                            fragmentation_fraction=m.get("fragmentation_fraction", float, 0.0))
    if not 0 <= reserve.fragmentation_fraction < 1:
        raise m.fail("fragmentation_fraction", f"must be in [0, 1), got {reserve.fragmentation_fraction}")
    taken = reserve.runtime_context_bytes + reserve.collective_buffers_bytes
    if taken >= memory_bytes:
        raise m.fail("runtime_context", f"runtime_context + collective_buffers = {taken:,} bytes leave nothing of "
                                        f"the device's {memory_bytes:,}; they must sum to less than device.memory")
    m.done()
    return reserve


def _input_pipeline(r: Fields) -> InputPipeline | None:
    if not r.has("input_pipeline"):
        r.get("input_pipeline", dict, None)
        return None
    f = r.sub("input_pipeline")
    overlap = f.get("overlap", bool)
    if overlap:
        if f.has("per_sample_s"):
            raise f.fail("per_sample_s", "only for an inline loader (overlap: false); give host_samples_per_s")
        pipe = InputPipeline(True, host_samples_per_s=f.positive_float("host_samples_per_s"))
    else:
        if f.has("host_samples_per_s"):
            raise f.fail("host_samples_per_s", "only for loader workers (overlap: true); for an inline loader "
                                               "give per_sample_s")
        pipe = InputPipeline(False, per_sample_s=f.positive_float("per_sample_s"))
    pipe = replace(pipe, sample_elements=f.positive_int("sample_elements", 0))
    if f.has("measured"):        # provenance written by `parsim profile-data`
        prov = f.sub("measured")
        for key in ("date", "machine", "command"):
            prov.get(key, str, "")
        prov.done()
    f.done()
    return pipe




def load_profile(path: str | os.PathLike) -> Profile:
    path = os.fspath(path)
    raw = load_file(path, "a hardware profile YAML")
    if isinstance(raw, dict) and "extends" in raw:
        raw = extended(raw, path, load_profile)
    r = Fields(raw, path)
    r.schema_version(SCHEMA_VERSION)
    d = r.sub("device")
    if not d.has("memory"):
        raise d.fail("memory", "missing; a device profile must name its memory, e.g. memory: 32GiB")
    peaks = d.sub("peak_tflops")
    peak = tuple((k, peaks.positive_float(k) * 1e12) for k in list(peaks.data))
    peaks.done()
    if not any(k == "fp32" for k, _ in peak):
        raise peaks.fail("fp32", "missing; give at least the fp32 peak")
    eff_rows = d.get("efficiency", list, [[1.0, 1.0]])
    try:
        eff = tuple((float(w), float(e)) for w, e in eff_rows)
    except (TypeError, ValueError):
        raise d.fail("efficiency", "expected a list of [work_flops, fraction] pairs") from None
    if any(not 0 < e <= 1 or w <= 0 for w, e in eff) or list(eff) != sorted(eff):
        raise d.fail("efficiency", "pairs need work_flops > 0 in rising order and 0 < fraction <= 1")
    memory_bytes = d.size_bytes("memory")
    device = Device(name=d.get("name", str), peak_flops_per_s=peak, memory_bytes=memory_bytes,
                    reserve=_memory_reserve(d, memory_bytes),
                    memory_bandwidth_bytes_per_s=d.positive_float("memory_bandwidth_gb_per_s") * 1e9,
                    efficiency=eff, memory_efficiency=d.fraction("memory_efficiency", 1.0),
                    kernels=_kernel_execution(d.sub("kernels")) if d.has("kernels") else None,
                    fp16_cube=d.get("fp16_cube", bool, False))
    d.done()

    n = r.sub("node")
    devices = n.positive_int("devices", at_most=MAX_WORLD_SIZE, why=_BOUND)
    groups = n.get("groups", list, [list(range(devices))])
    flat = sorted(x for g in groups for x in (g if isinstance(g, list) else [None]))
    if flat != list(range(devices)):
        raise n.fail("groups", f"groups must partition the devices 0..{devices - 1} exactly once")
    group_topology = n.choice("group_topology", GROUP_TOPOLOGIES, "switch")
    links = [("group", _link(n, "group_link"))]
    if len(groups) > 1:
        links.append(("node", _link(n, "node_link")))
    else:
        if n.has("node_link"):
            links.append(("node", _link(n, "node_link")))
        else:
            links.append(("node", links[0][1]))
    n.done()

    net = r.sub("network", required=False)
    nics = net.positive_int("nics_per_node", devices)
    if net.has("nic_bandwidth_gb_per_s"):
        # Per device, when every device of the node sends at once: the node's NICs are shared.
        per_device = net.positive_float("nic_bandwidth_gb_per_s") * 1e9 * min(1.0, nics / devices)
        links.append(("network", Link(per_device, net.get("latency_us", float, 0.0) * 1e-6,
                                      net.fraction("efficiency", 1.0))))
    else:
        links.append(("network", links[-1][1]))
    fabric = read_fabric(net)
    links += fabric.links(links[1][1], links[2][1])
    net.done()

    coll = read_collectives(r.sub("collective"))
    if r.has("measured"):        # provenance written by `parsim profile-comm`
        prov = r.sub("measured")
        for key in ("date", "machine", "command"):
            prov.get(key, str, "")
        recorded = Machine(cpu_model=prov.get("cpu_model", str, ""), torch=prov.get("torch", str, ""))
        prov.done()
        warn_if_elsewhere(recorded, path)
    if r.has("calibrated"):      # provenance written by `parsim calibrate --published` (parsim.profile.fit_published)
        cal = r.sub("calibrated")
        for key in ("command", "figures_file", "date"):
            cal.get(key, str, "")
        cal.get("fields", dict, {})
        cal.get("rows", list, [])
        cal.done()
    if r.has("fitted"):          # provenance written by the public fit (parsim.profile.loso.write_profiles)
        fit = r.sub("fitted")
        for key in ("command", "fit_spec", "date", "scored"):
            fit.get(key, str, "")
        fit.get("parameters", dict, {})          # parameter -> value
        fit.done()
    profile = Profile(name=r.get("name", str), description=r.get("description", str, ""), device=device,
                      devices_per_node=devices, groups=tuple(tuple(g) for g in groups),
                      links=tuple(sorted(links, key=lambda kv: LINK_CLASSES.index(kv[0]))),
                      nics_per_node=nics, collectives=coll, source=path,
                      default_nodes=r.positive_int("nodes", 1, at_most=MAX_WORLD_SIZE // devices,
                                                   why=f"{devices} devices each; {_BOUND}"),
                      input_pipeline=_input_pipeline(r), fabric=fabric, group_topology=group_topology)
    r.done()
    return profile


def profile_path(name: str) -> str:
    path = profiles_dir() / f"{name}.yaml"
    if not path.is_file():
        raise InputError(f"--cluster: no hardware profile named {name!r}; choose one of "
                         f"{', '.join(available_profiles())}, or give a profile YAML or rank-table JSON")
    return str(path)


def check_world_size(devices: int, where: str) -> None:
    """The one check of MAX_WORLD_SIZE, for clusters not read through Fields."""
    if devices > MAX_WORLD_SIZE:
        raise InputError(f"{where}: {devices:,} devices; {_BOUND} (2^20, 64x the largest published training "
                         "run); use fewer nodes")
