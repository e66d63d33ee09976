"""NCCL's latency model of its rings and trees, transcribed for the tests from NVIDIA/nccl
src/graph/tuning.cc (5067397c, 2026-06-11; Simple protocol): ncclTunerConstantsDefaults'
baseLatencies (ring and tree 8.4 us) and hwLatencies (NVLink ring 3.4 us, tree 4.0 us; NET 14 us),
getNetOverhead (1 us on an Intel host, 2 us on an AMD one, x3 under Simple) and
ncclTopoTuneModel's step counts.  The constants are written out here, apart from parsim.cost.nccl,
so that a slip in either shows."""


def ring_s(op: str, n: int, nodes: int, net_overhead_us: float) -> float:
    all_reduce = op == "all_reduce"
    steps = 2 * (n - 1) if all_reduce else n - 1
    between = 0 if nodes == 1 else (2 * (nodes - 1) if all_reduce else nodes - 1)
    inside = 3.4 if nodes == 1 else max(3.4, 3 * net_overhead_us)
    return (8.4 + (steps - between) * inside + between * 14.0) * 1e-6


def tree_s(n: int, nodes: int) -> float:
    log2i = nodes.bit_length() - 1
    return (8.4 + 2 * ((n // nodes - 1) * 4.0 + log2i * 14.0)) * 1e-6
