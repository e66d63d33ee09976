"""Error bars of parsim validate (parsim.report.errorbars): the seeded two-stage bootstrap checked
against closed forms on synthetic measurements, and the interleaved run order."""

import math

import numpy as np
import pytest

from parsim.report.errorbars import distinguishable, interval, mape_interval, paired_ratio, plan_errors, replicates
from parsim.report.validation import Row, summary
from parsim.validation import run_order


def _row(label, pred, steps, predicted_runs=(), analytical=math.nan):
    meas = float(np.median([np.median(s) for s in steps]))
    return Row(label, 1, 1, 1, "1f1b", "", pred, meas, 1.0, 1.0, 0.5, 0.3, 0.2, 0.5, analytical_step_s=analytical,
               measured_steps_s=tuple(tuple(s) for s in steps), predicted_runs_s=tuple(predicted_runs))


def test_constant_steps_have_a_zero_width_interval():
    meas, _ = replicates([[2.0] * 9, [2.0] * 5])
    assert interval(meas) == (2.0, 2.0)
    bars = plan_errors([_row("a", 2.2, [[2.0] * 9])])
    assert bars["plans"]["a"]["step_error_ci"] == pytest.approx((0.1, 0.1))
    assert bars["plans"]["a"]["distinguishable"] and bars["mape_step_time_ci"] == pytest.approx((0.1, 0.1))


def test_three_constant_runs_give_the_exact_bootstrap_distribution_of_their_median():
    """Runs of 1, 2 and 3 s: the median of 3 draws is 1 with probability 7/27 (at least two draws
    of 1: 3 (1/3)^2 (2/3) + (1/3)^3), 3 likewise, 2 with 13/27, so the 95% interval is [1, 3]."""
    meas, _ = replicates([[1.0] * 4, [2.0] * 4, [3.0] * 4], n_boot=20000)
    assert interval(meas) == (1.0, 3.0)
    assert np.mean(meas == 1.0) == pytest.approx(7 / 27, abs=0.01)
    assert np.mean(meas == 2.0) == pytest.approx(13 / 27, abs=0.01)


def test_one_run_median_interval_is_the_binomial_order_statistic_interval():
    """One run of n = 401 distinct steps 1..401: the bootstrap median lies between the order
    statistics n/2 -+ 1.96 sqrt(n)/2 (the median's binomial confidence interval; Conover 1999,
    Sec. 3.2), i.e. about 201 -+ 19.6."""
    steps = np.arange(1.0, 402.0)
    meas, _ = replicates([steps], n_boot=4000)
    lo, hi = interval(meas)
    half = 1.96 * math.sqrt(401) / 2
    assert lo == pytest.approx(201 - half, abs=4) and hi == pytest.approx(201 + half, abs=4)
    # the same seed gives the same interval
    assert interval(replicates([steps], n_boot=4000)[0]) == (lo, hi)


def test_predictions_are_drawn_with_their_runs():
    """Each pass's prediction tracks its run exactly (drift the profile saw): the error is 0 in
    every replicate, so no interval, though the runs themselves differ by 2x."""
    row = _row("a", 1.5, [[1.0] * 5, [2.0] * 5], predicted_runs=(1.0, 2.0))
    ci = plan_errors([row])["plans"]["a"]["step_error_ci"]
    assert ci == pytest.approx((0.0, 0.0)) and not distinguishable(ci)


def test_a_small_error_inside_the_noise_is_not_distinguishable_and_a_large_one_is():
    rng = np.random.default_rng(1)
    steps = [list(1.0 + 0.2 * rng.standard_normal(15)) for _ in range(3)]     # 20% step-to-step noise
    s = summary([_row("near", 1.01, steps, analytical=1.5), _row("far", 1.6, steps)])
    near, far = s["plans"]
    assert near["label"] == "near" and not near["distinguishable"]
    assert far["distinguishable"] and far["step_error_ci"][0] > 0.3
    assert near["analytical_distinguishable"]
    lo, hi = s["mape_step_time_ci"]
    assert lo < s["mape_step_time"] < hi


def test_the_mape_interval_is_the_least_and_greatest_mean_abs_error_the_plans_bonferroni_intervals_allow():
    """Two plans, so each plan's interval is at 97.5%: one whose replicates spread evenly over [-0.1, +0.1]
    (its interval [-0.0975, +0.0975], holding 0) and one at -0.2 in every replicate.  The least mean |error|
    is (0 + 0.2) / 2, the greatest (0.0975 + 0.2) / 2; one plan alone gets its own 95% interval's ends."""
    spread, fixed = np.linspace(-0.1, 0.1, 4001), np.full(4001, -0.2)
    assert mape_interval([spread, fixed]) == pytest.approx((0.1, 0.14875))
    assert mape_interval([spread]) == pytest.approx((0.0, 0.095))
    assert mape_interval([fixed]) == pytest.approx((0.2, 0.2))
    assert all(math.isnan(x) for x in mape_interval([]))


def test_a_set_priced_exactly_inside_noisy_runs_has_its_mape_inside_its_interval():
    """Four plans, each predicted at exactly its measured median, with 20% step-to-step noise: the MAPE is 0,
    and the interval holds it (its lower end 0).  The percentile interval of the replicates' mean |error|, as
    parsim drew it before, lies wholly above it: noise alone makes every replicate's |error| positive."""
    rng = np.random.default_rng(3)
    rows = []
    for label in "abcd":
        steps = [list(1.0 + 0.2 * rng.standard_normal(12)) for _ in range(3)]
        rows.append(_row(label, float(np.median([np.median(s) for s in steps])), steps))
    s = summary(rows)
    lo, hi = s["mape_step_time_ci"]
    assert s["mape_step_time"] == pytest.approx(0.0, abs=1e-12) and lo == 0.0 < hi
    rng = np.random.default_rng(0)
    replicate_abs = np.mean([np.abs(r.predicted_step_s / replicates(r.measured_steps_s, rng=rng)[0] - 1)
                             for r in rows], axis=0)
    assert interval(replicate_abs)[0] > s["mape_step_time"]


def test_rows_without_steps_get_no_interval():
    row = Row("old", 1, 1, 1, "1f1b", "", 1.0, 1.1, 1.0, 1.0, 0.5, 0.3, 0.2, 0.5)
    bars = plan_errors([row])
    assert bars["plans"] == {} and all(math.isnan(x) for x in bars["mape_step_time_ci"])


def test_runs_alternate_between_plans_and_each_pass_starts_one_later():
    order = run_order(["A", "B", "C"], 3)
    assert order == [(0, "A"), (0, "B"), (0, "C"), (1, "B"), (1, "C"), (1, "A"), (2, "C"), (2, "A"), (2, "B")]
    # every pass runs every plan once; over len(plans) passes each plan takes every position once
    for k in range(3):
        assert sorted(lab for p, lab in order if p == k) == ["A", "B", "C"]
    positions = {lab: sorted(i % 3 for i, (_, l) in enumerate(order) if l == lab) for lab in "ABC"}
    assert all(p == [0, 1, 2] for p in positions.values())
    assert run_order(["A", "B"], 1) == [(0, "A"), (0, "B")]


def test_paired_ratio_is_the_geometric_mean_of_the_pairs_with_a_bootstrap_over_them():
    """Pairs whose ratios are all 1.1 give 1.1 and a zero-width interval, however the runs drift;
    two pairs of ratios 1 and 4 give 2 (the geometric mean), and their replicates' means are 1, 2
    or 4 with probabilities 1/4, 1/2, 1/4, so the 95% interval is [1, 4]."""
    drift = [1.0, 1.5, 0.7, 2.0]
    ratio, ci = paired_ratio([1.1 * d for d in drift], drift)
    assert ratio == pytest.approx(1.1) and ci == pytest.approx((1.1, 1.1))
    ratio, ci = paired_ratio([1.0, 8.0], [1.0, 2.0], n_boot=20000)
    assert ratio == pytest.approx(2.0) and ci == pytest.approx((1.0, 4.0))
    with pytest.raises(ValueError):
        paired_ratio([1.0, 2.0], [1.0])
