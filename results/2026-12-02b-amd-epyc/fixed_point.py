"""The fixed point of the 910B's two fits (2026-12-02): the public fit's 910B parameters
(results/published/fit.yaml: memory-910b, attention-910b, attention-head-910b, hccl-overlap), fitted on every 910B row of
the development sources, and parsim calibrate --published's gemm_efficiency and HCCL
bandwidth_efficiency on ModelLink 1.1's five rows (atlas-900-a2's calibrated: section), alternated
until neither moves.  The 910B parameters price only 910B rows, so their all-source fit is their fit
on those rows (parsim.profile.loso.fit: the other rows' residuals do not depend on them).  Writes
the profiles as bench_published.py --write-profiles and the calibration do; run from the repository
root, then python benchmarks/bench_published.py --write-profiles to score it:

    python results/2026-12-02b-amd-epyc/fixed_point.py [ROUNDS]
"""

import runpy
import sys

ASCEND = ("memory-910b", "attention-910b", "attention-head-910b", "hccl-overlap")

if __name__ == "__main__":
    # the first fixed point's loop (results/2026-12-02-amd-epyc/fixed_point.py), over the four parameters
    first = runpy.run_path("results/2026-12-02-amd-epyc/fixed_point.py")
    first["main"](int(sys.argv[1]) if len(sys.argv) > 1 else 6, ASCEND)
