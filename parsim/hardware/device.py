"""One accelerator: peak FLOP/s per dtype, memory, and achievable efficiency.

Efficiency follows Calculon's habit (calculon/processor.py): a table of (work size, fraction of
peak) points, interpolated linearly in log10(work size) and held flat outside the table.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    name: str
    peak_flops_per_s: tuple[tuple[str, float], ...]       # (dtype, FLOP/s), e.g. ("fp16", 3.12e14)
    memory_bytes: int
    memory_bandwidth_bytes_per_s: float
    efficiency: tuple[tuple[float, float], ...] = ((1.0, 1.0),)  # (work_flops, fraction of peak)
    memory_efficiency: float = 1.0                         # fraction of memory bandwidth reached

    def peak(self, dtype: str) -> float:
        table = dict(self.peak_flops_per_s)
        if dtype in table:
            return table[dtype]
        if dtype == "bf16" and "fp16" in table:   # same tensor-core rate on A100/H100 (datasheets)
            return table["fp16"]
        return table["fp32"]

    def compute_efficiency(self, work_flops: float) -> float:
        xs = [math.log10(max(w, 1.0)) for w, _ in self.efficiency]
        ys = [e for _, e in self.efficiency]
        x = math.log10(max(work_flops, 1.0))
        if x <= xs[0]:
            return ys[0]
        if x >= xs[-1]:
            return ys[-1]
        i = bisect.bisect_right(xs, x)
        t = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
        return ys[i - 1] + t * (ys[i] - ys[i - 1])

    def achieved_flops_per_s(self, dtype: str, work_flops: float) -> float:
        return self.peak(dtype) * self.compute_efficiency(work_flops)

    def achieved_bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_bytes_per_s * self.memory_efficiency
