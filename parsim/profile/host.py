"""What the host does while a profile measures: a canary kernel's time, and how much of the cores
other processes used and the hypervisor stole (Linux ``/proc/stat``), for the rounds of
parsim.profile.rounds.

- ``canary_s()``: a fixed fp32 matmul chain on this thread, timed (the best of three).  Its time
  moves when the core slows down (a frequency drop, a neighbour sharing it), whatever the model.
- ``HostCounter.sample()``: since the previous call, the cores' busy time that the concurrent
  profilers did not use themselves (``foreign``), and the stolen time (``steal``), each as a
  share of one core over the wall time.  The profilers' own CPU time is this process's, times
  the profilers on this node (they run the same work in lock-step); with ``children``, that of
  the child processes it waited for as well (``parsim validate``: a run's ranks).  On a machine
  without ``/proc/stat`` both are 0.

Field order of /proc/stat's ``cpu`` line: user nice system idle iowait irq softirq steal
(proc(5)); steal is also counted as busy by nothing else there, so it is kept apart.
"""

from __future__ import annotations

import os
import time

import torch

from parsim.profile.rounds import HostSample

CANARY_N = 128            # 128 x 128 fp32 matmuls: about 4 MFLOP each, about 1 ms for the chain on one core
CANARY_CHAIN = 16


def canary_s(chain: int = CANARY_CHAIN, n: int = CANARY_N) -> float:
    """The best of three timings of ``chain`` dependent n x n matmuls on this thread."""
    a = torch.full((n, n), 1.0 / n)
    best = float("inf")
    for _ in range(3):
        x = torch.eye(n)
        t0 = time.perf_counter()
        for _ in range(chain):
            x = x @ a
        best = min(best, time.perf_counter() - t0)
    return best


def _proc_stat() -> tuple[float, float] | None:
    """(busy, steal) seconds of all cores since boot, or None without /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    ticks = [int(x) for x in fields[1:9]]
    hz = os.sysconf("SC_CLK_TCK")
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return (user + nice + system + irq + softirq) / hz, steal / hz


class HostCounter:
    """Call ``sample()`` after each measurement: what the host did since the previous call."""

    def __init__(self, profilers: int = 1, children: bool = False):
        self.profilers, self.children = profilers, children
        self._last = self._read()

    def _read(self):
        cpu = time.process_time()
        if self.children:                 # the finished children's CPU seconds (os.times: waited-for ones)
            t = os.times()
            cpu += t.children_user + t.children_system
        return time.perf_counter(), cpu, _proc_stat()

    def sample(self) -> HostSample:
        (t0, cpu0, stat0), (t1, cpu1, stat1) = self._last, self._read()
        self._last = (t1, cpu1, stat1)
        wall = t1 - t0
        if stat0 is None or stat1 is None or wall <= 0:
            return HostSample()
        busy, steal = stat1[0] - stat0[0], stat1[1] - stat0[1]
        ours = (cpu1 - cpu0) * self.profilers
        return HostSample(foreign=max(0.0, busy - ours) / wall, steal=max(0.0, steal) / wall)


class PhaseWatch:
    """The canary before, and the host's counters over, each phase of a measurement that is not
    taken in rounds (``parsim profile-comm``; each run of ``parsim validate``, whose ranks are
    child processes: ``children``): ``watch(name, fn)`` runs fn and records the phase.
    A phase is disturbed as a round's measurement is (parsim.profile.rounds.disturbed), its canary
    judged against the median of every phase's canary; without ``canary``, by the counters alone.
    (Timed after an idle gap, as before a validate run, the canary's 0.5 ms moved by 20-60% on a
    quiet 2-core EPYC VM and did not follow the runs' times: see parsim.validation.)"""

    def __init__(self, profilers: int = 1, children: bool = False, canary: bool = True):
        self.counter = HostCounter(profilers, children)
        self.canary = canary
        self.phases: list[tuple[str, float, HostSample]] = []

    def __call__(self, name: str, fn):
        canary = canary_s() if self.canary else 0.0
        self.counter.sample()
        out = fn()
        self.phases.append((name, canary, self.counter.sample()))
        return out


def disturbed_phases(phases: list[tuple[str, float, HostSample]]) -> list[str]:
    """One line per disturbed phase: what the canary and the counters saw."""
    import statistics

    from parsim.profile.rounds import disturbed

    if not phases:
        return []
    med = statistics.median(c for _, c, _ in phases)
    out = []
    for name, c, h in phases:
        if disturbed(c, med, h):
            parts = ([f"canary {c / med - 1:+.0%}"] if med > 0 else []) \
                + ([f"other processes {h.foreign:.0%} of a core"] if h.foreign else []) \
                + ([f"hypervisor steal {h.steal:.0%}"] if h.steal else [])
            out.append(f"{name}: " + ", ".join(parts))
    return out
