"""Fewer recomputed layers for the planner's full-recomputation picks (``parsim plan
--partial-recompute``; Constraints.partial_recompute).

A ranked candidate that recomputes every layer is simulated again with full recomputation of the
first N layers of each stage only (ParallelConfig.recompute_layers, Megatron-Core's
--recompute-method block --recompute-num-layers N), N the fewest that fit the cap, and takes its
place where it is faster.  One count for every stage, as Megatron takes it.

Why it is found this way: the peak memory does not rise and the step time does not fall as N
grows, layer by layer between none and full (tests/test_partial_recompute.py), so the fewest N
that fits is found by bisection (about log2 of the layers a stage holds simulations a
candidate) and is the fastest that fits.  It refines the ranked candidates only: the branch and
bound prices recomputation as all or nothing, so a layout that only a partial recomputation would
make the best one, and that the search ranked below its top k, is not found.  Off by default:
torchtitan and DeepSpeed run no such setting (parsim.export refuses it), and a pick should run
where parsim exports it.
"""

from __future__ import annotations

from dataclasses import replace

from parsim.fmt import human_time
from parsim.model.recompute import Recompute
from parsim.plan import recomputable, recompute_layers_text
from parsim.search.bound import Candidate, refine_ranked


def layers_per_stage(cfg, n_layers: int) -> int:
    """The most layers any stage of cfg could recompute (ParallelConfig.recomputed_layers' count):
    its layers other than the model's first and last."""
    return max(len(recomputable(range(a, b), n_layers)) for a, b in zip(cfg.bounds, cfg.bounds[1:]))


def fewer_recomputed(cand: Candidate, n_layers: int, cap_bytes: float, simulated, balanced=None) -> Candidate:
    """``cand`` with the fewest recomputed layers a stage that fit ``cap_bytes``, where that is
    faster; ``cand`` itself where it does not recompute fully, or nothing fewer fits.
    ``simulated(cfg) -> Candidate`` prices a configuration as the search does; ``balanced(cfg) ->
    bounds``, where given, the split balanced for cfg's partial recomputation (parsim.search.
    resolve.balanced_split, as ``parsim simulate --recompute-layers`` splits), tried beside the
    candidate's own, which the search balanced for recomputing every layer: the faster of the two
    that fit is kept."""
    cfg = cand.config
    if cfg.recompute is not Recompute.FULL or cfg.recompute_layers:
        return cand
    splits = [cfg.bounds]
    if balanced is not None:
        rebalanced = tuple(balanced(replace(cfg, recompute_layers=(1,))))    # the same for every count
        if rebalanced != tuple(cfg.bounds):
            splits.append(rebalanced)
    best = cand
    for bounds in splits:
        found = _fewest_that_fit(replace(cfg, bounds=bounds), n_layers, cap_bytes, simulated)
        if found is not None and found.estimate.step_time_s < best.estimate.step_time_s:
            best = found
    return cand if best is cand else replace(best, label=cand.label)


def _fewest_that_fit(cfg, n_layers: int, cap_bytes: float, simulated) -> Candidate | None:
    """``cfg`` simulated with the fewest layers a stage recomputed that fit ``cap_bytes``, found
    by bisection; None where even its most do not (the embedding and output layer kept: more than
    full's)."""
    def tried(n: int) -> Candidate:
        return simulated(replace(cfg, recompute_layers=(n,)))

    most = layers_per_stage(cfg, n_layers)
    best = tried(most)
    if best.peak_memory_bytes > cap_bytes:
        return None
    lo, hi = 0, most                          # hi fits; find the fewest that does
    while lo < hi:
        mid = (lo + hi) // 2
        trial = tried(mid)
        if trial.peak_memory_bytes <= cap_bytes:
            best, hi = trial, mid
        else:
            lo = mid + 1
    return best


def fewest_recomputed(ranked: list[Candidate], n_layers: int, cap_bytes: float,
                      simulated, balanced=None) -> tuple[list[Candidate], dict]:
    """``fewer_recomputed`` of each of ``ranked``, ranked again, and each refined one's key -> its
    step recomputing every layer (for ``fewer_lines``)."""
    return refine_ranked(ranked, lambda cand: fewer_recomputed(cand, n_layers, cap_bytes, simulated, balanced))


def fewer_lines(chosen: Candidate, whole: dict) -> tuple[str, ...]:
    """What the report says of the pick's recomputation where ``fewer_recomputed`` changed it
    (``whole``: a refined candidate's key -> its step with every layer recomputed)."""
    if chosen.key() not in whole:
        return ()
    return (f"recomputation: {recompute_layers_text(chosen.config.recompute_layers)}, the fewest that fit "
            f"(Megatron's --recompute-method block): {human_time(chosen.estimate.step_time_s)} a step against "
            f"{human_time(whole[chosen.key()])} recomputing every layer",)
