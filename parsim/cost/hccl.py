"""HCCL's collective algorithms beyond the ring, as Huawei's HCCL documentation prices them
(hicann/hccl, docs/en/user_guide/coll_algo_intro/: Mesh.md, NHR.md, Pipeline.md, algo_intro.md;
commit bf07f6e5, 2026).  HCCL uses the alpha-beta model: alpha the fixed latency of a step, beta
the time per byte of a link (here a bandwidth, bytes/s: beta = 1 / bandwidth); the reduction's
own time (gamma) is not priced, as for every library in parsim.cost.comm.

- Mesh (inside a server whose devices are fully connected, Atlas A2's HCCS): each device reads
  and writes every peer at once, one link per peer, in one step.  ReduceScatter and AllGather
  alpha + n/p beta; AllReduce, their sum, 2 alpha + 2 n/p beta (Mesh.md, Table 1), with beta the
  time per byte of ONE link: the p - 1 links carry (p-1)/p of the data together.
- NHR (nonuniform hierarchical ring, between servers): ceil(log2 p) steps whatever p, the data
  of a ring: AllReduce 2 ceil(log2 p) alpha + 2 (p-1)/p n beta (NHR.md, Table 1).
- Pipeline (between servers, several devices per server): the inter-server ring and the
  intra-server transfers of the block received the step before run at once, so each of the
  p_inter - 1 ring steps costs the slower of the two:
      AllGather = max(s/p beta_inter + alpha_inter, s/p beta_intra + alpha_intra) (p_inter - 1)
                  + s/p beta_intra + alpha_intra,
  ReduceScatter the same, AllReduce twice it (Pipeline.md, Table 1; p all devices, s the data).
  HCCL's intra-server step is the Mesh's (one block to each peer at once); on a switched node
  the step's p_intra - 1 blocks share the device's port, priced as such.

Which of them HCCL picks is its own choice ("adaptive algorithm selection", algo_intro.md);
parsim.cost.comm takes the fastest that applies, as it does for NCCL's tuner.
"""

from __future__ import annotations

import math


def mesh_time_s(p: int, nbytes: float, alpha_s: float, link_bytes_per_s: float, op: str = "all_reduce") -> float:
    """Mesh.md: an all-gather or reduce-scatter of ``nbytes`` (the whole buffer) over ``p``
    fully connected devices, alpha + nbytes / p over each link; an all-reduce twice that.  An
    all-to-all ("all_to_all"), each device's ``nbytes`` split over the p devices, moves the same
    per link as one all-gather step."""
    if p <= 1 or nbytes <= 0:
        return 0.0
    one = alpha_s + nbytes / p / link_bytes_per_s
    return 2 * one if op == "all_reduce" else one


def nhr_time_s(p: int, nbytes: float, alpha_s: float, bytes_per_s: float, op: str = "all_reduce") -> float:
    """NHR.md: ceil(log2 p) alpha + (p-1)/p nbytes beta for a reduce-scatter or all-gather, twice
    for an all-reduce; unlike recursive halving-doubling, any p."""
    if p <= 1 or nbytes <= 0:
        return 0.0
    one = math.ceil(math.log2(p)) * alpha_s + (p - 1) / p * nbytes / bytes_per_s
    return 2 * one if op == "all_reduce" else one


def pipeline_time_s(servers: int, per_server: int, nbytes: float, inter: tuple[float, float],
                    intra: tuple[float, float], intra_mesh: bool, op: str = "all_reduce") -> float:
    """Pipeline.md over ``servers`` x ``per_server`` devices: ``inter`` and ``intra`` are
    (alpha_s, bytes_per_s) of the links between servers and inside one; ``intra_mesh``: one
    link per peer (the intra step sends its block to each peer at once), else the per_server - 1
    blocks share one port."""
    p = servers * per_server
    if p <= 1 or nbytes <= 0:
        return 0.0
    block = nbytes / p
    inter_step = inter[0] + block / inter[1]
    intra_step = intra[0] + block * (1 if intra_mesh else per_server - 1) / intra[1]
    one = max(inter_step, intra_step) * (servers - 1) + intra_step
    return 2 * one if op == "all_reduce" else one
