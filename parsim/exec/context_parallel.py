"""Context parallelism in the executor: the zoo's GPT with each sequence split over a ring of cp
ranks and attention computed by passing K and V around it, as parsim.cost.context prices it.

Written here rather than taken from torch.distributed.tensor.experimental.context_parallel,
whose ring runs on CUDA's fused SDPA kernels; the scheme is the same, and Megatron-LM's
(TransformerEngine's ``AttnFuncWithCPAndKVP2P``), after Liu et al. 2023, "Ring Attention":

- **Zigzag split.** The sequence is cut into 2 x cp chunks; rank r holds chunks r and 2cp-1-r
  (``zigzag_positions``), so that under the causal mask every rank does the same work.  Tokens,
  targets and the position embeddings' positions are taken at those positions.
- **Forward.** cp steps: at step i rank r holds the K, V of rank j = (r - i) mod cp, sends it on
  to r + 1 and receives the next from r - 1 (torch.distributed isend/irecv) while it computes
  its queries against the chunk it holds.  Under the causal mask a step's work is fixed by j
  (``step_blocks``): j = r, the local chunks with the causal mask; j < r, all queries against
  j's first chunk; j > r, the second chunk's queries against all of j's keys; each step is two
  of the (s/2cp)^2 blocks.  Partial results merge with the online softmax (``merge``: Milakov &
  Gimelshein 2018; Rabe & Staats 2021; Liu et al. 2023): out and its log-sum-exp per row.
- **Backward** (``RingAttention.backward``), flash-attention style (Dao et al. 2022): the scores
  of each step are recomputed from the saved q, k, v, output and log-sum-exp; K and V go around
  the ring again, and each chunk's dK, dV accumulator travels with them, reaching its owner after
  cp - 1 hops (one hop behind the K, V ring): cp - 1 sends of K, V and cp - 1 of dK, dV.
- **Gradients.** Each rank's loss is the mean over its s/cp tokens of each sequence, so the
  mean over the dp x cp ranks' gradients (parsim.exec.grad_sync's buckets over
  ParallelConfig.grad_group) is the whole batch's.

All-gather cp (``cp_mode: allgather``; Llama 3, Dubey et al. 2024, Sec. 3.3.2; TE's
``AttnFuncWithCPAndKVAllGather``): the same zigzag split, but K and V are all-gathered over the
cp group (dist.all_gather) and each rank attends its local queries against every key under the
causal mask of their positions (``AllGatherAttention``); backward re-gathers K, V, computes the
whole sequence's dK, dV from its queries and sums them over the group, each rank keeping its own
(a reduce-scatter, run as an all-reduce since gloo has no reduce-scatter; counted as the
reduce-scatter's bytes, as parsim.cost.context prices it).

``Ring.sent_bytes`` counts the bytes a rank sends around its ring, to compare with the
simulator's ``Estimate.cp_ring_bytes``.  What runs: the GPT with pp = 1 and tp = 1, attention
dropout 0 (a ring has no way to draw the single process's dropout mask).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch import nn

from parsim.errors import InputError


def check_supported(cfg, spec, source: str) -> None:
    if cfg.cp == 1:
        return
    if spec.source.kind != "builtin" or spec.source.target != "gpt":
        raise InputError(f"{source}: parallel.cp: the executor runs context parallelism on the built-in gpt; "
                         f"plan {spec.path} with cp 1")
    if cfg.cp_mode not in ("ring", "allgather"):
        raise InputError(f"{source}: parallel.cp_mode: {cfg.cp_mode!r}; use ring or allgather")
    if cfg.pp > 1 or cfg.tp > 1 or cfg.zero or cfg.recompute:
        # recomputation would run the ring's forward again in backward, sending K,V twice
        raise InputError(f"{source}: parallel.cp: the executor runs cp > 1 with pp=1, tp=1, zero 0 and no "
                         f"recomputation (got pp={cfg.pp}, tp={cfg.tp}, zero={cfg.zero}, recompute={cfg.recompute}); "
                         "plan with --pp 1 --tp 1 --zero 0 --no-recompute or --cp 1")
    from parsim.model.zoo import GPT_PRESETS
    from parsim.model.zoo.gpt import GPTConfig

    kw = spec.source.kwargs
    dropout = kw.get("dropout", GPT_PRESETS[kw["preset"]].dropout if "preset" in kw else GPTConfig.dropout)
    if dropout:
        raise InputError(f"{spec.path}: args.dropout: the executor's ring attention has no dropout (got {dropout}); "
                         "set args.dropout: 0.0 to run cp > 1")


# ----------------------------------------------------------------------------- the zigzag split

def zigzag_positions(seq_len: int, cp: int, rank: int) -> torch.Tensor:
    """Positions rank ``rank`` holds: chunks rank and 2cp-1-rank of 2cp equal chunks, in order."""
    n = seq_len // (2 * cp)
    if n * 2 * cp != seq_len:
        raise ValueError(f"{seq_len} tokens do not cut into 2 x {cp} chunks")
    return torch.cat([torch.arange(rank * n, (rank + 1) * n), torch.arange((2 * cp - 1 - rank) * n, (2 * cp - rank) * n)])


def split_sequence(x: torch.Tensor, cp: int, rank: int, dim: int = 1) -> torch.Tensor:
    """This rank's tokens of ``x`` along ``dim``."""
    return x.index_select(dim, zigzag_positions(x.shape[dim], cp, rank).to(x.device))


def merge_sequence(parts: list[torch.Tensor], dim: int = 1) -> torch.Tensor:
    """The whole sequence from every rank's part (rank order): split_sequence's inverse."""
    cp = len(parts)
    whole = torch.cat(parts, dim)
    order = torch.cat([zigzag_positions(whole.shape[dim], cp, r) for r in range(cp)])
    return whole.index_select(dim, torch.argsort(order).to(whole.device))


# ----------------------------------------------------------------------------- blocks and merging

def step_blocks(rank: int, owner: int, local_len: int) -> tuple[slice, slice, bool]:
    """(queries, keys, causal) of the step where ``rank`` holds ``owner``'s K and V, as slices of
    the local s/cp positions (first half: chunk r, second: chunk 2cp-1-r): the blocks the causal
    mask leaves work in, two (s/2cp)^2 blocks whatever the step (module docstring)."""
    half = local_len // 2
    if owner == rank:
        return slice(None), slice(None), True
    if owner < rank:
        return slice(None), slice(0, half), False
    return slice(half, None), slice(None), False


def block_attention(q, k, v, causal: bool, scale: float):
    """(out, log-sum-exp) of q against k, v: (B, a, Tq, d), (B, a, Tq).  ``causal``: q and k are
    the same local positions, in order (a key after a query is masked)."""
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(_future(s.shape[-2], s.device), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse.unsqueeze(-1)) @ v, lse


def merge(out, lse, out_i, lse_i):
    """Two softmax-attention results over disjoint keys as one (the online softmax): each
    weighted by its share of the rows' total exp-sum."""
    new = torch.logaddexp(lse, lse_i)
    return out * torch.exp(lse - new).unsqueeze(-1) + out_i * torch.exp(lse_i - new).unsqueeze(-1), new


def _future(n: int, device) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(1)


def _block_backward(q, k, v, dout, lse, delta, causal: bool, scale: float):
    """(dq, dk, dv) of one block, its probabilities recomputed against the rows' final lse
    (Dao et al. 2022, Algorithm 2): dS = P * (dO V^T - rowsum(dO * O))."""
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(_future(s.shape[-2], s.device), float("-inf"))
    p = torch.exp(s - lse.unsqueeze(-1))
    ds = p * (dout @ v.transpose(-2, -1) - delta.unsqueeze(-1)) * scale
    return ds @ k, ds.transpose(-2, -1) @ q, p.transpose(-2, -1) @ dout


# ----------------------------------------------------------------------------- the ring

class Ring:
    """A cp group as a ring: this rank's place, its neighbours' global ranks, the bytes it sent."""

    def __init__(self, ranks: list[int], rank: int, group=None):
        self.ranks, self.group = list(ranks), group
        self.cp, self.rank = len(ranks), self.ranks.index(rank)
        self.next, self.prev = self.ranks[(self.rank + 1) % self.cp], self.ranks[(self.rank - 1) % self.cp]
        self.sent_bytes = 0

    def shift(self, send: torch.Tensor, tag: int) -> tuple[torch.Tensor, list]:
        """Start sending ``send`` to the next rank and receiving a tensor like it from the previous
        one; (the receive buffer, the requests to wait on)."""
        recv = torch.empty_like(send)
        reqs = [dist.isend(send, self.next, group=self.group, tag=tag),
                dist.irecv(recv, self.prev, group=self.group, tag=tag)]
        self.sent_bytes += send.numel() * send.element_size()
        return recv, reqs

    def owner(self, step: int) -> int:
        """The cp rank whose K and V this rank holds at ``step``."""
        return (self.rank - step) % self.cp


def _wait(reqs) -> None:
    for r in reqs:
        r.wait()


class RingAttention(torch.autograd.Function):
    """Causal attention of this rank's zigzag queries against the whole sequence's keys and
    values, by a ring over the cp group (module docstring).  q, k, v: (B, a, s/cp, d)."""

    @staticmethod
    def forward(ctx, q, k, v, ring: Ring):
        scale = 1.0 / math.sqrt(q.shape[-1])
        T = q.shape[2]
        kv = torch.stack([k, v]).contiguous()
        out = torch.zeros_like(q)
        lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)
        for step in range(ring.cp):
            reqs = []
            if step < ring.cp - 1:
                nxt, reqs = ring.shift(kv, step)               # overlapped with this step's blocks
            qs, ks, causal = step_blocks(ring.rank, ring.owner(step), T)
            o_i, l_i = block_attention(q[:, :, qs], kv[0][:, :, ks], kv[1][:, :, ks], causal, scale)
            out[:, :, qs], lse[:, :, qs] = merge(out[:, :, qs], lse[:, :, qs], o_i, l_i)
            if reqs:
                _wait(reqs)
                kv = nxt
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.ring, ctx.scale = ring, scale
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        ring, scale, T = ctx.ring, ctx.scale, q.shape[2]
        dout = dout.contiguous()
        delta = (dout * out).sum(-1)                           # rowsum(dO * O)
        dq = torch.zeros_like(q)
        kv = torch.stack([k, v]).contiguous()
        own = None                                             # dK, dV of this rank's own chunk
        acc_in, acc_reqs = None, []                            # a chunk's dK, dV arriving from the previous rank
        sends: list = []
        for step in range(ring.cp):
            reqs = []
            if step < ring.cp - 1:
                nxt, reqs = ring.shift(kv, step)
            qs, ks, causal = step_blocks(ring.rank, ring.owner(step), T)
            dq_i, dk_i, dv_i = _block_backward(q[:, :, qs], kv[0][:, :, ks], kv[1][:, :, ks], dout[:, :, qs],
                                               lse[:, :, qs], delta[:, :, qs], causal, scale)
            dq[:, :, qs] += dq_i
            dkv = torch.zeros_like(kv)
            dkv[0][:, :, ks], dkv[1][:, :, ks] = dk_i, dv_i
            if step == 0:
                own = dkv
            else:                                              # add to the chunk's accumulator, pass it on
                if acc_reqs:
                    _wait(acc_reqs)
                    dkv += acc_in
                acc_in, acc_reqs = ring.shift(dkv, ring.cp + step)
                sends.append(acc_reqs[0])
                acc_reqs = acc_reqs[1:]
            if reqs:
                _wait(reqs)
                kv = nxt
        if acc_reqs:                                           # this rank's chunk, back from its last holder
            _wait(acc_reqs)
            own = own + acc_in
        _wait(sends)
        return dq, own[0], own[1], None


def _gather_kv(kv: torch.Tensor, ring: Ring) -> torch.Tensor:
    """Every cp rank's K, V stacked as (2, B, a, s/cp, d), in rank order along the tokens: (2, B,
    a, s, d).  Counted as a ring all-gather sends: cp - 1 chunks."""
    parts = [torch.empty_like(kv) for _ in range(ring.cp)]
    dist.all_gather(parts, kv, group=ring.group)
    ring.sent_bytes += (ring.cp - 1) * kv.numel() * kv.element_size()
    return torch.cat(parts, dim=3)


def _gathered_scores(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ring: Ring, scale: float):
    """(K, V gathered over the cp group as (2, B, a, s, d), the causally masked scores of this
    rank's queries against them, (B, a, s/cp, s)): what the forward computes and the backward
    computes again from the local K, V it saved."""
    kv = _gather_kv(torch.stack([k, v]).contiguous(), ring)
    masked = _key_masked(ring, q.shape[2], q.device)
    return kv, (q @ kv[0].transpose(-2, -1) * scale).masked_fill(masked, float("-inf"))


def _key_masked(ring: Ring, T: int, device) -> torch.Tensor:
    """(T, cp T): a key after the query, by their positions in the sequence (the gathered keys
    are in rank order, each rank's zigzag positions)."""
    seq = T * ring.cp
    q_pos = zigzag_positions(seq, ring.cp, ring.rank)
    k_pos = torch.cat([zigzag_positions(seq, ring.cp, r) for r in range(ring.cp)])
    return (k_pos.unsqueeze(0) > q_pos.unsqueeze(1)).to(device)


class AllGatherAttention(torch.autograd.Function):
    """Causal attention of this rank's zigzag queries against the whole sequence's keys and
    values, all-gathered over the cp group (module docstring).  q, k, v: (B, a, s/cp, d)."""

    @staticmethod
    def forward(ctx, q, k, v, ring: Ring):
        scale = 1.0 / math.sqrt(q.shape[-1])
        kv, s = _gathered_scores(q, k, v, ring, scale)
        lse = torch.logsumexp(s, dim=-1)
        out = torch.exp(s - lse.unsqueeze(-1)) @ kv[1]
        ctx.save_for_backward(q, k, v, out, lse)          # the local K, V: gathered again in backward (as TE)
        ctx.ring, ctx.scale = ring, scale
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        ring, scale, T = ctx.ring, ctx.scale, q.shape[2]
        dout = dout.contiguous()
        kv, s = _gathered_scores(q, k, v, ring, scale)
        p = torch.exp(s - lse.unsqueeze(-1))
        delta = (dout * out).sum(-1)
        ds = p * (dout @ kv[1].transpose(-2, -1) - delta.unsqueeze(-1)) * scale
        dkv = torch.stack([ds.transpose(-2, -1) @ q, p.transpose(-2, -1) @ dout]).contiguous()   # (2, B, a, s, d)
        dist.all_reduce(dkv, group=ring.group)            # the reduce-scatter's sums; this rank keeps its own
        own = dkv[:, :, :, ring.rank * T:(ring.rank + 1) * T]
        ring.sent_bytes += (ring.cp - 1) * own.numel() * own.element_size()
        return ds @ kv[0], own[0], own[1], None


def parallelize(stage: nn.Sequential, ring: Ring, seq_len: int, mode: str = "ring") -> None:
    """Run one stage's GPT units on this rank's zigzag tokens, in place: the embedding at this
    rank's positions, each block's attention by the ring (or, ``mode`` "allgather", by
    all-gathered K, V)."""
    from parsim.model.zoo.gpt import Block, Embedding

    attention = AllGatherAttention if mode == "allgather" else RingAttention
    positions = zigzag_positions(seq_len, ring.cp, ring.rank)
    for unit in stage.children():
        if isinstance(unit, Embedding):
            unit.positions = lambda n, device, pos=positions: pos.to(device)
        elif isinstance(unit, Block):
            unit.attend = lambda q, k, v: attention.apply(q, k, v, ring)
