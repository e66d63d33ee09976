"""The uniform split (--split uniform, Megatron-Core's default) and the split a published row that
gives none is priced with (parsim.profile.published.row_split)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from parsim.cli import main
from parsim.cost.compute import AnalyticalCompute
from parsim.errors import InfeasibleError
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.profile.published import figure_spec, load_all_figures, price, row_split
from parsim.search.resolve import resolve_config, uniform_bounds

TINY = "examples/gpt_tiny_local.yaml"          # embed, layers.0 .. layers.3, head


def _bounds(split: str, **kw) -> tuple[int, ...]:
    spec = load_model(TINY)
    cluster = load_cluster("local-cpu:2x2")
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    return resolve_config(spec, cluster, compute, dp=1, microbatches=4, split=split, **kw).bounds


def test_the_layers_split_evenly_with_the_embedding_first_and_the_head_last():
    # Megatron's get_num_layers_to_build: 4 layers / 2 stages = 2 each; / (2 x 2) virtual stages = 1 each
    assert _bounds("uniform", pp=2) == (0, 3, 6)
    assert _bounds("uniform", pp=2, schedule="interleaved", chunks=2) == (0, 2, 3, 4, 6)
    assert _bounds("uniform", pp=4) == (0, 2, 3, 4, 6)


def test_layers_that_do_not_divide_are_refused_as_megatron_refuses_them(capsys):
    with pytest.raises(InfeasibleError, match="4 transformer layers do not divide over 3 pipeline stages"):
        _bounds("uniform", pp=3)
    assert main(["simulate", TINY, "--cluster", "ascend910:1x8", "--pp", "3", "--dp", "1", "--split", "uniform"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("parsim: error: --split uniform:")


def test_a_model_that_is_no_decoder_has_no_uniform_split():
    graph = load_model("examples/resnet50_imagenet.yaml").graph
    with pytest.raises(InfeasibleError, match="not a decoder's"):
        uniform_bounds(graph, 2)


FIGURES = load_all_figures("results/published")


def test_a_row_without_a_split_is_priced_with_its_frameworks_uniform_split():
    """MindSpeed-LLM's Qwen1.5-4B (40 layers, pp 2, no --num-layer-list) ran 20 layers a stage; a row
    whose layers do not divide (Llama 3.1 405B's 126 over 64 virtual stages) keeps the balanced
    split; a row that states its split keeps it."""
    row = FIGURES.by_id("msllm-qwen1_5-4b-a2-8npu")
    par = dict(row.parallel)
    assert "split" not in par and row_split(figure_spec(row).graph, par) == "uniform"
    assert uniform_bounds(figure_spec(row).graph, 2) == (0, 21, 42)
    priced = price(row)
    as_uniform = price(replace(row, parallel=tuple({**par, "split": "uniform"}.items())))
    as_balanced = price(replace(row, parallel=tuple({**par, "split": "balanced"}.items())))
    assert priced.predicted == as_uniform.predicted != as_balanced.predicted
    odd = FIGURES.by_id("mbridge26041-llama31-405b-h100-1024gpu")
    assert row_split(figure_spec(odd).graph, dict(odd.parallel)) == "balanced"
    given = FIGURES.by_id("mbridge26041-llama3-70b-h100-64gpu")
    assert dict(given.parallel)["split"].startswith("0,3,5,")
