"""A checkpoint's whole tensors from DTensor shards (parsim.exec.tensor_parallel.full, which
parsim.exec.train._save calls for every state-dict tensor): plain shards and replicas, even and
uneven (torch.chunk's, some empty), on one and two mesh dimensions, come back equal to the tensor
that was distributed, gathered by blocking c10d all-gathers, never by DTensor.full_tensor's
functional collectives.  4 ranks on gloo, one thread each."""

import pytest
import torch

from executor_checks import spawned

# (name, mesh shape, placements as (kind, dim) per mesh dimension, tensor shape)
CASES = [
    ("1d-shard0-even", (4,), (("S", 0),), (8, 3)),
    ("1d-shard0-uneven", (4,), (("S", 0),), (5, 3)),            # chunks of 2, 2, 1, 0 rows
    ("1d-shard0-fewer-rows", (4,), (("S", 0),), (2,)),          # two ranks hold nothing
    ("1d-shard1", (4,), (("S", 1),), (3, 6)),
    ("1d-replicate", (4,), (("R", 0),), (3, 2)),
    ("2d-shard0-shard0", (2, 2), (("S", 0), ("S", 0)), (7, 2)),  # nested: the outer mesh dimension first
    ("2d-shard0-shard1", (2, 2), (("S", 0), ("S", 1)), (5, 3)),
    ("2d-replicate-shard0", (2, 2), (("R", 0), ("S", 0)), (3, 4)),
]


def _worker(rank):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    from parsim.exec.tensor_parallel import full

    def refused(self, *args, **kwargs):
        raise AssertionError("full() called DTensor.full_tensor for plain shards")

    DTensor.full_tensor = refused
    found = {}
    for name, mesh_shape, placements, shape in CASES:
        mesh = init_device_mesh("cpu", mesh_shape)
        torch.manual_seed(0)
        whole = torch.randn(shape)
        dt = distribute_tensor(whole, mesh, [Shard(d) if kind == "S" else Replicate() for kind, d in placements])
        found[(name, rank)] = (full(dt), whole, tuple(dt.to_local().shape))
    return found


@pytest.fixture(scope="module")
def four_ranks():
    return spawned(_worker, 4)


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_full_gathers_the_distributed_tensor_on_every_rank(four_ranks, name):
    locals_ = [four_ranks[(name, r)][2] for r in range(4)]
    for rank in range(4):
        got, want, _ = four_ranks[(name, rank)]
        assert torch.equal(got, want)
    if "uneven" in name or "fewer" in name:
        assert len(set(locals_)) > 1            # the case does hold shards of different lengths
