"""Process groups from the plan: backend, timeouts, the (dp, pp, cp, tp) DeviceMesh, and a preflight check.

Backends: gloo on CPU, nccl on CUDA, hccl on Ascend when torch_npu is installed (a guarded
import; that path is untested here, since no Ascend device is available to this project).
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from parsim.errors import InputError
from parsim.plan import ParallelConfig


@dataclass(frozen=True)
class Env:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str


def detect_device(local_rank: int) -> tuple[torch.device, str]:
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count()), "nccl"
    try:  # Ascend: torch_npu registers the "npu" device and the hccl backend
        import torch_npu  # noqa: F401

        if torch.npu.is_available():  # type: ignore[attr-defined]
            return torch.device("npu", local_rank % torch.npu.device_count()), "hccl"  # type: ignore[attr-defined]
    except ImportError:
        pass
    return torch.device("cpu"), "gloo"


def synchronize(device: torch.device) -> None:
    """Wait until the device has run every kernel queued on it.  CUDA and Ascend launch kernels
    asynchronously, so a host clock read after a step without this reads how long the launches
    took, not the step; the CPU runs eagerly and needs nothing."""
    if device.type in ("cuda", "npu"):
        getattr(torch, device.type).synchronize(device)


# The devices each collective library runs on (a cluster profile's collective.library), as the
# backend detect_device picks for this machine.
LIBRARY_DEVICES = {"gloo": "CPUs", "nccl": "NVIDIA GPUs", "hccl": "Ascend NPUs"}


def cluster_mismatch(cluster_spec: str, backend: str, source: str) -> str | None:
    """Why a plan made for ``cluster_spec`` is not this machine's, in one line, or None: its
    profile's collective library (hccl, nccl, gloo) is not the backend this machine runs, so it
    was planned for other devices.  A cluster that cannot be read here (a rank table or profile
    left behind) is not judged."""
    from parsim.hardware import load_cluster

    try:
        library = load_cluster(cluster_spec).profile.collectives.library
    except InputError:
        return None
    if library == backend:
        return None
    hint = "--cluster local-cpu" if backend == "gloo" else "a --cluster of this machine's devices"
    return (f"{source}: cluster.spec: the plan was made for {cluster_spec} ({LIBRARY_DEVICES.get(library, library)}, "
            f"{library}), but this machine runs {backend} on {LIBRARY_DEVICES.get(backend, backend)}; plan again "
            f"with {hint}")


def init(timeout_s: float) -> Env:
    """Join the process group described by torchrun's environment variables."""
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise InputError(f"environment: {', '.join(missing)} not set; start with `parsim run` or torchrun")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    device, backend = detect_device(local)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    return Env(rank, world, local, device, backend)


def mesh_for(cfg: ParallelConfig, device: torch.device):
    """A 4-D DeviceMesh with dims named dp, pp, cp and tp, laid out as the plan says: tp innermost
    (consecutive ranks, parsim.plan.ParallelConfig.global_rank), then cp, then pp or dp by placement.
    Under HSDP (ParallelConfig.dp_shard) dp is two dims, dp_replicate outside dp_shard, as
    torchtitan's mesh orders them: a shard group is dp_shard consecutive replicas
    (ParallelConfig.shard_group); ``data_parallel_meshes`` gives the dp ranks' mesh."""
    from torch.distributed.device_mesh import DeviceMesh

    ranks = torch.arange(cfg.world_size)
    dp_dims = ((cfg.shard_replicas, cfg.dp_shard), ("dp_replicate", "dp_shard")) if cfg.hybrid_sharded else \
        ((cfg.dp,), ("dp",))
    if cfg.placement == "pp-inner":     # rank = ((replica * pp + pipe_rank) * cp + cp_rank) * tp + tp_rank
        shape, names = (*dp_dims[0], cfg.pp, cfg.cp, cfg.tp), (*dp_dims[1], "pp", "cp", "tp")
    else:
        shape, names = (cfg.pp, *dp_dims[0], cfg.cp, cfg.tp), ("pp", *dp_dims[1], "cp", "tp")
    return DeviceMesh(device.type, ranks.reshape(shape), mesh_dim_names=names)


def data_parallel_meshes(cfg: ParallelConfig, mesh):
    """(this rank's dp ranks as a 1-D mesh, the mesh FSDP2 shards over): both ``mesh["dp"]``, but
    under HSDP the dp ranks flattened from (dp_replicate, dp_shard) and FSDP2's 2-D mesh, which
    "shards across the 1st dim and replicates across the 0th dim" (torch.distributed.fsdp.fully_shard):
    it reduce-scatters over dp_shard, then all-reduces the shard over dp_replicate."""
    if not cfg.hybrid_sharded:
        return mesh["dp"], mesh["dp"]
    both = mesh["dp_replicate", "dp_shard"]
    return both._flatten("dp"), both


def shard_groups(cfg: ParallelConfig, rank: int):
    """HSDP: the process groups of this rank's shard group and of its replicas
    (ParallelConfig.shard_group, replicate_group), for ZeRO-1's buckets (parsim.exec.grad_sync).
    Every rank creates every such group, in the same order, as dist.new_group requires."""
    mine = [None, None]
    for p in range(cfg.pp):
        for t in range(cfg.tp):
            for k in range(cfg.shard_replicas):
                group = dist.new_group(cfg.shard_group(p, t, k))
                mine[0] = group if rank in cfg.shard_group(p, t, k) else mine[0]
            for j in range(cfg.shard_ranks):
                group = dist.new_group(cfg.replicate_group(p, t, j))
                mine[1] = group if rank in cfg.replicate_group(p, t, j) else mine[1]
    return tuple(mine)


def preflight(env: Env, cfg: ParallelConfig, source: str) -> None:
    """Every rank reaches every other, and the world matches the plan."""
    if env.world_size != cfg.world_size:
        raise InputError(f"{source}: parallel: the plan needs dp x pp x cp x tp = {cfg.world_size} ranks but "
                         f"{env.world_size} were started; use --nproc {cfg.world_size}")
    t = torch.ones(1, device=env.device)
    dist.all_reduce(t)
    if int(t.item()) != env.world_size:
        raise RuntimeError(f"preflight: all_reduce over {env.world_size} ranks gave {int(t.item())}")


def coordinates(cfg: ParallelConfig, rank: int) -> tuple[int, int]:
    """(replica, pipeline rank) of a global rank under the plan's placement (ParallelConfig.coordinates)."""
    return cfg.coordinates(rank)[:2]


def grad_group(cfg: ParallelConfig, pipe_rank: int, tp_rank: int):
    """The process group of the dp x cp ranks this rank averages gradients over
    (ParallelConfig.grad_group).  Every rank creates every such group, in the same order, as
    dist.new_group requires."""
    mine = None
    for p in range(cfg.pp):
        for t in range(cfg.tp):
            group = dist.new_group(cfg.grad_group(p, t))
            if (p, t) == (pipe_rank, tp_rank):
                mine = group
    return mine
