"""Two local gloo ranks for the communication benchmarks: ``run(worker)`` spawns them, each
calling ``worker(rank, init, out)`` with a file:// rendezvous, and returns what the workers
wrote to ``out`` (the benchmark's figures); ``main(worker)`` prints it."""

from __future__ import annotations

import os
import sys
import tempfile

import torch.multiprocessing as mp


def _then_exit(rank: int, worker, init: str, out: str) -> None:
    """``worker``, then leave without the interpreter's teardown, where torch can abort a finished
    gloo process (parsim.exec.runtime.exit_without_teardown)."""
    from parsim.exec.runtime import exit_without_teardown

    worker(rank, init, out)
    exit_without_teardown(0)


def run(worker) -> str:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.txt")
        mp.spawn(_then_exit, args=(worker, f"file://{os.path.join(d, 'init')}", out), nprocs=2)
        with open(out) as f:
            return f.read()


def main(worker) -> int:
    sys.stdout.write(run(worker))
    return 0
