"""The fabric between nodes: a scale-up domain that spans nodes (an NVLink switch system, Huawei's
UB network), and the network above the NICs: one switch tier (every profile before these), or
rail-optimised leaves under a spine, as in NVIDIA's DGX SuperPOD, priced as the link classes
``domain``, ``rail`` and ``spine`` (parsim.hardware.links).

Between ranks on different nodes, nearest first:

- ``domain``: nodes of one scale-up domain (``scale_up.nodes`` consecutive nodes).  A GB200 NVL72
  rack is 18 compute trays of 4 GPUs whose NVLink ports all go to the rack's NVLink switch trays
  (DGX GB200 user guide, "Hardware": 18 compute trays, 9 NVLink switch trays, 72-GPU NVLink
  domain), so two GPUs on different trays talk over NVLink as two on one tray do; a
  CloudMatrix384 is 48 servers of 8 Ascend 910C on one UB network (Zuo et al. 2025, "Serving
  Large Language Models on Huawei CloudMatrix384", arXiv 2506.12708, Sec. 3).  Priced at the
  domain's link (``scale_up``), before any NIC tier: a group inside the domain never touches
  the NICs however many nodes it spans.

- ``network``: two nodes of one pod on one rail: NIC, the rail's leaf switch, NIC.  A one-tier
  profile has nothing else.
- ``rail``: two nodes of one pod on different rails.  A rail-optimised fabric wires NIC i of
  every node of a pod to leaf i ("rail" i; DGX SuperPOD reference architecture, RA-11333-001,
  compute fabric; NVIDIA, "Doubling all2all Performance with NVIDIA Collective Communication
  Library 2.12", 2022, Fig. 1).  NCCL does not cross rails in the network: since 2.12 its PXN
  writes the data over NVLink into the GPU of the sending node that sits on the receiver's rail,
  whose NIC sends it (same blog post; on by default: NCCL_PXN_DISABLE defaults to 0, NCCL's
  environment-variable docs and src/graph/paths.cc).  Priced as that path: the node link's
  latency plus the network's, at the slower of the two bandwidths (the NIC's).
- ``spine``: nodes in different pods: leaf, spine, leaf.  A spine with oversubscription o has 1/o
  of the uplink bandwidth its leaves have downlinks, so when every GPU sends across pods at once
  each gets the NIC's bandwidth / o: the ``spine`` link here; the extra switch hops add
  ``spine_latency_s``.  A ring whose N nodes lie in p pods sends only p/N of its traffic across
  them, and gets the NIC's bandwidth / max(1, o p / N) there (parsim.cost.comm.ring_spine_relief).

A group's class is the farthest between any two of its members (Cluster.span_class), so a group
that spans nodes and rails is ``rail`` even where NCCL could route its ring on one rail; the cost
is the PXN hop's latency per step, the bandwidth being the NIC's either way.  Different rails in
different pods are ``spine``: the spine's bandwidth and latency, the PXN hop's latency left out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from parsim.hardware.links import Link
from parsim.inputs import Fields


@dataclass(frozen=True)
class Fabric:
    rail_optimized: bool = False    # NIC i of every node of a pod on leaf i
    pod_nodes: int = 0              # nodes under one set of leaves (a SuperPOD scalable unit); 0: one pod
    oversubscription: float = 1.0   # leaf downlink / uplink bandwidth at the spine (1: non-blocking)
    spine_latency_s: float = 0.0    # on top of the network's, across the spine
    domain_nodes: int = 0           # consecutive nodes in one scale-up domain (NVL72: 18 trays); 0: none
    domain_link: Link | None = None  # per device, one direction, across the domain's nodes

    @property
    def tiered(self) -> bool:
        return self.rail_optimized or self.pod_nodes > 0

    @property
    def spans_nodes(self) -> bool:
        """Whether a group across nodes can be anything but ``network`` (tiers or a domain)."""
        return self.tiered or self.domain_nodes > 0

    def tier(self, nodes: Iterable[int], rails: Iterable[int]) -> str:
        """The link class between ranks on two or more ``nodes`` whose NICs are on ``rails``."""
        nodes = set(nodes)
        if self.domain_nodes and len({n // self.domain_nodes for n in nodes}) == 1:
            return "domain"
        if self.pod_nodes and len({n // self.pod_nodes for n in nodes}) > 1:
            return "spine"
        if self.rail_optimized and len(set(rails)) > 1:
            return "rail"
        return "network"

    def links(self, node: Link, network: Link) -> tuple[tuple[str, Link], ...]:
        """The ``domain``, ``rail`` and ``spine`` links this fabric has: the domain's own, then
        those from the node's farthest link (the PXN hop) and the network's."""
        out = [("domain", self.domain_link)] if self.domain_nodes else []
        if self.rail_optimized:
            slower = min((node, network), key=lambda link: link.bandwidth_bytes_per_s * link.efficiency)
            out.append(("rail", replace(slower, latency_s=node.latency_s + network.latency_s)))
        if self.pod_nodes:
            out.append(("spine", replace(network, bandwidth_bytes_per_s=network.bandwidth_bytes_per_s
                                         / self.oversubscription,
                                         latency_s=network.latency_s + self.spine_latency_s)))
        return tuple(out)

    def describe(self) -> dict:
        out = {"rail_optimized": self.rail_optimized, "pod_nodes": self.pod_nodes,
               "oversubscription": self.oversubscription, "spine_latency_s": self.spine_latency_s}
        return {**out, "domain_nodes": self.domain_nodes} if self.domain_nodes else out


def read_fabric(net: Fields) -> Fabric:
    """The tier fields of a profile's ``network`` section (absent: one tier)::

        rail_optimized: true          # optional
        pod_nodes: 32                 # optional: nodes per pod; needed for a spine
        spine: {oversubscription: 1.0, latency_us: 1}   # optional with pod_nodes
        scale_up: {nodes: 18, bandwidth_gb_per_s: 900, latency_us: 3}   # optional: a domain across nodes
    """
    rail = net.get("rail_optimized", bool, False)
    pod_nodes = net.positive_int("pod_nodes", None) or 0
    fabric = Fabric(rail_optimized=rail, pod_nodes=pod_nodes)
    if net.has("scale_up"):
        s = net.sub("scale_up")
        domain_nodes = s.positive_int("nodes")
        if domain_nodes < 2:
            raise s.fail("nodes", "a scale-up domain spans at least 2 nodes (NVL72: 18 compute trays); "
                                  "inside one node the group and node links price it")
        if pod_nodes and pod_nodes % domain_nodes:
            raise s.fail("nodes", f"must divide pod_nodes ({pod_nodes}): a domain sits under one set of leaves")
        link = Link(s.positive_float("bandwidth_gb_per_s") * 1e9, s.get("latency_us", float, 0.0) * 1e-6,
                    s.fraction("efficiency", 1.0))
        s.done()
        fabric = replace(fabric, domain_nodes=domain_nodes, domain_link=link)
    if net.has("spine"):
        if not pod_nodes:
            raise net.fail("spine", "needs pod_nodes, the nodes under one set of leaves (32 in a DGX SuperPOD "
                                    "scalable unit); add it or remove spine")
        s = net.sub("spine")
        over = s.get("oversubscription", float, 1.0)
        if over < 1:
            raise s.fail("oversubscription", f"must be >= 1 (1: non-blocking; 7 for Llama 3's 1:7), got {over}")
        latency_us = s.get("latency_us", float, 0.0)
        if latency_us < 0:
            raise s.fail("latency_us", f"must be >= 0, got {latency_us}")
        s.done()
        fabric = replace(fabric, oversubscription=over, spine_latency_s=latency_us * 1e-6)
    if fabric.tiered and not net.has("nic_bandwidth_gb_per_s"):
        key = "rail_optimized" if rail else "pod_nodes"
        raise net.fail(key, "a multi-tier network needs nic_bandwidth_gb_per_s, the bandwidth its tiers divide")
    return fabric
