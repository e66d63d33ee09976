"""How a profile earns its numbers: repeats, re-measurement of noisy rows, and confirmation of
times that fall as the micro-batch grows.  Pure: the timing is a function passed in, so the
policy is tested without a clock.

A *key* is one timed quantity of one layer, e.g. ``("layer3", "fwd_s")``.  ``measure(b)`` runs
one round at micro-batch size b and returns every key's repeat times (warm-up already dropped).

- spread = interquartile range / median over a round's repeats (range / median below 5 repeats).
- A size whose keys that matter (median at least ``MATTERS`` of the round's total; a 20 µs ReLU
  cannot move a step) spread more than ``threshold`` is measured again, up to ``max_remeasure``
  more rounds; each key then takes the round where it spread least.  Keys still above the
  threshold are reported noisy (every key, small ones included).
- A layer whose F+B at the next larger size is lower by more than ``threshold`` (and more than
  its repeats spread at either size: a fall inside the noise confirms nothing) is suspect: both
  sizes are measured once more, the rounds' repeats pooled, and if it still falls the pair is
  ``nonmonotone_confirmed``.  The times are the measurements either way: never smoothed.

Concurrent profilers (``--nproc``) must call ``measure`` the same number of times, since they
measure in lock-step: every decision goes through ``agree`` (the union over processes).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

MATTERS = 0.01          # share of a size's total time below which a key does not trigger re-measuring


def spread(samples: list[float]) -> float:
    """Relative spread of repeat times: with five or more, the interquartile range over the median,
    so that one repeat slowed by a neighbour's burst moves it little (the range over the median
    flagged every row of every profile taken on the 2-core machine on 2026-11-23, quiet or not);
    with fewer, (max - min) / median; 0 for fewer than two."""
    if len(samples) < 2:
        return 0.0
    med = statistics.median(samples)
    if med <= 0:
        return 0.0
    if len(samples) >= 5:
        q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
        return (q3 - q1) / med
    return (max(samples) - min(samples)) / med


@dataclass(frozen=True)
class Measured:
    """Per key, one value per size (the sizes in order), and what re-measuring found."""
    sizes: tuple[int, ...]
    median_s: dict            # key -> [median per size]
    spread: dict              # key -> [relative spread per size]
    noisy: dict               # key -> [sizes still above the threshold]
    remeasured: tuple[int, ...]                     # sizes measured more than once for noise
    nonmonotone_confirmed: dict                     # layer -> [(b1, b2)]


def _choose(rounds: list[dict]) -> dict:
    """Per key, the repeats of the round where it spread least."""
    return {k: min((r[k] for r in rounds), key=spread) for k in rounds[0]}


def _noisy_keys(chosen: dict, threshold: float, only_mattering: bool) -> list:
    total = sum(statistics.median(v) for v in chosen.values())
    return [k for k, v in chosen.items() if spread(v) > threshold
            and (not only_mattering or statistics.median(v) >= MATTERS * total)]


def measure_stably(sizes, measure: Callable[[int], dict], threshold: float = 0.05, max_remeasure: int = 2,
                   agree: Callable[[set], set] = lambda s: s,
                   totals: Callable[[dict], dict] | None = None) -> Measured:
    """Measure every size (module docstring).  ``totals(chosen)`` maps a size's chosen repeats to
    {layer: F+B seconds} for the monotonicity check (default: keys are (layer, kind), summed over
    the kinds fwd_s and bwd_s)."""
    totals = totals or _fwd_plus_bwd
    chosen, remeasured = {}, []
    for b in sizes:
        rounds = [measure(b)]
        while len(rounds) <= max_remeasure and agree({b} if _noisy_keys(_choose(rounds), threshold, True) else set()):
            rounds.append(measure(b))
        if len(rounds) > 1:
            remeasured.append(b)
        chosen[b] = _choose(rounds)
    confirmed: dict = {}
    suspects = _falling(sizes, chosen, totals, threshold)
    again = sorted(agree({b for pairs in suspects.values() for pair in pairs for b in pair}))
    if again:
        for b in again:
            extra = measure(b)
            chosen[b] = {k: v + extra[k] for k, v in chosen[b].items()}
        for layer, pairs in _falling(sizes, chosen, totals, threshold).items():
            still = [p for p in pairs if p in suspects.get(layer, [])]
            if still:
                confirmed[layer] = still
    keys = list(chosen[sizes[0]])
    return Measured(
        sizes=tuple(sizes),
        median_s={k: [statistics.median(chosen[b][k]) for b in sizes] for k in keys},
        spread={k: [spread(chosen[b][k]) for b in sizes] for k in keys},
        noisy={k: [b for b in sizes if k in _noisy_keys(chosen[b], threshold, False)] for k in keys},
        remeasured=tuple(remeasured), nonmonotone_confirmed=confirmed)


def _fwd_plus_bwd(chosen: dict) -> dict:
    out: dict = {}
    for (layer, kind), v in chosen.items():
        if kind in ("fwd_s", "bwd_s"):
            out[layer] = out.get(layer, 0.0) + statistics.median(v)
    return out


def _falling(sizes, chosen: dict, totals, threshold: float) -> dict:
    """layer -> [(b1, b2)] of adjacent sizes whose F+B drops by more than ``threshold`` and more
    than the layer's own spread at either size (a fall inside the noise confirms nothing)."""
    per_size = {b: totals(chosen[b]) for b in sizes}
    noise = {b: {} for b in sizes}
    for b in sizes:
        for key, v in chosen[b].items():
            layer = key[0] if isinstance(key, tuple) else key
            noise[b][layer] = max(noise[b].get(layer, 0.0), spread(v))
    out: dict = {}
    for b1, b2 in zip(sizes, sizes[1:]):
        for layer, t1 in per_size[b1].items():
            margin = max(threshold, noise[b1].get(layer, 0.0), noise[b2].get(layer, 0.0))
            if per_size[b2].get(layer, t1) < t1 * (1 - margin):
                out.setdefault(layer, []).append((b1, b2))
    return out
