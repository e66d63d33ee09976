"""Mutation checks: each test run against a mutation of what it guards, which must turn it red.
A mutation is (what, path, old, new, test): ``old`` replaced by ``new`` in ``path`` (``old`` None:
``new`` appended), the test run clean and mutated, the file restored whatever happens.  A results
folder's mutations.py lists its MUTATIONS and calls ``check``; it prints one paragraph each and
returns how many were not caught.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run(test: str) -> tuple[int, str]:
    """(exit code, pytest's last line) of one test run without the cache."""
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
                       capture_output=True, text=True)
    last = [line for line in p.stdout.splitlines() if line.strip()][-1]
    return p.returncode, last


def check(mutations) -> int:
    bad = 0
    for what, path, old, new, test in mutations:
        f = Path(path)
        text = f.read_text()
        if old is None:
            mutated = text + new
        else:
            assert text.count(old) == 1, (path, old)
            mutated = text.replace(old, new)
        rc0, clean = run(test)
        try:
            f.write_text(mutated)
            rc1, red = run(test)
        finally:
            f.write_text(text)
        ok = rc0 == 0 and rc1 != 0
        bad += not ok
        print(f"{what}\n  {path} mutated; {test}\n  unmutated: {clean}\n  mutated:   {red}\n  "
              f"{'red under the mutation, green without: it can fail' if ok else 'NOT CAUGHT'}\n")
    return bad
