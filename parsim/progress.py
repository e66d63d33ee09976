"""Progress bars (tqdm) on stderr, the one rule for them: rank 0 only, and only where stderr is a
terminal, so that logs, pipes, notebooks and the other ranks never receive one.  A utility below
every package (the planner's search and the executor's steps show one)."""

from __future__ import annotations

import sys

from tqdm import tqdm


class NoBar:
    """The bar where none is shown: it counts nothing and draws nothing.  (tqdm's own disabled bar
    would do as much, but its first one in a process creates tqdm's multiprocessing lock: 3.5-4.0
    ms on an AMD EPYC host, 2026-11-29, results/2026-11-29-amd-epyc/no-bar.txt, inside the
    planner's timed search.)"""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, label: str, enabled: bool | None = None, rank: int = 0, **options) -> tqdm | NoBar:
    """A bar over ``total`` units; ``enabled`` None follows the rule above, True or False forces
    it (on rank 0); NoBar where it is off.  ``options`` go to tqdm (``initial``, ``unit``)."""
    on = rank == 0 and (sys.stderr.isatty() if enabled is None else enabled)
    if not on:
        return NoBar()
    return tqdm(total=total, desc=label, file=sys.stderr, leave=False, dynamic_ncols=True, **options)


def print_above(line: str, file=None) -> None:
    """Print one line, unchanged, above any bar on the screen (tqdm clears the bar, the line is
    printed and flushed, the bar is drawn again below it)."""
    file = file or sys.stdout
    with tqdm.external_write_mode(file=file):
        print(line, file=file, flush=True)
