"""A split moved a layer at a time until its peak floor fits (parsim.search.resplit), and the
planner repairing a candidate whose partitioner split overruns the cap by the backward's workspace
(parsim.search.bound.BranchAndBound.repaired)."""

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search.planner import plan
from parsim.search.resplit import REACH, resplit


def _floors(weights, pp):
    """Each rank's floor: the sum of its stages' layer weights (rank r holds stages r, r + pp, ...)."""
    def floors_of(bounds):
        out = [0.0] * pp
        for s in range(len(bounds) - 1):
            out[s % pp] += sum(weights[bounds[s]:bounds[s + 1]])
        return out
    return floors_of


def test_resplit_moves_the_fullest_ranks_boundaries_a_layer_at_a_time_until_it_fits():
    weights = [3.0] + [1.0] * 12 + [3.0]           # an embedding and a head heavier than a block
    floors_of = _floors(weights, 2)
    # (0, 8, 14): 10 and 8; under a cap of 9.6 the walk moves the boundary one layer back: 9 and 9
    assert resplit((0, 8, 14), 2, floors_of, 9.6, 4) == (0, 7, 14)
    # interleaved, v = 2: stages 0 and 2 on rank 0; the first and last boundaries stay
    bounds = (0, 5, 8, 12, 14)
    found = resplit(bounds, 2, floors_of, 10.5, 8)          # ranks 11 and 7 at first
    assert found is not None and found[0] == 0 and found[-1] == 14 and max(floors_of(found)) <= 10.5
    assert all(a < b for a, b in zip(found, found[1:]))                 # every stage keeps a layer


def test_resplit_leaves_a_split_that_fits_or_one_beyond_its_reach():
    floors_of = _floors([1.0] * 10, 2)
    assert resplit((0, 5, 10), 2, floors_of, 5.0, 4) is None           # fits: nothing to repair
    assert resplit((0, 9, 10), 2, floors_of, 9.0 / REACH - 1e-9, 4) is None     # over by more than REACH
    assert resplit((0, 1, 2), 2, _floors([5.0, 1.0], 2), 4.9, 4) is None     # no move keeps both stages


def test_the_planner_repairs_a_split_the_backwards_workspace_overruns():
    """Llama 3 405B on 576 H100s: the partitioner's split of dp 16 pp 9 tp 4 (full recomputation)
    has a peak floor 1.42 GiB over the cap (the closed form leaves out the backward's workspace);
    one a layer off at the middle boundaries fits and is the fastest plan found
    (results/2026-12-03b-amd-epyc/planner-split-overrun.txt)."""
    spec = load_model("examples/llama3_405b.yaml")
    cluster = load_cluster("dgx-h100:72x8")
    result = plan(spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training), progress=False)
    c = result.chosen.config
    assert (c.dp, c.pp, c.tp, c.recompute) == (16, 9, 4, "full")
    assert result.chosen.peak_memory_bytes <= result.capacity_bytes
    assert result.chosen.estimate.step_time_s < 203.0          # the tp 8 plan it beats: 203.94 s
