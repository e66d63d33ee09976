"""Fused attention's forward and backward timed by sequence length, causal or not, on each backend torch
offers: does the rate parsim prices fused attention at (a device's attention_efficiency, one number at
every sequence length) hold from 2K to 64K tokens?  NeMo's long-sequence rows on H100 run 1.18x to 1.52x
their price, more as the sequence grows (results/2026-12-05g-intel-xeon/nemo-longseq-heldout.txt); whether
the kernel's rate falls with the sequence, or causal attention does not halve the time as parsim's half of
the FLOPs assumes, is what this measures, for runners/device_check.sh.

    python runners/attention_seq.py [--device cuda] [--tokens 65536] [--heads 32] [--reps 5]

FLOPs as parsim counts them (parsim.model.attention): forward 4 b h s^2 d, halved when causal; backward
2.5x the forward.  Each line: the backend, the sequence, causal or not, forward and backward medians, and
the rate of forward + backward in TFLOP/s.  A fixed number of tokens a call (batch = tokens / seq).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_alignment import _timed  # noqa: E402

SEQS = (2048, 4096, 8192, 16384, 32768, 65536)


def _backends():
    """(name, the sdpa_kernel context's argument) for each backend this torch names."""
    from torch.nn.attention import SDPBackend
    names = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")
    return [(n.lower(), getattr(SDPBackend, n)) for n in names if hasattr(SDPBackend, n)]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tokens", type=int, default=65536, help="batch x sequence, the same at every sequence")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--seqs", default=",".join(map(str, SEQS)))
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    from torch.nn.attention import sdpa_kernel

    dtype = torch.bfloat16
    h, d = args.heads, args.head_dim
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print(f"fused attention on {args.device} ({name}), bf16, {args.tokens} tokens a call, {h} heads of {d}, "
          f"torch {torch.__version__}; median of {args.reps}")
    backends = _backends() if args.device == "cuda" else [("default", None)]
    for backend, which in backends:
        for s in map(int, args.seqs.split(",")):
            b = max(1, args.tokens // s)
            q, k, v = (torch.randn(b, h, s, d, device=args.device, dtype=dtype, requires_grad=True)
                       for _ in range(3))
            for causal in (True, False):
                out = {}

                def forward():
                    out["o"] = F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                def backward():
                    torch.autograd.grad(out["o"], (q, k, v), grad_outputs=grad, retain_graph=True)
                try:
                    with sdpa_kernel(which) if which is not None else contextlib.nullcontext():
                        fwd = _timed(forward, args.device, args.reps)
                        grad = torch.ones_like(out["o"])
                        bwd = _timed(backward, args.device, args.reps)
                except RuntimeError as e:
                    print(f"  {backend:20s} seq {s:6d} {'causal' if causal else 'full  '}: "
                          f"not run ({str(e).splitlines()[0][:80]})")
                    break
                flops = 4 * b * h * s * s * d / (2 if causal else 1)
                print(f"  {backend:20s} seq {s:6d} {'causal' if causal else 'full  '}: forward {fwd * 1e3:9.3f} ms, "
                      f"backward {bwd * 1e3:9.3f} ms, {3.5 * flops / (fwd + bwd) / 1e12:7.1f} TFLOP/s "
                      f"(forward {flops / fwd / 1e12:6.1f}, backward {2.5 * flops / bwd / 1e12:6.1f})")
            q = k = v = out = None
            if args.device == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
