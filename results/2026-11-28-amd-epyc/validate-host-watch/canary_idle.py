"""The two canary experiments of README.md section 1, as run (2026-11-28 14:26-14:27 UTC, between the two quiet validates).

    python results/2026-11-28-amd-epyc/validate-host-watch/canary_idle.py
"""
import statistics
import time

import torch

from parsim.profile.host import canary_s

# 1. canary_s() back to back, then after a 2 s sleep (printed, ms)
print(" ".join(f"{canary_s() * 1e3:.3f}" for _ in range(10)))
time.sleep(2)
print(" ".join(f"{canary_s() * 1e3:.3f}" for _ in range(5)))

# 2. the chain's median after a warm-up, after idle gaps of 0-5 s
a = torch.full((128, 128), 1 / 128)


def chain() -> float:
    x, t = torch.eye(128), time.perf_counter()
    for _ in range(16):
        x = x @ a
    return time.perf_counter() - t


def steady(warm_s: float = 0.02, n: int = 15) -> float:
    t = time.perf_counter()
    while time.perf_counter() - t < warm_s:
        chain()
    return statistics.median(chain() for _ in range(n)) * 1e3


out = []
for idle in (0, 0.5, 2, 5, 0, 2, 5, 1, 3, 0.1):
    time.sleep(idle)
    out.append((idle, round(steady(), 3), round(steady(0.1, 30), 3)))
print(out)
