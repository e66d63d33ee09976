"""What a cut unit runs, recorded on the meta device: every kernel of one forward and backward (``unit_kernels``,
``loss_kernels``: FLOPs, bytes moved, GEMM shapes, convolution windows, each affine in the batch), and how far the
tensor storage alive rises in its backward above what its forward left (``unit_recordings``: _LiveStorages, the
parameters' gradients left out; ``Layer.bwd_rise_bytes``).  parsim.model.extract measures each unit with them."""

from __future__ import annotations

import gc
import math
import weakref

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from parsim.model.attention import register_flop_formulas
from parsim.model.graph import ConvWindow, Kernel
from parsim.model.loss import cross_entropy

register_flop_formulas()     # fused attention's FLOPs (parsim.model.attention), before any count

# Operators that move no data on a GPU.  ``_unsafe_view`` is not a view in aten's schema (its
# output does not alias for autograd), but it is ``self.view(size)`` underneath (aten/src/ATen/
# native/TensorShape.cpp, _unsafe_view_impl): matmul calls it to fold a bmm's operands and to
# unfold its output, so counting it as a copy priced the a*s^2 attention scores once more.
FREE_OPS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach", "alias",
            "lift_fresh", "_local_scalar_dense", "zeros", "ones", "full", "arange", "scalar_tensor", "_unsafe_view"}


def storage_key(t: torch.Tensor) -> int:
    """The address of ``t``'s storage, one key for all its views."""
    return t.untyped_storage()._cdata


def _gemm_dims(name: str, args, out) -> list[tuple[str, tuple[float, float, float, float], float]]:
    """(phase hint, (M, N, K, groups), FLOPs) of each GEMM a contraction runs; FLOPs = 2*M*N*K*groups.
    Convolutions are implicit GEMMs (Chetlur et al. 2014): forward M = N*Ho*Wo, N = Co/g,
    K = Ci/g*kh*kw; backward data M = N*Ho*Wo, N = Ci/g, K = Co/g*kh*kw; backward weight
    M = Co/g, N = Ci/g*kh*kw, K = N*Ho*Wo."""
    def one(hint, m, n, k, g=1):
        return hint, (float(m), float(n), float(k), float(g)), 2.0 * m * n * k * g
    if name in ("mm", "addmm", "_scaled_mm"):
        a, b = (args[1], args[2]) if name == "addmm" else (args[0], args[1])
        return [one("", a.shape[0], b.shape[1], a.shape[1])]
    if name in ("bmm", "baddbmm"):
        a, b = (args[1], args[2]) if name == "baddbmm" else (args[0], args[1])
        return [one("", a.shape[1], b.shape[2], a.shape[2], a.shape[0])]
    if name in ("convolution", "_convolution"):
        x, w = args[0], args[1]
        g = args[8] if len(args) > 8 else 1
        return [one("", out.shape[0] * math.prod(out.shape[2:]), w.shape[0] // g, math.prod(w.shape[1:]), g)]
    if name == "convolution_backward":
        grad_out, x, w = args[0], args[1], args[2]
        g, mask = args[9], args[10]
        co, k_w = w.shape[0], math.prod(w.shape[2:])
        rows = []
        if mask[0]:
            # as FlopCounterMode counts it: the forward's work (a strided convolution's data
            # gradient touches each output position's window once)
            rows.append(one("I", grad_out.shape[0] * math.prod(grad_out.shape[2:]), x.shape[1] // g, co // g * k_w, g))
        if mask[1]:
            rows.append(one("W", co // g, w.shape[1] * k_w, grad_out.shape[0] * math.prod(grad_out.shape[2:]), g))
        return rows
    return []


def _conv_window(name: str, args) -> ConvWindow | None:
    """The window of a convolution (forward or backward), as aten's schema lays out its arguments."""
    if name in ("convolution", "_convolution"):
        x, w, stride, padding, dilation, transposed = args[0], args[1], args[3], args[4], args[5], args[6]
    elif name == "convolution_backward":
        x, w, stride, padding, dilation, transposed = args[1], args[2], args[4], args[5], args[6], args[7]
    else:
        return None
    return ConvWindow(tuple(w.shape[2:]), tuple(stride), tuple(dilation), bool(transposed), math.prod(x.shape[1:]),
                      tuple(padding), tuple(x.shape[2:]))


class _KernelRecorder(TorchDispatchMode):
    """Every kernel a unit runs, in order: aten ops that move data (views and allocations
    excluded), each with its FLOPs (FlopCounterMode's formulas), bytes read plus written, and for
    contractions its GEMM shape.  ``phase`` says whether the forward or the backward runs."""

    def __init__(self):
        super().__init__()
        self.phase = "F"
        # (phase, op, klass, flops, bytes, gemm dims or None, ConvWindow or None, head dim or 0)
        self.rows: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        name = packet.__name__
        if func.is_view or name in FREE_OPS:
            return out
        leaves = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
        nbytes = float(sum(t.numel() * t.element_size() for t in leaves))
        if packet not in flop_registry:
            self.rows.append((self.phase, name, "mem", 0.0, nbytes, None, None, 0))
            return out
        klass = "conv" if "conv" in name else "attention" if "attention" in name else "matmul"
        gemms = _gemm_dims(name, args, out if isinstance(out, torch.Tensor) else None)
        window = _conv_window(name, args)
        if not gemms:                  # attention and other counted kernels: FLOPs only
            # fused attention's Q, [b, h, s, d]: the forward's first argument, the backward's second
            # (after the output's gradient)
            head_dim = int(args[1 if name.endswith("_backward") else 0].shape[-1]) if klass == "attention" else 0
            self.rows.append((self.phase, name, klass, float(flop_registry[packet](*args, **kwargs, out_val=out)),
                              nbytes, None, window, head_dim))
        for hint, dims, flops in gemms:
            self.rows.append((hint or self.phase, name, klass, flops, nbytes / len(gemms), dims, window, 0))
        return out


class _LiveStorages(TorchDispatchMode):
    """The tensor storage alive, op by op: every storage an op makes (not a view, nor one of its inputs' storages,
    as an in-place op's output is) counted from the op that made it until torch frees it, in ``events`` (storage
    number, +bytes made or -bytes freed) in order.  A free is seen by a weak reference's callback: torch keeps a
    storage's Python object for as long as the storage lives (PyObject preservation), which
    torch.distributed._tools.mem_tracker's estimates rest on too.  The cyclic garbage collector is off while it
    records, so that what is freed, and when, does not depend on when the collector happens to run (as
    SavedStorages found for addresses)."""

    def __init__(self):
        super().__init__()
        self.events: list[tuple[int, int]] = []
        self.number: dict[int, int] = {}           # a live storage's address -> its number
        self._refs: dict[int, object] = {}
        self._gc = True

    def __enter__(self):
        self._gc = gc.isenabled()
        gc.disable()
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        if self._gc:
            gc.enable()

    def _freed(self, key: int, number: int, nbytes: int):
        def callback(_):
            self.events.append((number, -nbytes))
            self.number.pop(key, None)
            self._refs.pop(number, None)
        return callback

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.is_view:
            return out
        inputs = {storage_key(t) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key = storage._cdata
            if key in inputs or key in self.number:
                continue
            number, nbytes = len(self.events), storage.nbytes()
            self.number[key] = number
            self._refs[number] = weakref.ref(storage, self._freed(key, number, nbytes))
            self.events.append((number, nbytes))
        return out

    def rise(self, start: int, kept: list[torch.Tensor]) -> int:
        """The most bytes alive at once, from ``events[start]`` on, above what was alive there, storages of
        ``kept`` (the parameters' gradients, held as static memory) left out."""
        left_out = {self.number.get(storage_key(t)) for t in kept} - {None}
        now = peak = 0
        for number, nbytes in self.events[start:]:
            if number not in left_out:
                now += nbytes
                peak = max(peak, now)
        return peak


def _record_kernels(unit: nn.Module, x: torch.Tensor, needs_input_grad: bool) -> tuple[list[tuple], int]:
    """One forward and backward of ``unit`` on ``x`` (meta), recording its kernels; and how far the storage
    alive rises in the backward above what the forward left (its saved tensors and output): the gradient that
    enters it, every temporary its backward's formulas make (a squared ReLU's PowBackward0 holds three of its
    input's size: torch/csrc/autograd/FunctionsManual.cpp, pow_backward), less the saved tensors each node
    frees once it has run; the parameters' gradients left out (static memory)."""
    for p in unit.parameters():
        p.grad = None              # the first micro-batch's gradients are assigned, not accumulated
    x = x.detach().requires_grad_(needs_input_grad)
    rec, live = _KernelRecorder(), _LiveStorages()
    with rec, live:
        y = unit(x)
        rec.phase = "B"
        start = len(live.events)
        if y.requires_grad:
            y.backward(torch.empty_like(y))
    rise = live.rise(start, [p.grad for p in unit.parameters() if p.grad is not None])
    for p in unit.parameters():
        p.grad = None
    return rec.rows, rise


def _affine(q_lo: float, q_hi: float, b_lo: int, b_hi: int) -> tuple[float, float]:
    """(fixed, per sample) of a size measured at two batch sizes."""
    per = (q_hi - q_lo) / (b_hi - b_lo)
    return q_lo - per * b_lo, per


def unit_kernels(unit: nn.Module, x: torch.Tensor, needs_input_grad: bool) -> tuple[Kernel, ...]:
    """The unit's kernels with every size affine in the batch (unit_recordings)."""
    return unit_recordings(unit, x, needs_input_grad)[0]


def unit_recordings(unit: nn.Module, x: torch.Tensor,
                    needs_input_grad: bool) -> tuple[tuple[Kernel, ...], tuple[float, float]]:
    """The unit's kernels with every size affine in the batch, and its backward's rise (_record_kernels) as
    (bytes, bytes per sample), from recordings at x's batch B and 2B.

    A backward contraction whose K grows with the batch while M, N and the group count do not is
    a weight gradient (phase "W"); the rest of the backward is "I"."""
    b = x.shape[0]
    lo, rise_lo = _record_kernels(unit, x, needs_input_grad)
    hi, rise_hi = _record_kernels(unit, torch.empty((2 * b, *x.shape[1:]), dtype=x.dtype, device="meta"),
                                  needs_input_grad)
    if [r[:3] for r in lo] != [r[:3] for r in hi]:
        # The kernel sequence depends on the batch: take every size as proportional to it.
        hi = [(r[0], r[1], r[2], 2 * r[3], 2 * r[4], None if r[5] is None else (2 * r[5][0], *r[5][1:]), *r[6:])
              for r in lo]
    kernels = []
    for (phase, op, klass, f_lo, by_lo, g_lo, window, head_dim), (_, _, _, f_hi, by_hi, g_hi, _, _) in zip(lo, hi):
        gemm = ()
        if g_lo is not None:
            gemm = tuple(_affine(a, c, b, 2 * b) for a, c in zip(g_lo, g_hi))
            if phase == "B":
                (_, m1), (_, n1), (_, k1), (_, g1) = gemm
                phase = "W" if k1 > 0 and m1 == n1 == g1 == 0 else "I"
        if phase == "B":
            phase = "I"
        kernels.append(Kernel(phase, op, klass, _affine(f_lo, f_hi, b, 2 * b), _affine(by_lo, by_hi, b, 2 * b), gemm,
                              window, head_dim))
    return tuple(kernels), _affine(rise_lo, rise_hi, b, 2 * b)


class _Objective(nn.Module):
    """The run's loss (parsim.model.loss) on a unit's output, every prediction's target class 0."""

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return cross_entropy(logits, torch.zeros(logits.shape[:-1], dtype=torch.long, device=logits.device))


def loss_kernels(logits: torch.Tensor) -> tuple[Kernel, ...]:
    """The loss's kernels on ``logits`` (the last unit's output, meta), forward (F) and backward
    (I), each size affine in the batch as a unit's are; () where the output is no batch of
    predictions (not floating point, or one number per sample)."""
    if not logits.is_floating_point() or logits.dim() < 2:
        return ()
    return unit_kernels(_Objective(), logits, True)
