"""Where a one-device training step's time goes, measured: the forward, the backward and the
optimizer step timed apart (the device synchronized at each boundary), and the kernels that
filled them (torch.profiler).  For comparing with the simulator's layer prices when a measured
step and its prediction disagree (runners/device_check.sh's runs).

    python benchmarks/gpu_breakdown.py PLAN.json [PLAN.json ...] [--steps 8] [--warmup 3]

Each plan is one made by ``parsim plan MODEL --cluster C:1x1 --dp 1 --pp 1 -o PLAN.json`` (one
device, every micro-batch on it).  The model is built as the single-process reference builds it
(parsim.exec.reference: the executor's units in one Sequential, the plan's dtype and memory
format, its optimizer on fp32 masters), fed synthetic data of the model's input shape.  Prints,
per plan: the step's median and the median of each phase over the timed steps, then the 15
kernels with the most device time over one profiled step, and the device time by kind of kernel
(GEMM, convolution, normalization, the optimizer's element-wise work, other element-wise).  On a
CPU it runs too (the kernels are then torch's CPU operators).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

import torch

from parsim.errors import ParsimError
from parsim.exec.data import input_kind, make_loader
from parsim.exec.groups import synchronize
from parsim.exec.objective import loss_fn
from parsim.exec.reference import reference_model
from parsim.inputs import nonnegative_int_arg, positive_int_arg
from parsim.plan import load_plan

# kernel names by kind, first match wins (cuBLAS/CUTLASS GEMMs are nvjet/sm90_xmma/cutlass/gemm;
# cuDNN's convolutions carry conv, implicit or wgrad/dgrad in their names)
KINDS = (("gemm", re.compile(r"gemm|nvjet|cutlass|xmma_gemm|addmm|matmul|\bmm\b|bmm", re.I)),
         ("convolution", re.compile(r"conv|implicit|wgrad|dgrad|cudnn", re.I)),
         ("attention", re.compile(r"flash|fmha|attention|sdpa|efficient", re.I)),
         ("normalization", re.compile(r"norm|bn_|batch_norm", re.I)),
         ("optimizer", re.compile(r"adam|multi_tensor|foreach|lerp|addcdiv|addcmul", re.I)))


def kind_of(name: str) -> str:
    return next((k for k, pattern in KINDS if pattern.search(name)), "other")


def breakdown(plan_path: str, steps: int, warmup: int) -> None:
    plan = load_plan(plan_path)
    cfg = plan.config
    if cfg.dp * cfg.pp * cfg.tp * cfg.cp != 1:
        raise SystemExit(f"{plan_path}: one device only (dp pp tp cp = 1); plan with --dp 1 --pp 1")
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    spec, model, opt, feed = reference_model(plan, plan_path, device=dev)
    b = cfg.microbatch_size(plan.global_batch_size)
    loader, _, _ = make_loader(None, b * cfg.microbatches, 1, 0, input_kind(spec), 0, b * cfg.microbatches)
    x, y = next(iter(loader))
    x = feed(x).to(dev)
    y = y.to(dev)

    def step(times: dict | None):
        model.zero_grad(set_to_none=True)
        t = {"forward": 0.0, "backward": 0.0}
        for xi, yi in zip(x.chunk(cfg.microbatches), y.chunk(cfg.microbatches)):
            synchronize(dev)
            t0 = time.perf_counter()
            with torch.profiler.record_function("forward"):
                loss = loss_fn(model(xi), yi)
            synchronize(dev)
            t1 = time.perf_counter()
            with torch.profiler.record_function("backward"):
                loss.backward()
            synchronize(dev)
            t["forward"] += t1 - t0
            t["backward"] += time.perf_counter() - t1
        t0 = time.perf_counter()
        with torch.profiler.record_function("optimizer"):
            opt.step()
        synchronize(dev)
        t["optimizer"] = time.perf_counter() - t0
        if times is not None:
            for k, v in t.items():
                times.setdefault(k, []).append(v)
            times.setdefault("step", []).append(sum(t.values()))

    for _ in range(warmup):
        step(None)
    times: dict = {}
    for _ in range(steps):
        step(times)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"== {plan.model_path}: {spec.name}, {plan.dtype}, micro-batch {b} x {cfg.microbatches}, "
          f"{plan.optimizer}, on {torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'cpu'}")
    print(f"predicted step {plan.estimate['step_time_s'] * 1e3:.2f} ms" if "step_time_s" in plan.estimate else "")
    print("measured (median of %d steps): " % steps + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in med.items()))
    print("  step spread: %.2f .. %.2f ms" % (min(times["step"]) * 1e3, max(times["step"]) * 1e3))

    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with torch.profiler.profile(activities=acts) as prof:
        step(None)
    attr = "self_device_time_total" if dev.type == "cuda" else "self_cpu_time_total"
    # kernels only: not the ranges of user annotations (ours, and the optimizer's "Optimizer.step#Adam.step",
    # which the first H200 run, 2026-12-04, counted as 45 ms of device time over the kernels inside it);
    # on CUDA not the host's operators and runtime calls either
    events = [e for e in prof.key_averages() if getattr(e, attr, 0) > 0 and not getattr(e, "is_user_annotation", False)
              and e.key not in ("forward", "backward", "optimizer") and not e.key.startswith("Optimizer.")]
    if dev.type == "cuda":
        events = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    total = sum(getattr(e, attr) for e in events)
    print(f"device time over one profiled step: {total / 1e3:.2f} ms in {sum(e.count for e in events)} kernels")
    by_kind: dict[str, float] = {}
    for e in events:
        kind = kind_of(e.key)
        by_kind[kind] = by_kind.get(kind, 0.0) + getattr(e, attr)
    print("  by kind: " + ", ".join(f"{k} {v / 1e3:.2f} ms ({v / total:.0%})" for k, v in
                                   sorted(by_kind.items(), key=lambda kv: -kv[1])))
    for e in sorted(events, key=lambda e: -getattr(e, attr))[:15]:
        print(f"  {getattr(e, attr) / 1e3:9.3f} ms  x{e.count:<5d} {kind_of(e.key):13s} {e.key[:110]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("plans", nargs="+")
    ap.add_argument("--steps", type=positive_int_arg, default=8)
    ap.add_argument("--warmup", type=nonnegative_int_arg, default=3)
    args = ap.parse_args()
    try:
        for p in args.plans:
            breakdown(p, args.steps, args.warmup)
    except ParsimError as e:          # a missing or malformed plan: its one line, no traceback
        raise SystemExit(f"gpu_breakdown: error: {e}") from None


if __name__ == "__main__":
    main()
