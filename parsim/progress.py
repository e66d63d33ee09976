"""Progress bars (tqdm) on stderr, the one rule for them: rank 0 only, and only where stderr is a
terminal, so that logs, pipes, notebooks and the other ranks never receive one.  A utility below
every package (the planner's search and the executor's steps show one)."""

from __future__ import annotations

import sys

from tqdm import tqdm


def progress_bar(total: int, label: str, enabled: bool | None = None, rank: int = 0, **options) -> tqdm:
    """A bar over ``total`` units; ``enabled`` None follows the rule above, True or False forces
    it (on rank 0).  ``options`` go to tqdm (``initial``, ``unit``)."""
    on = rank == 0 and (sys.stderr.isatty() if enabled is None else enabled)
    return tqdm(total=total, desc=label, file=sys.stderr, disable=not on, leave=False, dynamic_ncols=True,
                **options)


def print_above(line: str, file=None) -> None:
    """Print one line, unchanged, above any bar on the screen (tqdm clears the bar, the line is
    printed and flushed, the bar is drawn again below it)."""
    file = file or sys.stdout
    with tqdm.external_write_mode(file=file):
        print(line, file=file, flush=True)
