"""A/B of the GPT's initialisation on the meta device: the seconds to price BLOOM's 100 scored topology rows (44
GPTs of up to 96 blocks, each built on the meta device and extracted), in a fresh process, run from a checkout
before the change (dee8404) and after it, alternated A B A B.

    python results/2026-12-07b-amd-epyc/meta_init_ab.py /tmp/pre . > results/2026-12-07b-amd-epyc/meta-init-ab.txt
"""

from __future__ import annotations

import os
import subprocess
import sys

TIMED = """
import sys, time
sys.path.insert(0, "tests")
from test_new_figures import BLOOM
from parsim.profile.published import load_figures, price
rows = [f for f in load_figures(BLOOM).figures if not f.excluded]
t = time.perf_counter()
errors = [price(f).error for f in rows]
print(time.perf_counter() - t, sum(errors))
"""


def main(before: str, after: str) -> None:
    seen = {}
    for checkout in (before, after, before, after):
        env = {**os.environ, "PYTHONPATH": os.path.abspath(checkout)}
        out = subprocess.run([sys.executable, "-W", "ignore", "-c", TIMED], cwd=checkout, env=env, check=True,
                             capture_output=True, text=True).stdout.split()
        seconds, total = float(out[0]), float(out[1])
        seen.setdefault(checkout, []).append(seconds)
        side = "before" if checkout == before else "after"
        print(f"{side:6s} {seconds:6.1f} s  (sum of the 100 errors {total:+.6f})")
    b, a = seen[before], seen[after]
    print(f"after / before, pair by pair: {a[0] / b[0]:.2f}, {a[1] / b[1]:.2f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
