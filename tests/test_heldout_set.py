"""The held-out sets (results/heldout/2026-11-27b.yaml and moe-2026-11-27c.yaml; 2026-11-27.yaml,
moe-2026-11-27.yaml and moe-2026-11-27b.yaml, development sets since their first reports) build
and simulate: every model loads and
extracts, its torch module runs one forward on the executor's input kind, and every plan (the
planner's pick too, kept to the set's sizes as validate keeps it) resolves and simulates.  Nothing
here runs a plan: the set's figures come only from the runs its rule allows."""

import json

import pytest
import torch

from parsim.cost.compute import AnalyticalCompute
from parsim.errors import InputError
from parsim.exec.data import input_kind
from parsim.hardware import load_cluster
from parsim.model.spec import build_module, load_model
from parsim.sim import simulate
from parsim.validation import case_microbatch_sizes, default_cases
from parsim.validation_sets import load_plan_set

SET = "results/heldout/2026-11-27.yaml"
HELD = load_plan_set(SET)
SET_B = "results/heldout/2026-11-27b.yaml"
HELD_B = load_plan_set(SET_B)
MOE = "results/heldout/moe-2026-11-27.yaml"
MOE_B = "results/heldout/moe-2026-11-27b.yaml"
MOE_C = "results/heldout/moe-2026-11-27c.yaml"
SETS = {path: load_plan_set(path) for path in (SET, SET_B, MOE, MOE_B, MOE_C)}
# the micro-batch sizes profiled in development: ResNet-50 and the GPT (1..32); then set 2026-11-27's
# bert-mini and llama-tiny (12, 6, 3), which became development rows.  The MoE sets' models are
# their own (each held-out one was never profiled in development): no size is excluded.
DEVELOPMENT_SIZES = {SET: {1, 2, 4, 8, 16, 32}, SET_B: {1, 2, 3, 4, 6, 8, 12, 16, 24, 32},
                     MOE: set(), MOE_B: set(), MOE_C: set()}


@pytest.mark.parametrize("path,name,models", [(SET, "heldout-2026-11-27", 4), (SET_B, "heldout-2026-11-27b", 3),
                                              (MOE, "moe-2026-11-27", 1), (MOE_B, "moe-2026-11-27b", 1),
                                              (MOE_C, "moe-2026-11-27c", 1)])
def test_the_set_is_frozen_with_its_date_and_rule(path, name, models):
    held = SETS[path]
    assert held.name == name and held.date == "2026-11-27"
    assert "new held-out set" in held.rule and "once per model change" in held.rule
    assert len(held.models) == models


def test_the_moe_held_out_set_is_another_model_with_expert_parallel_plans():
    """moe-2026-11-27c: neither development set's model (the tiny Mixtral, the Qwen3-MoE-style
    one), another model type, every decoder layer MoE, and ep=2 plans."""
    (path, plans), = SETS[MOE_C].models
    spec = load_model(path)
    for dev in (MOE, MOE_B):
        (dev_path, _), = SETS[dev].models
        assert path != dev_path and spec.source.kind == "hf"
    assert json.loads(spec.source.target)["model_type"] == "qwen2_moe"
    assert all(layer.experts is not None for layer in spec.graph.layers if layer.name.startswith("layers."))
    assert {p.label for p in plans if p.ep == 2} == {"dp2-ep2", "dp2-ep2-m3"}


@pytest.mark.parametrize("set_path,path", [(s, p) for s, held in SETS.items() for p, _ in held.models])
def test_each_model_builds_runs_a_forward_and_every_plan_simulates(set_path, path):
    spec = load_model(path)
    cluster = load_cluster("local-cpu")
    held = load_plan_set(set_path)
    sizes = case_microbatch_sizes(spec, set_path)
    assert sizes and not set(sizes) & DEVELOPMENT_SIZES[set_path]
    kind = input_kind(spec)
    torch.manual_seed(0)
    module = build_module(spec.source, spec.path)
    if kind[0] == "tokens":
        _, seq, vocab = kind
        assert module(torch.randint(0, vocab, (2, seq))).shape == (2, seq, vocab)
    else:
        assert module(torch.randn(2, 3, kind[1], kind[1])).shape == (2, 10)
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    skipped = []
    cases = default_cases(spec, cluster, compute, set_path, skipped, profiled_sizes=tuple(sizes))
    assert skipped == []
    assert [c.label for c in cases] == [p.label for p in held.plans_for(path)] + ["planner"]
    batch = spec.training.global_batch_size
    for case in cases:
        assert case.config.microbatch_size(batch) in sizes
        est = simulate(spec.graph, spec.training, cluster, case.config, compute, keep_timeline=False)
        assert est.step_time_s > 0


def test_a_model_the_set_does_not_hold_is_one_line(tmp_path):
    with pytest.raises(InputError, match=r"2026-11-27.yaml: models: no entry for examples/gpt_tiny_local.yaml"):
        HELD.plans_for("examples/gpt_tiny_local.yaml")
    bad = tmp_path / "s.yaml"
    bad.write_text("name: s\ndate: 2026-11-27\nrule: r\nmodels:\n  - model: m.yaml\n    plans: [{label: planner}]\n")
    with pytest.raises(InputError, match=r"models\[0\]\.plans: labels must be unique and not 'planner'"):
        load_plan_set(str(bad))


MOE_SET = "results/heldout/moe-2026-11-27.yaml"


def test_the_moe_set_loads_and_every_plan_simulates():
    """The mixture-of-experts set (the tiny Mixtral): its plans, dp2-ep2's experts split over ep=2,
    resolve and simulate, the planner's pick beside them."""
    pytest.importorskip("transformers")
    held = load_plan_set(MOE_SET)
    assert held.name == "moe-2026-11-27" and "new held-out set" in held.rule
    (path, plans), = held.models
    spec = load_model(path)
    assert spec.graph.moe
    cluster = load_cluster("local-cpu")
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    skipped = []
    sizes = case_microbatch_sizes(spec, MOE_SET)
    cases = default_cases(spec, cluster, compute, MOE_SET, skipped, profiled_sizes=tuple(sizes))
    assert skipped == []
    assert [c.label for c in cases] == [p.label for p in plans] + ["planner"]
    assert {c.label: c.config.ep for c in cases}["dp2-ep2"] == 2
    for case in cases:
        assert simulate(spec.graph, spec.training, cluster, case.config, compute, keep_timeline=False).step_time_s > 0


def test_a_set_plan_whose_ep_does_not_divide_dp_is_refused(tmp_path):
    bad = tmp_path / "set.yaml"
    bad.write_text("schema_version: 1\nname: x\ndate: 2026-11-27\nrule: r\nmodels:\n"
                   "  - model: examples/moe_tiny_local.yaml\n    plans:\n      - {label: a, dp: 2, ep: 4}\n")
    with pytest.raises(InputError, match=r"plans\[0\]\.ep: 4 does not divide dp 2"):
        load_plan_set(str(bad))
