"""NCCL's own latency model of its rings and trees: what a collective costs beyond its bytes, as
NCCL's tuner prices it to choose an algorithm (NVIDIA/nccl, src/graph/tuning.cc at
5067397c2676d5aed50042fc39e5c8ee96eb0027, 2026-06-11: ncclTunerConstantsDefaults, getNetOverhead
and ncclTopoTuneModel).  A profile opts in with ``collective.latency_model: nccl``
(parsim.hardware.collectives); parsim.cost.comm then prices a ring's or tree's latency here and its
bytes as before.  The Simple protocol's figures: NCCL runs the bandwidth-bound messages that
training moves on it (its LL and LL128 protocols, chosen for small messages, trade bandwidth for
latency and are not modelled: a message of a few KiB is priced at Simple's latency, an upper bound
on what NCCL's pick costs).  Not modelled either: the ring all-reduce's "plateau" factor across
nodes (tuning.cc, ncclTopoGetAlgoTime: x1.4 on compute capability 8.0 and later, x1.9 before),
NVLS, CollNet and PAT.

    ring (all-reduce 2(n-1) steps, of which 2(N-1) between nodes; all-gather and reduce-scatter
    n-1, of which N-1), over n ranks on N nodes:
        base + (steps - between) x inside + between x outside,
        inside = max(NVLink hop, 3 x the host's network post overhead) when N > 1
    tree (all-reduce), ppn = n / N ranks a node:
        base + 2 ((ppn - 1) x tree's NVLink hop + floor(log2 N) x outside)
"""

from __future__ import annotations

# Microseconds, Simple protocol (tuning.cc, ncclTunerConstantsDefaults): baseLatencies[RING] and
# [TREE]; hwLatencies[NVLINK][RING], [NVLINK][TREE]; hwLatencies[NET][RING] and [NET][TREE] (both
# 14: "With ppn=1 latencies are fully exposed, use the Tree network latency" changes nothing here).
BASE_US = {"ring": 8.4, "tree": 8.4}
NVLINK_HOP_US = {"ring": 3.4, "tree": 4.0}
NET_HOP_US = 14.0
# "Inter-node rings still have to launch nsteps * net overhead": getNetOverhead, 1 us on an Intel
# host, 2 us on an AMD one, times 3 for the Simple protocol.
SIMPLE_NET_OVERHEAD_FACTOR = 3


def ring_latency_s(op: str, n: int, nodes: int, net_overhead_s: float) -> float:
    """A ring ``op`` ("all_reduce", "all_gather", "reduce_scatter") over ``n`` ranks on ``nodes``
    nodes, the host posting each network step in ``net_overhead_s``: its latency."""
    if n <= 1:
        return 0.0
    all_reduce = op == "all_reduce"
    steps = 2 * (n - 1) if all_reduce else n - 1
    between = 0 if nodes <= 1 else (2 if all_reduce else 1) * (nodes - 1)
    inside = NVLINK_HOP_US["ring"] * 1e-6
    if nodes > 1:
        inside = max(inside, SIMPLE_NET_OVERHEAD_FACTOR * net_overhead_s)
    return BASE_US["ring"] * 1e-6 + (steps - between) * inside + between * NET_HOP_US * 1e-6


def tree_latency_s(n: int, nodes: int) -> float:
    """A tree all-reduce over ``n`` ranks on ``nodes`` nodes (n / nodes a node): its latency."""
    if n <= 1:
        return 0.0
    per_node = max(1, n // max(1, nodes))
    log2_nodes = max(1, nodes).bit_length() - 1         # tuning.cc's log2i: the floor
    return BASE_US["tree"] * 1e-6 + 2 * ((per_node - 1) * NVLINK_HOP_US["tree"] + log2_nodes * NET_HOP_US) * 1e-6
