"""Progress beats, so that a hung rank is named rather than only the ranks that timed out waiting
for it.  Under ``parsim run`` each rank notes the last point of its step loop it reached (a
sequence number, the time, a few words) in a small file the launcher reads when a rank fails.
Every rank passes the same points in the same order, so sequence numbers compare across ranks:
the rank that is behind the failed one and has been silent for a whole --timeout is the one
that hung (``laggard``).  Under torchrun no folder is given and nothing is written."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

ENV = "PARSIM_HEARTBEAT_DIR"     # set by parsim.exec.launch
_WIDTH = 160                     # one fixed-width record, rewritten in place


def _path(folder: str, rank: int) -> str:
    return os.path.join(folder, f"rank{rank}.beat")


@dataclass(frozen=True)
class Beat:
    seq: int
    time_s: float                # time.time() when the rank reached it
    what: str                    # e.g. "step 2's barrier"


class Beats:
    """One rank's writer; ``beat(what)`` before each collective point of the step loop."""

    def __init__(self, rank: int):
        folder = os.environ.get(ENV)
        self.fd = os.open(_path(folder, rank), os.O_WRONLY | os.O_CREAT, 0o644) if folder else None
        self.seq = 0

    def beat(self, what: str) -> None:
        self.seq += 1
        if self.fd is not None:
            os.pwrite(self.fd, f"{self.seq} {time.time():.3f} {what}"[:_WIDTH].ljust(_WIDTH).encode(), 0)


def read(folder: str, rank: int) -> Beat | None:
    try:
        with open(_path(folder, rank)) as f:
            seq, t, what = f.read().strip().split(" ", 2)
        return Beat(int(seq), float(t), what)
    except (OSError, ValueError):          # not written yet, or read mid-write: no beat this time
        return None


def laggard(beats: dict[int, Beat | None], failed: int, alive: list[int], now_s: float, timeout_s: float,
            started_s: float) -> int | None:
    """The alive rank that hung: behind the failed rank's last point and silent for at least
    ``timeout_s`` (a rank that never beat counts as silent since ``started_s``); the furthest
    behind when there are several.  None when no rank fits (the failure had another cause)."""
    def key(r):
        b = beats.get(r)
        return (b.seq, b.time_s) if b else (0, started_s)

    behind = [r for r in alive if key(r)[0] < key(failed)[0] and now_s - key(r)[1] >= timeout_s]
    return min(behind, key=key, default=None)
