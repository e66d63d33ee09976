"""The published mixture-of-experts rows (results/published/moe_figures.yaml, issue 32 item 7, issue
37 item 3): each row consistent with its source's table (sizes, batches, experts), the models the
published ones, every row expressible (its expert groups fold into its ranks: parsim.plan.
fold_refusal) and priced within what it is held to.  The tokens-per-second metric they are
measured in is checked here in closed form on a dense row."""

import json
import re

import pytest
import yaml

from parsim.errors import InputError
from parsim.hardware.cluster import load_profile, profile_path
from parsim.model.moe import param_count
from parsim.profile.published import _thaw, load_figures, price, figure_imbalance

PATH = "results/published/moe_figures.yaml"
FIGURES = load_figures(PATH)


def _config(figure) -> dict:
    hf = _thaw(figure.model)["hf"]
    with open(f"results/published/{hf}") as f:
        return json.load(f)


def _experts(cfg: dict) -> int:
    return cfg.get("n_routed_experts") or cfg.get("num_experts") or cfg["num_local_experts"]


def _row_number(figure, label: str) -> int:
    """The integer after ``label`` in the row's citation text, e.g. "MBS 2"."""
    m = re.search(rf"\b{label} (\d+)", figure.row)
    assert m, (figure.id, label)
    return int(m.group(1))


@pytest.mark.parametrize("figure", FIGURES.figures, ids=[f.id for f in FIGURES.figures])
def test_each_row_is_the_sources_configuration(figure):
    par = dict(figure.parallel)
    training = _thaw(figure.model)["training"]
    per_node = figure.devices_per_node or load_profile(profile_path(figure.profile)).devices_per_node
    world = figure.nodes * per_node
    # dp x tp x pp x cp = the GPUs; the micro-batches and their size give the global batch
    assert par["dp"] * par["tp"] * par["pp"] * par["cp"] == world
    micro_batch = training["global_batch_size"] // (par["dp"] * par["microbatches"])
    assert micro_batch * par["dp"] * par["microbatches"] == training["global_batch_size"]
    if "Megatron-Bridge" in figure.citation:        # the table's own columns, as cited in row:
        assert (training["global_batch_size"], micro_batch) == (_row_number(figure, "GBS"), _row_number(figure, "MBS"))
        assert re.search(rf"\b{world} GPUs\b", figure.row)
        assert (par["tp"], par["pp"], par["cp"], par["ep"]) == tuple(_row_number(figure, k) for k in ("TP", "PP", "CP",
                                                                                                     "EP"))
        vp = re.search(r"\bVP (\d+|n/a)", figure.row).group(1)
        assert par.get("chunks", 1) == (1 if vp == "n/a" else int(vp))
        assert par["schedule"] == ("interleaved" if vp != "n/a" else "1f1b")
        if "GA " in figure.row:                   # gradient accumulation = micro-batches per pipeline
            assert par["microbatches"] == _row_number(figure, "GA")
    # the experts divide over ep, and the expert group fits in what Megatron-Core folds it from
    cfg = _config(figure)
    assert _experts(cfg) % par["ep"] == 0
    assert (par["tp"] * par["cp"] * par["dp"]) % par["ep"] == 0
    assert figure.metric == "tokens_per_s_per_gpu" and figure.tolerance == 0.1 and figure.routing
    assert _thaw(figure.model)["args"]["seq_len"] == 4096 and training["fp8"] and training["dtype"] == "bf16"


def test_which_rows_need_parallel_folding():
    """The Qwen3-235B rows run EP 32 over dp 16 with TP 2 (ETP 1: Megatron-Core's Parallel Folding),
    their expert groups across the tp ranks; every row folds (parsim.plan.ParallelConfig.fold)."""
    from parsim.plan import ParallelConfig
    from parsim.refusals import fold_refusal

    folded = {f.id for f in FIGURES.figures if (dict(f.parallel)["dp"] * dict(f.parallel)["cp"]) % dict(f.parallel)["ep"]}
    assert folded == {"mbridge2509-qwen3-235b-a22b-h100-256gpu-tokendrop", "mbridge26041-qwen3-235b-a22b-h100-256gpu"}
    for f in FIGURES.figures:
        par = dict(f.parallel)
        cfg = ParallelConfig(dp=par["dp"], pp=par["pp"], microbatches=par["microbatches"], tp=par["tp"], cp=par["cp"],
                             ep=par["ep"], etp=par.get("etp", 1))
        assert fold_refusal(cfg) is None, f.id
        assert par.get("etp", 1) == dict(_thaw(f.source_config)).get("etp", 1)        # the recipes' ETP


def test_routing_follows_the_sources():
    """NVIDIA's dropless MoE benchmarks force balanced routing (the tables' footnote); its 25.09
    token-drop rows pad every expert to capacity factor 1.0; DeepSeek-V3 balances by its own
    auxiliary-loss-free bias and drops no token."""
    for f in FIGURES.figures:
        routing = dict(f.routing)
        config = dict(_thaw(f.source_config))
        if routing["balance"] == "forced":
            assert "force-balance" in f.citation and config["moe_router_force_load_balancing"] is True
            assert config["moe_expert_capacity_factor"] is None
        elif routing["balance"] == "capacity":
            assert "tokendrop" in f.row and routing == {"balance": "capacity", "capacity_factor": 1.0, "padded": True}
            assert config["moe_router_force_load_balancing"] is False
        else:
            assert f.id.startswith("deepseek-v3") and config["token_dropping"] is False


def test_the_deepseek_v3_figure_is_its_reports_gpu_hours():
    f = FIGURES.by_id("deepseek-v3-h800-2048gpu")
    assert f.measured == round(1e12 / (180e3 * 3600), 1)                   # Sec. 1: 180K GPU hours per 1T tokens
    assert 14.8e12 / (2664e3 * 3600) == pytest.approx(f.measured, rel=1e-3)   # Table 1: 2664K hours, 14.8T tokens
    assert f.profile == "hgx-h800" and f.nodes * 8 == 2048 and f.excluded


def test_qwen3_235b_is_the_published_model():
    # Qwen3 Technical Report, Table 2: 235B total, 22B activated
    total, active = param_count(json.load(open("examples/qwen3_235b_a22b/config.json")))
    assert (total, active) == (235_093_634_560, 22_190_763_520)
    assert round(total / 1e9) == 235 and round(active / 1e9) == 22


@pytest.mark.parametrize("figure", [f for f in FIGURES.figures if not f.excluded],
                         ids=[f.id for f in FIGURES.figures if not f.excluded])
def test_an_expert_parallel_row_prices_within_what_it_is_held_to(figure):
    """Held out: first priced when the simulator gained ep (tp 1 rows) or folding (tp 2 rows);
    their misses are in their notes."""
    p = price(figure)
    assert f"ep={dict(figure.parallel)['ep']}" in p.config
    assert abs(p.error) <= figure.held_within, (figure.id, p.predicted, p.error)


def test_every_row_is_priced():
    """No row is refused any more: the excluded ones too have a prediction (printed, not held)."""
    for f in FIGURES.figures:
        assert price(f).predicted > 0


def test_the_routing_a_row_states_is_the_imbalance_it_is_priced_at():
    assert figure_imbalance((("balance", "forced"),)) == 1.0
    assert figure_imbalance((("balance", "capacity"), ("capacity_factor", 1.25), ("padded", True))) == 1.25
    assert figure_imbalance((("balance", "learned"),)) is None and figure_imbalance(()) is None


# ----------------------------------------------------------------------------- the loader

DENSE = {"model": "gpt", "args": {"layers": 2, "hidden": 64, "heads": 2, "seq_len": 128, "vocab": 256},
         "training": {"global_batch_size": 8, "dtype": "bf16", "optimizer": "adam"}}


def _write(tmp_path, rows: list[dict]) -> str:
    path = tmp_path / "figures.yaml"
    base = {"id": "x", "source": "s", "row": "r", "model": DENSE, "cluster": {"profile": "dgx-h100", "nodes": 1,
                                                                            "devices_per_node": 1},
            "parallel": {"dp": 1}, "measured": {"samples_per_s": 1.0}, "tolerance": 0.1}
    path.write_text(yaml.safe_dump({"schema_version": 1, "sources": {"s": "a source"},
                                    "figures": [{**base, **r} for r in rows]}))
    return str(path)


def test_tokens_per_second_per_gpu_is_tokens_over_step_time_over_gpus(tmp_path):
    figures = load_figures(_write(tmp_path, [{"id": "samples"},
                                             {"id": "tokens", "measured": {"tokens_per_s_per_gpu": 1.0}}]))
    samples, tokens = (price(f) for f in figures.figures)
    assert tokens.step_time_s == samples.step_time_s
    assert tokens.predicted == pytest.approx(8 * 128 / tokens.step_time_s / 1, rel=1e-12)   # batch x seq / s / GPUs
    assert tokens.predicted == pytest.approx(samples.predicted * 128, rel=1e-12)


@pytest.mark.parametrize("row, field", [
    ({"routing": {"balance": "even"}}, "figures[0].routing.balance"),
    ({"routing": {"balance": "capacity"}}, "figures[0].routing.capacity_factor"),
    ({"routing": {"balance": "forced", "padded": True}}, "figures[0].routing.padded"),
    ({"parallel": {"dp": 1, "zero": 4}}, "figures[0].parallel.zero"),
    ({"parallel": {"dp": 1, "ep": 0}}, "figures[0].parallel.ep"),
    ({"source_config": "fp8"}, "figures[0].source_config"),
])
def test_a_bad_moe_field_names_itself(tmp_path, row, field):
    path = _write(tmp_path, [row])
    with pytest.raises(InputError, match=re.escape(f"{path}: {field}")):
        load_figures(path)


def test_a_tokens_row_needs_the_sequence_length(tmp_path):
    model = {**DENSE, "args": {"preset": "gpt-tiny"}}                 # the preset's sequence, not stated
    figures = load_figures(_write(tmp_path, [{"model": model, "measured": {"tokens_per_s_per_gpu": 1.0}}]))
    with pytest.raises(InputError, match="args.seq_len"):
        price(figures.figures[0])
