"""Two local gloo ranks for the communication benchmarks: ``run(worker)`` spawns them, each
calling ``worker(rank, init, out)`` with a file:// rendezvous, and returns what the workers
wrote to ``out`` (the benchmark's figures); ``main(worker)`` prints it."""

from __future__ import annotations

import os
import sys
import tempfile

import torch.multiprocessing as mp


def run(worker) -> str:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.txt")
        mp.spawn(worker, args=(f"file://{os.path.join(d, 'init')}", out), nprocs=2)
        with open(out) as f:
            return f.read()


def main(worker) -> int:
    sys.stdout.write(run(worker))
    return 0
