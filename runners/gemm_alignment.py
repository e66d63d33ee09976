"""Attention's two batched GEMMs timed by head dimension: is a dimension that is not a multiple of 8
elements (16 bytes of fp16 or bf16) slower per FLOP, and by how much?  NVIDIA's "Matrix Multiplication
Background User's Guide" (Sec. 2.2, "Tensor Core Requirements") says cuBLAS 11 and later run Tensor Cores
on any size, more efficiently at multiples of 16 bytes; parsim's kernel model has no alignment term (its
GEMM tables hold no unaligned shape), and BigScience's BLOOM trials with head dimensions 150 and 108 ran
about 1.37x slower against parsim's price than the same layouts with aligned heads
(results/2026-12-05d-intel-xeon/bloom-alignment.txt).  This measures it, for runners/device_check.sh.

    python runners/gemm_alignment.py [--device cuda] [--dtype bf16] [--seq 2048] [--batch 64] [--reps 20]

Prints one line per head dimension: QK^T ([batch, seq, d] x the transpose of K's [batch, seq, d], as
Megatron's baddbmm takes it) and AV ([batch, seq, seq] x [batch, seq, d]), each its median time and
TFLOP/s (2 x batch x seq x seq x d FLOPs each), and their FLOP rate over the 128-dimension rate.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

HEAD_DIMS = (128, 112, 104, 96, 144, 150, 108, 100)      # aligned to 8 first, then 150, 108 (BLOOM's), 100


def _timed(fn, device: str, reps: int) -> float:
    """The median of ``reps`` timings of ``fn`` in seconds, after two warm-up calls."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64, help="micro-batch x heads per tensor-parallel rank")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args(argv)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    b, s = args.batch, args.seq
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print(f"attention's batched GEMMs on {args.device} ({name}), {args.dtype}, batch {b}, seq {s}, "
          f"torch {torch.__version__}; median of {args.reps}")
    base = None
    for d in HEAD_DIMS:
        q = torch.randn(b, s, d, device=args.device, dtype=dtype)
        k = torch.randn(b, s, d, device=args.device, dtype=dtype).transpose(1, 2)   # as attention holds K
        p = torch.randn(b, s, s, device=args.device, dtype=dtype)
        flops = 2 * b * s * s * d
        qk = _timed(lambda: torch.bmm(q, k), args.device, args.reps)
        av = _timed(lambda: torch.bmm(p, q), args.device, args.reps)
        rate = 2 * flops / (qk + av)
        base = base or rate
        print(f"  head dim {d:4d} ({'aligned to 8' if d % 8 == 0 else 'UNALIGNED'}): QK^T {qk * 1e3:8.3f} ms "
              f"{flops / qk / 1e12:7.2f} TFLOP/s; AV {av * 1e3:8.3f} ms {flops / av / 1e12:7.2f} TFLOP/s; "
              f"rate over head dim 128's {rate / base:.3f}")


if __name__ == "__main__":
    main()
