"""Worker entry point: ``torchrun --nproc-per-node N -m parsim.run plan.json [options]``.

``parsim run plan.json --nproc N`` starts the same on this machine.  Errors are one line per rank
on stderr; a lost peer (collective timeout) says so.
"""

from __future__ import annotations

import argparse
import sys

from parsim.errors import ParsimError
from parsim.inputs import nonnegative_int_arg, positive_float_arg, positive_int_arg


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", help="plan.json from `parsim plan -o`")
    p.add_argument("--steps", type=positive_int_arg, default=10, help="training steps (default 10)")
    p.add_argument("--warmup", type=nonnegative_int_arg, default=3,
                   help="steps left out of the timing; memory is measured on the last of them (default 3)")
    p.add_argument("--data", help="cifar-10-batches-bin folder (default: synthetic data of the same shape)")
    p.add_argument("--out", default="runs/latest", help="measured.json, trace and checkpoints (default runs/latest)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=positive_float_arg, default=300.0, help="seconds before a lost rank stops the run")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    p.add_argument("--checkpoint-every", type=nonnegative_int_arg, default=0, help="also checkpoint every N steps")
    p.add_argument("--synthetic-size", type=positive_int_arg, default=50_000, help="samples in the synthetic dataset")
    p.add_argument("--dry-run", action="store_true", help="check plan, groups, stages and data; do not train")
    p.add_argument("--json", action="store_true", help="print the measurement summary as JSON")
    p.add_argument("--force", action="store_true",
                   help="run a plan made for another kind of cluster, or whose model.yaml changed since (refused "
                        "otherwise; the prediction then does not hold)")


def worker_argv(args) -> list[str]:
    """The options above, as a worker's command line (what `parsim run` hands each rank)."""
    argv = [args.plan, "--steps", str(args.steps), "--warmup", str(args.warmup), "--out", args.out,
            "--seed", str(args.seed), "--timeout", str(args.timeout), "--checkpoint-every", str(args.checkpoint_every),
            "--synthetic-size", str(args.synthetic_size)]
    if args.data:
        argv += ["--data", args.data]
    argv += [flag for flag, on in (("--resume", args.resume), ("--dry-run", args.dry_run), ("--json", args.json),
                                   ("--force", args.force)) if on]
    return argv


def options_from(args):
    from parsim.exec.train import RunOptions

    return RunOptions(plan=args.plan, steps=args.steps, warmup=args.warmup, data=args.data, out=args.out,
                      seed=args.seed, timeout_s=args.timeout, resume=args.resume, dry_run=args.dry_run,
                      json=args.json, checkpoint_every=args.checkpoint_every, synthetic_size=args.synthetic_size,
                      force=args.force)


def main(argv: list[str] | None = None) -> int:
    import os

    parser = argparse.ArgumentParser(prog="python -m parsim.run")
    add_run_options(parser)
    args = parser.parse_args(argv)
    rank = os.environ.get("RANK", "?")
    try:
        from parsim.exec.runtime import configure_process

        configure_process(int(os.environ.get("OMP_NUM_THREADS", "1")))
        from parsim.exec.train import train
        from parsim.report.measured import report_measurement

        return train(options_from(args), report_measurement)     # the executor measures, the report reports
    except ParsimError as e:
        print(f"parsim: error: rank {rank}: {e}", file=sys.stderr)
        return e.exit_code
    except (RuntimeError, ConnectionError) as e:   # gloo/nccl: a peer vanished or timed out
        if os.environ.get("PARSIM_TRACEBACK"):     # for developers: the whole story
            import traceback
            traceback.print_exc()
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        lost = any(w in str(e).lower() for w in ("timed out", "timeout", "connection", "closed", "reset by peer"))
        what = "lost contact with a peer rank" if lost else "failed"
        print(f"parsim: error: rank {rank}: {what}: {text[:300]}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    from parsim.exec.runtime import exit_without_teardown

    exit_without_teardown(main())
