"""A pick that survives the profile's noise: the planner's best few plans priced again with every
replicate of the layer profile (parsim.cost.profile_rounds), ranked by expected throughput, each
with the probability that it is the fastest, and the pick's near-equals named.

For the top ``TOP`` candidates of the search (ranked by their point estimates) and R replicate
profiles, t[r, c] is candidate c's step time priced with replicate r.  Then:

- expected throughput: the mean over replicates of global batch / t[r, c]; the ranking's order;
- P(best): the share of replicates in which c has the shortest step;
- near-equal: a candidate the profile cannot tell apart from the one of highest expected
  throughput: faster than it in at least ``(1 - level) / 2`` of the replicates;
- the pick, among that one and its near-equals: the simplest to run (fewest devices, then the
  fewest parallel dimensions, no ZeRO or recomputation, the fewest micro-batches, the plainest
  schedule), then the one whose prediction is most certain (the narrowest relative interval of
  its replicates' step times).  Choosing among equals by simplicity is what an operator does
  with two plans a measurement cannot separate: the simpler one has fewer ways to go wrong.

The replicates carry the profile's noise only, not the model's own misses (the development
residuals of parsim.sim.interval), which shift near-equal plans alike more often than not; the
probabilities are the profile's, and the explanation says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

TOP = 8
SCHEDULE_RANK = {"gpipe": 0, "1f1b": 0, "interleaved": 1, "zbh1": 2, "zbv": 2}


@dataclass(frozen=True)
class NoisyRanking:
    ranked: tuple              # the top candidates, the pick first, then by expected throughput
    p_best: dict               # candidate key -> probability it is fastest
    expected_step_s: dict      # candidate key -> mean step over the replicates
    width: dict                # candidate key -> (high - low) / median of its replicates' 90% interval
    near: tuple                # keys that cannot be told apart from the best by expected throughput
    best_expected: object      # that candidate's key
    replicates: int
    level: float

    def lines(self, short) -> list[str]:
        """The explanation's lines; ``short(config)`` names a plan."""
        pick = self.ranked[0]
        k = pick.key()
        line = (f"under the profile's noise ({self.replicates} replicates of its rounds): the pick is the fastest in "
                f"{self.p_best[k]:.0%} of them, its step {self.expected_step_s[k] * 1e3:.3g} ms expected "
                f"(90% of replicates within {self.width[k]:.1%})")
        others = [c for c in self.ranked[1:] if c.key() in self.near or c.key() == self.best_expected]
        if not others:
            return [line + "; no other plan is near it"]
        lines = [line + "; " + ", ".join(
            f"{short(c.config)} ({self.p_best[c.key()]:.0%} fastest, {self.expected_step_s[c.key()] * 1e3:.3g} ms)"
            for c in others) + " cannot be told apart from it"]
        if k != self.best_expected:
            best = next(c for c in self.ranked if c.key() == self.best_expected)
            lines.append(f"chosen over {short(best.config)}, whose expected throughput is higher by "
                         f"{self.expected_step_s[k] / self.expected_step_s[self.best_expected] - 1:.1%}, because "
                         "the profile cannot tell them apart and it is simpler to run "
                         "(fewer devices, parallel dimensions, micro-batches, or a plainer schedule)"
                         + (" with the more certain prediction" if self.width[k] <= self.width[self.best_expected]
                            else ""))
        return lines


def simplicity(cfg) -> tuple:
    """Smaller is simpler to run (module docstring)."""
    dims = sum(x > 1 for x in (cfg.dp, cfg.pp, cfg.tp, cfg.cp, cfg.ep))
    return (cfg.world_size, dims, cfg.zero > 0, cfg.recompute.value != "none", cfg.microbatches,
            SCHEDULE_RANK.get(cfg.schedule, 3), cfg.chunks)


def rank_under_noise(candidates, price, replicates, batch: int, level: float = 0.9,
                     top: int = TOP) -> tuple[NoisyRanking, dict]:
    """``price(config, compute_model)``: a candidate's step time under one replicate's model.
    Returns the ranking and each top candidate's replicate step times by key."""
    shown = list(candidates[:top])
    t = np.array([[price(c.config, m) for c in shown] for m in replicates])         # [replicate, candidate]
    keys = [c.key() for c in shown]
    expected_tput = (batch / t).mean(axis=0)
    order = list(np.argsort(-expected_tput, kind="stable"))
    best = order[0]
    tail = (1 - level) / 2
    near = {keys[i] for i in order[1:] if (t[:, i] < t[:, best]).mean() >= tail}
    fastest = np.argmin(t, axis=1)
    p_best = {keys[i]: float((fastest == i).mean()) for i in range(len(shown))}
    lo, med, hi = np.quantile(t, [tail, 0.5, 1 - tail], axis=0)
    width = {keys[i]: float((hi[i] - lo[i]) / med[i]) for i in range(len(shown))}
    group = [best] + [i for i in order[1:] if keys[i] in near]
    pick = min(group, key=lambda i: (simplicity(shown[i].config), width[keys[i]]))
    ranked = [shown[pick]] + [shown[i] for i in order if i != pick]
    return (NoisyRanking(tuple(ranked), p_best, {keys[i]: float(t[:, i].mean()) for i in range(len(shown))}, width,
                         tuple(near), keys[best], len(replicates), level),
            {keys[i]: t[:, i] for i in range(len(shown))})


def reranker(spec, cluster, compute, tp_compute=None, ep_compute=None, level: float = 0.9):
    """For plan(rerank=...): a function of the ranked candidates returning (the candidates, the pick
    first, each of the top ones with its step interval; the explanation's lines), or None where
    ``compute`` has no profile rounds to redraw."""
    from parsim.search.explain import short
    from parsim.sim import simulate
    from parsim.sim.interval import replicate_models, residual_kind, residuals_for, step_interval

    replicates = replicate_models(compute)
    if not replicates:
        return None
    own = dict(tp_compute or {})

    def price(cfg, model):
        fixed = own.get((cfg.tp, cfg.tp_layout)) or (ep_compute or {}).get(cfg.ep)
        return simulate(spec.graph, spec.training, cluster, cfg, fixed or model, strategies=spec.shard,
                        keep_timeline=False).step_time_s

    kind = residual_kind(spec.graph)
    residuals = residuals_for(cluster.profile.name, kind)

    def rerank(ranked):
        ranking, times = rank_under_noise(ranked, price, replicates, spec.training.global_batch_size, level)
        top = []
        for c in ranking.ranked:
            band = step_interval(c.estimate.step_time_s, times[c.key()], compute.table, residuals, kind, level)
            top.append(replace(c, p_best=ranking.p_best[c.key()], estimate=replace(c.estimate, step_time_band=band)))
        shown = {c.key() for c in top}
        lines = (f"the first {len(top)} rows are ranked by expected throughput over the profile's replicates, the "
                 "rest by their step",) + tuple(ranking.lines(short))
        return tuple(top) + tuple(c for c in ranked if c.key() not in shown), lines
    return rerank
