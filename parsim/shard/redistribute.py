"""Redistribution: the steps that turn one layout into another, and their price.

On one device matrix, per device dimension d (right-counted):
- partial in the source, the target splits tensor dim i by d: ReduceScatter;
- partial in the source, not in the target:                    AllReduce;
- source splits i by d, target splits nothing by d:            AllGather;
- source splits nothing by d, target splits i by d:            a local split (no communication);
- source splits i, target splits j != i by d:                  AllToAll.
Shapes must match; layouts on different device matrices are compared after normalization
(dimensions of size 1 dropped).

Steps are priced by ``parsim.cost.layer.step_time_s`` on the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from parsim.errors import InfeasibleError
from parsim.shard.layout import Layout


@dataclass(frozen=True)
class Step:
    kind: str                 # AllReduce | ReduceScatter | AllGather | AllToAll | Split
    device_dim: int           # right-counted
    group_size: int
    bytes_per_device: float   # the larger of the local input and output of the step
    from_dim: int | None = None
    to_dim: int | None = None

    @property
    def communicates(self) -> bool:
        return self.kind != "Split"


def redistribute(src: Layout, dst: Layout, elem_bytes: int = 4) -> list[Step]:
    if tuple(src.shape) != tuple(dst.shape):
        raise InfeasibleError(f"redistribution: shapes differ ({src.shape} vs {dst.shape}); a reshape must come first")
    a, b = src.normalized(), dst.normalized()
    if a.device_matrix != b.device_matrix:
        if a.num_devices != b.num_devices:
            raise InfeasibleError(f"redistribution: {a.num_devices} devices to {b.num_devices}")
        raise InfeasibleError(f"redistribution between device matrices {a.device_matrix} and {b.device_matrix} "
                              "is not supported yet; use one device matrix for both operators")
    steps: list[Step] = []
    cur = a
    for d in range(len(a.device_matrix)):
        n = a.device_dim_size(d)
        s_i, t_i = cur.split_of(d), b.split_of(d)
        size = cur.local_elements() * elem_bytes
        if d in cur.partial and d not in b.partial:
            if t_i is not None and s_i is None:
                steps.append(Step("ReduceScatter", d, n, size, to_dim=t_i))
                cur = _set(cur, d, t_i, partial=False)
            else:
                steps.append(Step("AllReduce", d, n, size))
                cur = _set(cur, d, None, partial=False)
            s_i = cur.split_of(d)
        if s_i == t_i:
            continue
        if s_i is not None and t_i is None:
            steps.append(Step("AllGather", d, n, size * n, from_dim=s_i))
        elif s_i is None and t_i is not None:
            steps.append(Step("Split", d, n, size, to_dim=t_i))
        else:
            steps.append(Step("AllToAll", d, n, size, from_dim=s_i, to_dim=t_i))
        cur = _set(cur, d, t_i, partial=d in b.partial)
    return steps


def edge(producer_out: Layout, consumer_in: Layout, consumer_in_grad: Layout,
         elem_bytes: int = 4) -> tuple[list[Step], list[Step]]:
    """(forward steps, backward steps) on the edge from a producer to a consumer.  Forward:
    producer's output -> consumer's input.  Backward: the consumer's input gradient (possibly
    partial) -> the gradient of the producer's output, which has its layout without partials."""
    settled = Layout(producer_out.device_matrix, producer_out.tensor_map, producer_out.shape)
    return redistribute(producer_out, consumer_in, elem_bytes), redistribute(consumer_in_grad, settled, elem_bytes)


def _set(layout: Layout, d: int, tensor_dim: int | None, partial: bool) -> Layout:
    tmap = [(-1 if x == d else x) for x in layout.tensor_map]
    if tensor_dim is not None:
        tmap[tensor_dim] = d
    parts = set(layout.partial) - {d}
    if partial:
        parts.add(d)
    return Layout(layout.device_matrix, tuple(tmap), layout.shape, frozenset(parts))
