"""An independent reference for parsim's executor: the same plan, trained by a short hand-written
torch script, plain ``DistributedDataParallel`` for dp=2 and plain ``torch.distributed.pipelining``
(PipelineStage + ScheduleGPipe / Schedule1F1B) for pp=2, on 2 gloo ranks with 1 thread each;
no training code from ``parsim.exec``.  From parsim it takes only the model's definition (its torch
module, ``parsim.model.spec.build_module``, and the units a pipeline may be cut at,
``parsim.model.extract.cut_units``) and the process settings and exit of a run's ranks
(``parsim.exec.runtime``), and reads the plan's JSON with ``json``.
``benchmarks/executor_vs_reference.py`` alternates it with parsim's executor, with intervals.

    # one plan that parsim validate wrote (runs/validate/<label>.plan.json), 12 steps, 3 warm-up:
    python benchmarks/reference_torch.py runs/validate/pp2-1f1b-m4.plan.json --steps 12
    # every 2-rank dp or pp plan of a validate folder, beside parsim's own measurement and prediction:
    python benchmarks/reference_torch.py --compare runs/validate --steps 12

Each rank runs with the executor's process settings (``parsim.exec.runtime.configure_process``:
one compute thread, and glibc malloc told to keep freed memory rather than unmap it, which the
executor's docstring measured at 3-5% of a ResNet-50 step), so that a comparison measures the
training loops, not the allocator.
Each step starts after a barrier, as the executor's do, and a step's time is the slowest rank's;
the figure is the median over the steps after warm-up.  Optimizer: SGD with momentum 0.9, lr 0.01
(training.optimizer: momentum) or Adam (lr 1e-3), the executor's settings.  Synthetic inputs:
images and 10 class labels, or token ids and next tokens.  Differences from the executor, by
design: DDP's own buckets (25 MiB) and its broadcast of rank 0's buffers (BatchNorm's running
statistics) before each forward, which parsim.exec does not run (``--ddp-bucket-mb`` and
``--no-broadcast-buffers`` change both for a comparison).  Where a pipeline splits a tied
embedding and head (a Gemma-style decoder), the two stages' gradients of the shared weight are
summed after the backward, before the optimizer, as Megatron-LM's embedding-group all-reduce
(``_allreduce_word_embedding_grads`` in megatron/core/distributed/finalize_model_grads.py) and
the executor's REDUCE_TIED do: without it each stage would train its own copy, a cheaper step that
is not the same training.  Each stage's input and output pass a dense copy
where they are strided views (gloo sends contiguous buffers only), as the executor's stages do.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def batch(model_cfg: dict, spec, n: int, step: int):
    """Synthetic samples: (inputs, targets) for ``n`` samples, the same on every rank for a step."""
    g = torch.Generator().manual_seed(step)
    shape = tuple(spec.input.shape)
    if spec.input.dtype.startswith("int"):
        vocab = int(spec.graph.layers[-1].output_bytes // 4) // shape[0]     # fp32 logits per sample / T
        tokens = torch.randint(0, vocab, (n, shape[0] + 1), generator=g)
        return tokens[:, :-1], tokens[:, 1:]
    return torch.randn(n, *shape, generator=g), torch.randint(0, 10, (n,), generator=g)


def loss_fn(logits, target):
    return F.cross_entropy(logits.flatten(0, -2).float(), target.flatten())


class _Dense(torch.autograd.Function):
    """Identity whose output and gradient are dense: gloo sends contiguous buffers only, and a ViT's
    patches (flatten(2).transpose(1, 2)) cross a stage boundary as a strided view."""

    @staticmethod
    def forward(ctx, x):
        return x.contiguous()

    @staticmethod
    def backward(ctx, grad):
        return grad.contiguous()


class Dense(nn.Module):
    def forward(self, x):
        return _Dense.apply(x) if x.is_floating_point() else x


def tied_params(stage_mod: nn.Module, units: list, a: int, b: int) -> list:
    """The parameters of a stage (units ``a:b``) that a unit outside it shares (tied embeddings:
    one ``Parameter`` object, since every rank builds the whole model): the weights whose
    gradients the stages holding them must sum."""
    elsewhere = {id(p) for _, u in units[:a] + units[b:] for p in u.parameters()}
    return [p for p in stage_mod.parameters() if id(p) in elsewhere]


def worker(rank: int, world: int, init: str, plan_path: str, steps: int, warmup: int, out: str,
           ddp_options: dict | None = None) -> None:
    from parsim.model.extract import cut_units
    from parsim.model.spec import build_module, load_model

    from parsim.exec.runtime import configure_process

    configure_process(1)     # the executor's process settings: one thread, glibc keeping freed memory mapped
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    plan = json.load(open(plan_path))
    par, m = plan["parallel"], plan["model"]
    spec = load_model(m["path"])
    torch.manual_seed(0)
    model = build_module(spec.source, spec.path)
    units = cut_units(model)
    if [n for n, _ in units] != m["layers"]:
        raise SystemExit(f"{plan_path}: the model's units {[n for n, _ in units][:4]}... are not the plan's layers")
    gb, micro = m["global_batch_size"], par["microbatches"]

    def optimizer(params):
        return (torch.optim.Adam(params, lr=1e-3) if m["optimizer"] == "adam"
                else torch.optim.SGD(params, lr=0.01, momentum=0.9))

    if par["pp"] == 1:                                   # dp = world: plain DDP, micro-batches accumulated
        ddp = nn.parallel.DistributedDataParallel(model, **(ddp_options or {}))
        opt = optimizer(ddp.parameters())
        per_rank = gb // par["dp"]

        def step_fn(x, y):
            xs, ys = x.chunk(micro), y.chunk(micro)
            for i, (xi, yi) in enumerate(zip(xs, ys)):
                ctx = ddp.no_sync() if i < micro - 1 else torch.enable_grad()
                with ctx:
                    (loss_fn(ddp(xi), yi) / micro).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    else:                                                # pp = world: PipelineStage + GPipe / 1F1B
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

        a, b = par["bounds"][rank], par["bounds"][rank + 1]
        stage_mod = nn.Sequential(Dense(), *[u for _, u in units[a:b]], Dense())
        stage = PipelineStage(stage_mod, rank, par["pp"], torch.device("cpu"))
        cls = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[par["schedule"]]
        sched = cls(stage, micro, loss_fn=loss_fn)
        opt = optimizer(stage_mod.parameters())
        per_rank = gb
        tied = tied_params(stage_mod, units, a, b)      # pp = world = 2: both stages hold a tied weight

        def step_fn(x, y):
            if rank == 0:
                sched.step(x)
            elif rank == par["pp"] - 1:
                sched.step(target=y)
            else:
                sched.step()
            for p in tied:
                dist.all_reduce(p.grad)
            opt.step()
            opt.zero_grad(set_to_none=True)

    times = []
    for s in range(steps):
        x, y = batch(m, spec, gb, s)
        if par["pp"] == 1:
            x, y = x[rank * per_rank:(rank + 1) * per_rank], y[rank * per_rank:(rank + 1) * per_rank]
        dist.barrier()
        t0 = time.perf_counter()
        step_fn(x, y)
        times.append(time.perf_counter() - t0)
    gathered = [None] * world
    dist.all_gather_object(gathered, times)
    if rank == 0:
        slowest = [max(ts) for ts in zip(*gathered)]
        with open(out, "w") as f:
            json.dump({"step_times_s": slowest, "step_time_s": statistics.median(slowest[warmup:])}, f)
    dist.destroy_process_group()
    from parsim.exec.runtime import exit_without_teardown
    exit_without_teardown(0)            # torch's teardown after gloo can abort a finished rank (SIGABRT)


def supported(par: dict) -> bool:
    """Whether this script runs a plan's ``parallel`` section: dp=2 or pp=2 (GPipe, 1F1B), nothing else."""
    return (par["dp"] * par["pp"] == 2 and par["dp"] != par["pp"] and par["schedule"] in ("gpipe", "1f1b")
            and all(par.get(k, 1) == 1 for k in ("tp", "cp", "ep", "chunks")) and not par.get("zero", 0))


def run(plan_path: str, steps: int, warmup: int, ddp_options: dict | None = None) -> dict:
    """The reference's steps on ``plan_path``; ``ddp_options``: keyword arguments for a dp plan's
    DistributedDataParallel (default: DDP's own defaults)."""
    plan = json.load(open(plan_path))
    par = plan["parallel"]
    world = par["dp"] * par["pp"]
    if not supported(par):
        raise SystemExit(f"{plan_path}: the reference runs dp=2 or pp=2 (GPipe, 1F1B) only")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        mp.spawn(worker, args=(world, f"file://{os.path.join(d, 'init')}", plan_path, steps, warmup, out, ddp_options),
                 nprocs=world)
        with open(out) as f:
            return json.load(f)


def compare(folder: str, steps: int, warmup: int) -> None:
    print(f"{'plan':24} {'predicted s':>12} {'parsim run s':>13} {'reference s':>12} {'parsim/ref':>11}")
    for plan_path in sorted(glob.glob(os.path.join(folder, "*.plan.json"))):
        label = os.path.basename(plan_path).removesuffix(".plan.json")
        if not supported(json.load(open(plan_path))["parallel"]):
            continue
        runs = sorted(glob.glob(os.path.join(folder, label, "measured.json"))
                      + glob.glob(os.path.join(folder, f"{label}.pass*", "measured.json")))
        measured = statistics.median(json.load(open(p))["step_time_s"] for p in runs) if runs else float("nan")
        est = json.load(open(plan_path)).get("estimate", {}).get("step_time_s", float("nan"))
        ref = run(plan_path, steps, warmup)["step_time_s"]
        print(f"{label:24} {est:12.4f} {measured:13.4f} {ref:12.4f} {measured / ref - 1:+10.1%}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plan", nargs="?", help="a plan.json (parsim validate writes them to its --out)")
    ap.add_argument("--compare", metavar="DIR", help="every 2-rank dp or pp plan of a validate folder")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--ddp-bucket-mb", type=float, default=None,
                    help="DDP's bucket_cap_mb for a dp plan (default: DDP's own, 25); one larger than the model's "
                         "gradients makes a single all-reduce after the backward")
    ap.add_argument("--no-broadcast-buffers", action="store_true",
                    help="DDP(broadcast_buffers=False): no broadcast of rank 0's buffers (BatchNorm's running "
                         "statistics) before each forward, as parsim's executor, Megatron and torchtitan run")
    args = ap.parse_args()
    if args.compare:
        compare(args.compare, args.steps, args.warmup)
    elif args.plan:
        ddp_options = ({"bucket_cap_mb": args.ddp_bucket_mb} if args.ddp_bucket_mb else {}) | \
            ({"broadcast_buffers": False} if args.no_broadcast_buffers else {})
        got = run(args.plan, args.steps, args.warmup, ddp_options)
        print(f"{args.plan}: median step {got['step_time_s']:.4f} s over steps {args.warmup + 1}..{args.steps} "
              f"(each: {', '.join(f'{t:.4f}' for t in got['step_times_s'])})")
    else:
        ap.error("give a plan.json or --compare DIR")
    return 0


if __name__ == "__main__":
    sys.exit(main())
