"""HCCL's reduce-scatter and all-gather across servers priced as HCCL runs them on Atlas A2, kept
aside (not committed to parsim): hccl_planes.patch prices them as the server planes of hicann/hccl's
CollReduceScatterMeshExecutor (across servers on every local rank's own NIC at once over the whole
buffer, then a Mesh inside each server over its slice), or HCCL's Pipeline where the profile lists
it, against the flat ring on one NIC that parsim.cost.comm._sharded prices.  Prices every public row
at the shipped profiles without and with the patch (applied to the working tree, then reverted
whatever happens) and prints the scored rows whose error moves by more than 0.05 points.
Deterministic: prices, fits nothing.  From the repository root:

    python results/2026-12-05c-intel-xeon/hccl_planes.py
"""

from __future__ import annotations

import re
import subprocess
import sys

PATCH = "results/2026-12-05c-intel-xeon/hccl_planes.patch"
ROW = re.compile(r"^(\S+)\s+\S+\s+\S+\s+\S+\s+([+-][\d.]+)%\s.*?(\(excluded\))?$")


def quick() -> dict[str, tuple[float, bool]]:
    """Row id -> (its error in %, whether excluded), from bench_published.py --quick."""
    out = subprocess.run([sys.executable, "benchmarks/bench_published.py", "--quick"], check=True,
                         capture_output=True, text=True).stdout
    return {m.group(1): (float(m.group(2)), bool(m.group(3))) for m in map(ROW.match, out.splitlines()) if m}


def main() -> None:
    before = quick()
    subprocess.run(["git", "apply", PATCH], check=True)
    try:
        after = quick()
    finally:
        subprocess.run(["git", "apply", "-R", PATCH], check=True)
    moved = [(k, before[k][0], after[k][0]) for k in before
             if k in after and not before[k][1] and abs(after[k][0] - before[k][0]) > 0.05]
    print(f"{len(before)} rows priced; scored rows whose error moves by more than 0.05 points: {len(moved)}")
    for ident, a, b in moved:
        print(f"  {ident:<60} {a:+7.1f}% -> {b:+7.1f}%")


if __name__ == "__main__":
    main()
