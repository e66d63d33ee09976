"""Data-parallel gradient synchronisation: the buckets the simulator prices, run.

One mechanism for every plan with dp > 1, whatever its schedule (a split backward under ZB-H1 or
not) and whether its parameters are DTensors (tensor parallelism) or plain:

- **Buckets.** A stage's cut units in backward order are grouped by ``parsim.cost.comm.ddp_buckets``
  into buckets of at most 25 MiB of gradients (torch DDP's ``bucket_cap_mb``). That is the rule
  ``parsim.sim.simulate`` prices (``Estimate.grad_buckets_bytes``): same units, same cap, same
  order, so the all-reduces that run are the ones predicted, bucket for bucket.
- **Started as gradients become ready.** A post-accumulate-grad hook counts each parameter's
  accumulations. A parameter is final after one accumulation per micro-batch: its B step, or its
  W step under a split backward. When every parameter of a bucket is final, the bucket's
  all-reduce starts asynchronously, overlapping the backward that is still running, as DDP's
  reducer does.
- **In place.** Each bucket's gradients are views into one flat buffer, like DDP's
  ``gradient_as_bucket_view`` and Megatron's contiguous gradient buffer, so the gradients are
  held once and reduced without a copy. The buffer is divided by dp before the sum, which is
  ``gradients_mean`` (the seeds'). DTensor parameters (tensor parallelism) keep DTensor
  gradients whose local shards are those views.
- ``finish()`` starts any bucket still waiting (a parameter that got no gradient this step) and
  waits for all of them, before the optimizer.  Without overlap (ParallelConfig.overlap_grad_reduce
  false: Megatron-Core without --overlap-grad-reduce) no bucket starts during the backward, and
  ``finish()`` starts every one, in the same order.

**ZeRO stage 1** (``zero=1``; Rajbhandari et al. 2020; Megatron's distributed optimizer): the
same buckets, padded to a multiple of dp, are reduce-scattered instead of all-reduced, each rank
keeping the summed gradients of its 1/dp slice of every bucket; the parameters are views into
flat buffers laid out like the gradients', so the optimizer steps only this rank's slices
(``shard_params``: its optimizer state is 1/dp of the whole) and ``gather_params`` all-gathers
the updated slices back into every rank's parameters.  Under tensor parallelism the buckets
hold each rank's local shards, and a DTensor parameter is re-made on its slot of the flat
buffer.  The simulator prices the same collectives, bucket for bucket
(``Estimate.sharded_collectives``).  Under hybrid sharding (``ParallelConfig.dp_shard``: Megatron's
partial distributed optimizer) the slices are those of the shard group, and each reduce-scattered
slice is then all-reduced over the ranks holding the same slice (``replicas``).

A weight two cut units share (the GPT's word embedding, used again by its LM head) is one
parameter when both units sit on one rank, and autograd sums its two gradients. When pp > 1
puts them on different pipeline ranks, each rank holds a copy (built from the same seed, so
equal), and ``TiedGrads`` sums the copies' gradients over those ranks after the data-parallel
buckets, so that both copies take the same step: Megatron's embedding group
(megatron/core/distributed/finalize_model_grads.py, ``_allreduce_word_embedding_grads``). The
simulator prices the same all-reduce (Kind.REDUCE_TIED, ``Estimate.tied_grad_bytes``).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch import nn

from parsim.cost.comm import DDP_BUCKET_BYTES, ddp_buckets, first_bucket_bytes
from parsim.errors import InputError
from parsim.exec.tensor_parallel import local


class GradBuckets:
    """One stage module's gradients, all-reduced over ``group`` in the simulator's buckets."""

    def __init__(self, stage: nn.Module, group, dp: int, microbatches: int, zero: int = 0,
                 tied: frozenset = frozenset(), keep=None, mean_over: int | None = None, replicas=None,
                 overlap: bool = True):
        """``keep``: which parameters the buckets hold (default all; expert parallelism keeps its
        experts apart, parsim.exec.expert_parallel); ``mean_over``: the divisor of the sum (default
        ``dp``, the group's size; expert gradients divide by dp x cp over a smaller group, HSDP's by
        every replica's); ``replicas``: under ZeRO-1 with HSDP (ParallelConfig.dp_shard), the
        process group of the ranks holding this rank's shard, over which each reduce-scattered
        slice is then all-reduced (``group`` being the shard group, ``dp`` its size); ``overlap``
        false (ParallelConfig.overlap_grad_reduce): no bucket starts during the backward, ``finish``
        starts them all, in order (Megatron-Core without --overlap-grad-reduce)."""
        self.group, self.dp, self.microbatches, self.zero = group, dp, microbatches, zero
        self.overlap = overlap
        self.replicas = replicas
        self.mean_over = mean_over or dp
        # A parameter two units share (the GPT's tied embedding and head) belongs to the first in
        # forward order, as extraction counts it (parsim.model.extract); autograd accumulates it
        # once per backward.  Under ZeRO-1 a weight tied over pipeline ranks (``tied``) is an entry
        # after the rest of its unit, in a bucket of its own (ddp_buckets' ``alone``), as the
        # simulator prices it.
        units = list(stage.children())
        owner: dict = {}
        for k, unit in enumerate(units):
            for p in unit.parameters():
                owner.setdefault(p, k)
        entries: list[tuple[list[nn.Parameter], bool]] = []
        for k in range(len(units) - 1, -1, -1):                        # backward order
            params = list(dict.fromkeys(p for p in units[k].parameters()
                                        if p.requires_grad and (keep is None or keep(p)) and owner[p] == k))
            alone = [p for p in params if zero and p in tied]
            entries.append(([p for p in params if not (zero and p in tied)], False))
            if alone:
                entries.append((alone, True))
        sizes = [sum(local(p).numel() * p.element_size() for p in params) for params, _ in entries]
        alone = frozenset(j for j, (_, is_tied) in enumerate(entries) if is_tied)
        # every bucket holds an entry with gradient bytes (ddp_buckets opens none for an empty one)
        self.params: list[list[nn.Parameter]] = [[p for j in members for p in entries[j][0]]
                                                 for members in ddp_buckets(sizes, DDP_BUCKET_BYTES, alone,
                                                                            first_bucket_bytes(zero))]
        self.bucket_of: dict[nn.Parameter, int] = {}
        self.flat: list[torch.Tensor] = []
        self.flat_params: list[torch.Tensor] = []  # ZeRO: the parameters' storage, laid out as the gradients
        self.rank = dist.get_rank(group) if zero else 0
        for k, params in enumerate(self.params):
            n = sum(local(p).numel() for p in params)
            if zero:
                n += -n % dp                        # equal slices for the reduce-scatter and all-gather
                flat_params = torch.zeros(n, dtype=params[0].dtype, device=local(params[0]).device)
            flat = torch.zeros(n, dtype=params[0].dtype, device=local(params[0]).device)
            offset = 0
            for p in params:
                shard = local(p)
                view = flat[offset:offset + shard.numel()].view_as(shard)
                if zero:
                    held = flat_params[offset:offset + shard.numel()].view_as(shard)
                    with torch.no_grad():
                        held.copy_(shard)
                    if hasattr(p, "to_local"):
                        # a DTensor keeps its local shard in an attribute: swap in one on this storage;
                        # the swap exchanges the objects' __dict__ too, so what parsim set on the
                        # parameter (a mirror's partial_grad_placements, op_parallel) goes back on it
                        mine = dict(p.__dict__)
                        torch.utils.swap_tensors(p, nn.Parameter(_on_storage(p, held), p.requires_grad))
                        p.__dict__.update(mine)
                    else:
                        p.data = held
                p.grad = _on_storage(p, view)
                offset += shard.numel()
                self.bucket_of[p] = k
                p.register_post_accumulate_grad_hook(self._accumulated)
            self.flat.append(flat)
            if zero:
                self.flat_params.append(flat_params)
        self.syncing = True                        # False inside unsynced()
        self._reset()
        self.issued_bytes: list[int] = []          # this step's gradient reductions, bytes each, in launch order
        self.issued: list[tuple[str, int]] = []    # ZeRO: (collective, bytes) of this step, in launch order

    def _reset(self) -> None:
        self.count = {p: 0 for p in self.bucket_of}
        self.waiting = [len(ps) for ps in self.params]
        self.handles = [None] * len(self.params)

    @contextmanager
    def unsynced(self):
        """Backward passes inside start no reduction and leave the gradients as they accumulate
        (parsim.profile.grad_sync's reference backward, on the same buffers and hooks)."""
        self.syncing = False
        try:
            yield
        finally:
            self.syncing = True
            self._reset()

    def _accumulated(self, p: nn.Parameter) -> None:
        if not self.syncing:
            return
        self.count[p] += 1
        if self.count[p] == self.microbatches:
            k = self.bucket_of[p]
            self.waiting[k] -= 1
            if self.waiting[k] == 0 and self.overlap:
                self._start(k)

    def _slice(self, flat: torch.Tensor) -> torch.Tensor:
        size = flat.numel() // self.dp
        return flat[self.rank * size:(self.rank + 1) * size]

    def _start(self, k: int) -> None:
        flat = self.flat[k]
        flat.div_(self.mean_over)
        nbytes = flat.numel() * flat.element_size()
        if self.zero:            # in place: this rank's slice of the buffer receives the sum
            self.handles[k] = dist.reduce_scatter_single(self._slice(flat), flat, group=self.group, async_op=True)
            self.issued.append(("reduce_scatter", nbytes))
            if self.replicas is not None:      # HSDP: the summed slice over its replicas, after the reduce-scatter
                self.handles[k].wait()
                self.handles[k] = dist.all_reduce(self._slice(flat), group=self.replicas, async_op=True)
                self.issued.append(("all_reduce", nbytes // self.dp))
        else:
            self.handles[k] = dist.all_reduce(flat, group=self.group, async_op=True)
        self.issued_bytes.append(nbytes)

    def shard_params(self) -> list[nn.Parameter]:
        """ZeRO: this rank's slice of every bucket's parameters, each with its slice of the summed
        gradients: what its optimizer steps (in place, in the parameters' storage)."""
        shards = []
        for flat_params, flat in zip(self.flat_params, self.flat):
            shard = nn.Parameter(self._slice(flat_params))
            shard.grad = self._slice(flat)
            shards.append(shard)
        return shards

    def gather_params(self) -> None:
        """ZeRO, after the optimizer: every rank's updated slices into every rank's parameters,
        bucket by bucket; then the gradient buffers are cleared for the next step (the optimizer,
        which holds only this rank's slices, clears only those)."""
        for flat_params, flat in zip(self.flat_params, self.flat):
            dist.all_gather_single(flat_params, self._slice(flat_params), group=self.group)
            self.issued.append(("all_gather", flat_params.numel() * flat_params.element_size()))
            flat.zero_()

    def take_issued(self) -> list[tuple[str, int]]:
        """ZeRO: this step's (collective, bytes), in launch order, and start a new list."""
        issued, self.issued = self.issued, []
        return issued

    def finish(self) -> list[int]:
        """Wait for every bucket of this step (starting any a missing gradient held back); the
        bytes of each all-reduce issued, in launch order."""
        for k, handle in enumerate(self.handles):
            if handle is None:
                self._start(k)
        for handle in self.handles:
            handle.wait()
        issued, self.issued_bytes = self.issued_bytes, []
        self._reset()
        return issued


def _on_storage(p: nn.Parameter, view: torch.Tensor) -> torch.Tensor:
    """A tensor like ``p`` (its gradient; under ZeRO its data) whose storage is ``view``: a DTensor
    parameter gets a DTensor with the same mesh and placements."""
    if hasattr(p, "to_local"):
        from torch.distributed.tensor import DTensor

        return DTensor.from_local(view, p.device_mesh, p.placements, run_check=False,
                                  shape=p.shape, stride=p.stride())
    return view


def tied_holders(units: list[tuple[str, nn.Module]]) -> list[list[tuple[int, str]]]:
    """Each parameter more than one cut unit holds: (unit index, its name in a stage module) per
    holder, the owner (the first) first.  Stage modules name unit "layers.3" "layers_3"
    (parsim.exec.stages.sequential)."""
    holders: dict[int, list[tuple[int, str]]] = {}
    for u, (unit_name, unit) in enumerate(units):
        for name, p in unit.named_parameters():
            holders.setdefault(id(p), []).append((u, f"{unit_name.replace('.', '_')}.{name}"))
    return [h for h in holders.values() if len(h) > 1]


class TiedGrads:
    """The tied weights whose holders sit on different pipeline ranks: their gradients summed
    over those ranks of each (replica, tensor-parallel rank), once per step."""

    def __init__(self, holders: list[list[tuple[int, str]]], cfg, stage_ids: list[int],
                 modules: list[nn.Module], coords: tuple[int, int, int], plan_path: str = "plan"):
        replica, pipe_rank, tp_rank = coords
        stage_of = cfg.layer_stages()
        self.reductions: list[tuple[int, nn.Parameter, object]] = []   # (stage, parameter, group)
        for held in holders:
            stages = sorted({stage_of[u] for u, _ in held})
            pipe_ranks = sorted({s % cfg.pp for s in stages})
            if len(pipe_ranks) == 1:
                continue                       # one parameter on one rank: autograd sums its uses
            if len(pipe_ranks) != len(stages):
                raise InputError(f"{plan_path}: parallel.bounds: two stages on one pipeline rank hold copies of "
                                 f"{held[0][1]}, which the executor cannot keep equal; move the boundaries")
            for d in range(cfg.dp):            # every rank creates every group, in the same order
                for t in range(cfg.tp):
                    group = dist.new_group([cfg.global_rank(d, r, t) for r in pipe_ranks])
                    if (d, t) != (replica, tp_rank) or pipe_rank not in pipe_ranks:
                        continue
                    for s, module in zip(stage_ids, modules):
                        if s not in stages:
                            continue
                        params = dict(module.named_parameters(remove_duplicate=False))
                        name = next(n for u, n in held if stage_of[u] == s and n in params)
                        self.reductions.append((s, params[name], group))

    @property
    def stages(self) -> list[int]:
        return [s for s, _, _ in self.reductions]

    def reduce(self, stage: int) -> int:
        """Sum ``stage``'s tied gradients over their groups; the bytes all-reduced."""
        nbytes = 0
        for s, p, group in self.reductions:
            if s == stage:
                if hasattr(p, "placements") and p.grad.placements != p.placements:
                    # the embedding's backward leaves its DTensor gradient replicated; take this
                    # rank's vocabulary slice (no communication), the slice its copy holds
                    p.grad = p.grad.redistribute(p.device_mesh, p.placements)
                grad = local(p.grad)
                dist.all_reduce(grad, group=group)
                nbytes += grad.numel() * grad.element_size()
        return nbytes
