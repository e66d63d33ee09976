"""ZeRO stages 2 and 3, run by torch FSDP2 (``torch.distributed.fsdp.fully_shard``).

A stage module's cut units become FSDP units on the data-parallel mesh, one unit per cut unit,
as torchtitan wraps each transformer block; units that share a parameter (the GPT's tied
embedding and head, on one rank) are left to the stage module's own root unit, which FSDP2
lets hold a parameter two submodules share. Which layers form which unit is
``parsim.cost.comm.fsdp_units``: the rule the simulator prices, so that the collectives that run
are the ones predicted, unit for unit.

- **ZeRO-3** (``reshard_after_forward=True``, FSDP's FULL_SHARD): a unit's parameters are
  all-gathered before its forward and again before its backward, and freed after each; its
  gradients are reduce-scattered after its backward, every micro-batch.
- **ZeRO-2** (``reshard_after_forward=False``, FSDP's SHARD_GRAD_OP, torchtitan's ZeRO-2): a
  unit's parameters are all-gathered before the step's first forward and kept until the last
  micro-batch's backward (``set_reshard_after_backward``, FSDP2's gradient-accumulation switch);
  its gradients are reduce-scattered after every micro-batch's backward, each rank keeping the
  sum of its shard.
- Under either, ``ParallelConfig.no_sync`` reduce-scatters in the last micro-batch's backward only:
  the earlier ones accumulate unsharded gradients (``set_requires_gradient_sync(False)``).

The root unit keeps its parameters gathered from its forward through its backward under either
stage (FSDP2 sets a root's ``reshard_after_forward`` to False: its parameters are needed again
at once). FSDP2 averages the reduce-scattered gradients over the mesh, which is the seeds'
``gradients_mean``. The optimizer steps the sharded parameters (DTensors, ``Shard(0)``), so its
state is 1/dp of the whole.

Under HSDP (``ParallelConfig.dp_shard``) the mesh is 2-D (parsim.exec.groups.data_parallel_meshes):
the units shard over a shard group of dp_shard ranks, and each reduce-scattered shard is then
all-reduced over the dp / dp_shard groups holding the same shard; the optimizer state is
1/dp_shard of the whole.
"""

from __future__ import annotations

from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from parsim.cost.comm import fsdp_units
from parsim.exec.grad_sync import tied_holders

# c10d's ops, as FSDP2 issues them, by the collective the simulator names
_OPS = {"_allgather_base_": "all_gather", "_reduce_scatter_base_": "reduce_scatter", "allreduce_": "all_reduce"}


def shard_stage(module: nn.Module, mesh, zero: int) -> None:
    """Wrap ``module``'s cut units (its children, in order) as ``fsdp_units`` groups them, then
    the module itself as the root unit."""
    from torch.distributed.fsdp import fully_shard

    named = list(module.named_children())
    units = [unit for _, unit in named]
    shared = {i for held in tied_holders(named) for i, _ in held}       # units holding a parameter with another
    sizes = [sum(p.numel() for p in u.parameters()) for u in units]
    for (i,) in fsdp_units(sizes, [i in shared for i in range(len(units))])[1:]:
        fully_shard(units[i], mesh=mesh, reshard_after_forward=zero == 3)
    fully_shard(module, mesh=mesh, reshard_after_forward=zero == 3)


def before_microbatch(module: nn.Module, zero: int, i: int, microbatches: int, no_sync: bool = False) -> None:
    """ZeRO-2: keep the gathered parameters over the step's micro-batches, freeing them after the
    last one's backward.  ``no_sync`` (ParallelConfig.no_sync): reduce-scatter the gradients in the
    last micro-batch's backward only, every earlier one accumulating them unsharded (FSDP2's
    ``set_requires_gradient_sync``)."""
    last = i == microbatches - 1
    if zero == 2:
        module.set_reshard_after_backward(last, recurse=True)
    if no_sync:
        module.set_requires_gradient_sync(last, recurse=True)


class ShardedCollectives(TorchDispatchMode):
    """The collectives FSDP2 issues, (op, bytes of the full buffer), in launch order: an
    all-gather's output, a reduce-scatter's input, and under HSDP the all-reduce of each shard
    over ``replicas`` (its process group; other all-reduces, a tensor-parallel one, are not
    FSDP2's); the quantities ``Estimate.sharded_collectives`` prices.  ``stage_of()`` names the
    stage whose action issues one now (stages.Recorder.stage; None: the rank's first stage), so
    that a rank holding several stages (an interleaved pipeline) reports each stage's own."""

    def __init__(self, replicas=None, stage_of=lambda: None):
        super().__init__()
        self.issued: list[tuple[str, int]] = []
        self.stages: list[int | None] = []          # the stage of each entry of ``issued``
        self.replicas = replicas.group_name if replicas is not None else None
        self.stage_of = stage_of

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if func.namespace == "c10d" and name in _OPS:
            if name == "allreduce_":      # ([tensor], its process group, ...)
                import torch.distributed as dist

                if self.replicas is not None and dist.ProcessGroup.unbox(args[1]).group_name == self.replicas:
                    self.issued.append(("all_reduce", sum(t.numel() * t.element_size() for t in args[0])))
                    self.stages.append(self.stage_of())
            else:
                whole = args[0] if name == "_allgather_base_" else args[1]
                self.issued.append((_OPS[name], whole.numel() * whole.element_size()))
                self.stages.append(self.stage_of())
        return func(*args, **(kwargs or {}))

    def take(self, stage_ids=(0,)) -> list[list[tuple[str, int]]]:
        """What each of ``stage_ids`` (the rank's stages, in order) issued, in launch order; emptied."""
        out = [[c for c, s in zip(self.issued, self.stages) if (stage_ids[0] if s is None else s) == stage]
               for stage in stage_ids]
        self.issued, self.stages = [], []
        return out
