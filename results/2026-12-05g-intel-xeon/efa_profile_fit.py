"""The EFA network of hardware_profiles/aws-p5.yaml, fitted to public nccl-tests tables of p5.48xlarge.

Rows: hardware_profiles/comm/aws-p5/*.csv, copied verbatim (CC BY 4.0, (c) chang-ning; PROVENANCE.md there) from
crazyguitar/aws-gpu-communication-benchmark at a77f70db668034b75db9a430b3cd718f59a6c232 (2025-10-14),
data/nccl_alltoall.csv, nccl_all_reduce.csv and nccl_all_gather.csv: 2-32 p5.48xlarge on SageMaker HyperPod
(EKS), 8 ranks a node, NCCL 2.27.7, EFA installer 1.43.2, nccl-tests 2.16.9, 32 MiB to 2-8 GiB, out-of-place
algbw (results/drawn/aws_efa_nccl_report.md, A).
Time = size / algbw (nccl-tests: algbw = size / time; size the send buffer of alltoall and the whole buffer of
all_reduce and all_gather, parsim.cost.comm's nbytes for each).

Each row is priced with parsim.cost.comm on a profile that is aws-p5.yaml with the two network fields under fit
(network.efficiency, network.latency_us); the fit minimises the squared log ratio over the all-to-all rows
(the op a MoE dispatcher runs, the op the AWS family's misses pointed at), on a grid.  The all-reduce and
all-gather rows are priced at the fitted values and reported, not fitted: parsim's ring/tree model of them is
the dgx-h100 one (NCCL's tuning latencies), and their ratios say what that model leaves out on EFA.

    python results/2026-12-05g-intel-xeon/efa_profile_fit.py > results/2026-12-05g-intel-xeon/efa-profile-fit.txt
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

from parsim.cost import comm
from parsim.hardware.cluster import Cluster, load_profile

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
OPS = {"alltoall": "all_to_all", "all_reduce": "all_reduce", "all_gather": "all_gather"}


def rows(op: str) -> list[tuple[int, float, float]]:
    """(nodes, size in bytes, measured seconds) of hardware_profiles/comm/aws-p5/nccl_<op>.csv."""
    out = []
    with open(ROOT / "hardware_profiles" / "comm" / "aws-p5" / f"nccl_{op}.csv") as f:
        for r in csv.DictReader(f):
            size = float(r["size(MB)"]) * 2**20
            out.append((int(r["Nodes"]), size, size / (float(r["out algbw(GB/s)"]) * 1e9)))
    return out


def profile_with(efficiency: float, latency_us: float, tmp: Path):
    """aws-p5.yaml with the network's efficiency and latency replaced, loaded from a copy beside dgx-h100."""
    raw = yaml.safe_load((ROOT / "hardware_profiles" / "aws-p5.yaml").read_text())
    raw["network"] = {**raw["network"], "efficiency": efficiency, "latency_us": latency_us}
    (tmp / "dgx-h100.yaml").write_text((ROOT / "hardware_profiles" / "dgx-h100.yaml").read_text())
    path = tmp / "aws-p5.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_profile(path)


def priced_s(profile, op: str, nodes: int, size: float) -> float:
    cluster = Cluster(profile, nodes, 8)
    ranks = list(range(8 * nodes))
    if op == "alltoall":
        return comm.all_to_all_time_s(cluster, ranks, size)
    return comm.collective_time_s(cluster, ranks, size, OPS[op])


def log_error(profile, table) -> float:
    return sum(math.log(priced_s(profile, "alltoall", n, s) / t) ** 2 for n, s, t in table)


def main() -> None:
    tables = {op: rows(op) for op in OPS}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        grid = [(e / 100, lat) for e in range(60, 101, 2) for lat in (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20)]
        scored = sorted((log_error(profile_with(e, lat, tmp), tables["alltoall"]), e, lat) for e, lat in grid)
        _, eff, lat = scored[0]
        fine = [(round(eff + de / 100, 3), lat + dl) for de in (-1.5, -1, -0.5, 0, 0.5, 1, 1.5)
                for dl in (-1, -0.5, 0, 0.5, 1) if eff + de / 100 <= 1 and lat + dl >= 0]
        _, eff, lat = min((log_error(profile_with(e, la, tmp), tables["alltoall"]), e, la) for e, la in fine)
        fitted = profile_with(eff, lat, tmp)
        print(f"fitted on the {len(tables['alltoall'])} all-to-all rows: network.efficiency {eff:g}, "
              f"network.latency_us {lat:g}")
        for op, table in tables.items():
            ratios = [t / priced_s(fitted, op, n, s) for n, s, t in table]
            errs = [abs(r - 1) for r in ratios]
            print(f"\n{op}: {len(table)} rows, measured / priced median {statistics.median(ratios):.3f}, "
                  f"range {min(ratios):.3f}-{max(ratios):.3f}, mean absolute error {100 * statistics.mean(errs):.1f}%"
                  f"{' (fitted)' if op == 'alltoall' else ' (not fitted)'}")
            print(f"  {'nodes':>5} {'size MiB':>9} {'measured us':>12} {'priced us':>10} {'ratio':>6}")
            for (n, s, t), r in zip(table, ratios):
                print(f"  {n:>5} {s / 2**20:>9g} {t * 1e6:>12.0f} {t / r * 1e6:>10.0f} {r:>6.3f}")


if __name__ == "__main__":
    sys.exit(main())
