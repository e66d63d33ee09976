"""Test-only fault injection.  ``PARSIM_FAULT`` makes one rank misbehave at one step so that the
tests can check how a run fails (tests/test_faults.py); a real run leaves it unset, and then this
does nothing.  Steps count from 1, as the loss log does.

    PARSIM_FAULT=hang@rank=1@step=2   rank 1 stops before step 2's barrier (a hung rank)
    PARSIM_FAULT=nan@rank=0@step=2    rank 0 sets its parameters to NaN before step 2 (a diverged loss)
"""

from __future__ import annotations

import os

from parsim.errors import InputError

KINDS = ("hang", "nan")


def injected(kind: str, step: int, rank: int) -> bool:
    """Whether PARSIM_FAULT asks for ``kind`` at ``step`` on ``rank`` (rank or step left out: any)."""
    spec = os.environ.get("PARSIM_FAULT")
    if not spec:
        return False
    name, *fields = spec.split("@")
    try:
        where = {k: int(v) for k, v in (f.split("=", 1) for f in fields)}
    except ValueError:
        where = {"?": 0}
    if name not in KINDS or set(where) - {"rank", "step"}:
        raise InputError(f"PARSIM_FAULT={spec}: expected one of {', '.join(KINDS)} followed by @rank=N and/or "
                         "@step=N (a test hook; unset it for a real run)")
    return name == kind and where.get("step", step) == step and where.get("rank", rank) == rank
