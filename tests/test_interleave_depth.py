"""Interleaved 1F1B at any depth v the cut units allow: the schedule's bubble in closed form over a
grid of (p, m, v) (pure schedule and engine, no cost model), ``--chunks v`` beyond 4 and its
refusals, and the planner considering v beyond 4 on a model with enough layers."""

from dataclasses import dataclass

import pytest

from parsim.cli import main
from parsim.cost.compute import AnalyticalCompute
from parsim.errors import InfeasibleError
from parsim.hardware import load_cluster
from parsim.model.graph import Layer, LayerGraph
from parsim.model.spec import Training, load_model
from parsim.plan import ParallelConfig
from parsim.schedule.generators import build_schedule, check_feasible
from parsim.search import enumerate as space
from parsim.search.planner import Constraints, plan
from parsim.sim import simulate

IDEAL = load_cluster("tests/data/ideal.yaml")          # free communication


@dataclass(frozen=True)
class UnitCost:
    """F = 1, B = 2 per layer: uniform stages."""

    def layer_time_s(self, layer, kind, microbatch):
        return {"F": 1.0, "B": 2.0, "I": 1.0, "W": 1.0}[kind]

    def optimizer_time_s(self, param_count, bytes_per_param_moved):
        return 0.0


def _uniform(stages: int) -> LayerGraph:
    return LayerGraph("uniform", tuple(Layer(f"l{i}", 1.0, 2.0, 10, 40, 8.0, 100.0) for i in range(stages)))


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("v", [2, 3, 5, 6, 8])
@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_interleaved_bubble_closed_form_at_any_depth(p, v, rounds):
    """Narayanan et al. 2021, Sec. 2.2: with v chunks per rank the bubble is (p-1)/(v m) of the
    ideal step, i.e. (p-1)/(v m + p - 1) of the step, for m a multiple of p."""
    m = rounds * p
    g = _uniform(p * v)
    cfg = ParallelConfig(dp=1, pp=p, microbatches=m, schedule="interleaved", chunks=v,
                         bounds=tuple(range(p * v + 1)))
    e = simulate(g, Training(global_batch_size=m), IDEAL, cfg, UnitCost())
    ideal = m * v * 3.0                       # each rank: m micro-batches x v chunks x (F + B)
    assert e.step_time_s == pytest.approx(ideal + (p - 1) * 3.0)
    assert e.bubble_fraction == pytest.approx((p - 1) / (v * m + p - 1))
    assert sum(r.bubble_s for r in e.ranks) / p == pytest.approx(ideal * (p - 1) / (v * m))
    # every stage runs every micro-batch once each way
    sched = build_schedule("interleaved", p, m, v)
    assert sorted((a.stage, a.kind.value, a.microbatch) for r in range(p) for a in sched.actions(r)) == sorted(
        (s, k, i) for s in range(p * v) for k in ("F", "B") for i in range(m))


def test_megatron_multiple_of_pp_is_required():
    with pytest.raises(InfeasibleError, match="multiple of pp"):
        check_feasible("interleaved", 4, 6, 5)
    check_feasible("interleaved", 4, 8, 7)


def test_chunks_beyond_four_and_their_refusals(capsys):
    model = "examples/gpt_tiny_local.yaml"             # 6 cut units: embed, 4 blocks, head
    assert main(["simulate", model, "--cluster", "local-cpu", "--dp", "1", "--pp", "2", "--schedule", "interleaved",
                 "--chunks", "3", "--microbatches", "2", "--json"]) == 0
    capsys.readouterr()
    assert main(["simulate", model, "--cluster", "local-cpu", "--dp", "1", "--pp", "2", "--schedule", "interleaved",
                 "--chunks", "4", "--microbatches", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "8 pipeline stages" in err[0] and "6 cut units" in err[0]


def test_planner_considers_depths_beyond_four(tmp_path):
    """A 24-layer GPT (26 cut units) on pp = 2: interleaved v from 2 to min(13, the search's cap
    of 8) are all candidates, and the exhaustive search simulates each; told the depths, up to 13."""
    path = tmp_path / "gpt24.yaml"
    path.write_text("model: gpt\nargs: {preset: gpt-tiny, layers: 24, dropout: 0.0}\n"
                    "training: {global_batch_size: 8, dtype: fp32, optimizer: sgd}\n")
    spec = load_model(str(path))
    assert len(spec.graph) == 26
    cluster = load_cluster("dgx-h100:1x2")
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    c = Constraints(pp=2, dp=1, tp=1, microbatches=4, schedule="interleaved", zero=0, recompute=False, prune=False,
                    top=1000)
    result = plan(spec, cluster, compute, c, progress=False)
    assert space.INTERLEAVE_SEARCH_MAX == 8
    assert {x.config.chunks for x in result.ranked} == set(range(2, 9))
    told = plan(spec, cluster, compute, Constraints(**{**c.__dict__, "chunk_options": tuple(range(2, 20))}),
                progress=False)
    assert {x.config.chunks for x in told.ranked} == set(range(2, 14))       # pp x v <= 26 cut units
    # the pruned search ranks the same best
    best = plan(spec, cluster, compute, Constraints(**{**c.__dict__, "prune": True, "top": 1}), progress=False)
    assert best.chosen.key() == result.chosen.key()
