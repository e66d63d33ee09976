"""Links between devices, priced alpha-beta: time = latency + bytes / (bandwidth x efficiency).

Link classes, from closest to farthest:
- ``group``: inside one fully connected group (Ascend 910's 4-chip HCCS ring, NVLink/NVSwitch);
- ``node``: inside one node, across groups (Ascend 910: PCIe between the two HCCS groups);
- ``domain``: across nodes of one scale-up domain, on the same fabric as inside a node (GB200
  NVL72: 18 compute trays on one NVLink switch system; CloudMatrix384: 48 servers on one UB
  network), priced at the domain's own link;
- ``network``: across nodes (RoCE / InfiniBand NICs); in a multi-tier fabric, two nodes of one
  pod on one rail: NIC, one leaf switch, NIC;
- ``rail``: two nodes of one pod on different rails of a rail-optimised fabric (NCCL's PXN: an
  NVLink hop to the GPU on the right rail, then its NIC);
- ``spine``: nodes in different pods: leaf, spine, leaf, at the spine's oversubscription.
``domain``, ``rail`` and ``spine`` exist only in profiles that describe them (parsim.hardware.fabric);
a one-tier profile's links are ``group``, ``node`` and ``network``, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

LINK_CLASSES = ("group", "node", "domain", "network", "rail", "spine")


@dataclass(frozen=True)
class Link:
    bandwidth_bytes_per_s: float   # one direction, per device
    latency_s: float
    efficiency: float = 1.0        # fraction of bandwidth large transfers reach

    def time_s(self, nbytes: float) -> float:
        if nbytes <= 0:
            return 0.0
        return self.latency_s + nbytes / (self.bandwidth_bytes_per_s * self.efficiency)
