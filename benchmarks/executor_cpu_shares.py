"""Where a step's CPU time goes, in parsim's executor and in plain torch (benchmarks/reference_torch.py),
on one plan: each rank runs under cProfile with a CPU-time clock (``time.process_time``: the
process's own CPU seconds, all its threads, so that waiting and a neighbour's load count little),
and per rank it prints the CPU milliseconds a step spends in the step as a whole, the zeroing of
the gradients, the optimizer step, and, in the executor, the wait for the gradient all-reduces,
the gradient-ready hooks and the per-action timing records.  What explains a gap that
``benchmarks/executor_vs_reference.py`` measures: where the executor's CPU time per step is no
larger than the reference's, its gap is waiting (communication, a pipeline's bubbles), not work.

    python benchmarks/executor_cpu_shares.py PLAN.json [--steps 12] [--warmup 3]

Per step means over every step run, warm-up included, on both sides alike; cProfile adds a few
microseconds to each Python call, so shares, not times, are what to read.  Guidance, not a
timing to report: run ``executor_vs_reference.py`` for the figures.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time

import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# (label, file name's end, function): per side, what a step's CPU time is split into
PARTS = {
    "executor": [("step", "exec/train.py", "run_step"), ("zero grads", "exec/precision.py", "zero_grad"),
                 ("optimizer", "exec/precision.py", "step"), ("grad sync wait", "exec/grad_sync.py", "finish"),
                 ("grad hooks", "exec/grad_sync.py", "_accumulated"), ("action records", "exec/train.py", "action")],
    "reference": [("step", "reference_torch.py", "step_fn"), ("zero grads", "optim/optimizer.py", "zero_grad"),
                  ("optimizer", "optim/sgd.py", "step"), ("optimizer", "optim/adam.py", "step")],
}


def _executor_rank(rank: int, plan: str, steps: int, warmup: int, port: int, prefix: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    from parsim.exec.runtime import configure_process, exit_without_teardown
    from parsim.exec.train import RunOptions, train

    configure_process(1)
    sys.stdout = open(os.devnull, "w")             # the run's own summary: this script prints its own
    with tempfile.TemporaryDirectory() as out:
        prof = cProfile.Profile(time.process_time)
        prof.enable()
        train(RunOptions(plan=plan, steps=steps, warmup=warmup, out=out, json=True, force=True))
        prof.disable()
    prof.dump_stats(f"{prefix}.executor.{rank}")
    exit_without_teardown(0)


def _reference_rank(rank: int, plan: str, steps: int, warmup: int, init: str, out: str, prefix: str) -> None:
    import parsim.exec.runtime as runtime
    import reference_torch

    prof = cProfile.Profile(time.process_time)

    def dump_then_exit(code: int) -> None:        # the reference worker's last call
        prof.disable()
        prof.dump_stats(f"{prefix}.reference.{rank}")
        os._exit(code)
    runtime.exit_without_teardown = dump_then_exit
    prof.enable()
    reference_torch.worker(rank, 2, init, plan, steps, warmup, out)


def cpu_ms_per_step(path: str, parts, steps: int) -> dict[str, float]:
    stats = pstats.Stats(path).stats
    out: dict[str, float] = {}
    for label, where, fn in parts:
        cum_s = sum(v[3] for (f, _, name), v in stats.items() if name == fn and f.endswith(where))
        out[label] = out.get(label, 0.0) + 1e3 * cum_s / steps
    return out


def main(argv=None) -> int:
    from parsim.exec.launch import free_port

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plan", help="a 2-rank plan the reference runs (dp=2, or pp=2 with GPipe or 1F1B)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        prefix = os.path.join(d, "prof")
        mp.spawn(_executor_rank, args=(os.path.abspath(args.plan), args.steps, args.warmup, free_port(), prefix),
                 nprocs=2)
        mp.spawn(_reference_rank, args=(args.plan, args.steps, args.warmup, f"file://{os.path.join(d, 'init')}",
                                         os.path.join(d, "ref.json"), prefix), nprocs=2)
        print(f"{args.plan}: CPU ms per step (cProfile, process time; {args.steps} steps, warm-up included)")
        for side, parts in PARTS.items():
            for rank in (0, 1):
                got = cpu_ms_per_step(f"{prefix}.{side}.{rank}", parts, args.steps)
                print(f"{side:9} rank {rank}: " + ", ".join(f"{k} {v:.2f}" + (f" ({v / got['step']:.1%})" if k != "step"
                                                                              else "") for k, v in got.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
