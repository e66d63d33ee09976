"""Every profiled prediction carries its interval (parsim.sim.interval): a profile's rounds
redrawn (parsim.cost.profile_rounds), composed with the development residuals and the host's noise
as the profile's canary saw it; the planner's
ranking under the profile's noise (parsim.search.noise); validate's coverage.  No timing: the
profiles are written by hand."""

import json
import math

import numpy as np
import pytest

from parsim.cli import main
from parsim.cost.compute import load_profile_table
from parsim.cost.profile_rounds import replicate_tables
from parsim.plan import ParallelConfig
from parsim.report.validation import Row, summary
from parsim.search.noise import rank_under_noise, simplicity
from parsim.sim.interval import (Interval, compose, host_log_errors, load_residuals, quantiles, residuals_for,
                                  step_interval)

MODEL = "tests/data/two_layers.yaml"


def rounds_profile(path, fwd_rounds, kept=None, sizes=(1, 2, 4), canary=None, device="cpu: x86_64", processes=1):
    """A two-layer profile taken in rounds: layer a's forward per round is ``fwd_rounds`` (one list
    per round, one time per size), its backward twice that; layer b steady at a tenth; ``canary``:
    the canary's readings per round and size (none by default); ``processes``: its concurrent_processes."""
    n = len(fwd_rounds)
    kept = kept or [[True] * len(sizes)] * n

    def layer(name, scale):
        rows = [[scale * t for t in r] for r in fwd_rounds]
        med = [float(np.median([r[j] for r, k in zip(rows, kept) if k[j]])) for j in range(len(sizes))]
        return {"name": name, "fwd_s": med, "bwd_s": [2 * t for t in med],
                "round_s": {"fwd_s": rows, "bwd_s": [[2 * t for t in r] for r in rows]}}
    data = {"schema_version": 1, "kind": "layer-profile", "microbatch_sizes": list(sizes), "device": device,
            "layers": [layer("a", 1.0), layer("b", 0.1)], "optimizer_s_per_param": 1e-9,
            "concurrent_processes": processes,
            "rounds": {"count": n, "kept": kept, "stopped": "rounds", "target": 0.02, "precision": [0.0] * len(sizes),
                       "optimizer_s_per_param": [1e-9, 1.2e-9, 0.8e-9],
                       **({"canary_s": canary} if canary is not None else {})}}
    path.write_text(json.dumps(data))
    return str(path)


def test_interval_round_trips_and_says_where_it_is():
    iv = Interval(1.0, 0.9, 1.2, 0.9, "somewhere")
    assert Interval.from_json(iv.to_json()) == iv and Interval.from_json(None) is None
    assert iv.contains(1.0) and not iv.contains(1.3)
    assert iv.relative() == (pytest.approx(-0.1), pytest.approx(0.2))


def test_composing_a_point_with_residuals_gives_their_quantiles():
    errors = np.log(np.linspace(0.8, 1.2, 401))          # measured / predicted spread evenly over +-20%
    lo, hi = compose([1.0], errors, level=0.9, n=200_000)
    assert lo == pytest.approx(0.82, abs=0.002) and hi == pytest.approx(1.18, abs=0.002)
    assert compose([2.0, 2.0], [], 0.9) == (2.0, 2.0)      # no residuals: the predictions' own spread
    assert quantiles([1, 2, 3, 4, 5], 0.5) == (2.0, 4.0)


def test_the_hosts_noise_multiplies_in_as_a_third_independent_draw():
    """compose with the host's log noise: none, or all zeros, leaves the pairs' quantiles exactly as they were;
    a host slow half the time by 2x puts the 95th percentile of a steady prediction at 2x."""
    errors = np.log(np.linspace(0.9, 1.1, 201))
    assert compose([1.0, 1.1], errors) == compose([1.0, 1.1], errors, host=()) == \
        compose([1.0, 1.1], errors, host=(0.0,) * 7)
    lo, hi = compose([1.0], [], 0.9, n=100_000, host=(0.0, np.log(2.0)))
    assert lo == 1.0 and hi == pytest.approx(2.0)


def test_host_noise_is_each_rounds_canary_level_in_one_process_and_every_reading_in_several(tmp_path):
    """host_log_errors of a one-process CPU profile: log(level / median level) of each round's canary level (the
    median of its readings, one per size, a zero left out); of a profile of two processes (the slower one's reading
    of each measurement), log(reading / median reading) of every positive reading; none from a profile without
    readings, with one round of them, or taken on an accelerator (its canary times the host's CPU, not the
    device)."""
    fwd = [[1e-3, 2e-3, 4e-3]] * 3
    canary = [[1e-3, 1e-3, 0.5e-3], [2e-3, 2e-3, 1e-3], [1e-3, 4e-3, 4e-3]]
    table = load_profile_table(rounds_profile(tmp_path / "c.json", fwd, canary=canary))
    assert table.rounds.canary_s == (1e-3, 1e-3, 0.5e-3, 2e-3, 2e-3, 1e-3, 1e-3, 4e-3, 4e-3)
    assert table.rounds.canary_round_s == pytest.approx((1e-3, 2e-3, 4e-3))
    assert table.rounds.processes == 1
    assert host_log_errors(table) == pytest.approx((np.log(0.5), 0.0, np.log(2)))
    two = load_profile_table(rounds_profile(tmp_path / "two.json", fwd, canary=canary, processes=2))
    assert two.rounds.processes == 2        # the median of the nine readings is 1e-3
    assert host_log_errors(two) == pytest.approx(tuple(np.log([1, 1, 0.5, 2, 2, 1, 1, 4, 4])))
    two_gaps = load_profile_table(rounds_profile(tmp_path / "tz.json", fwd, canary=[[1e-3, 0, 4e-3]] + [[0] * 3] * 2,
                                                 processes=2))
    assert host_log_errors(two_gaps) == pytest.approx((np.log(0.4), np.log(1.6)))     # their median 2.5e-3
    gaps = load_profile_table(rounds_profile(tmp_path / "z.json", fwd, canary=[[1e-3, 0, 3e-3], [0] * 3, [2e-3] * 3]))
    assert gaps.rounds.canary_round_s == pytest.approx((2e-3, 2e-3))
    assert host_log_errors(load_profile_table(rounds_profile(tmp_path / "n.json", fwd))) == ()
    assert host_log_errors(load_profile_table(rounds_profile(tmp_path / "g.json", fwd, canary=canary,
                                                             device="cuda: NVIDIA H200"))) == ()
    assert host_log_errors(load_profile_table(rounds_profile(tmp_path / "o.json", fwd,
                                                             canary=[[1e-3, 2e-3, 0], [0, 0, 0], [0, 0, 0]]))) == ()
    bad = json.loads((tmp_path / "c.json").read_text())
    bad["rounds"]["canary_s"] = [[1e-3, "slow", 1e-3]]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert main(["simulate", MODEL, "--cluster", "local-cpu", "--profile", str(tmp_path / "bad.json")]) == 2


def test_a_noisy_hosts_profile_widens_the_interval_and_says_so(tmp_path, monkeypatch):
    """step_interval on a steady prediction: a quiet canary leaves the band as the rounds and residuals give
    it; a canary at 1.5x its median in 3 of 10 rounds reaches 1.5x above the prediction, says how noisy the host
    was, and with no residuals anywhere says that the profile's and the host's noise are all it has.  A canary
    slow in one reading of every round is a burst within a round, not the host's level: in one process it leaves
    the band; in a profile of two, whose ranks wait for each other, it widens it and says so."""
    fwd = [[1e-3, 2e-3, 4e-3]] * 10
    quiet = load_profile_table(rounds_profile(tmp_path / "q.json", fwd, canary=[[1e-3] * 3] * 10))
    noisy = load_profile_table(rounds_profile(tmp_path / "n.json", fwd, canary=[[1e-3] * 3] * 7 + [[1.5e-3] * 3] * 3))
    bursts = load_profile_table(rounds_profile(tmp_path / "b.json", fwd, canary=[[1e-3, 1e-3, 1.5e-3]] * 10))
    reps = [1.0] * 50
    res = load_residuals("local-cpu")
    calm, wide, burst = (step_interval(1.0, reps, t, res, "dense") for t in (quiet, noisy, bursts))
    assert (calm.low, calm.high) == compose(reps, res.step["dense"])
    assert wide.high > calm.high * 1.3 and wide.low == pytest.approx(calm.low, rel=0.02)
    assert "the host's noise over the profile (the canary's level in 10 rounds, p90 +50% of their median)" \
        in wide.source
    assert (burst.low, burst.high) == (calm.low, calm.high)
    ranks = load_profile_table(rounds_profile(tmp_path / "r.json", fwd, canary=[[1e-3, 1e-3, 1.5e-3]] * 10,
                                              processes=2))
    waited = step_interval(1.0, reps, ranks, res, "dense")
    assert waited.high > calm.high * 1.2 and waited.low == pytest.approx(calm.low, rel=0.02)
    assert "(30 canary readings, the slower process's of each, p90 +50% of their median)" in waited.source
    assert "development runs" in wide.source
    monkeypatch.setattr("parsim.sim.interval.residuals_path", lambda name: str(tmp_path / "none" / f"{name}.yaml"))
    assert residuals_for("local-cpu", "dense") is None
    alone = step_interval(1.0, reps, noisy, None, "dense")
    assert (alone.low, alone.high) == (1.0, pytest.approx(1.5))
    assert alone.source.endswith("the profile's and the host's noise only")
    assert step_interval(1.0, reps, quiet, None, "dense").high == 1.0


def test_replicates_redraw_whole_rounds_and_drop_the_disturbed(tmp_path):
    table = load_profile_table(rounds_profile(tmp_path / "r.json", [[1.0, 2.0, 4.0], [1.1, 2.2, 4.4], [9.0, 9.0, 9.0]],
                                              kept=[[True] * 3, [True] * 3, [False] * 3]))
    assert table.rounds.count == 3 and table.layers[0][1].fwd_s == (1.05, 2.1, 4.2)
    reps = replicate_tables(table, n=300, seed=1)
    assert len(reps) == 300 and all(r.rounds is None for r in reps)
    seen = {r.layers[0][1].fwd_s for r in reps}
    # a replicate's value is the median of its drawn kept rounds: never the disturbed round's 9.0
    assert seen <= {(1.0, 2.0, 4.0), (1.1, 2.2, 4.4), (1.05, 2.1, 4.2)} and len(seen) == 3
    for r in reps:            # one draw for every layer: b moves with a
        a, b = r.layers[0][1].fwd_s, r.layers[1][1].fwd_s
        assert b == pytest.approx(tuple(0.1 * x for x in a))
    assert {r.optimizer_s_per_param for r in reps} <= {1e-9, 1.2e-9, 0.8e-9}


def test_a_profile_without_rounds_gives_no_replicates_and_rounds_must_match(tmp_path):
    assert replicate_tables(load_profile_table("tests/data/profile_table.yaml")) == []
    path = rounds_profile(tmp_path / "p.json", [[1.0, 2.0, 4.0]] * 3)
    data = json.loads(open(path).read())
    data["layers"][1]["round_s"]["fwd_s"] = data["layers"][1]["round_s"]["fwd_s"][:2]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    assert main(["simulate", MODEL, "--cluster", "local-cpu", "--profile", str(tmp_path / "bad.json")]) == 2


def test_simulate_prints_the_interval_and_writes_it(tmp_path, capsys):
    path = rounds_profile(tmp_path / "p.json", [[1e-3, 2e-3, 4e-3], [1.2e-3, 2.4e-3, 4.8e-3], [0.9e-3, 1.8e-3, 3.6e-3],
                                                [1e-3, 2e-3, 4e-3], [1.1e-3, 2.2e-3, 4.4e-3]])
    out = tmp_path / "plan.json"
    assert main(["simulate", MODEL, "--cluster", "local-cpu", "--dp", "1", "--pp", "1", "--profile", path,
                 "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "step-time band: 90% band [" in printed and "the profile's 5 rounds redrawn 200 times" in printed
    est = json.loads(out.read_text())["estimate"]
    iv = Interval.from_json(est["step_time_band"])
    assert iv.low < est["step_time_s"] < iv.high and iv.level == 0.9
    res = load_residuals("local-cpu")                 # the committed residuals widen it past the profile's own
    assert "development runs" in iv.source and "borrowed" not in iv.source
    lo, hi = quantiles(np.exp(res.step["dense"]), 0.9)
    assert iv.high / est["step_time_s"] >= hi * 0.95


def test_a_cluster_without_residuals_borrows_the_profiled_models_errors_elsewhere(tmp_path, capsys, monkeypatch):
    """A GPU profile has no residuals of its own: its interval composes the profile's noise with the
    profiled model's errors where it was scored (local-cpu), and says they are borrowed, not the
    noise alone (which covered neither of the first H200's runs); with no table anywhere, the noise
    alone, saying so."""
    own, lent = residuals_for("local-cpu", "dense"), residuals_for("dgx-h200", "dense")
    assert own.lent_to == "" and lent.lent_to == "dgx-h200" and lent.step["dense"] == own.step["dense"]
    assert lent.memory["dense"] == own.memory["dense"] and "borrowed: the profiled model has none on dgx-h200" in \
        lent.describe("dense")
    path = rounds_profile(tmp_path / "p.json", [[1e-3, 2e-3, 4e-3], [1.2e-3, 2.4e-3, 4.8e-3], [0.9e-3, 1.8e-3, 3.6e-3]])

    def band(cluster):
        out = tmp_path / f"{cluster}.json"
        assert main(["simulate", MODEL, "--cluster", cluster, "--dp", "1", "--pp", "1", "--microbatches", "2",
                     "--profile", path, "-o", str(out)]) == 0       # micro-batch 4: inside the profile
        capsys.readouterr()
        est = json.loads(out.read_text())["estimate"]
        return (est["step_time_s"], Interval.from_json(est["step_time_band"]),
                Interval.from_json(est.get("peak_memory_band")))
    step, iv, mem = band("dgx-h200:1x1")
    assert "borrowed: the profiled model has none on dgx-h200" in iv.source and "local-cpu.yaml" in iv.source
    lo, hi = quantiles(np.exp(own.step["dense"]), 0.9)
    assert iv.low / step <= lo * 1.05 and iv.high / step >= hi * 0.95 and mem is not None and "borrowed" in mem.source
    monkeypatch.setattr("parsim.sim.interval.residuals_path", lambda name: str(tmp_path / "none" / f"{name}.yaml"))
    assert residuals_for("dgx-h200", "dense") is None
    step, noise, mem = band("dgx-h200:1x1")
    assert "the profile's noise only" in noise.source and mem is None and noise.high - noise.low < iv.high - iv.low


def test_a_prediction_from_the_analytical_model_has_no_profile_interval(capsys):
    assert main(["simulate", MODEL, "--cluster", "local-cpu", "--dp", "1", "--pp", "1", "--json"]) == 0
    band = json.loads(capsys.readouterr().out)["step_time_band"]
    assert band is None or "public rows" in band["source"]      # the public benchmark's, where its device ran


class _Cand:
    def __init__(self, name, cfg):
        self.name, self.config = name, cfg

    def key(self):
        return self.name


def _cfg(dp=1, pp=1, m=1, schedule="1f1b"):
    return ParallelConfig(dp, pp, m, schedule, 1, tuple(range(pp + 1)) if pp > 1 else (0, 2))


def test_the_ranking_under_noise_gives_each_plan_its_chance_and_prefers_the_simpler_of_equals():
    # A is 1% faster than B on average, but the replicates cannot tell them apart; C is clearly slower.
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.03, 400)
    times = {"A": 1.00 + noise + rng.normal(0, 0.02, 400), "B": 1.01 + noise + rng.normal(0, 0.02, 400),
             "C": 1.30 + noise}
    cands = [_Cand("A", _cfg(dp=2)), _Cand("B", _cfg()), _Cand("C", _cfg(pp=2, m=4))]
    assert simplicity(cands[1].config) < simplicity(cands[0].config)     # one device against two
    ranking, got = rank_under_noise(cands, lambda cfg, r: times[next(c.name for c in cands if c.config is cfg)][r],
                                    list(range(400)), batch=8)
    assert ranking.best_expected == "A" and ranking.near == ("B",)
    assert ranking.ranked[0].name == "B"                                   # the simpler of two equals
    assert ranking.p_best["C"] == 0.0 and ranking.p_best["A"] + ranking.p_best["B"] == pytest.approx(1.0)
    assert 0.3 < ranking.p_best["B"] < 0.7
    lines = ranking.lines(lambda cfg: f"dp={cfg.dp} pp={cfg.pp}")
    assert "cannot be told apart" in lines[0] and lines[1].startswith("chosen over dp=2 pp=1")
    # far apart, the faster wins whatever its simplicity
    times["B"] = times["B"] + 0.2
    ranking, _ = rank_under_noise(cands, lambda cfg, r: times[next(c.name for c in cands if c.config is cfg)][r],
                                  list(range(400)), batch=8)
    assert ranking.ranked[0].name == "A" and ranking.near == () and ranking.p_best["A"] == 1.0


def test_validate_counts_the_runs_inside_their_pass_interval():
    def row(label, runs, intervals, peak=100.0, mem=(90.0, 110.0)):
        return Row(label=label, dp=1, pp=1, microbatches=1, schedule="1f1b", split="a..b", predicted_step_s=1.0,
                   measured_step_s=float(np.median(runs)), predicted_peak_bytes=100.0, measured_peak_bytes=peak,
                   predicted_compute_frac=1.0, predicted_bubble_frac=0.0, predicted_exposed_comm_frac=0.0,
                   measured_compute_frac=1.0, measured_steps_s=tuple((r,) for r in runs),
                   predicted_runs_s=(1.0, 1.05, 0.95)[:len(runs)], predicted_intervals_s=intervals,
                   memory_interval_bytes=mem, interval_level=0.9)
    rows = [row("x", [1.0, 1.3, 0.9], ((0.8, 1.2),) * 3), row("y", [1.1, 1.1, 1.1], ((1.0, 1.2),) * 3, peak=120.0)]
    out = summary(rows)
    assert out["step_interval_runs"] == 6 and out["step_interval_coverage"] == pytest.approx(5 / 6)
    assert out["memory_interval_coverage"] == 0.5 and out["interval_level"] == 0.9
    # pairs of passes' predictions: |1/1.05-1|, |1/0.95-1|, |1.05/0.95-1| for each plan
    assert out["profile_repeatability"] == pytest.approx(abs(1 / 0.95 - 1))
    assert math.isnan(summary([row("z", [1.0], ())])["step_interval_coverage"])


def test_plan_with_a_profile_in_rounds_ranks_its_best_under_the_noise(tmp_path, capsys):
    path = rounds_profile(tmp_path / "p.json", [[1e-3, 2e-3, 4e-3], [1.2e-3, 2.4e-3, 4.8e-3], [0.9e-3, 1.8e-3, 3.6e-3],
                                                [1e-3, 2e-3, 4e-3], [1.1e-3, 2.2e-3, 4.4e-3]],
                          canary=[[1e-3] * 3] * 3 + [[1.2e-3] * 3] * 2)
    assert main(["plan", MODEL, "--cluster", "local-cpu", "--tp", "1", "--profile", path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    top = [c for c in out["candidates"] if "rounds redrawn" in (c["estimate"]["step_time_band"] or {}).get("source", "")]
    assert top and "rounds redrawn" in out["plan"]["estimate"]["step_time_band"]["source"]
    # the reranked plans carry the host's noise as simulate's do (parsim.sim.interval.step_interval)
    said = "the host's noise over the profile (the canary's level in 5 rounds, p90 +20%"
    assert all(said in c["estimate"]["step_time_band"]["source"] for c in top)
    assert any("under the profile's noise" in line for line in out["explanation"])
    assert main(["plan", MODEL, "--cluster", "local-cpu", "--tp", "1", "--profile", path]) == 0
    printed = capsys.readouterr().out
    assert "P(best)" in printed and "90% band" in printed
