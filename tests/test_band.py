"""A prediction's interval (parsim.sim.band): the conformal band on out-of-sample residuals, its
classes, its source, and where simulate, plan and the report print it."""

import math
import random
import re
import statistics
from dataclasses import replace

import pytest

from parsim.errors import InputError
from parsim.model.spec import load_model
from parsim.sim.band import (LEVEL, MIN_FAMILIES, Interval, PlanKind, Residual, architecture, band_text,
                             families_needed, load_residuals, parallel_mix, residuals_yaml, step_band)

A100 = "A100-SXM4-80GB"


def _res(i, family, device=A100, mix="3d", model="dense", ratio=1.0):
    return Residual(f"r{i}", family, PlanKind(device, mix, model), math.log(ratio))


def test_interval_holds_a_value_its_bounds_level_and_source():
    band = Interval(2.0, 1.5, 3.0, 0.9, "test", ("a", "b"))
    assert band.contains(2.9) and not band.contains(3.1)
    ms = band.scaled(1e3)                        # the same band in milliseconds
    assert (ms.low, ms.high, ms.value) == (1500.0, 3000.0, 2000.0)
    assert band.to_json() == {"value": 2.0, "low": 1.5, "high": 3.0, "level": 0.9, "source": "test", "rows": ["a", "b"]}


def test_a_band_adds_a_sources_bias_quantile_to_the_spread_within_a_source():
    """Twenty families of two rows, each pair at its family's bias b_f -+ d_f: m is the median of the
    twenty biases; q_b the 19th smallest of the twenty |b_f - m| (ceil(21 x 0.9): not the far
    family's); q_e the 18th smallest d_f (a family's two rows weigh one family: 0.9 x 20); the band is
    the prediction times exp(m -+ (q_b + q_e))."""
    biases = [math.log(0.9 + 0.01 * f) for f in range(19)] + [math.log(2.5)]
    spreads = [0.01 * (f + 1) for f in range(20)]
    kind = PlanKind(A100, "3d", "dense")
    rows = tuple(Residual(f"r{f}{s}", f"f{f}", kind, b + s * d)
                 for f, (b, d) in enumerate(zip(biases, spreads)) for s in (-1, 1))
    band = step_band(2.0, kind, rows)
    m = statistics.median(biases)
    q_b = sorted(abs(b - m) for b in biases)[math.ceil(21 * 0.9) - 1]
    q_e = sorted(spreads)[17]
    assert math.ceil(21 * 0.9) == 19 and q_b < math.log(2.5) - m
    assert band.low == pytest.approx(2.0 * math.exp(m - q_b - q_e))
    assert band.high == pytest.approx(2.0 * math.exp(m + q_b + q_e))
    assert not band.contains(2.0 * 2.5)           # the one far source is past the quantile
    assert len(band.rows) == 40 and "20 sources" in band.source and band.level == 0.9
    assert (f"half-width x{math.exp(q_b + q_e):.2f}: x{math.exp(q_b):.2f} between sources' biases, "
            f"x{math.exp(q_e):.2f} within a source") in band.source


def test_a_new_sources_rows_fall_inside_as_often_as_the_two_parts_promise():
    """Sources whose biases spread (sd 0.15 in log) wider than their rows about them (sd 0.05): a band
    on 30 such sources covers a new source's rows at least 80% of the time by the union bound (each
    part covers at 90%), and more where the parts are independent, as here (94.9% of 1,500 seeded
    draws); a band without the sources' biases falls well short."""
    rng = random.Random(58)
    kind = PlanKind(A100, "3d", "dense")
    inside = total = 0
    for trial in range(300):
        rows = tuple(Residual(f"r{trial}-{f}-{i}", f"f{f}", kind, b + rng.gauss(0, 0.05))
                     for f, b in enumerate(rng.gauss(0, 0.15) for _ in range(30)) for i in range(5))
        band = step_band(1.0, kind, rows)
        new_bias = rng.gauss(0, 0.15)
        for _ in range(5):
            inside += band.contains(math.exp(new_bias + rng.gauss(0, 0.05)))
            total += 1
    assert 0.85 <= inside / total <= 0.97


def test_a_band_rests_on_the_fewest_families_whose_conformal_quantile_exists():
    """With F families as the units, the band is the ceil((F + 1) x level)-th smallest of F scores:
    9 families at 90%.  A class of eight sources widens, however many rows it holds and however
    far its worst row: its quantile would be past that row (the 910B tensor-parallel plans' band
    was one MindFormers row's 0.19-5.7x, results/2026-12-03g-amd-epyc/band-families.txt)."""
    assert (families_needed(0.9), families_needed(0.8), families_needed(0.95)) == (9, 4, 19)
    assert MIN_FAMILIES == families_needed(LEVEL) == 9
    npu = "Ascend 910B"
    eight = tuple(_res(i, f"n{i % 8}", device=npu, ratio=1.05) for i in range(40)) + (_res(40, "n0", device=npu,
                                                                                             ratio=5.7),)
    others = tuple(_res(100 + i, f"g{i}", ratio=1.0 + 0.01 * i) for i in range(MIN_FAMILIES))
    band = step_band(1.0, PlanKind(npu, "3d", "dense"), eight + others)
    assert "mix and model as this plan's, widened: 41 rows of 8 sources" in band.source
    assert f"under the {MIN_FAMILIES} sources a 90% band rests on" in band.source
    assert band.high < 5.7
    nine = eight + (_res(41, "n8", device=npu, ratio=1.05),)
    assert "device, mix and model as this plan's: " in step_band(1.0, PlanKind(npu, "3d", "dense"), nine + others).source


def test_one_sources_many_rows_weigh_as_one_source():
    """Nine rows of one family measured 40% slower than predicted and one row each of eight others
    exact: weighted by family the median is the eight's, not the nine rows'."""
    rows = tuple(_res(i, "big", ratio=1.4) for i in range(9)) + tuple(_res(9 + i, f"f{i}") for i in range(8))
    band = step_band(1.0, PlanKind(A100, "3d", "dense"), rows)
    assert band.contains(1.0) and band.contains(1.4)
    assert "median bias +0.0%" in band.source


def test_the_class_widens_until_it_holds_enough_sources():
    same = tuple(_res(i, f"f{i}") for i in range(MIN_FAMILIES))                       # 9 rows, 9 sources
    assert "device, mix and model as this plan's: " in step_band(1.0, PlanKind(A100, "3d", "dense"), same).source
    few = same[:4] + tuple(_res(10 + i, f"g{i}", mix="fsdp") for i in range(6))
    assert "device and model as this plan's, widened" in step_band(1.0, PlanKind(A100, "3d", "dense"), few).source
    other = tuple(_res(i, f"f{i}", device="H100-SXM5-80GB", mix="fsdp") for i in range(MIN_FAMILIES))
    mixed = other + (_res(99, "x"),)
    band = step_band(1.0, PlanKind(A100, "fsdp", "dense"), mixed)
    assert band is not None and "mix and model as this plan's, widened" in band.source


def test_a_widened_class_says_so_and_why_and_keeps_to_the_device_before_every_row():
    """A class too small for a band widens, and the band's source says which rows it took and why:
    an A100 MoE plan whose own class holds one source's four rows takes the A100 rows of every
    mix and model (not the H100 ones) before it takes every row; a device with one row takes every row."""
    moe = tuple(_res(i, "moe", mix="ep", model="moe") for i in range(4))
    a100 = tuple(_res(10 + i, f"a{i}") for i in range(MIN_FAMILIES))
    h100 = tuple(_res(20 + i, f"h{i}", device="H100-SXM5-80GB", ratio=2.0) for i in range(MIN_FAMILIES))
    band = step_band(1.0, PlanKind(A100, "ep", "moe"), moe + a100 + h100)
    assert band.rows == tuple(r.id for r in moe + a100)
    assert ("(device as this plan's, widened: 4 rows of 1 source share this plan's device, mix and model "
            f"({A100}, ep, moe), under the {MIN_FAMILIES} sources a 90% band rests on)") in band.source
    lone = (_res(99, "npu", device="Ascend 910", mix="dp", model="conv"),)
    band = step_band(1.0, PlanKind("Ascend 910", "dp", "conv"), moe + a100 + h100 + lone)
    assert len(band.rows) == 4 + 2 * MIN_FAMILIES + 1
    assert band.source.split("(", 1)[1].startswith("every public row, of any device, mix and model: 1 row of 1 source "
                                                   "share this plan's device, mix and model (Ascend 910, dp, conv), "
                                                   "and no narrower class holds")
    exact = step_band(1.0, PlanKind(A100, "3d", "dense"), moe + a100)
    assert f"(device, mix and model as this plan's: {A100}, 3d, dense)" in exact.source and "widened" not in exact.source


def test_no_band_for_a_device_no_public_row_ran_on_or_without_its_own_family():
    rows = tuple(_res(i, f"f{i}") for i in range(MIN_FAMILIES))
    assert step_band(1.0, PlanKind("local-cpu", "dp", "conv"), rows) is None
    assert "no public row ran on local-cpu" in band_text(None, "local-cpu")
    only = tuple(_res(i, "only", device="Ascend 910") for i in range(MIN_FAMILIES))
    assert step_band(1.0, PlanKind("Ascend 910", "dp", "conv"), only + rows, leave_out="only") is None


def test_a_device_no_row_ran_on_takes_its_architectures_rows_and_says_so():
    """An H200 plan, no public row on H200: the H100 rows stand for its device's, the band the H100 plan's,
    and its source says so; an H200 row of its own keeps the H200 plan to the exact device; an Ascend 910C
    die takes the 910B's; a CPU has no architecture and no band."""
    h100 = tuple(_res(i, f"h{i}", device="H100-SXM5-80GB", ratio=1.0 + i / 50) for i in range(MIN_FAMILIES))
    a100 = tuple(_res(20 + i, f"a{i}", ratio=0.5) for i in range(MIN_FAMILIES))
    h200 = step_band(1.0, PlanKind("H200-SXM-141GB", "3d", "dense"), h100 + a100)
    same = step_band(1.0, PlanKind("H100-SXM5-80GB", "3d", "dense"), h100 + a100)
    assert (h200.low, h200.high, h200.rows) == (same.low, same.high, same.rows)
    assert ("no public row ran on H200-SXM-141GB: the rows of its architecture (Hopper: H100-SXM5-80GB) stand for "
            "its device's") in h200.source and "architecture" not in same.source
    own = (_res(99, "h200", device="H200-SXM-141GB"),)
    assert "architecture" not in step_band(1.0, PlanKind("H200-SXM-141GB", "3d", "dense"), h100 + a100 + own).source
    npu = tuple(_res(40 + i, f"n{i}", device="Ascend 910B") for i in range(MIN_FAMILIES))
    assert "(Ascend 910: Ascend 910B)" in step_band(1.0, PlanKind("Ascend 910C die", "3d", "dense"), npu).source
    assert architecture("x86_64-core") is None and architecture("B200-180GB") == architecture("GB200-B200-186GB")
    assert step_band(1.0, PlanKind("x86_64-core", "3d", "dense"), h100 + a100) is None


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
    rows = tuple(_res(i, f"f{i}", mix="fsdp", ratio=r) for i, r in enumerate(ratios))
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
    other = step_band(2.0, PlanKind(A100, "3d", "dense"), tuple(_res(i, f"f{i}", ratio=r)
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
    lone = (Residual("l0", "lone", PlanKind("Ascend 910B", "fsdp", "dense"), math.log(3.0), True),)
    assert ("; held-out test: 1 fsdp dense row of lone (Ascend 910B), fitted on by nothing, ran 3.00x its "
            "predicted step, outside this band") in step_band(2.0, kind, rows + lone).source


def test_a_plans_stack_says_how_the_public_families_on_it_ran_and_moves_nothing():
    """Training.stack adds a clause: each family on that stack counts once, by its median measured /
    predicted step (in log, as the band); the interval stays where it was, and no stack adds nothing."""
    ratios = [0.90, 0.95, 1.00, 1.02, 1.05, 1.08, 1.10, 1.12, 1.15, 1.20, 1.25, 1.40]
    rows = tuple(_res(i, f"f{i}", ratio=r) for i, r in enumerate(ratios))
    ds = (Residual("d0", "ds-a", PlanKind(A100, "3d", "dense"), math.log(1.2)),
          Residual("d1", "ds-a", PlanKind(A100, "3d", "dense"), math.log(1.8)),
          Residual("d2", "ds-b", PlanKind(A100, "fsdp", "dense"), math.log(0.9), True))
    stacks = {**{f"f{i}": "megatron" for i in range(12)}, "ds-a": "deepspeed", "ds-b": "deepspeed"}
    kind = PlanKind(A100, "3d", "dense")
    plain = step_band(2.0, kind, rows + ds, stacks=stacks)
    told = step_band(2.0, kind, rows + ds, stack="deepspeed", stacks=stacks)
    assert (told.low, told.high, told.rows) == (plain.low, plain.high, plain.rows) and "stack" not in plain.source
    assert told.source == plain.source + (
        "; stack check: the 2 public families that ran on deepspeed ran 0.90-1.47x their predicted steps (each "
        "family's median; median 1.18x), 1 of them slower than priced; this band does not include it")
    assert step_band(2.0, kind, rows, stack="mindspore", stacks=stacks).source.endswith(
        "; stack check: no public family ran on mindspore")


def test_a_stated_stack_reaches_simulates_band_and_a_wrong_one_names_its_field(tmp_path, capsys):
    """training.stack in a model.yaml: simulate's band says how the committed public families on that stack
    ran (results/published/harnesses.yaml); a stack parsim does not know is one line naming the field."""
    from parsim.cli import main

    text = open("examples/megatron_39b.yaml").read()
    assert "\ntraining:\n" in text
    model = tmp_path / "m.yaml"
    model.write_text(text.replace("\ntraining:\n", "\ntraining:\n  stack: deepspeed\n", 1))
    assert main(["simulate", str(model), "--cluster", "dgx-a100:64x8", "--dp", "32", "--tp", "8", "--pp", "2",
                 "--microbatches", "12", "--recompute"]) == 0
    assert re.search(r"; stack check: the \d+ public families that ran on deepspeed ran [\d.]+-[\d.]+x their "
                     r"predicted steps", capsys.readouterr().out)
    model.write_text(text.replace("\ntraining:\n", "\ntraining:\n  stack: composer\n", 1))
    with pytest.raises(InputError, match=r"training\.stack: must be one of megatron, deepspeed, torch-fsdp"):
        load_model(model)


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
