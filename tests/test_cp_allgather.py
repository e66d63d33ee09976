"""All-gather context parallelism (cp_mode allgather; Dubey et al. 2024, "The Llama 3 Herd of
Models", Sec. 3.3.2): its price for one attention layer in closed form against the ring's, its
working set, the simulator's wiring and the planner's search.  The two-rank executor run against
the single-process reference is tests/test_exec.py::test_context_parallel_gpt_matches_reference."""

import json

import nccl_closed_form
import pytest

from parsim.cli import main
from parsim.cost.compute import AnalyticalCompute
from parsim.cost.context import allgather_exposed_s, cp_buffer_bytes, ring_exposed_s, ring_sent_bytes
from parsim.cost.layer import loss_time_s
from parsim.cost.memory import backward_workspace_bytes
from parsim.errors import InfeasibleError
from parsim.plan import ParallelConfig, Plan
from parsim.schedule.actions import Kind
from parsim.search.planner import Constraints, plan
from parsim.shard.prepare import per_device_graph
from parsim.sim import simulate

GPT = "examples/gpt_small_local.yaml"        # 4 blocks, h 256, 8 heads of 32, s 128, fp32


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_allgather_of_one_attention_layer_in_closed_form(gpt, h100, cp):
    """Forward: the ring all-gather of cp K, V chunks, NCCL's latency for it (one node: a base and
    cp-1 NVLink hops, tests/nccl_closed_form.py) + (cp-1) chunk / beta; backward: that all-gather
    again and the reduce-scatter of dK, dV, twice it; none hidden.  The ring moves the same bytes
    but hides them behind the chunks' attention."""
    b = 4
    layer = per_device_graph(gpt.graph, cp=cp).layers[1]
    chunk = 2 * (128 // cp) * 8 * 32 * 4 * b                       # K and V of s/cp tokens, 8 heads of 32, fp32
    assert layer.cp_kv_bytes * b == chunk
    link = h100.link_for("group")
    coll = h100.profile.collectives
    beta = link.bandwidth_bytes_per_s * link.efficiency * coll.bandwidth_efficiency
    ranks = list(range(cp))
    gather = nccl_closed_form.ring_s("all_gather", cp, 1, 1.0) + (cp - 1) * chunk / beta
    assert allgather_exposed_s(layer, "F", b, cp, h100, ranks) == pytest.approx(gather, rel=1e-12)
    assert allgather_exposed_s(layer, "B", b, cp, h100, ranks) == pytest.approx(2 * gather, rel=1e-12)
    assert allgather_exposed_s(layer, "W", b, cp, h100, ranks) == 0.0
    # the ring on the same link: cp - 1 hops of one chunk forward, each hidden behind a chunk's attention
    compute = AnalyticalCompute.for_training(h100.device, gpt.training)
    ring_f = ring_exposed_s(compute, layer, "F", b, cp, link, coll.overlap)
    assert ring_f <= gather
    assert ring_sent_bytes(layer, "F", b, cp) == (cp - 1) * chunk                   # what each rank sends
    assert ring_sent_bytes(layer, "B", b, cp) == 2 * (cp - 1) * chunk               # K, V again and dK, dV
    # memory: the gathered K, V and the whole sequence's dK, dV in the backward, against the ring's 4 chunks
    assert cp_buffer_bytes(layer, b, cp, "allgather") == 2 * cp * chunk
    assert cp_buffer_bytes(layer, b, cp, "ring") == 4 * chunk
    g = per_device_graph(gpt.graph, cp=cp)
    for mode in ("ring", "allgather"):
        one_block = backward_workspace_bytes(g, [range(1, 2)], b, cp_mode=mode)
        assert one_block >= cp_buffer_bytes(layer, b, cp, mode) + layer.output_bytes * b


def test_simulator_adds_the_allgather_exposed_where_the_ring_hides(gpt, h100):
    compute = AnalyticalCompute.for_training(h100.device, gpt.training)
    L, cp, b = len(gpt.graph), 4, 8
    g = per_device_graph(gpt.graph, cp=cp)
    runs = {mode: simulate(gpt.graph, gpt.training, h100, ParallelConfig(1, 1, 1, bounds=(0, L), cp=cp, cp_mode=mode),
                           compute) for mode in ("ring", "allgather")}
    link, overlap = h100.link_for("group"), h100.profile.collectives.overlap
    for kind in (Kind.F, Kind.B):
        for mode, extra in (("allgather", lambda x: allgather_exposed_s(x, kind.value, b, cp, h100, range(cp))),
                            ("ring", lambda x: ring_exposed_s(compute, x, kind.value, b, cp, link, overlap))):
            want = (sum(compute.layer_time_s(x, kind.value, b) + extra(x) for x in g.layers)
                    + loss_time_s(compute, g, kind.value, b))                 # the last layer runs the loss
            got = [e - s for r, a, _, s, e in runs[mode].timeline.records if a.kind == kind]
            assert got == [pytest.approx(want, rel=1e-9)], (mode, kind)
    assert runs["allgather"].step_time_s > runs["ring"].step_time_s
    assert runs["allgather"].cp_ring_bytes == runs["ring"].cp_ring_bytes                # the same bytes
    assert runs["allgather"].config["cp_mode"] == "allgather"


def test_bad_cp_mode_is_refused_and_old_plans_load(gpt, h100, tmp_path, capsys):
    L = len(gpt.graph)
    with pytest.raises(InfeasibleError, match="allgather only with cp > 1"):
        simulate(gpt.graph, gpt.training, h100, ParallelConfig(1, 1, 1, bounds=(0, L), cp_mode="allgather"))
    path = str(tmp_path / "p.json")
    assert main(["simulate", GPT, "--cluster", "dgx-h100:1x8", "--dp", "1", "--cp", "2", "--cp-mode", "allgather",
                 "-o", path, "--json"]) == 0
    capsys.readouterr()
    d = json.loads(open(path).read())
    assert d["parallel"]["cp_mode"] == "allgather"
    assert Plan.from_json(d, path).config.cp_mode == "allgather"
    for key in ("cp_mode", "tp_comm_overlap"):         # a plan written before these fields: the defaults
        del d["parallel"][key]
    old = Plan.from_json(d, path).config
    assert (old.cp_mode, old.tp_comm_overlap) == ("ring", False)
    assert main(["simulate", GPT, "--cluster", "dgx-h100:1x8", "--cp-mode", "sideways"]) == 2
    assert "--cp-mode" in capsys.readouterr().err


def test_planner_searches_both_modes_where_cp_is_above_one(gpt, h100):
    c = Constraints(cp=2, tp=1, pp=1, zero=0, recompute=False, prune=False, top=100)
    result = plan(gpt, h100, AnalyticalCompute.for_training(h100.device, gpt.training), c, progress=False)
    modes = {x.config.cp_mode for x in result.ranked}
    assert modes == {"ring", "allgather"}
    fixed = plan(gpt, h100, AnalyticalCompute.for_training(h100.device, gpt.training),
                 Constraints(cp=2, tp=1, pp=1, zero=0, recompute=False, cp_mode="allgather", top=100), progress=False)
    assert {x.config.cp_mode for x in fixed.ranked} == {"allgather"}
