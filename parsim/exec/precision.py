"""Mixed precision in the executor, as parsim.cost.memory prices it (Micikevicius et al. 2018;
Rajbhandari et al. 2020, Sec. 3.1; Megatron-LM's Float16Module with its fp32 "main" parameters):

- the model's parameters, gradients and activations are in the training dtype (bf16 or fp16):
  2 bytes each, the bytes extraction measured (the model runs in that dtype there too);
- the optimizer keeps an fp32 master copy of every parameter and its state in fp32 (SGD's
  momentum; Adam's two moments, as Megatron's DistributedOptimizer and DeepSpeed keep them), steps
  the masters with the gradients cast to fp32, and copies the result back into the model;
- the loss is taken in fp32 (the logits are cast up first), as Megatron's vocab-parallel and
  torch's autocast losses are;
- fp16 (CUDA only) multiplies the loss by a dynamic scale before the backward, so that small
  gradients do not flush to zero, and divides the master gradients by it; a step whose
  gradients overflowed is skipped and the scale halved (DynamicLossScaler).

Not torch's autocast: autocast keeps fp32 parameters and gradients (4 bytes each) and casts the
weights at every use, a different memory and communication footprint from the one priced (there
the data-parallel buckets carry 2-byte gradients).  The model is cast once instead, its
buffers (BatchNorm's running statistics) with it, and only the loss and the optimizer run in
fp32.
"""

from __future__ import annotations

import torch

from parsim.errors import InputError
from parsim.exec.tensor_parallel import as_dtensor_like, local

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def check_supported(dtype: str, device: torch.device, source: str) -> None:
    """fp32 and bf16 run everywhere; fp16 needs CUDA (its CPU kernels are partial and slow)."""
    if dtype not in TORCH_DTYPES:
        raise InputError(f"{source}: model.dtype: the executor runs fp32, bf16 and fp16 (got {dtype!r})")
    if dtype == "fp16" and device.type != "cuda":
        raise InputError(f"{source}: model.dtype: fp16 runs on CUDA only (this run is on {device.type}); "
                         "plan bf16 instead")


class MasterWeightOptimizer:
    """An optimizer on fp32 master copies of a low-precision model's parameters, by default momentum
    SGD by hand (named MasterWeightSGD until it also stepped Adam): torch.optim.SGD's
    update (no dampening, no Nesterov, no weight decay: buf = momentum * buf + g, w -= lr * buf,
    the first buf = g).  For an fp32 model it is torch.optim.SGD on the parameters themselves.
    With ``inner`` (a torch optimizer's constructor: ``make_optimizer``'s Adam) that optimizer
    steps the masters, or an fp32 model's parameters, instead.

    ``step()`` steps the masters in chunks of consecutive parameters, each no larger than the
    largest parameter (so the fp32 gradients are a transient the size of one parameter, as
    parsim.cost.memory prices them, not held): it casts the chunk's gradients to fp32, divides
    out the loss scale, steps those masters with torch's multi-tensor (``_foreach``) kernels, as
    Megatron's and torchtitan's fused optimizers step many tensors a launch, and writes them
    back into the model, rounded to the model's dtype.  An ``inner`` optimizer (built with
    ``foreach=True``) is stepped once a chunk, with only that chunk's gradients set (torch's
    optimizers skip parameters without one).  Until 2026-12-04 it stepped one parameter at a
    time: host-bound on a GPU (67.7 ms of a 1.3B GPT's 324 ms step on an H200,
    results/2026-12-04e-amd-epyc/h200/breakdown.txt)."""

    def __init__(self, params, lr: float, momentum: float, inner=None):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.momentum = lr, momentum
        self.mixed = any(p.dtype != torch.float32 for p in self.params)
        self.masters = [local(p).detach().float().clone() for p in self.params] if self.mixed else []
        # the optimizer given (``make_optimizer``: Adam) on the masters or the fp32 parameters; else
        # torch's SGD on fp32 parameters, or SGD by hand on the masters (None); none for a stage of
        # parameter-free units (a Flatten alone), which torch's optimizers refuse ("empty parameter list")
        self.inner = None
        if self.params and inner is not None:
            self.inner = inner(self.masters, foreach=True) if self.mixed else inner(self.params)
        elif self.params and not self.mixed:
            self.inner = torch.optim.SGD(self.params, lr=lr, momentum=momentum)
        self.buffers: list[torch.Tensor | None] = [None] * len(self.masters)
        self.scale = 1.0               # the loss scale the gradients carry (DynamicLossScaler)

    @property
    def state(self) -> dict:
        """Tensors held between steps, by parameter: the master copy and the momentum (or the
        inner optimizer's state: Adam's step count and two moments)."""
        if not self.mixed:
            return self.inner.state if self.inner is not None else {}
        if self.inner is not None:
            return {i: {"master": m, **self.inner.state.get(m, {})} for i, m in enumerate(self.masters)}
        return {i: {"master": m, **({"momentum_buffer": b} if b is not None else {})}
                for i, (m, b) in enumerate(zip(self.masters, self.buffers))}

    def zero_grad(self, set_to_none: bool = False) -> None:
        for p in self.params:
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    def grads_finite(self) -> bool:
        """No inf or NaN in any gradient."""
        return all(bool(torch.isfinite(local(p.grad)).all()) for p in self.params if p.grad is not None)

    @torch.no_grad()
    def step(self) -> None:
        if not self.mixed:
            if self.inner is not None:
                self.inner.step()
            return
        for chunk in self._chunks():
            masters = [self.masters[k] for k in chunk]
            grads = [torch.empty_like(m) for m in masters]     # fp32 copies: they become the momentum
            torch._foreach_copy_(grads, [local(self.params[k].grad) for k in chunk])
            if self.scale != 1.0:
                torch._foreach_div_(grads, self.scale)
            if self.inner is not None:
                for m, g in zip(masters, grads):
                    m.grad = g
                self.inner.step()
                for m in masters:
                    m.grad = None
            else:
                held = [(self.buffers[k], g) for k, g in zip(chunk, grads) if self.buffers[k] is not None]
                if held:
                    torch._foreach_mul_([buf for buf, _ in held], self.momentum)
                    torch._foreach_add_([buf for buf, _ in held], [g for _, g in held])
                for k, g in zip(chunk, grads):
                    if self.buffers[k] is None:      # the first step: the gradient is the momentum
                        self.buffers[k] = g
                torch._foreach_add_(masters, [self.buffers[k] for k in chunk], alpha=-self.lr)
            torch._foreach_copy_([local(self.params[k]) for k in chunk], masters)

    def _chunks(self) -> list[list[int]]:
        """The indices of the parameters with a gradient, in order, in runs whose elements add up
        to at most the largest parameter's."""
        cap = max(m.numel() for m in self.masters)
        chunks, size = [], cap
        for k, p in enumerate(self.params):
            if p.grad is None:
                continue
            n = self.masters[k].numel()
            if size + n > cap:
                chunks.append([])
                size = 0
            chunks[-1].append(k)
            size += n
        return chunks

    def state_dict(self) -> dict:
        if not self.mixed:
            return {"inner": self.inner.state_dict() if self.inner is not None else None}
        return {"masters": self.masters, "buffers": self.buffers, "scale": self.scale,
                **({"inner": self.inner.state_dict()} if self.inner is not None else {})}

    def load_state_dict(self, state: dict) -> None:
        """Load what ``state_dict`` gave, or its local shards (checkpoints keep tensor-parallel
        ranks' momentum as local tensors): those become DTensors again, laid out as their
        parameters."""
        if self.inner is None and not self.mixed:
            return
        if not self.mixed:
            self.inner.load_state_dict(state["inner"])
            for p in self.params:
                st = self.inner.state.get(p, {})
                for k, v in st.items():
                    if torch.is_tensor(v):
                        st[k] = as_dtensor_like(v, p)
            return
        for m, saved in zip(self.masters, state["masters"]):
            m.copy_(saved)
        self.buffers = [None if b is None else b.clone() for b in state["buffers"]]
        self.scale = state["scale"]
        if self.inner is not None:
            self.inner.load_state_dict(state["inner"])


def make_optimizer(kind: str, params) -> MasterWeightOptimizer:
    """The optimizer of ``training.optimizer`` (parsim.exec.objective's settings): momentum SGD
    (the seeds'), plain SGD, or Adam, each on fp32 masters where the model is bf16 or fp16."""
    from parsim.exec.objective import ADAM_LR, LR, MOMENTUM

    if kind == "adam":
        # foreach=False on an fp32 model's parameters: one at a time, as DTensor parameters of different
        # layouts need; MasterWeightOptimizer asks foreach=True for a mixed model's masters (plain tensors)
        return MasterWeightOptimizer(params, LR, MOMENTUM,
                                     lambda ps, foreach=False: torch.optim.Adam(ps, lr=ADAM_LR, foreach=foreach))
    return MasterWeightOptimizer(params, LR, MOMENTUM if kind == "momentum" else 0.0)


class DynamicLossScaler:
    """Dynamic loss scaling for fp16 (Micikevicius et al. 2018, Sec. 3.2; the defaults of
    Megatron-LM's DynamicGradScaler: initial scale 2^32, halved on an overflow after a
    hysteresis of 2, doubled after 1000 clean steps, never below 1)."""

    def __init__(self, initial: float = 2.0 ** 32, growth_interval: int = 1000, hysteresis: int = 2,
                 min_scale: float = 1.0):
        self.scale, self.growth_interval, self.hysteresis, self.min_scale = initial, growth_interval, hysteresis, \
            min_scale
        self._clean, self._left = 0, hysteresis

    def update(self, finite: bool) -> bool:
        """Record one step's overflow check; True when the step may be taken."""
        if finite:
            self._clean += 1
            if self._clean == self.growth_interval:
                self.scale, self._clean, self._left = self.scale * 2, 0, self.hysteresis
            return True
        self._clean = 0
        self._left -= 1
        if self._left <= 0:
            self.scale = max(self.min_scale, self.scale / 2)
        return False
