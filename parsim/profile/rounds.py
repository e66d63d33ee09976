"""How a layer profile earns its numbers: interleaved rounds, a canary that watches the host, and
an interval on every entry.  Pure: the timing functions are passed in, so the policy is tested
without a clock.

A *key* is one timed quantity of one layer, e.g. ``("layer3", "fwd_s")``.  ``measure(b)`` runs a
few timed repeats at micro-batch size b (warm-up dropped) and returns every key's repeat times.

- **Rounds.**  Round r measures every size once, in an order rotated by r, so that a slow minute
  of the shared machine falls on every size alike instead of on one.  A size's value in a round
  is the median of its repeats; an entry's value is the median over the rounds kept (a round
  slowed by a burst moves it little).
- **Interval.**  Each entry's interval is the order-statistic interval of that median: with n
  rounds, the k-th smallest and k-th largest round, k the largest with
  1 - 2 P(Binomial(n, 1/2) < k) >= ``LEVEL`` (distribution-free; Conover 1999, "Practical
  Nonparametric Statistics", Sec. 3.2).  The rounds themselves are kept in the profile, so that
  a plan's step time gets its interval by redrawing whole rounds (parsim.cost.profile_rounds):
  a disturbance slows every layer of a round alike, and redrawing rounds keeps that.
- **Canary.**  Before each size of each round, ``canary()`` times a fixed kernel, and ``host()``
  says how much of a core other processes used and how much the hypervisor stole since the last
  call (``/proc/stat``; parsim.profile.host).  A measurement is *disturbed* when its canary ran
  more than ``CANARY_TOLERANCE`` slower than the canary's median over the whole profile (a
  frequency drop, a neighbour on the core), or when foreign processes or steal took more than
  ``FOREIGN_LIMIT`` of a core; it is left out of the medians and named.  A profile where more
  than half the measurements of a size were disturbed is itself disturbed (``Rounds.disturbed``):
  ``parsim profile`` says what it saw, and ``--strict`` refuses it.
- **Stopping.**  After ``min_rounds``, the profile stops when every size's chain (its forward and
  backward keys summed over the units, what a step adds up) has an interval within ``target`` of its value on
  either side ("precise"), when ``budget_s`` of wall time is spent ("budget"), or after
  ``max_rounds`` ("rounds"); ``Rounds.stopped`` says which.

Concurrent profilers (``--nproc``) measure in lock-step and must agree on every round: the
decision to go on goes through ``agree`` (the union over processes: one process still imprecise
keeps all of them measuring).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable

LEVEL = 0.9                 # the entries' and the stopping rule's interval level
CANARY_TOLERANCE = 0.10     # a canary this much slower than its median marks the measurement disturbed
FOREIGN_LIMIT = 0.25        # of one core: other processes' CPU or stolen time beyond it marks it disturbed


@dataclass(frozen=True)
class RoundsPolicy:
    """How long a profile measures (parsim.profile.rounds): ``repeats`` timed repeats per size and
    round after one warm-up, at least ``min_rounds`` and at most ``max_rounds`` rounds, stopping
    once every size's chain is within ``target`` (relative, at 90%) or after ``budget_s``;
    entries whose interval is wider than ``noise_threshold`` either side are flagged noisy.
    The defaults: 5 rounds give the first 90% interval of a median (the range of 5); 2% is
    half the run-to-run spread the quiet 2-core machine showed (results/2026-11-27-amd-epyc)."""
    repeats: int = 3
    min_rounds: int = 5
    max_rounds: int = 15
    target: float = 0.02
    budget_s: float = 300.0
    noise_threshold: float = 0.05

    def argv(self) -> list[str]:
        return ["--repeats", str(self.repeats), "--min-rounds", str(self.min_rounds), "--max-rounds",
                str(self.max_rounds), "--target", str(self.target), "--budget", str(self.budget_s),
                "--noise-threshold", str(self.noise_threshold)]


@dataclass(frozen=True)
class HostSample:
    """What the host did during one measurement: the share of one core other processes used
    (``foreign``) and the hypervisor stole (``steal``), each over the measurement's wall time."""
    foreign: float = 0.0
    steal: float = 0.0


@dataclass(frozen=True)
class Rounds:
    sizes: tuple[int, ...]
    round_s: dict              # key -> [round][size] median of that measurement's repeats
    kept: tuple[tuple[bool, ...], ...]          # [round][size]: not disturbed
    canary_s: tuple[tuple[float, ...], ...]     # [round][size]
    host: tuple[tuple[HostSample, ...], ...]    # [round][size]
    stopped: str               # "precise", "budget" or "rounds"
    target: float

    @property
    def median_s(self) -> dict:
        """key -> per size, the median over the kept rounds."""
        return {k: [statistics.median(kept_values(v, self.kept, j)) for j in range(len(self.sizes))]
                for k, v in self.round_s.items()}

    @property
    def interval_s(self) -> dict:
        """key -> per size, (low, high): the order-statistic interval of the median (module docstring)."""
        return {k: [median_interval(kept_values(v, self.kept, j)) for j in range(len(self.sizes))]
                for k, v in self.round_s.items()}

    @property
    def precision(self) -> list[float]:
        """Per size, the chain's interval half-width over its value (the larger side)."""
        return chain_precision(self.round_s, self.kept, len(self.sizes))

    @property
    def disturbed(self) -> list[str]:
        """One line per size of which more than half the measurements were disturbed."""
        out = []
        for j, b in enumerate(self.sizes):
            bad = [r for r in range(len(self.kept)) if not self.kept[r][j]]
            if 2 * len(bad) > len(self.kept):
                out.append(f"micro-batch size {b}: {len(bad)} of {len(self.kept)} rounds disturbed "
                           f"({describe(self, bad, j)})")
        return out

    @property
    def disturbed_count(self) -> int:
        return sum(not k for row in self.kept for k in row)


def kept_values(per_round: list[list[float]], kept, j: int) -> list[float]:
    """Size j's values of the kept rounds (every round's, where none was kept)."""
    values = [per_round[r][j] for r in range(len(per_round)) if kept[r][j]]
    return values or [per_round[r][j] for r in range(len(per_round))]


def order_statistic_rank(n: int, level: float = LEVEL) -> int:
    """The largest k (1-based) whose [x_(k), x_(n-k+1)] covers the median with probability at least
    ``level``; 1 (the range) where no k does (n < 5 at 90%)."""
    best = 1
    for k in range(1, n // 2 + 1):
        below = sum(math.comb(n, i) for i in range(k)) / 2 ** n      # P(Binomial(n, 1/2) < k)
        if 1 - 2 * below >= level:
            best = k
    return best


def median_interval(values: list[float], level: float = LEVEL) -> tuple[float, float]:
    v = sorted(values)
    k = order_statistic_rank(len(v), level)
    return v[k - 1], v[len(v) - k]


CHAIN_KINDS = ("fwd_s", "bwd_s")       # a key (layer, kind) of these adds to the chain; I and W split B again


def in_chain(key) -> bool:
    return not isinstance(key, tuple) or key[-1] in CHAIN_KINDS


def chain_precision(round_s: dict, kept, n_sizes: int) -> list[float]:
    """Per size, the relative half-width (the larger side) of the chain's interval: the chain of a
    round is the sum of its chain keys (``in_chain``) at that size in that round."""
    out = []
    for j in range(n_sizes):
        rounds = [r for r in range(len(kept)) if kept[r][j]] or list(range(len(kept)))
        chain = [sum(v[r][j] for k, v in round_s.items() if in_chain(k)) for r in rounds]
        mid = statistics.median(chain)
        lo, hi = median_interval(chain)
        out.append(max(mid - lo, hi - mid) / mid if mid > 0 else 0.0)
    return out


def describe(rounds: Rounds, bad: list[int], j: int) -> str:
    """What the canary and the host showed in the disturbed rounds ``bad`` of size j."""
    med = statistics.median(c for row in rounds.canary_s for c in row)
    slow = max(rounds.canary_s[r][j] / med - 1 for r in bad) if med > 0 else 0.0
    foreign = max(rounds.host[r][j].foreign for r in bad)
    steal = max(rounds.host[r][j].steal for r in bad)
    parts = [f"canary up to {slow:+.0%}"]
    if foreign > 0:
        parts.append(f"other processes up to {foreign:.0%} of a core")
    if steal > 0:
        parts.append(f"hypervisor steal up to {steal:.0%}")
    return ", ".join(parts)


def disturbed(canary_s: float, canary_median_s: float, host: HostSample) -> bool:
    return (canary_median_s > 0 and canary_s > canary_median_s * (1 + CANARY_TOLERANCE)) or \
        host.foreign > FOREIGN_LIMIT or host.steal > FOREIGN_LIMIT


def measure_rounds(sizes, measure: Callable[[int], dict], canary: Callable[[], float] = lambda: 0.0,
                   host: Callable[[], HostSample] = HostSample, target: float = 0.02, min_rounds: int = 5,
                   max_rounds: int = 15, budget_s: float = math.inf, clock: Callable[[], float] = lambda: 0.0,
                   agree: Callable[[set], set] = lambda s: s) -> Rounds:
    """Measure every size in rounds (module docstring).  ``clock`` gives wall seconds (the budget);
    ``host()`` is called after each measurement and reports what happened since the previous call."""
    sizes = tuple(sizes)
    start = clock()
    round_s: dict = {}
    canaries: list[list[float]] = []
    hosts: list[list[HostSample]] = []
    stopped = "rounds"
    host()                                       # start the host's counters
    for r in range(max_rounds):
        row_c, row_h = [0.0] * len(sizes), [HostSample()] * len(sizes)
        for j in [(i + r) % len(sizes) for i in range(len(sizes))]:      # rotated: every size first once
            row_c[j] = canary()
            times = measure(sizes[j])
            row_h[j] = host()
            for key, reps in times.items():
                round_s.setdefault(key, [[math.nan] * len(sizes) for _ in range(max_rounds)])[r][j] = \
                    statistics.median(reps)
        canaries.append(row_c)
        hosts.append(row_h)
        if r + 1 < min_rounds:
            continue
        kept = _kept(canaries, hosts)
        values = {k: v[:r + 1] for k, v in round_s.items()}
        precise = max(chain_precision(values, kept, len(sizes))) <= target
        out_of_time = clock() - start >= budget_s
        if not agree(set() if precise or out_of_time else {"go on"}):
            stopped = "precise" if precise else "budget"
            break
    n = len(canaries)
    return Rounds(sizes, {k: [row for row in v[:n]] for k, v in round_s.items()}, _kept(canaries, hosts),
                  tuple(map(tuple, canaries)), tuple(map(tuple, hosts)), stopped, target)


def _kept(canaries: list[list[float]], hosts: list[list[HostSample]]) -> tuple[tuple[bool, ...], ...]:
    med = statistics.median(c for row in canaries for c in row)
    return tuple(tuple(not disturbed(c, med, h) for c, h in zip(rc, rh)) for rc, rh in zip(canaries, hosts))


def falls(rounds: Rounds, totals: Callable[[dict], dict]) -> dict:
    """layer -> [(b1, b2)] of adjacent sizes whose F + B at b2 is below its value at b1 beyond both
    intervals (the upper end at b2 under the lower end at b1): a fall the rounds confirm.
    ``totals(values_by_key)`` maps one round's {key: value} at one size to {layer: F + B}."""
    per = []                                     # [size] -> {layer: [F + B per kept round]}
    for j in range(len(rounds.sizes)):
        keep = [r for r in range(len(rounds.kept)) if rounds.kept[r][j]] or list(range(len(rounds.kept)))
        rows: dict = {}
        for r in keep:
            for layer, t in totals({k: v[r][j] for k, v in rounds.round_s.items()}).items():
                rows.setdefault(layer, []).append(t)
        per.append(rows)
    out: dict = {}
    for j in range(len(rounds.sizes) - 1):
        for layer, v1 in per[j].items():
            v2 = per[j + 1].get(layer)
            if v2 and median_interval(v2)[1] < median_interval(v1)[0]:
                out.setdefault(layer, []).append((rounds.sizes[j], rounds.sizes[j + 1]))
    return out
