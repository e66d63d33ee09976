"""Shard strategies for the operators that matter, in the seeds' notation: one tuple of split
counts per input, e.g. MatMul ((2, 1), (1, 4)): X's rows split in 2, W's columns in 4.

Each operator checks its strategy and derives an ``OpSharding``:
- the device matrix and every input's layout;
- the output layout, partial over device dimensions whose contraction was split (an AllReduce
  or ReduceScatter completes it when the next operator needs it);
- the layout of each input's gradient, partial where the backward contracts a split dimension.

Communication follows from layouts alone (``parsim.shard.redistribute``).  In the forward pass
it is the redistribution from each producer's output to the consumer's input; in the backward
pass, from each input gradient back to the producer's output layout.  This gives AllGather <->
ReduceScatter and AllReduce <-> identity.  A parameter's partial gradient is the "mirror"
reduction across devices that hold the same slice, done once per step with the other gradients.

Only matrix-multiply-like operators contract, so only they make partial values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from parsim.errors import InfeasibleError
from parsim.shard.layout import Layout

Strategy = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class OpSharding:
    op: str
    device_matrix: tuple[int, ...]
    inputs: tuple[Layout, ...]
    output: Layout
    input_grads: tuple[Layout, ...]
    is_param: tuple[bool, ...]

    @property
    def mirrors(self) -> list[tuple[int, Layout]]:
        """(input index, gradient layout) of parameters whose gradient needs a reduction."""
        return [(i, g) for i, (g, p) in enumerate(zip(self.input_grads, self.is_param)) if p and g.partial]


def _check_divides(op: str, shapes, strategy: Strategy) -> None:
    if len(strategy) != len(shapes):
        raise InfeasibleError(f"{op}: strategy {strategy} gives {len(strategy)} inputs, the operator has {len(shapes)}")
    for k, (shape, split) in enumerate(zip(shapes, strategy)):
        if len(split) != len(shape):
            raise InfeasibleError(f"{op}: input {k} has {len(shape)} dimensions, strategy {split} has {len(split)}")
        for i, (s, c) in enumerate(zip(shape, split)):
            if c < 1 or s % c:
                divisors = [d for d in range(1, min(s, 64) + 1) if s % d == 0]
                raise InfeasibleError(f"{op}: input {k} dimension {i} has size {s}, which does not split into {c}; "
                                      f"use one of {divisors}")


def _with_repeat(matrix: tuple[int, ...], devices: int, op: str) -> tuple[int, ...]:
    used = math.prod(matrix)
    if devices % used:
        raise InfeasibleError(f"{op}: the strategy uses {used} devices, which does not divide {devices}")
    return ((devices // used,) if devices > used else ()) + matrix     # repeated calculation on the left


def matmul(x_shape, w_shape, strategy: Strategy, devices: int, w_is_param: bool = True) -> OpSharding:
    """Y[m, n] = X[m, k] @ W[k, n] with strategy ((a, b), (b, c)): device matrix [a, b, c]."""
    _check_divides("MatMul", (x_shape, w_shape), strategy)
    (a, b), (b2, c) = strategy
    if b != b2:
        raise InfeasibleError(f"MatMul: the contracted dimension is split {b} ways in X but {b2} in W; split both alike")
    dm = _with_repeat((a, b, c), devices, "MatMul")             # right-counted: c=0, b=1, a=2
    m, k = x_shape
    n = w_shape[1]
    x = Layout(dm, (2, 1), tuple(x_shape))
    w = Layout(dm, (1, 0), tuple(w_shape))
    y = Layout(dm, (2, 0), (m, n), frozenset({1}) if b > 1 else frozenset())
    dx = Layout(dm, (2, 1), tuple(x_shape), frozenset({0}) if c > 1 else frozenset())   # dY @ W^T sums over n
    dw = Layout(dm, (1, 0), tuple(w_shape), frozenset({2}) if a > 1 else frozenset())   # X^T @ dY sums over m
    return OpSharding("MatMul", dm, (x, w), y, (dx, dw), (False, w_is_param))


def batch_matmul(x_shape, w_shape, strategy: Strategy, devices: int, w_is_param: bool = False) -> OpSharding:
    """Y[B, m, n] = X[B, m, k] @ W[B, k, n], strategy ((d, a, b), (d, b, c)): device matrix [d, a, b, c]."""
    _check_divides("BatchMatMul", (x_shape, w_shape), strategy)
    (d, a, b), (d2, b2, c) = strategy
    if d != d2 or b != b2:
        raise InfeasibleError("BatchMatMul: split the batch dimension and the contracted dimension alike in both inputs")
    dm = _with_repeat((d, a, b, c), devices, "BatchMatMul")     # c=0, b=1, a=2, d=3
    x = Layout(dm, (3, 2, 1), tuple(x_shape))
    w = Layout(dm, (3, 1, 0), tuple(w_shape))
    y = Layout(dm, (3, 2, 0), (x_shape[0], x_shape[1], w_shape[2]), frozenset({1}) if b > 1 else frozenset())
    dx = Layout(dm, (3, 2, 1), tuple(x_shape), frozenset({0}) if c > 1 else frozenset())
    dw = Layout(dm, (3, 1, 0), tuple(w_shape), frozenset({2}) if a > 1 else frozenset())
    return OpSharding("BatchMatMul", dm, (x, w), y, (dx, dw), (False, w_is_param))


def conv2d(x_shape, w_shape, out_shape, strategy: Strategy, devices: int) -> OpSharding:
    """Conv2d X[N, Ci, H, W] * W[Co, Ci, kh, kw] -> Y[N, Co, Ho, Wo], strategy ((n, ci, 1, 1),
    (co, ci, 1, 1)): batch, input-channel (contracted) and output-channel splits; device matrix
    [n, ci, co]."""
    _check_divides("Conv2d", (x_shape, w_shape), strategy)
    (n, ci, h, wd), (co, ci2, kh, kw) = strategy
    if (h, wd, kh, kw) != (1, 1, 1, 1):
        raise InfeasibleError("Conv2d: spatial dimensions cannot be split (they need halo exchange); use 1 there")
    if ci != ci2:
        raise InfeasibleError(f"Conv2d: input channels are split {ci} ways in X but {ci2} in W; split both alike")
    dm = _with_repeat((n, ci, co), devices, "Conv2d")           # co=0, ci=1, n=2
    x = Layout(dm, (2, 1, -1, -1), tuple(x_shape))
    w = Layout(dm, (0, 1, -1, -1), tuple(w_shape))
    return OpSharding("Conv2d", dm, (x, w), Layout(dm, (2, 0, -1, -1), tuple(out_shape),
                                                   frozenset({1}) if ci > 1 else frozenset()),
                      (Layout(dm, (2, 1, -1, -1), tuple(x_shape), frozenset({0}) if co > 1 else frozenset()),
                       Layout(dm, (0, 1, -1, -1), tuple(w_shape), frozenset({2}) if n > 1 else frozenset())),
                      (False, True))


def _same_split(op: str, shape, split, devices: int, keep_whole: tuple[int, ...] = ()) -> tuple:
    _check_divides(op, (shape,), (split,))
    for i in keep_whole:
        if split[i] != 1:
            raise InfeasibleError(f"{op}: dimension {i} is reduced over and cannot be split; use 1 there")
    dm = _with_repeat(tuple(split), devices, op)
    n = len(split)
    return dm, Layout(dm, tuple(n - 1 - i if split[i] > 1 else -1 for i in range(n)), tuple(shape))


def elementwise(shape, strategy: Strategy, devices: int, op: str = "ElementWise") -> OpSharding:
    """Element-wise operators: every input split alike; no communication."""
    if any(s != strategy[0] for s in strategy):
        raise InfeasibleError(f"{op}: all inputs must be split alike, got {strategy}")
    dm, lay = _same_split(op, shape, strategy[0], devices)
    return OpSharding(op, dm, tuple(lay for _ in strategy), lay, tuple(lay for _ in strategy), (False,) * len(strategy))


def softmax(shape, strategy: Strategy, devices: int, axis: int = -1) -> OpSharding:
    dm, lay = _same_split("Softmax", shape, strategy[0], devices, keep_whole=(axis % len(shape),))
    return softmax_on(lay)


def softmax_on(lay: Layout) -> OpSharding:
    """Softmax on an input already laid out as ``lay`` (its reduced dimension whole)."""
    return OpSharding("Softmax", lay.device_matrix, (lay,), lay, (lay,), (False,))


def layer_norm(shape, strategy: Strategy, devices: int) -> OpSharding:
    """LayerNorm over the last dimension, with its weight [h]: the weight's gradient sums over
    every split of the other dimensions (a mirror reduction)."""
    dm, lay = _same_split("LayerNorm", shape, strategy[0], devices, keep_whole=(len(shape) - 1,))
    return layer_norm_on(lay)


def layer_norm_on(lay: Layout) -> OpSharding:
    """LayerNorm on an input already laid out as ``lay`` (its last dimension whole)."""
    dm, h = lay.device_matrix, lay.shape[-1]
    split_dims = frozenset(d for d in lay.tensor_map if d != -1)
    return OpSharding("LayerNorm", dm, (lay, Layout(dm, (-1,), (h,))), lay,
                      (lay, Layout(dm, (-1,), (h,), split_dims)), (False, True))


def batch_norm(shape, strategy: Strategy, devices: int) -> OpSharding:
    """BatchNorm over [N, C, H, W], its channels possibly split: each device normalises its
    channels with their own statistics, the same as one device's (Ioffe & Szegedy 2015: the
    statistics are per channel, over N, H and W).  The batch is never split: statistics over
    part of it would differ per device unless all-reduced (MindSpore's BatchNorm all-reduces the
    mean and variance, 2 x C floats, forward and again backward), which parsim does not price."""
    dm, lay = _same_split("BatchNorm", shape, strategy[0], devices, keep_whole=(0, 2, 3))
    return batch_norm_on(lay)


def batch_norm_on(lay: Layout) -> OpSharding:
    """BatchNorm on an input already laid out as ``lay`` (only its channels split): the affine
    weight, bias and running statistics [C] split as the channels, no gradient partial."""
    if any(d != -1 for i, d in enumerate(lay.tensor_map) if i != 1):
        raise InfeasibleError(f"BatchNorm: only the channels split, got the layout {lay.tensor_map}")
    dm, c_dim, channels = lay.device_matrix, lay.tensor_map[1], lay.shape[1]
    return OpSharding("BatchNorm", dm, (lay, Layout(dm, (c_dim,), (channels,))), lay,
                      (lay, Layout(dm, (c_dim,), (channels,))), (False, True))


def embedding(w_shape, strategy: Strategy, devices: int, out_shape) -> OpSharding:
    """Embedding lookup out[..., h] = W[idx, h], strategy ((v, c),): the vocabulary split v ways
    (Megatron's VocabParallelEmbedding: each device looks up its rows, zeros elsewhere, so the
    output is partial), the hidden dimension c ways (the output's last dimension split)."""
    _check_divides("Embedding", (w_shape,), strategy)
    (v, c), = strategy
    dm = _with_repeat((v, c), devices, "Embedding")                 # c=0, v=1
    w = Layout(dm, (1, 0), tuple(w_shape))
    out_map = tuple([-1] * (len(out_shape) - 1) + [0])
    out = Layout(dm, out_map, tuple(out_shape), frozenset({1}) if v > 1 else frozenset())
    return OpSharding("Embedding", dm, (w,), out, (w,), (True,))


def attention(q_shape, k_shape, v_shape, strategy: Strategy, devices: int) -> OpSharding:
    """Fused attention O[b, h, s, d] = softmax(Q K^T) V, Q of h query heads, K and V of g KV heads
    (h / g query heads read each; parsim.model.attention), strategy ((n, a, 1, 1), (n, c, 1, 1),
    (n, c, 1, 1)): the batch split n ways, the query heads a ways and the KV heads c = min(a, g)
    ways; sequence and head dimension whole (each device's heads are whole attentions).

    Q and O lie on the device matrix [n, a].  Beyond the KV-head count (a > g) each KV head is
    replicated r = a / g times (Megatron's rule for tp > num_query_groups): K and V lie on
    [r, n, g], split by g and repeated on the left as a column-split K projection's output is
    (``_with_repeat``), so they arrive without communication; their gradients are partial over
    r (each copy holds the part its own query heads contribute) and are summed on the way back."""
    _check_divides("Attention", (q_shape, k_shape, v_shape), strategy)
    (n, a, sq, dq), (nk, c, sk, dk), (nv, cv, sv, dv) = strategy
    if (sq, dq, sk, dk, sv, dv) != (1,) * 6:
        raise InfeasibleError("Attention: split only the batch and the heads; use 1 for the sequence and head size")
    if not n == nk == nv or c != cv:
        raise InfeasibleError("Attention: split the batch alike in Q, K and V, and K's heads as V's")
    g = k_shape[1]
    if c != min(a, g) or a % c:
        raise InfeasibleError(f"Attention: {a} query-head pieces read {min(a, g)} KV-head pieces of the {g} KV "
                              f"heads; split K and V {min(a, g)} ways")
    r = a // c
    dm = _with_repeat((n, a), devices, "Attention")              # a=0, n=1
    q = Layout(dm, (1, 0, -1, -1), tuple(q_shape))
    out = Layout(dm, (1, 0, -1, -1), tuple(q_shape[:3]) + (v_shape[3],))
    if r == 1:
        k, v = Layout(dm, (1, 0, -1, -1), tuple(k_shape)), Layout(dm, (1, 0, -1, -1), tuple(v_shape))
        dk, dv_ = k, v
    else:
        dm_kv = dm[:-2] + (r, n, c)                              # c=0, n=1, r=2
        k, v = Layout(dm_kv, (1, 0, -1, -1), tuple(k_shape)), Layout(dm_kv, (1, 0, -1, -1), tuple(v_shape))
        dk = Layout(dm_kv, (1, 0, -1, -1), tuple(k_shape), frozenset({2}))
        dv_ = Layout(dm_kv, (1, 0, -1, -1), tuple(v_shape), frozenset({2}))
    return OpSharding("Attention", dm, (q, k, v), out, (q, dk, dv_), (False, False, False))
