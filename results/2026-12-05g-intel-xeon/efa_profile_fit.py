"""The EFA network of hardware_profiles/aws-p5.yaml, fitted to public nccl-tests tables of p5.48xlarge.

Rows: hardware_profiles/comm/aws-p5/*.csv, copied verbatim (CC BY 4.0, (c) chang-ning; PROVENANCE.md there) from
crazyguitar/aws-gpu-communication-benchmark at a77f70db668034b75db9a430b3cd718f59a6c232 (2025-10-14),
data/nccl_alltoall.csv, nccl_all_reduce.csv and nccl_all_gather.csv: 2-32 p5.48xlarge on SageMaker HyperPod
(EKS), 8 ranks a node, NCCL 2.27.7, EFA installer 1.43.2, nccl-tests 2.16.9, 32 MiB to 2-8 GiB, out-of-place
algbw (results/drawn/aws_efa_nccl_report.md, A).
Time = size / algbw (nccl-tests: algbw = size / time; size the send buffer of alltoall and the whole buffer of
all_reduce and all_gather, parsim.cost.comm's nbytes for each).

Each row is priced with parsim.cost.comm on aws-p5.yaml with the two network fields under fit (network.efficiency,
network.latency_us); the fit minimises the squared log ratio over the all-to-all rows (the op a MoE dispatcher
runs, the op the AWS family's misses pointed at), on a grid (parsim.profile.comm_fit.fit_network).  The
all-reduce and all-gather rows are priced at the fitted values and reported, not fitted: parsim's ring/tree model
of them is the dgx-h100 one (NCCL's tuning latencies), and their ratios say what that model leaves out on EFA.

    python results/2026-12-05g-intel-xeon/efa_profile_fit.py > results/2026-12-05g-intel-xeon/efa-profile-fit.txt
"""

import statistics
import sys

from parsim.hardware.cluster import load_profile, profile_path
from parsim.profile.comm_fit import OPS, fit_network, load_table, ratios, with_network

TABLES = "hardware_profiles/comm/aws-p5/nccl_{}.csv"


def main() -> None:
    tables = {test: load_table(TABLES.format(test)) for test in OPS}
    profile = load_profile(profile_path("aws-p5"))
    eff, lat = fit_network(profile, "alltoall", tables["alltoall"])
    fitted = with_network(profile, eff, lat * 1e-6)
    print(f"fitted on the {len(tables['alltoall'])} all-to-all rows: network.efficiency {eff:g}, "
          f"network.latency_us {lat:g}")
    for test, rows in tables.items():
        r = ratios(fitted, test, rows)
        errs = [abs(x - 1) for x in r]
        print(f"\n{test}: {len(rows)} rows, measured / priced median {statistics.median(r):.3f}, "
              f"range {min(r):.3f}-{max(r):.3f}, mean absolute error {100 * statistics.mean(errs):.1f}%"
              f"{' (fitted)' if test == 'alltoall' else ' (not fitted)'}")
        print(f"  {'nodes':>5} {'size MiB':>9} {'measured us':>12} {'priced us':>10} {'ratio':>6}")
        for row, x in zip(rows, r):
            print(f"  {row.nodes:>5} {row.size_bytes / 2**20:>9g} {row.measured_s * 1e6:>12.0f} "
                  f"{row.measured_s / x * 1e6:>10.0f} {x:>6.3f}")


if __name__ == "__main__":
    sys.exit(main())
