"""The fixed point of the 910B's two fits (2026-12-02): the public fit's 910B parameters
(results/published/fit.yaml: memory-910b, attention-910b, hccl-overlap), fitted on every 910B row of
the development sources, and parsim calibrate --published's gemm_efficiency and HCCL
bandwidth_efficiency on ModelLink 1.1's five rows (atlas-900-a2's calibrated: section), alternated
until neither moves.  The 910B parameters price only 910B rows, so their all-source fit is their fit
on those rows (parsim.profile.loso.fit: the other rows' residuals do not depend on them).  Writes
the profiles as bench_published.py --write-profiles and the calibration do; run from the repository
root, then python benchmarks/bench_published.py --write-profiles to score it:

    python results/2026-12-02-amd-epyc/fixed_point.py [ROUNDS]
"""

from __future__ import annotations

import dataclasses
import sys

sys.path.insert(0, "benchmarks")

from bench_published import COMMAND, FIT                       # noqa: E402
from parsim.cli import main as parsim                            # noqa: E402
from parsim.hardware.cluster import load_profile                 # noqa: E402
from parsim.profile.loso import Profiles, Surrogate, fit, load_fit_spec, write_profiles   # noqa: E402
from parsim.profile.published import load_all_figures            # noqa: E402

ASCEND = ("memory-910b", "attention-910b", "hccl-overlap")
CALIBRATE = ["calibrate", "--published", "results/published/ascend_figures.yaml", "--cluster", "atlas-900-a2",
             "-o", "hardware_profiles/atlas-900-a2.yaml"]


def main(rounds: int, names: tuple[str, ...] = ASCEND) -> None:
    """``rounds`` of the alternation over the fit.yaml parameters ``names`` (results/2026-12-02b-amd-epyc's
    fixed point runs it over four)."""
    spec = load_fit_spec(FIT)
    sub = dataclasses.replace(spec, parameters=tuple(p for p in spec.parameters if p.name in names))
    figures = [f for f in load_all_figures().scorable() if spec.fitted_on(f)]
    for r in range(1, rounds + 1):
        profiles = Profiles(sub)
        try:
            mine = [f for f in figures if "atlas-900-a2" in profiles.chain(f.profile)]
            values = fit(sub, Surrogate(sub, profiles, mine).rows)
            write_profiles(sub, profiles, values, COMMAND)
        finally:
            profiles.close()
        parsim(CALIBRATE)
        dev = load_profile("hardware_profiles/atlas-900-a2.yaml")
        print(f"round {r}: {', '.join(f'{n} {values[n]:.4g}' for n in names)}; calibrated gemm_efficiency "
              f"{dev.device.kernels.gemm_efficiency:.4g}, bandwidth_efficiency {dev.collectives.bandwidth_efficiency:.4g}",
              flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
