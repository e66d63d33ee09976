"""Expert parallelism in the executor: each MoE layer's routed experts split over an ep group,
tokens dispatched to their experts' ranks and combined back by ``all_to_all_single``.

Megatron-Core's alltoall token dispatcher (megatron/core/transformer/moe/token_dispatcher.py,
``MoEAlltoAllTokenDispatcher``), dropless, written here for transformers 5's MoE blocks (Mixtral,
Qwen3-MoE, DeepSeek-V3: ``mlp.experts`` with stacked ``gate_up_proj`` (E, 2I, h) and ``down_proj``
(E, h, I), called as ``experts(tokens (T, h), top_k_index (T, k), top_k_weights (T, k))``):

- the router runs as transformers wrote it, on every rank's own T tokens of the micro-batch;
- **permute**: the T k (token, expert) rows sorted by expert, so that the rows for ep rank j's
  experts (E/ep consecutive experts, j E/ep onwards) are one contiguous slice;
- **split sizes**: each rank's tokens per expert, exchanged first (an all_to_all_single of E
  counts), so that every rank knows how many rows it receives from each peer;
- **dispatch**: an all_to_all_single of the T k x h rows (uneven splits); the received rows,
  grouped by source rank, are regrouped by local expert;
- **experts**: this rank's E/ep experts, each a SwiGLU on its rows (a grouped GEMM as a loop of
  GEMMs, as transformers' grouped_mm fallback runs it);
- **combine**: the outputs back in the received order, the transposed all_to_all_single, then
  unpermuted to (token, slot) order, weighted by the routing probabilities and summed over the k
  slots (as transformers' grouped_mm_experts_forward sums them).

Autograd goes through both all-to-alls: ``_AllToAll``'s backward is the all_to_all_single with the
split sizes swapped.  Every rank of an ep group must issue its all-to-alls in the same order: the
group's ranks are one pipeline rank of ep replicas, which run the same schedule, so pipelines
run too (pp > 1: each stage's ep group exchanges the tokens of its own MoE layers, micro-batch by
micro-batch as the schedule orders them; torch's metadata inference on the first step runs one
extra forward on every rank of a stage alike).

Each rank keeps experts [r E/ep, (r+1) E/ep) of every layer, sliced from the full model that every
rank builds from the same seed, so a run can be compared with one process.  Expert gradients are
averaged over the expert-data-parallel group (ParallelConfig.expert_dp_group: the ranks holding
the same experts), divided by dp x cp as the dense ones are: each expert's gradient already sums
its ep group's tokens through the dispatch's backward.  Checkpoints hold whole expert tensors,
gathered over the ep group (``whole_state``), so the single-process reference reads them by name.

``Exchanges`` counts the bytes of every all_to_all_single's input buffer per rank, forward and
backward.  The dispatch forward and the combine's backward scatter the rank's own T k token rows:
T k h x dtype bytes each, ``Experts.all_to_all_bytes`` exactly.  The combine forward and the
dispatch's backward scatter the rows its experts received, which the routing decides; over the ep
group they sum to the same T k h per rank, so the group's mean is the rule exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn

from parsim.errors import InputError

# the input buffer of each all-to-all: the rank's own token rows, or the rows its experts received
OWN_ROWS = ("dispatch", "combine-backward")
RECEIVED_ROWS = ("combine", "dispatch-backward")


def check_supported(cfg, spec, source: str) -> None:
    """ep > 1 needs routed experts ep divides, on an ``hf:`` MoE decoder, with no ZeRO (tp > 1:
    parsim.exec.folding's checks), dropless, by the alltoall dispatcher (ZeRO would shard the
    experts over the dense group); one line naming the field otherwise.  Full recomputation runs
    at tp 1: a recomputed layer's backward issues its split-size exchange, dispatch and combine
    again, as the simulator prices it (parsim.cost.experts.a2a_calls); beside the folded layout's
    DTensors (tp > 1) it is not run."""
    if cfg.ep == 1:
        return
    moe = [(layer.name, layer.experts) for layer in spec.graph.layers if layer.experts is not None]
    if not moe:
        raise InputError(f"{source}: parallel.ep: {spec.path} has no mixture-of-experts layers, so there are no "
                         f"experts to split; plan it with ep 1")
    bad = next(((name, ex) for name, ex in moe if ex.experts % cfg.ep), None)
    if bad:
        raise InputError(f"{source}: parallel.ep: {cfg.ep} does not divide the {bad[1].experts} routed experts of "
                         f"{bad[0]} ({spec.path}); choose an ep dividing {bad[1].experts}")
    if spec.source.kind != "hf":
        raise InputError(f"{source}: parallel.ep: the executor splits the experts of hf: models (transformers' MoE "
                         f"blocks); plan {spec.path} with ep 1")
    t = spec.training
    if t.moe_dispatcher != "alltoall" or t.moe_capacity_factor is not None:
        key = "moe_dispatcher" if t.moe_dispatcher != "alltoall" else "moe_capacity_factor"
        raise InputError(f"{source}: training.{key}: the executor runs the alltoall dispatcher, dropless "
                         f"(all_to_all_single of every row); set training.moe_dispatcher alltoall and no "
                         f"moe_capacity_factor in {spec.path} to run it")
    if cfg.zero:
        raise InputError(f"{source}: parallel.ep: the executor runs ep > 1 with zero 0 (got zero={cfg.zero}); "
                         f"plan with --zero 0, or ep 1")
    if cfg.recompute and cfg.tp > 1:
        raise InputError(f"{source}: parallel.recompute: the executor recomputes beside ep > 1 at tp 1 only (got "
                         f"tp={cfg.tp}); plan with --no-recompute, or tp 1")


# ----------------------------------------------------------------------------- the exchanges

@dataclass
class Exchanges:
    """An ep group (its process group, size and this rank's place in it) and the bytes this rank
    scattered since ``reset``: per all_to_all_single, (what, input bytes), in issue order."""

    group: object
    ep: int
    rank: int
    token_calls: list = field(default_factory=list)     # (dispatch | combine | ...-backward, bytes)
    split_bytes: int = 0                                 # the split-size exchanges (E counts each)
    expert_rows: int = 0                                 # rows this rank's experts computed, forward

    def reset(self) -> None:
        self.token_calls, self.split_bytes, self.expert_rows = [], 0, 0

    def tokens(self, x: torch.Tensor, out_splits: list[int], in_splits: list[int], what: str) -> torch.Tensor:
        out = x.new_empty((sum(out_splits), *x.shape[1:]))
        dist.all_to_all_single(out, x, out_splits, in_splits, group=self.group)
        self.token_calls.append((what, x.numel() * x.element_size()))
        return out

    def counts(self, per_expert: torch.Tensor) -> torch.Tensor:
        """Every rank's rows for this rank's experts: (ep, E/ep), from each rank's (E,) counts."""
        out = torch.empty_like(per_expert)
        dist.all_to_all_single(out, per_expert, group=self.group)
        self.split_bytes += per_expert.numel() * per_expert.element_size()
        return out.view(self.ep, -1)

    def summary(self) -> dict:
        """This rank's bytes of the token all-to-alls since ``reset``, by kind of input buffer."""
        own = sum(b for w, b in self.token_calls if w in OWN_ROWS)
        received = sum(b for w, b in self.token_calls if w in RECEIVED_ROWS)
        return {"all_to_alls": len(self.token_calls), "input_bytes": own + received,
                "own_rows_bytes": own, "received_rows_bytes": received,
                "by_kind": {w: sum(b for x, b in self.token_calls if x == w) for w in (*OWN_ROWS, *RECEIVED_ROWS)},
                "split_bytes": self.split_bytes, "expert_rows": self.expert_rows}


class _AllToAll(torch.autograd.Function):
    """all_to_all_single of rows with uneven splits; its backward is the same exchange transposed
    (each rank sends back, to every peer, the gradients of the rows it received from it)."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits, ex: Exchanges, what: str):
        ctx.splits, ctx.ex, ctx.what = (out_splits, in_splits), ex, what
        return ex.tokens(x.contiguous(), out_splits, in_splits, what)

    @staticmethod
    def backward(ctx, grad):
        out_splits, in_splits = ctx.splits
        return ctx.ex.tokens(grad.contiguous(), in_splits, out_splits, f"{ctx.what}-backward"), None, None, None, None


# ----------------------------------------------------------------------------- the experts

class ExpertParallelExperts(nn.Module):
    """This rank's E/ep experts of one MoE layer, called as transformers' experts module is:
    (tokens (T, h), top_k_index (T, k), top_k_weights (T, k)) -> (T, h) (module docstring)."""

    def __init__(self, full: nn.Module, ex: Exchanges):
        super().__init__()
        if getattr(full, "has_bias", False) or getattr(full, "is_transposed", False) \
                or not getattr(full, "has_gate", True):
            raise InputError(f"parallel.ep: {type(full).__name__} is not laid out as gate_up_proj (E, 2I, h) and "
                             "down_proj (E, h, I) without biases; the executor splits only such experts; plan ep 1")
        e = full.gate_up_proj.shape[0]
        self.experts, self.local = e, e // ex.ep
        mine = slice(ex.rank * self.local, (ex.rank + 1) * self.local)
        self.gate_up_proj = nn.Parameter(full.gate_up_proj.detach()[mine].clone())    # (E/ep, 2I, h)
        self.down_proj = nn.Parameter(full.down_proj.detach()[mine].clone())          # (E/ep, h, I)
        self.act_fn = full.act_fn
        object.__setattr__(self, "ex", ex)             # shared by the layers, not a submodule

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor):
        ex, el = self.ex, self.local
        t, h = hidden_states.shape
        k = top_k_index.shape[-1]
        expert_ids = top_k_index.reshape(-1)                                   # (T k,) in (token, slot) order
        order = torch.argsort(expert_ids, stable=True)                         # permute: rows by expert
        rows = hidden_states.index_select(0, order // k)                       # (T k, h)
        sent = torch.bincount(expert_ids, minlength=self.experts)              # (E,) rows per expert
        received = ex.counts(sent)                                             # (ep, E/ep) rows from each rank
        send_splits = sent.view(ex.ep, el).sum(1).tolist()
        recv_splits = received.sum(1).tolist()
        got = _AllToAll.apply(rows, recv_splits, send_splits, ex, "dispatch")  # (R, h): by source rank, then expert
        local_ids = torch.arange(el, device=got.device).repeat(ex.ep).repeat_interleave(received.reshape(-1))
        by_expert = torch.argsort(local_ids, stable=True)                      # regroup by local expert
        y = self._compute(got.index_select(0, by_expert), received.sum(0).tolist())
        ex.expert_rows += y.shape[0]
        back = y.index_select(0, torch.argsort(by_expert))                     # the received order again
        out = _AllToAll.apply(back, send_splits, recv_splits, ex, "combine")   # (T k, h) in ``order``
        out = out.index_select(0, torch.argsort(order))                        # unpermute: (token, slot) order
        weighted = out * top_k_weights.reshape(-1, 1)
        return weighted.view(t, k, h).sum(dim=1).to(hidden_states.dtype)

    def _compute(self, x: torch.Tensor, per_expert: list[int]) -> torch.Tensor:
        """Each local expert's SwiGLU on its consecutive rows (an expert with none still enters the
        graph, so that its gradient is accumulated every micro-batch, as grad_sync counts)."""
        outs, start = [], 0
        for e, n in enumerate(per_expert):
            gate, up = (x[start:start + n] @ self.gate_up_proj[e].t()).chunk(2, dim=-1)
            outs.append((self.act_fn(gate) * up) @ self.down_proj[e].t())
            start += n
        return torch.cat(outs)


def parallelize(stage: nn.Module, ex: Exchanges) -> list[nn.Parameter]:
    """Replace every MoE block's experts in ``stage`` by this rank's share, in place; returns the
    expert parameters (averaged over the expert-data-parallel group, not the dense one)."""
    from parsim.model.hf import experts_of

    params: list[nn.Parameter] = []
    for unit in list(stage.modules()):
        if experts_of(unit) is None:                  # a decoder layer with a routed-experts MoE block
            continue
        mlp = unit.mlp
        if mlp.experts.gate_up_proj.shape[0] % ex.ep:
            raise InputError(f"parallel.ep: {ex.ep} does not divide {mlp.experts.gate_up_proj.shape[0]} experts")
        mlp.experts = ExpertParallelExperts(mlp.experts, ex)
        params += list(mlp.experts.parameters())
    return params


def expert_modules(module: nn.Module) -> list[tuple[str, ExpertParallelExperts]]:
    return [(n, m) for n, m in module.named_modules() if isinstance(m, ExpertParallelExperts)]


def whole_state(module: nn.Module, state: dict) -> dict:
    """``state`` (the module's state dict) with each expert tensor whole: every ep rank's share
    gathered, in rank order (a collective over each ep group: every rank calls it)."""
    state = dict(state)
    for name, m in expert_modules(module):
        for p in ("gate_up_proj", "down_proj"):
            key = f"{name}.{p}"
            parts = [torch.empty_like(state[key]) for _ in range(m.ex.ep)]
            dist.all_gather(parts, state[key].contiguous(), group=m.ex.group)
            state[key] = torch.cat(parts)
    return state


def local_state(module: nn.Module, state: dict) -> dict:
    """``whole_state``'s inverse: this rank's share of each whole expert tensor (no communication)."""
    state = dict(state)
    for name, m in expert_modules(module):
        mine = slice(m.ex.rank * m.local, (m.ex.rank + 1) * m.local)
        for p in ("gate_up_proj", "down_proj"):
            state[f"{name}.{p}"] = state[f"{name}.{p}"][mine]
    return state


class ExpertGrads:
    """Expert gradients averaged over the expert-data-parallel group: divided by dp x cp (each
    already sums its ep group's tokens) and, with more than one rank holding the same experts,
    summed over them in grad_sync's buckets; with one, no communication."""

    def __init__(self, modules: list[nn.Module], group, expert_dp: int, grad_ranks: int, microbatches: int,
                 overlap: bool = True):
        from parsim.exec.grad_sync import GradBuckets

        self.params = [p for m in modules for _, e in expert_modules(m) for p in e.parameters()]
        self.grad_ranks = grad_ranks
        keep = frozenset(self.params)
        self.buckets = [GradBuckets(m, group, expert_dp, microbatches, keep=lambda p: p in keep, mean_over=grad_ranks,
                                    overlap=overlap)
                        for m in modules] if expert_dp > 1 else []

    def finish(self) -> list[list[int]]:
        """Wait for (or do) the step's averaging; the bytes of each all-reduce per stage."""
        if self.buckets:
            return [b.finish() for b in self.buckets]
        with torch.no_grad():
            for p in self.params:
                if p.grad is not None and self.grad_ranks > 1:
                    p.grad.div_(self.grad_ranks)
        return []


def ep_groups(cfg, rank: int):
    """(this rank's ep group, its place in it, its expert-data-parallel group) on the folded expert
    mesh (ParallelConfig.fold): every rank creates every such group, in the same order, as
    dist.new_group requires."""
    mine = expert_dp = None
    place = 0
    for p in range(cfg.pp):
        for i in range(cfg.expert_dp * cfg.etp):
            ranks = cfg.ep_group(p, i)
            group = dist.new_group(list(ranks))
            if rank in ranks:
                mine, place = group, ranks.index(rank)
        for e in range(cfg.ep if cfg.expert_dp > 1 else 0):     # one rank per expert: nothing to average over
            for t in range(cfg.etp):
                ranks = cfg.expert_dp_group(p, e, t)
                group = dist.new_group(list(ranks))
                if rank in ranks:
                    expert_dp = group
    return mine, place, expert_dp
