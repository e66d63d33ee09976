"""A layer profile's rounds (parsim.profile.rounds), read back, and redrawn: the replicates that
give a profiled prediction its interval.

A profile taken in rounds keeps, per layer and timed quantity, one value per round and size, and
which (round, size) measurements the canary kept.  A *replicate* of the profile redraws the
rounds with replacement, the same draw for every layer (a burst slows every layer of a round
alike), and takes each entry's median over its drawn kept rounds: the profile a repeat of the
same measurement could have given (Efron & Tibshirani 1993, "An Introduction to the Bootstrap",
Ch. 6; whole rounds as the resampled unit, as blocks of dependent values).  Pricing a plan with
each replicate gives the spread of its predicted step that the profile's own noise makes.

Each size redraws among its kept rounds only (the canary's verdict is part of the measurement).
A replicate also draws the optimizer's per-parameter time from its timed repeats.  Profiles
without rounds (taken before 2026-11-28) have no replicates: their predictions carry no profile
interval, and say so.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

import numpy as np

from parsim.errors import InputError

TIME_KINDS = ("fwd_s", "bwd_s", "bwd_input_s", "bwd_weight_s")
N_REPLICATES = 200        # replicates per prediction; the 5th-95th percentiles move by < 1% between seeds
SEED = 0


@dataclass(frozen=True)
class ProfileRounds:
    """``round_s[layer][kind]``: [round][size] values; ``kept``: [round][size]."""
    round_s: dict
    kept: tuple[tuple[bool, ...], ...]
    optimizer_s_per_param: tuple[float, ...] = ()     # the optimizer's timed repeats, per parameter
    stopped: str = ""
    precision: tuple[float, ...] = ()                  # per size, the chain's relative interval half-width
    canary_s: tuple[float, ...] = ()                   # every canary reading, rounds x sizes (the host's noise)
    processes: int = 1                                 # profilers run at once (concurrent_processes), as a run's ranks

    @property
    def count(self) -> int:
        return len(self.kept)

    @property
    def canary_round_s(self) -> tuple[float, ...]:
        """Each round's canary level: the median of that round's positive readings (one per size); a
        round without any is left out."""
        n = len(self.kept[0]) if self.kept else 0
        rows = [[c for c in self.canary_s[i:i + n] if c > 0] for i in range(0, len(self.canary_s), n)] if n else []
        return tuple(float(statistics.median(row)) for row in rows if row)


def read_layer_rounds(f, kinds_present: tuple[str, ...], n_sizes: int) -> dict | None:
    """A layer row's ``round_s`` ({kind: [round][size]}), checked, or None where absent."""
    if not f.has("round_s"):
        return None
    sub = f.sub("round_s")
    out = {}
    for kind in kinds_present:
        v = sub.get(kind, list)
        if not v or any(not isinstance(row, list) or len(row) != n_sizes or
                        any(not isinstance(x, (int, float)) or x < 0 for x in row) for row in v):
            raise f.fail("round_s", f"{kind}: expected one list of {n_sizes} non-negative times per round; "
                                    "profile the model again")
        out[kind] = tuple(tuple(float(x) for x in row) for row in v)
    sub.done()
    return out


def read_rounds(r, per_layer: dict, n_sizes: int, path: str, processes: int = 1) -> ProfileRounds | None:
    """The top-level ``rounds`` block with every layer's ``round_s``, or None where the profile has
    none.  Every layer must have as many rounds as ``rounds.kept``; ``processes``: the profile's
    concurrent_processes."""
    if not r.has("rounds"):
        if any(v is not None for v in per_layer.values()):
            raise r.fail("rounds", "layers have round_s but the profile has no rounds block; profile the model again")
        return None
    f = r.sub("rounds")
    kept = f.get("kept", list)
    if not kept or any(not isinstance(row, list) or len(row) != n_sizes or any(not isinstance(x, bool) for x in row)
                       for row in kept):
        raise f.fail("kept", f"expected one list of {n_sizes} booleans per round")
    n = len(kept)
    canary = f.get("canary_s", list, [])
    if any(not isinstance(row, list) or any(not isinstance(x, (int, float)) or x < 0 for x in row) for row in canary):
        raise f.fail("canary_s", "expected one list of non-negative canary times (seconds) per round; "
                                 "profile the model again")
    for key in ("foreign", "steal"):
        f.get(key, list, None)                  # for the reader
    for key in ("count", ):
        f.get(key, int, None)
    f.get("target", float, None)
    f.get("disturbed", list, None)
    precision = f.get("precision", list, [])
    stopped = f.get("stopped", str, "")
    opt = f.get("optimizer_s_per_param", list, [])
    f.done()
    for name, rows in per_layer.items():
        if rows is None or any(len(v) != n for v in rows.values()):
            raise InputError(f"{path}: layers: {name!r}: round_s must hold the {n} rounds of rounds.kept; "
                             "profile the model again")
    return ProfileRounds(per_layer, tuple(tuple(row) for row in kept), tuple(float(x) for x in opt), stopped,
                         tuple(float(x) for x in precision), tuple(float(x) for row in canary for x in row), processes)


def _kept_rounds(kept, j: int) -> list[int]:
    """Size j's kept rounds (every round, where none was kept)."""
    return [r for r in range(len(kept)) if kept[r][j]] or list(range(len(kept)))


def replicate_tables(table, n: int = N_REPLICATES, seed: int = SEED) -> list:
    """``n`` replicates of a ProfileTable (module docstring); [] where it has no rounds."""
    rounds = table.rounds
    if rounds is None or rounds.count < 2:
        return []
    rng = np.random.default_rng(seed)
    kept = [_kept_rounds(rounds.kept, j) for j in range(len(table.microbatch_sizes))]
    out = []
    for _ in range(n):
        u = rng.random(max(map(len, kept)))            # one draw for every layer and size: a round is a block
        draws = [[rows[int(x * len(rows))] for x in u[:len(rows)]] for rows in kept]
        layers = []
        for name, times in table.layers:
            rows = rounds.round_s[name]
            new = {kind: tuple(statistics.median(rows[kind][r][j] for r in draw) for j, draw in enumerate(draws))
                   for kind in TIME_KINDS if kind in rows}
            layers.append((name, replace(times, **new)))
        opt = table.optimizer_s_per_param
        if rounds.optimizer_s_per_param:
            picks = rng.integers(0, len(rounds.optimizer_s_per_param), size=len(rounds.optimizer_s_per_param))
            opt = statistics.median(rounds.optimizer_s_per_param[i] for i in picks)
        out.append(replace(table, layers=tuple(layers), optimizer_s_per_param=opt, rounds=None))
    return out
