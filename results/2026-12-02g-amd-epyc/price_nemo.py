"""Price the NeMo 24.07 rows (results/published/nemo_perf_figures.yaml; beside this script when
drawn) at the shipped profiles, as benchmarks/bench_published.py --quick prints them:

    python results/2026-12-02g-amd-epyc/price_nemo.py
"""

import os
import statistics
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

from parsim.profile.published import load_figures, price  # noqa: E402

errors = []
for f in load_figures(os.path.join(ROOT, "results", "published", "nemo_perf_figures.yaml")).figures:
    p = price(f)
    errors.append(p.error)
    print(f"{f.id:<48} {f.profile:<18} {f.measured:>10.4g} {p.predicted:>10.4g} {p.error:+7.1%}  {p.config}")
print(f"{len(errors)} rows: MAPE {statistics.mean(abs(e) for e in errors):.1%}, "
      f"{sum(abs(e) <= 0.10 for e in errors)} within 10%, {sum(abs(e) > 0.25 for e in errors)} beyond 25%")
