"""A one-line progress bar on stderr, shown only when stdout is a terminal."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, label: str, enabled: bool | None = None):
        self.total, self.label, self.done = max(total, 1), label, 0
        self.enabled = sys.stdout.isatty() if enabled is None else enabled
        self._last = 0.0

    def step(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._last > 0.1 or self.done >= self.total):
            self._last = now
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(30 * frac)
            sys.stderr.write(f"\r{self.label} [{bar:<30}] {self.done}/{self.total}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()
