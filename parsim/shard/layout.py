"""Tensor layouts, as MindSpore's ``TensorLayout`` (the seeds' design document): a device matrix,
a tensor map and a shape, plus the device dimensions over which values are partial sums.

Conventions (MindSpore's):
- the device matrix lists device-dimension sizes left to right, e.g. [2, 2] for 4 devices;
- ``tensor_map[i]`` names the device dimension that splits tensor dimension i, counted from the
  right of the device matrix (0 = last), or -1 if dimension i is not split;
- a DTensor ``DeviceMesh`` has the device matrix as its shape, so mesh dimension j (from the
  left) is device dimension ``len(device_matrix) - 1 - j``.

Worked example (4 devices, X of shape [8, 16]):

    Layout(device_matrix=(2, 2), tensor_map=(1, 0), shape=(8, 16))
      tensor dim 0 (rows) is split by device dim 1 (the left "2"), tensor dim 1 by device dim 0;
      each device holds a [4, 8] block; as DTensor placements on a (2, 2) mesh:
      [Shard(0), Shard(1)].
    Layout((2, 2), (1, -1), (8, 16))   -> [Shard(0), Replicate()]: rows split, columns whole,
      each block held by the 2 devices of the right mesh dimension.
    Layout((2, 2), (1, -1), (8, 16), partial=(0,)) -> [Shard(0), Partial()]: the 2 devices along
      the right mesh dimension each hold a partial sum; an AllReduce over them completes it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from parsim.errors import InfeasibleError


@dataclass(frozen=True)
class Layout:
    device_matrix: tuple[int, ...]
    tensor_map: tuple[int, ...]
    shape: tuple[int, ...]
    partial: frozenset[int] = field(default_factory=frozenset)   # device dims (right-counted)

    def __post_init__(self):
        object.__setattr__(self, "partial", frozenset(self.partial))
        self.validate()
        # hashed once (the field's own hash, kept): the auto layout's cost graphs look layouts up
        # by value some 12,000 times on ResNet-50; ints only, so the same in every process
        object.__setattr__(self, "_hash", hash((self.device_matrix, self.tensor_map, self.shape, self.partial)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def num_devices(self) -> int:
        n = 1
        for d in self.device_matrix:
            n *= d
        return n

    def device_dim_size(self, d: int) -> int:
        """Size of device dimension d (right-counted)."""
        return self.device_matrix[len(self.device_matrix) - 1 - d]

    def validate(self) -> None:
        if len(self.tensor_map) != len(self.shape):
            raise InfeasibleError(f"layout: tensor map {self.tensor_map} does not match shape {self.shape}")
        used = [d for d in self.tensor_map if d != -1]
        if len(set(used)) != len(used):
            raise InfeasibleError(f"layout: tensor map {self.tensor_map} splits two tensor dimensions by one device dimension")
        for i, d in enumerate(self.tensor_map):
            if d == -1:
                continue
            if not 0 <= d < len(self.device_matrix):
                raise InfeasibleError(f"layout: tensor map {self.tensor_map} names device dimension {d}, but the "
                                      f"device matrix {self.device_matrix} has {len(self.device_matrix)}")
            if self.shape[i] % self.device_dim_size(d):
                raise InfeasibleError(f"layout: tensor dimension {i} of size {self.shape[i]} does not split into "
                                      f"{self.device_dim_size(d)}; use a divisor of {self.shape[i]}")
        if any(p in used or not 0 <= p < len(self.device_matrix) for p in self.partial):
            raise InfeasibleError(f"layout: partial device dimensions {sorted(self.partial)} must be unused by the map")

    def split_of(self, d: int) -> int | None:
        """The tensor dimension device dimension d splits, or None."""
        for i, dd in enumerate(self.tensor_map):
            if dd == d:
                return i
        return None

    def local_shape(self) -> tuple[int, ...]:
        return tuple(s // (self.device_dim_size(d) if d != -1 else 1) for s, d in zip(self.shape, self.tensor_map))

    def local_elements(self) -> int:
        n = 1
        for s in self.local_shape():
            n *= s
        return n

    def normalized(self) -> "Layout":
        """Device dimensions of size 1 dropped, indices renumbered."""
        return _normalized(self)

    def _normalize(self) -> "Layout":
        keep = [d for d in range(len(self.device_matrix)) if self.device_dim_size(d) > 1]   # right-counted
        new_index = {d: k for k, d in enumerate(keep)}
        matrix = tuple(self.device_dim_size(d) for d in reversed(keep))
        tmap = tuple(-1 if d == -1 or d not in new_index else new_index[d] for d in self.tensor_map)
        return Layout(matrix, tmap, self.shape, frozenset(new_index[p] for p in self.partial if p in new_index))

    # ---------------------------------------------------------------- DTensor placements

    def placements(self) -> list[tuple]:
        """Per mesh dimension (left to right): ("S", tensor_dim), ("R",) or ("P",)."""
        out = []
        for j in range(len(self.device_matrix)):
            d = len(self.device_matrix) - 1 - j
            i = self.split_of(d)
            out.append(("S", i) if i is not None else ("P",) if d in self.partial else ("R",))
        return out

    @classmethod
    def from_placements(cls, placements: list[tuple], mesh_shape: tuple[int, ...], shape: tuple[int, ...]) -> "Layout":
        tmap, partial = [-1] * len(shape), set()
        for j, p in enumerate(placements):
            d = len(mesh_shape) - 1 - j
            if p[0] == "S":
                tmap[p[1]] = d
            elif p[0] == "P":
                partial.add(d)
        return cls(tuple(mesh_shape), tuple(tmap), tuple(shape), frozenset(partial))

    def to_dtensor(self):
        """torch.distributed.tensor placement objects for this layout."""
        from torch.distributed.tensor import Partial, Replicate, Shard

        return [Shard(p[1]) if p[0] == "S" else Partial() if p[0] == "P" else Replicate() for p in self.placements()]


# Kept, by value (layouts are small frozen values): a strategy search redistributes the same
# layouts many times.  Benchmark line: building ResNet-50's cost graph at tp 8
# (parsim.shard.auto.cost_graph, ascend910:1x8) asks 832 times for 112 layouts, and GPT-3 175B's
# plan on 1,024 A100s (bench_planner.py --goals) 2,885 times for 242 (counts, 2026-11-28); the
# cost graph took 17 ms with it, 29 ms without (one run each on a shared host: unconfirmed).
@functools.lru_cache(maxsize=65536)
def _normalized(layout: Layout) -> Layout:
    """Layout.normalized, by value."""
    return layout._normalize()
