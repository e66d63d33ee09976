"""Full recomputation of some layers (ParallelConfig.recompute_layers, recompute_every): of each stage,
Megatron-Core's --recompute-method block --recompute-num-layers N and MindFormers' per-stage
``recompute: [4, 0]``; every N-th layer of a rank, torchtitan's selective_ac_option N.

The rule (which layers), the graph it gives (between none and full, layer by layer), the simulated
step against a closed form (pp = 1, one micro-batch: each recomputed layer adds its forward to its
backward), plan.json, the refusals, the executor's wrapped units, and the framework readers and
writers.  The executor runs it against the single-process reference in tests/test_plan_kinds.py
(``pp2-zbh1-recompute-layers``).
"""

import dataclasses
import json

import pytest
import torch.nn as nn

from parsim.cli import main
from parsim.cost.compute import AnalyticalCompute
from parsim.cost.layer import recompute_time_s
from parsim.errors import InputError
from parsim.exec.stages import recompute_units, recomputed_children, sequential
from parsim.export import read_config
from parsim.export.megatron import export_args as megatron_args
from parsim.hardware import load_cluster
from parsim.model.recompute import Recompute
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig, Plan
from parsim.shard.prepare import per_device_graph
from parsim.sim import simulate

GPT = "examples/gpt_tiny_local.yaml"


def _cfg(**kw) -> ParallelConfig:
    return ParallelConfig(**{"dp": 1, "pp": 2, "microbatches": 2, "recompute": "full", **kw})


def test_the_first_layers_of_each_stage_other_than_the_embedding_and_the_output_layer():
    # ten layers, two stages: layer 0 (the embedding) and 9 (the output layer) never count
    assert _cfg(bounds=(0, 5, 10), recompute_layers=2).recomputed_layers(10) == {1, 2, 5, 6}
    assert _cfg(bounds=(0, 5, 10), recompute_layers=(4, 0)).recomputed_layers(10) == {1, 2, 3, 4}
    # per virtual stage under interleaving (Megatron: "per virtual pipeline stage")
    assert _cfg(chunks=2, schedule="interleaved", bounds=(0, 3, 6, 8, 10), recompute_layers=1) \
        .recomputed_layers(10) == {1, 3, 6, 8}
    assert _cfg(bounds=(0, 5, 10), recompute_layers=9).recomputed_layers(10) == set(range(1, 9))
    assert _cfg(bounds=(0, 5, 10)).recomputed_layers(10) is None            # every layer
    assert _cfg(recompute_layers=3).recomputed_layers(10) == {1, 2, 3}       # no split yet: one stage


def test_the_graph_recomputes_the_chosen_layers_as_full_and_keeps_the_others():
    g = load_model(GPT).graph
    n = len(g)
    full, none = g.with_recompute(Recompute.FULL), g
    assert g.with_recompute(Recompute.FULL, frozenset(range(n))).layers == full.layers
    some = g.with_recompute(Recompute.FULL, frozenset({1, 2}))
    assert some.recompute is Recompute.FULL and some.recompute_only == {1, 2}
    for i, layer in enumerate(some.layers):
        want = full.layers[i] if i in (1, 2) else none.layers[i]
        assert (layer.saved_bytes, layer.recompute_bytes) == (want.saved_bytes, want.recompute_bytes), i
    # layer 3 follows a recomputed layer, which keeps only its own input: nothing is shared
    assert some.layers[3].input_shared_bytes == 0.0
    with pytest.raises(ValueError, match="only under full"):
        g.with_recompute(Recompute.SELECTIVE, frozenset({1}))
    # the per-device graph keeps the subset apart from the whole recomputation
    assert per_device_graph(g, 1, "", "full", recompute_only=frozenset({1})).recompute_only == {1}


def test_the_simulated_step_adds_each_recomputed_layers_forward_to_its_backward():
    """pp = 1, one micro-batch, no communication: the step is the layers' forwards and backwards in
    a row, so N recomputed layers add exactly their recompute_time_s."""
    spec = load_model(GPT)
    cluster = load_cluster("local-cpu:1x1")
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    b = spec.training.global_batch_size
    n = len(spec.graph)

    def step(**kw):
        cfg = ParallelConfig(1, 1, 1, bounds=(0, n), **kw)
        return simulate(spec.graph, spec.training, cluster, cfg, compute)

    base = step().step_time_s
    full = spec.graph.with_recompute(Recompute.FULL)
    for count in range(1, n - 1):
        est = step(recompute="full", recompute_layers=count)
        added = sum(recompute_time_s(compute, full.layers[i], b) for i in range(1, count + 1))
        assert est.step_time_s - base == pytest.approx(added, rel=1e-9), count
        assert est.config["recompute_layers"] == [count]


def test_time_and_memory_sit_between_none_and_full_stage_by_stage():
    spec = load_model(GPT)
    cluster = load_cluster("local-cpu:1x2")
    n = len(spec.graph)
    bounds = (0, n // 2, n)

    def run(**kw):
        return simulate(spec.graph, spec.training, cluster, ParallelConfig(1, 2, 4, bounds=bounds, **kw))

    none, full = run(), run(recompute="full")
    prev = none
    for count in range(0, n):
        est = run(recompute="full", recompute_layers=count)
        assert prev.step_time_s <= est.step_time_s <= full.step_time_s
        assert max(full.peak_memory_bytes) <= max(est.peak_memory_bytes) <= max(prev.peak_memory_bytes)
        prev = est
    assert run(recompute="full", recompute_layers=0).step_time_s == none.step_time_s
    assert prev.step_time_s < full.step_time_s        # the embedding and output layer are never recomputed


def _plan_json(tmp_path, *flags, model=GPT) -> dict:
    out = tmp_path / "p.json"
    assert main(["simulate", model, "--cluster", "local-cpu:1x2", "--dp", "1", "--pp", "2", "--microbatches", "2",
                 *flags, "-o", str(out), "--json"]) == 0
    return json.loads(out.read_text())


def test_plan_json_keeps_the_counts_and_simulate_reads_them_back(tmp_path, capsys):
    d = _plan_json(tmp_path, "--recompute-layers", "1")
    assert d["parallel"]["recompute"] == "full" and d["parallel"]["recompute_layers"] == [1]
    plan = Plan.from_json(d, "p.json")
    assert plan.config.recompute_layers == (1,)
    capsys.readouterr()
    assert main(["simulate", str(tmp_path / "p.json"), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["step_time_s"] == d["estimate"]["step_time_s"]
    assert "recompute_layers" not in _plan_json(tmp_path, "--recompute", "full")["parallel"]


@pytest.mark.parametrize("edit,says", [
    ({"recompute": "none"}, "set recompute full"),
    ({"recompute_layers": [1, 1, 1]}, "one per stage (2 stages)"),
    ({"recompute_layers": [-1]}, "0 or more"),
    ({"recompute_layers": "2"}, "expected an integer or a list"),
])
def test_a_bad_plan_is_refused_naming_the_field(tmp_path, edit, says):
    d = _plan_json(tmp_path, "--recompute-layers", "1")
    d["parallel"].update(edit)
    with pytest.raises(InputError, match="parallel.recompute_layers") as e:
        Plan.from_json(d, "p.json")
    assert says in str(e.value)


def test_simulate_refuses_counts_beside_another_mode_in_one_line(capsys):
    rc = main(["simulate", GPT, "--cluster", "local-cpu:1x2", "--pp", "2", "--recompute", "selective",
               "--recompute-layers", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--recompute-layers" in err and "recompute full" in err


def test_the_executor_wraps_the_chosen_units_only():
    names = ["embed", "h.0", "h.1", "h.2", "h.3", "head"]
    cfg = _cfg(bounds=(0, 3, 6), recompute_layers=1)
    assert recomputed_children(cfg, names) == {"h_0", "h_2"}
    assert recomputed_children(_cfg(bounds=(0, 3, 6)), names) is None
    stage = sequential([(n, nn.Linear(2, 2)) for n in names])
    plain = {n: m.forward for n, m in stage.named_children()}
    recompute_units(stage, recomputed_children(cfg, names))
    wrapped = {n for n, m in stage.named_children() if m.forward != plain[n]}
    assert wrapped == {"h_0", "h_2"}


MEGATRON = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
            "--vocab-size", "128",
            "--max-position-embeddings", "32", "--micro-batch-size", "1", "--global-batch-size", "8",
            "--pipeline-model-parallel-size", "2", "--recompute-granularity", "full"]


def test_megatron_block_reads_as_the_first_layers_of_each_stage_and_is_written_back(tmp_path):
    args = tmp_path / "run.args"
    args.write_text(" ".join(MEGATRON + ["--recompute-method", "block", "--recompute-num-layers", "1"]))
    got = read_config("megatron", str(args))
    assert got.parallel["recompute"] == "full" and got.parallel["recompute_layers"] == 1
    args.write_text(" ".join(MEGATRON + ["--recompute-method", "block", "--recompute-num-layers", "2"]))
    assert "recompute_layers" not in read_config("megatron", str(args)).parallel      # every layer of a stage
    # written back: tests/test_export_frameworks.py's Megatron check reads it with Megatron-Core;
    # one count per stage has no Megatron flag
    model = tmp_path / "gpt.yaml"
    model.write_text("schema_version: 1\nname: gpt-tiny-sdpa\nmodel: gpt\nargs: {preset: gpt-tiny, attention: sdpa}\n"
                     "training: {global_batch_size: 8, dtype: bf16, optimizer: adam}\n")
    d = _plan_json(tmp_path, "--recompute-layers", "1,0", model=str(model))
    with pytest.raises(InputError, match="parallel.recompute_layers"):
        megatron_args(Plan.from_json(d, "p.json"), load_model(str(model)), "p.json")


def test_mindformers_per_stage_list_reads_as_its_counts(tmp_path):
    from parsim.export.mindformers import import_config

    raw = {"model": {"model_config": {"type": "LlamaConfig", "num_layers": 4, "hidden_size": 64, "num_heads": 4,
                                      "vocab_size": 128, "seq_length": 32, "intermediate_size": 128,
                                      "compute_dtype": "bfloat16"}},
           "parallel_config": {"data_parallel": 1, "model_parallel": 1, "pipeline_stage": 2, "micro_batch_num": 2},
           "recompute_config": {"recompute": [2, 0]}}
    got = import_config(raw, "run.yaml")
    assert got.parallel["recompute"] == "full" and got.parallel["recompute_layers"] == (2, 0)
    raw["recompute_config"]["recompute"] = [2, 0, 1]
    with pytest.raises(InputError, match="recompute_config.recompute"):
        import_config(raw, "run.yaml")
    raw["recompute_config"]["recompute"] = True
    assert "recompute_layers" not in import_config(raw, "run.yaml").parallel


def test_mindspore_recomputes_the_chosen_cells(tmp_path):
    from parsim.export.mindspore import export_settings

    d = _plan_json(tmp_path, "--recompute-layers", "1", "--placement", "dp-inner")
    plan = Plan.from_json(d, "p.json")
    names = list(plan.layers)
    want = [names[i] for i in sorted(plan.config.recomputed_layers(len(names)))]
    assert export_settings(plan, load_model(GPT), "p.json", {})["RECOMPUTE"] == want
    assert len(want) == 2 and names[0] not in want


GPT3 = ["examples/gpt3_175b.yaml", "--cluster", "dgx-h100:64x8", "--tp", "8", "--tp-layout", "megatron", "--pp", "8",
        "--dp", "8", "--zero", "1", "--microbatches", "64", "--schedule", "1f1b"]


def test_the_planner_recomputes_the_fewest_layers_that_fit_when_asked(capsys):
    """GPT-3 175B where keeping every activation does not fit (results/simulated/2026-12-01-recompute-
    layers.txt): without --partial-recompute the pick recomputes every layer; with it, the fewest
    layers of each stage that fit, faster, and one fewer does not fit."""
    def planned(*flags):
        capsys.readouterr()
        assert main(["plan", *GPT3, "--top", "2", "--json", *flags]) == 0
        return json.loads(capsys.readouterr().out)

    whole, fewer = planned(), planned("--partial-recompute")
    assert whole["plan"]["parallel"]["recompute"] == "full" and "recompute_layers" not in whole["plan"]["parallel"]
    n = fewer["plan"]["parallel"]["recompute_layers"]
    assert fewer["plan"]["parallel"]["recompute"] == "full" and n[0] < 12
    assert fewer["plan"]["estimate"]["step_time_s"] < whole["plan"]["estimate"]["step_time_s"]
    assert any(line.startswith(f"recomputation: {n[0]} layers per stage") for line in fewer["explanation"])
    cap = fewer["capacity_bytes"]
    assert max(fewer["plan"]["estimate"]["peak_memory_bytes"]) <= cap
    plan = Plan.from_json(fewer["plan"], "p.json")
    spec = load_model(GPT3[0])
    one_fewer = simulate(spec.graph, spec.training, load_cluster("dgx-h100:64x8"),
                         dataclasses.replace(plan.config, recompute_layers=(n[0] - 1,)))
    assert max(one_fewer.peak_memory_bytes) > cap


def test_the_planners_fewer_layers_take_the_split_simulate_balances_for_them(capsys):
    """`parsim simulate --recompute-layers N` balances its split on the layers without recomputation
    (every stage recomputes N); the planner's refinement tries that split beside the one it
    balanced for recomputing every layer, so its pick is priced as simulate prices the same flags
    (GPT-3 175B: 19.087 s on the full-recomputation split, against simulate's 19.032 s, until
    2026-12-03)."""
    capsys.readouterr()
    assert main(["plan", *GPT3, "--top", "1", "--json", "--partial-recompute"]) == 0
    picked = json.loads(capsys.readouterr().out)["plan"]
    n = picked["parallel"]["recompute_layers"]
    assert main(["simulate", *GPT3, "--placement", picked["parallel"]["placement"], "--recompute-layers", str(n[0]),
                 "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert picked["parallel"]["bounds"] == alone["config"]["bounds"]
    assert picked["estimate"]["step_time_s"] == pytest.approx(alone["step_time_s"], rel=1e-12)


def test_every_nth_layer_of_each_rank_as_torchtitan_counts_them():
    """torchtitan's selective_ac_option N: on each rank, the k-th of its transformer blocks in order
    (over its stages, counted from 1) where k % N == 0 (activation_checkpoint.py, _apply_layer_sac)."""
    assert _cfg(bounds=(0, 5, 10), recompute_every=2).recomputed_layers(10) == {2, 4, 6, 8}
    # interleaved: rank 0 holds stages 0 and 2 (layers 0-2, 6-7), rank 1 stages 1 and 3 (3-5, 8-9)
    assert _cfg(chunks=2, schedule="interleaved", bounds=(0, 3, 6, 8, 10), recompute_every=2) \
        .recomputed_layers(10) == {2, 7, 4, 8}
    assert _cfg(recompute_every=3).recomputed_layers(10) == {3, 6}
    assert _cfg(bounds=(0, 5, 10), recompute_every=1).recomputed_layers(10) == set(range(1, 9))
    assert recomputed_children(_cfg(bounds=(0, 3, 6), recompute_every=2),
                               ["embed", "h.0", "h.1", "h.2", "h.3", "head"]) == {"h_1", "h_3"}


def test_every_nth_is_kept_refused_and_exported_to_torchtitan(tmp_path, capsys):
    d = _plan_json(tmp_path, "--recompute-every", "2")
    assert d["parallel"]["recompute"] == "full" and d["parallel"]["recompute_every"] == 2
    assert Plan.from_json(d, "p.json").config.recompute_every == 2
    for edit, says in (({"recompute": "none"}, "set recompute full"),
                       ({"recompute_layers": [1]}, "not both")):
        bad = json.loads(json.dumps(d))
        bad["parallel"].update(edit)
        with pytest.raises(InputError, match="parallel.recompute_every") as e:
            Plan.from_json(bad, "p.json")
        assert says in str(e.value)
    assert main(["simulate", GPT, "--cluster", "local-cpu:1x2", "--pp", "2", "--recompute-every", "2",
                 "--recompute-layers", "1"]) == 2
    assert "not both" in capsys.readouterr().err


@pytest.mark.parametrize("section,want", [
    ('mode = "selective"\nselective_ac_option = "2"\n', ("full", 2)),
    ('mode = "selective"\n', ("full", 2)),                    # torchtitan's default option is "2"
    ('mode = "selective"\nselective_ac_option = "0"\n', ("full", 1)),      # 0: every block
    ('mode = "selective"\nselective_ac_option = "op"\n', ("selective", None)),
    ('mode = "full"\n', ("full", None)),
])
def test_torchtitan_reads_layer_checkpointing_as_every_nth(tmp_path, section, want):
    toml = tmp_path / "tt.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "debugmodel"\n[training]\nlocal_batch_size = 8\n'
                    'seq_len = 256\n[activation_checkpoint]\n' + section)
    got = read_config("torchtitan", str(toml))
    assert (got.parallel["recompute"], got.parallel.get("recompute_every")) == want


def test_torchtitan_refuses_an_option_it_does_not_take(tmp_path):
    toml = tmp_path / "tt.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "debugmodel"\n[activation_checkpoint]\nmode = "selective"\n'
                    'selective_ac_option = "half"\n')
    with pytest.raises(InputError, match="selective_ac_option"):
        read_config("torchtitan", str(toml))


def test_every_nth_goes_back_to_torchtitan_as_its_layer_option(tmp_path):
    toml, plan, out = tmp_path / "tt.toml", tmp_path / "plan.json", tmp_path / "out.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "debugmodel"\n[training]\nlocal_batch_size = 8\nseq_len = 256\n'
                    '[parallelism]\ndata_parallel_replicate_degree = 8\ndata_parallel_shard_degree = 1\n'
                    '[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "3"\n')
    assert main(["simulate", "--from", "torchtitan", str(toml), "--cluster", "dgx-h100:1x8", "-o", str(plan)]) == 0
    assert json.loads(plan.read_text())["parallel"]["recompute_every"] == 3
    assert main(["export", str(plan), "--to", "torchtitan", "-o", str(out)]) == 0
    text = out.read_text()
    assert 'mode = "selective"' in text and 'selective_ac_option = "3"' in text
