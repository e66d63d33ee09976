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


class MasterWeightSGD:
    """Momentum SGD on fp32 master copies of a low-precision model's parameters: torch.optim.SGD's
    update (no dampening, no Nesterov, no weight decay: buf = momentum * buf + g, w -= lr * buf,
    the first buf = g).  For an fp32 model it is torch.optim.SGD on the parameters themselves.
    With ``inner`` (a torch optimizer's constructor: ``make_optimizer``'s Adam) that optimizer
    steps the masters, or an fp32 model's parameters, instead.

    ``step()`` casts one parameter's gradient at a time to fp32 (so the fp32 gradient is a
    transient the size of one parameter, not held), divides out the loss scale, steps that
    master and writes it back into the model, rounded to the model's dtype.  An ``inner``
    optimizer is stepped once a master, with only that master's gradient set (torch's
    optimizers skip parameters without one)."""

    def __init__(self, params, lr: float, momentum: float, inner=None):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.momentum = lr, momentum
        self.mixed = any(p.dtype != torch.float32 for p in self.params)
        self.masters = [local(p).detach().float().clone() for p in self.params] if self.mixed else []
        # the optimizer given (``make_optimizer``: Adam) on the masters or the fp32 parameters; else
        # torch's SGD on fp32 parameters, or SGD by hand on the masters; none for a stage of
        # parameter-free units (a Flatten alone), which torch's optimizers refuse ("empty parameter list")
        self.inner = None if not self.params else inner(self.masters or self.params) if inner is not None else \
            None if self.mixed else torch.optim.SGD(self.params, lr=lr, momentum=momentum)
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
        for k, (p, m) in enumerate(zip(self.params, self.masters)):
            if p.grad is None:
                continue
            g = local(p.grad).to(torch.float32, copy=True)   # a copy even of an fp32 gradient: it
            # becomes the momentum and is scaled in place, so it must not alias the gradient buffer
            if self.scale != 1.0:
                g.div_(self.scale)
            if self.inner is not None:
                m.grad = g
                self.inner.step()
                m.grad = None
            else:
                if self.buffers[k] is None:
                    self.buffers[k] = g
                else:
                    self.buffers[k].mul_(self.momentum).add_(g)
                m.add_(self.buffers[k], alpha=-self.lr)
            local(p).copy_(m)

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


def make_optimizer(kind: str, params) -> MasterWeightSGD:
    """The optimizer of ``training.optimizer`` (parsim.exec.objective's settings): momentum SGD
    (the seeds'), plain SGD, or Adam, each on fp32 masters where the model is bf16 or fp16."""
    from parsim.exec.objective import ADAM_LR, LR, MOMENTUM

    if kind == "adam":
        # foreach=False: one parameter at a time, as DTensor parameters of different layouts need
        return MasterWeightSGD(params, LR, MOMENTUM, lambda ps: torch.optim.Adam(ps, lr=ADAM_LR, foreach=False))
    return MasterWeightSGD(params, LR, MOMENTUM if kind == "momentum" else 0.0)


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
