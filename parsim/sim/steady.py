"""A step of many micro-batches from a few: past its warm-up, a pipeline schedule repeats itself,
and every number the engine reports grows by the same amount per micro-batch (or per round of
them), so the step of m micro-batches costs O(1) in m.

The engine's step is a max-plus linear system in the micro-batches (every time it computes is a
sum of prices and a max of such sums), which after a transient is periodic: each further round
of ``c`` micro-batches adds the same amount to each rank's end, busy, exposed and idle time and
the same bytes to its activations' peak (Baccelli, Cohen, Olsder and Quadrat 1992,
"Synchronization and Linearity", Sec. 3.7: the cyclicity theorem).  ``c`` is the schedule's own
round: p micro-batches for the interleaved schedules (they run in rounds of p), else 1.

``run`` prices the step at four micro-batch counts m0, m0 + c, m0 + 2c, m0 + 3c past the warm-up
(m0 at least twice the stages), and where every number of the Timeline grows by the same amount
between each two of them (to a relative 1e-9), extrapolates it to m; else it tries again from
2 m0, and gives up (None: run the whole step) once that is no cheaper.  An extrapolated step
equals the whole run's to that tolerance (tests/test_steady.py), and keeps no records: the
timeline of a step that long is not drawn.
"""

from __future__ import annotations

from typing import Callable

from parsim.schedule import Schedule
from parsim.sim import engine

# Grows "by the same amount": each difference within this share of the numbers' size.
TOLERANCE = 1e-9
# The micro-batch counts priced: four (three differences, two of them checked against the last).
POINTS = 4
# parsim.sim.simulate extrapolates a step of at least this many compute actions of each kind
# (stages x micro-batches) and runs a shorter one whole: up to it a run costs well under a second
# (benchmarks/bench_simulator.py: 64 stages x 1,024 micro-batches), and every example the outputs
# are checked on (benchmarks/check_outputs_identical.py) stays below it, so their numbers stay
# bit for bit the engine's.
FROM_ACTIONS = 2**16


def round_of(name: str, pp: int, v: int) -> int:
    """Micro-batches per round of the schedule ``name``, twice its period: the looped schedules of
    more than one chunk (interleaved 1F1B, ZB-H1 with v > 1) run in rounds of p micro-batches
    (parsim.schedule.generators), the others in rounds of 1; and the steady state may repeat
    every other round (cyclicity 2: 64 1F1B stages of bench_simulator.py grow by 0.20514 and
    0.20521 s in turn), which two rounds at a time absorb.  A longer cycle shows as no steady
    growth, and the whole step is run."""
    return 2 * (pp if (name == "interleaved" or (name == "zbh1" and v > 1)) else 1)


def start_of(stages: int, step: int) -> int:
    """The first micro-batch count to price: a whole number of rounds, at least twice the stages
    (the warm-up of every generator is at most (v - 1) x p + 2 (p - 1) forwards)."""
    return -(-2 * stages // step) * step


def run(lowered_at: Callable[[int], Schedule], costs: engine.Costs, m: int, stages: int, step: int,
        prices=None) -> engine.Timeline | None:
    """The Timeline of ``m`` micro-batches (no records) from shorter steps (module docstring);
    ``lowered_at(k)``: the lowered schedule of k micro-batches; None where m is too few for it to
    pay, or no steady growth showed."""
    m0 = start_of(stages, step)
    while m0 + POINTS * step < m // 2 and (m - m0) % step == 0:
        runs = [engine.run(lowered_at(m0 + k * step), costs, keep_records=False, prices=prices)
                for k in range(POINTS)]
        grown = _extrapolated(runs, (m - m0) // step - (POINTS - 1))
        if grown is not None:
            return grown
        m0 *= 2
    return None


def _numbers(tl: engine.Timeline) -> list[float]:
    """Every number of a Timeline without records, in one list (the shape: _rebuilt)."""
    out = []
    for per_rank in (tl.end_s, tl.busy_s, tl.exposed_comm_s, tl.peak_activation_bytes, tl.max_inflight, tl.input_s,
                     tl.idle_s, tl.last_compute_end_s, tl.a2a_hidden_s):
        out += per_rank
    for waits in tl.collective_waits:
        for a, b in waits:
            out += [a, b]
    return out


def _rebuilt(tl: engine.Timeline, numbers: list[float]) -> engine.Timeline:
    R = len(tl.end_s)
    cut = [numbers[k * R:(k + 1) * R] for k in range(9)]
    rest = iter(numbers[9 * R:])
    waits = [[(next(rest), next(rest)) for _ in w] for w in tl.collective_waits]
    return engine.Timeline([], cut[0], cut[1], cut[2], cut[3], [int(round(x)) for x in cut[4]], tl.frees_activations,
                           cut[5], [], cut[6], cut[7], waits, {}, cut[8])


def _extrapolated(runs: list[engine.Timeline], rounds: int) -> engine.Timeline | None:
    """The last of ``runs`` grown by ``rounds`` more rounds, where each of its numbers grew by
    the same amount between every two runs; None where one did not."""
    if len({tuple(map(len, tl.collective_waits)) for tl in runs}) > 1:
        return None
    rows = [_numbers(tl) for tl in runs]
    grown = []
    for values in zip(*rows):
        steps = [b - a for a, b in zip(values, values[1:])]
        scale = max(abs(values[-1]), abs(steps[-1]), 1e-300)
        if any(abs(d - steps[-1]) > TOLERANCE * scale for d in steps):
            return None
        grown.append(values[-1] + rounds * steps[-1])
    return _rebuilt(runs[-1], grown)
