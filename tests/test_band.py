"""A prediction's interval (parsim.sim.band): the conformal band on out-of-sample residuals, its
classes, its source, and where simulate, plan and the report print it."""

import math
from dataclasses import replace

import pytest

from parsim.sim.band import (MIN_ROWS, Interval, PlanKind, Residual, band_text, load_residuals, parallel_mix,
                             residuals_yaml, step_band)

A100 = "A100-SXM4-80GB"


def _res(i, family, device=A100, mix="3d", model="dense", ratio=1.0):
    return Residual(f"r{i}", family, PlanKind(device, mix, model), math.log(ratio))


def test_interval_holds_a_value_its_bounds_level_and_source():
    band = Interval(2.0, 1.5, 3.0, 0.9, "test", ("a", "b"))
    assert band.contains(2.9) and not band.contains(3.1)
    ms = band.scaled(1e3)                        # the same band in milliseconds
    assert (ms.low, ms.high, ms.value) == (1500.0, 3000.0, 2000.0)
    assert band.to_json() == {"value": 2.0, "low": 1.5, "high": 3.0, "level": 0.9, "source": "test", "rows": ["a", "b"]}


def test_equal_families_give_the_conformal_quantile_of_the_centred_residuals():
    """Twelve rows, four families of three: every row weighs alike; the band is the prediction
    times exp(m -+ q), m the median of the log ratios and q the smallest deviation whose share
    reaches 0.9 x (1 + 1/4)."""
    ratios = [0.90, 0.95, 1.00, 1.02, 1.05, 1.08, 1.10, 1.12, 1.15, 1.20, 1.25, 1.40]
    rows = tuple(_res(i, f"f{i % 4}", ratio=r) for i, r in enumerate(ratios))
    band = step_band(2.0, PlanKind(A100, "3d", "dense"), rows)
    logs = sorted(math.log(r) for r in ratios)
    m = logs[5]                                   # the weighted median: the 6th of 12 reaches half
    dev = sorted(abs(x - m) for x in logs)
    q = dev[math.ceil(12 * 0.9 * 1.25) - 1] if math.ceil(12 * 0.9 * 1.25) <= 12 else dev[-1]
    assert band.low == pytest.approx(2.0 * math.exp(m - q)) and band.high == pytest.approx(2.0 * math.exp(m + q))
    assert len(band.rows) == 12 and "4 sources" in band.source and band.level == 0.9


def test_one_sources_many_rows_weigh_as_one_source():
    """Nine rows of one family measured 40% slower than predicted and one row each of two others
    exact: weighted by family the median is not the nine's."""
    rows = tuple(_res(i, "big", ratio=1.4) for i in range(9)) + (_res(9, "a"), _res(10, "b"))
    band = step_band(1.0, PlanKind(A100, "3d", "dense"), rows)
    assert band.contains(1.0) and band.contains(1.4)
    assert "median bias +0.0%" in band.source or "median bias +40.0%" in band.source


def test_the_class_widens_until_it_holds_enough_rows_and_sources():
    same = tuple(_res(i, f"f{i % 3}") for i in range(MIN_ROWS))                    # 9 rows, 3 sources
    assert "device, mix and model as this plan's: " in step_band(1.0, PlanKind(A100, "3d", "dense"), same).source
    few = same[:4] + tuple(_res(10 + i, f"g{i % 3}", mix="fsdp") for i in range(6))
    assert "device and model as this plan's, widened" in step_band(1.0, PlanKind(A100, "3d", "dense"), few).source
    other = tuple(_res(i, f"f{i % 3}", device="H100-SXM5-80GB", mix="fsdp") for i in range(MIN_ROWS))
    mixed = other + (_res(99, "x"),)
    band = step_band(1.0, PlanKind(A100, "fsdp", "dense"), mixed)
    assert band is not None and "mix and model as this plan's, widened" in band.source


def test_a_widened_class_says_so_and_why_and_keeps_to_the_device_before_every_row():
    """A class too small for a band widens, and the band's source says which rows it took and why:
    an A100 MoE plan whose own class holds one source's four rows takes the A100 rows of every
    mix and model (not the H100 ones) before it takes every row; a device with one row takes every row."""
    moe = tuple(_res(i, "moe", mix="ep", model="moe") for i in range(4))
    a100 = tuple(_res(10 + i, f"a{i % 3}") for i in range(MIN_ROWS))
    h100 = tuple(_res(20 + i, f"h{i % 3}", device="H100-SXM5-80GB", ratio=2.0) for i in range(MIN_ROWS))
    band = step_band(1.0, PlanKind(A100, "ep", "moe"), moe + a100 + h100)
    assert band.rows == tuple(r.id for r in moe + a100)
    assert ("(device as this plan's, widened: 4 rows of 1 source share this plan's device, mix and model "
            f"({A100}, ep, moe), under the {MIN_ROWS} rows of 3 sources a band rests on)") in band.source
    lone = (_res(99, "npu", device="Ascend 910", mix="dp", model="conv"),)
    band = step_band(1.0, PlanKind("Ascend 910", "dp", "conv"), moe + a100 + h100 + lone)
    assert len(band.rows) == 4 + 2 * MIN_ROWS + 1
    assert band.source.split("(", 1)[1].startswith("every public row, of any device, mix and model: 1 row of 1 source "
                                                   "share this plan's device, mix and model (Ascend 910, dp, conv), "
                                                   "and no narrower class holds")
    exact = step_band(1.0, PlanKind(A100, "3d", "dense"), moe + a100)
    assert f"(device, mix and model as this plan's: {A100}, 3d, dense)" in exact.source and "widened" not in exact.source


def test_no_band_for_a_device_no_public_row_ran_on_or_without_its_own_family():
    rows = tuple(_res(i, f"f{i % 3}") for i in range(MIN_ROWS))
    assert step_band(1.0, PlanKind("local-cpu", "dp", "conv"), rows) is None
    assert "no public row ran on local-cpu" in band_text(None, "local-cpu")
    only = tuple(_res(i, "only", device="Ascend 910") for i in range(MIN_ROWS))
    assert step_band(1.0, PlanKind("Ascend 910", "dp", "conv"), only + rows, leave_out="only") is None


def test_the_mix_of_a_plan():
    assert parallel_mix(ep=8) == "ep" and parallel_mix(zero=3) == "fsdp" and parallel_mix(tp=2) == "3d"
    # ZeRO-2 moves data parallelism's traffic, not ZeRO-3's per-layer gathers: it classes as its tp, pp, cp say
    assert parallel_mix(zero=2) == "dp" and parallel_mix(tp=8, zero=2) == "3d" and parallel_mix(tp=8, zero=3) == "fsdp"
    assert parallel_mix(pp=4, zero=1) == "3d" and parallel_mix(cp=2) == "cp" and parallel_mix() == "dp"


def test_the_residual_table_round_trips(tmp_path):
    from types import SimpleNamespace

    text = residuals_yaml([(SimpleNamespace(id="a"), "fam", PlanKind(A100, "3d", "dense"), 0.1234, False),
                           (SimpleNamespace(id="b"), "new", PlanKind(A100, "fsdp", "dense"), 2.5, True)], "cmd")
    path = tmp_path / "residuals.yaml"
    path.write_text(text)
    r, h = load_residuals(path)
    assert (r.id, r.family, r.kind, r.log_ratio, r.held_out) == ("a", "fam", PlanKind(A100, "3d", "dense"),
                                                                 pytest.approx(math.log(1.1234)), False)
    assert (h.id, h.held_out, h.log_ratio) == ("b", True, pytest.approx(math.log(3.5)))


def test_a_held_out_sources_rows_are_in_no_band_and_say_how_they_fared():
    """Rows marked held_out (results/published/fit.yaml's held-out sources) leave the band where it
    was, and a plan of their mix and model, on any device, is told how they fared against its band."""
    ratios = [0.90, 0.95, 1.00, 1.02, 1.05, 1.08, 1.10, 1.12, 1.15, 1.20, 1.25, 1.40]
    rows = tuple(_res(i, f"f{i % 4}", mix="fsdp", ratio=r) for i, r in enumerate(ratios))
    held = tuple(Residual(f"h{i}", "new", PlanKind(A100, "fsdp", "dense"), math.log(r), True)
                 for i, r in enumerate([1.1, 2.0, 4.5]))
    kind = PlanKind(A100, "fsdp", "dense")
    alone, with_held = step_band(2.0, kind, rows), step_band(2.0, kind, rows + held)
    assert (with_held.low, with_held.high, with_held.rows) == (alone.low, alone.high, alone.rows)
    assert "held-out" not in alone.source
    assert with_held.source.startswith(alone.source)
    assert ("; held-out test: 3 fsdp dense rows of new (A100-SXM4-80GB), fitted on by nothing, ran 1.10-4.50x "
            "their predicted steps, 1 of 3 inside this band") in with_held.source
    elsewhere = tuple(replace(r, kind=PlanKind("H100-SXM5-80GB", "fsdp", "dense")) for r in held)
    assert "3 fsdp dense rows of new (H100-SXM5-80GB)" in step_band(2.0, kind, rows + elsewhere).source
    other = step_band(2.0, PlanKind(A100, "3d", "dense"), tuple(_res(i, f"f{i % 4}", ratio=r)
                                                                for i, r in enumerate(ratios)) + held)
    assert "held-out" not in other.source                 # another mix: not its test
    assert "held-out" not in step_band(2.0, kind, rows + held, leave_out="new").source
    # each held-out source is its own test: two families, two clauses, each with its own rows
    later = tuple(Residual(f"g{i}", "later", PlanKind("H100-SXM5-80GB", "fsdp", "dense"), math.log(r), True)
                  for i, r in enumerate([1.05, 1.15]))
    both = step_band(2.0, kind, rows + held + later).source
    assert "; held-out test: 3 fsdp dense rows of new (A100-SXM4-80GB), fitted on by nothing, ran 1.10-4.50x" in both
    assert ("; held-out test: 2 fsdp dense rows of later (H100-SXM5-80GB), fitted on by nothing, ran 1.05-1.15x "
            "their predicted steps, 2 of 2 inside this band") in both


def test_simulate_prints_the_band_and_plan_files_carry_it(tmp_path, capsys):
    import json

    from parsim.cli import main

    out = tmp_path / "plan.json"
    assert main(["simulate", "examples/megatron_39b.yaml", "--cluster", "dgx-a100:64x8", "--dp", "32", "--tp", "8",
                 "--pp", "2", "--microbatches", "12", "--recompute", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "step-time band: 90% band [" in text and "public rows" in text
    band = json.loads(out.read_text())["estimate"]["step_time_band"]
    assert band["low"] < band["value"] < band["high"] and band["level"] == 0.9 and band["rows"]
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu:1x2", "--dp", "2"]) == 0
    assert "no step-time band: no public row ran on" in capsys.readouterr().out
