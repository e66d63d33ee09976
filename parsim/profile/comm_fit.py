"""Fit a profile's network to public nccl-tests tables, and price their rows.

The tables in hardware_profiles/comm/ (their sources: PROVENANCE.md there) hold nccl-tests' out-of-place
algorithm bandwidth by node count and message size; time = size / algbw (nccl-tests: algbw = size / time,
the size the send buffer of alltoall and the whole buffer of all_reduce and all_gather, which is
parsim.cost.comm's nbytes for each).  Each row is priced with parsim.cost.comm on the profile, every node
full; ``fit_network`` picks the network's efficiency and latency that minimise the squared log ratio over
a table, on a grid refined once.  Used by results/2026-12-05g-intel-xeon/efa_profile_fit.py (the fit that
wrote hardware_profiles/aws-p5.yaml's network) and tests/test_aws_p5.py (the profile against its tables).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from pathlib import Path

from parsim.cost import comm
from parsim.hardware.cluster import Cluster, Profile

# nccl-tests' binary (alltoall_perf, ...) -> parsim.cost.comm's op
OPS = {"alltoall": "all_to_all", "all_reduce": "all_reduce", "all_gather": "all_gather"}


@dataclass(frozen=True)
class Row:
    nodes: int
    size_bytes: float
    measured_s: float


def load_table(path: str | Path) -> tuple[Row, ...]:
    """The rows of an nccl-tests CSV (columns Nodes, size(MB), out algbw(GB/s)): MiB sizes, GB/s bandwidths."""
    with open(path) as f:
        return tuple(Row(int(r["Nodes"]), float(r["size(MB)"]) * 2**20,
                         float(r["size(MB)"]) * 2**20 / (float(r["out algbw(GB/s)"]) * 1e9)) for r in csv.DictReader(f))


def priced_s(profile: Profile, test: str, nodes: int, size_bytes: float) -> float:
    """nccl-tests' ``test`` (a key of OPS) over every device of ``nodes`` full nodes, priced."""
    cluster = Cluster(profile, nodes, profile.devices_per_node)
    ranks = list(range(nodes * profile.devices_per_node))
    if test == "alltoall":
        return comm.all_to_all_time_s(cluster, ranks, size_bytes)
    return comm.collective_time_s(cluster, ranks, size_bytes, OPS[test])


def ratios(profile: Profile, test: str, rows: tuple[Row, ...]) -> list[float]:
    """measured / priced for each row."""
    return [r.measured_s / priced_s(profile, test, r.nodes, r.size_bytes) for r in rows]


def log_error(profile: Profile, test: str, rows: tuple[Row, ...]) -> float:
    """The fit's objective: the sum of squared log ratios."""
    return sum(math.log(x) ** 2 for x in ratios(profile, test, rows))


def with_network(profile: Profile, efficiency: float, latency_s: float | None = None) -> Profile:
    """``profile`` with its network link's efficiency (and latency, where given) replaced."""
    def changed(link):
        return replace(link, efficiency=efficiency, latency_s=link.latency_s if latency_s is None else latency_s)
    return replace(profile, links=tuple((c, changed(link) if c == "network" else link) for c, link in profile.links))


def fit_network(profile: Profile, test: str, rows: tuple[Row, ...]) -> tuple[float, float]:
    """(efficiency, latency in us) of the network minimising ``log_error`` over ``rows``: a grid of efficiency
    0.60-1.00 by 0.02 and latency 0-20 us, then the best point's neighbourhood by 0.005 and 0.5 us."""
    def score(e, lat_us):
        return log_error(with_network(profile, e, lat_us * 1e-6), test, rows)
    grid = [(e / 100, lat) for e in range(60, 101, 2) for lat in (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20)]
    _, eff, lat = min((score(e, lat), e, lat) for e, lat in grid)
    fine = [(round(eff + de / 100, 3), lat + dl) for de in (-1.5, -1, -0.5, 0, 0.5, 1, 1.5)
            for dl in (-1, -0.5, 0, 0.5, 1) if eff + de / 100 <= 1 and lat + dl >= 0]
    _, eff, lat = min((score(e, la), e, la) for e, la in fine)
    return eff, lat
