"""Expert-parallel profiles (``parsim profile --ep``): the MoE layers timed as one rank of an ep
group runs them, E/ep experts and the token all-to-alls inside, so that the simulator does not
price the all-to-alls again; such a profile prices only plans of its own ep; and validate takes
one for an hf: mixture of experts."""

import json
import os

import pytest

from parsim.cost.compute import ProfiledCompute, check_profile_ep, ep_compute_models, load_profile_table
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig
from parsim.sim import simulate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "examples", "moe_tiny_local.yaml")


@pytest.fixture(scope="module")
def tiny():
    return load_model(TINY)


def _table(tmp_path, spec, name: str, **fields) -> str:
    """A profile of ``spec`` at sizes 2 and 4 whose every layer takes 1 ms forward, 2 ms backward."""
    doc = {"schema_version": 1, "kind": "layer-profile", "model": spec.name, "dtype": "fp32",
           "microbatch_sizes": [2, 4], "optimizer_s_per_param": 1e-9,
           "layers": [{"name": n, "fwd_s": [1e-3, 1e-3], "bwd_s": [2e-3, 2e-3]} for n in spec.graph.names], **fields}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def _sim(spec, compute, ep: int = 2):
    cfg = ParallelConfig(2, 1, 2, ep=ep, bounds=(0, len(spec.graph)))
    return simulate(spec.graph, spec.training, load_cluster("local-cpu:1x2"), cfg, compute, keep_timeline=False)


def test_an_expert_parallel_profile_holds_the_all_to_alls_so_they_are_not_priced_again(tmp_path, tiny):
    """The same layer times, with and without ep: 2: the plain profile adds every MoE layer's
    exchanges on the compute stream (parsim.cost.experts.a2a_time_s), the ep profile does not; the
    bytes the all-to-alls scatter are the byte rule's either way."""
    plain = load_profile_table(_table(tmp_path, tiny, "plain.json"))
    split = load_profile_table(_table(tmp_path, tiny, "ep2.json", ep=2))
    assert (plain.ep, split.ep) == (1, 2)
    fallback = None
    a = _sim(tiny, ProfiledCompute(plain, fallback))
    b = _sim(tiny, ProfiledCompute(split, fallback))
    assert a.ranks[0].ep_comm_s > 0 and b.ranks[0].ep_comm_s == 0
    assert a.step_time_s - b.step_time_s == pytest.approx(a.ranks[0].ep_comm_s)
    assert a.ep_a2a_bytes == b.ep_a2a_bytes and a.ep_a2a_bytes[0] > 0
    assert ProfiledCompute(split, fallback).includes_ep_comm_at(2)
    assert not ProfiledCompute(plain, fallback).includes_ep_comm_at(2)


def test_an_expert_parallel_profile_prices_only_its_own_ep(tmp_path, tiny):
    split = ProfiledCompute(load_profile_table(_table(tmp_path, tiny, "ep2.json", ep=2)), None)
    check_profile_ep(split, 2)
    for ep, says in ((1, "taken without --ep"), (4, "parsim profile --ep 4")):
        with pytest.raises(InputError, match=f"ep2.json: ep: this profile timed MoE layers split over ep=2; .*{says}"):
            check_profile_ep(split, ep)
    with pytest.raises(InputError, match="plain.json: ep: this profile timed MoE layers holding every expert"):
        ep_compute_models([_table(tmp_path, tiny, "plain.json")], None)
    assert list(ep_compute_models([_table(tmp_path, tiny, "ep2.json", ep=2)], None)) == [2]


def test_validation_prices_expert_parallel_plans_with_the_ep_profile(tmp_path, tiny):
    from parsim.validation import Measured, Pricing, experts_split_over

    assert experts_split_over(tiny, 2) and not experts_split_over(tiny, 3)
    assert not experts_split_over(load_model(os.path.join(ROOT, "examples", "gpt_tiny_local.yaml")), 2)
    m = Measured({1: _table(tmp_path, tiny, "one.json"), 2: _table(tmp_path, tiny, "two.json")},
                 ep=(_table(tmp_path, tiny, "ep2.json", ep=2),))
    priced = Pricing(tiny, "local-cpu:1x2", "quick", TINY, m)
    assert priced.compute_for(ParallelConfig(2, 1, 1, ep=2)).table.ep == 2
    assert priced.compute_for(ParallelConfig(2, 1, 1)).table.ep == 1
    # the analytical column of an ep plan: the device as it stands, as for a tensor-parallel profile
    assert priced.analytical_for(tiny, ParallelConfig(2, 1, 1, ep=2)) is priced.ep_models[2].fallback


def test_parsim_profile_ep_times_the_split_layers_on_two_processes(tmp_path, tiny):
    """Two gloo processes, ep=2: the table says ep 2, has no slowest_rank (the processes wait for
    each other inside every MoE layer, as a tensor-parallel profile's do) and no gradient
    all-reduce diagnostic; every layer has times."""
    from parsim.profile.layers import launch_profilers
    from parsim.profile.rounds import RoundsPolicy

    out = tmp_path / "ep2.json"
    assert launch_profilers(TINY, [2], str(out), 2, RoundsPolicy(2, 2, 2), quiet=True, ep=2) == 0
    doc = json.loads(out.read_text())
    assert doc["ep"] == 2 and "slowest_rank" not in doc and "grad_sync" not in doc
    table = load_profile_table(str(out))
    assert table.ep == 2 and [n for n, _ in table.layers] == list(tiny.graph.names)
    assert all(t.fwd_s[0] > 0 and t.bwd_s[0] > 0 for _, t in table.layers)


def test_profile_ep_refuses_what_it_cannot_split(tmp_path, capsys):
    from parsim.cli import main

    for flags, says in ((["--ep", "3", "--nproc", "2"], "--ep 3: the 2 processes"),
                        (["--ep", "2", "--nproc", "2", "--tp", "2"], "--ep 2: profiles the MoE layers of an hf: model"),
                        (["--ep", "16", "--nproc", "16"], "--ep 16: ep=16 must divide every MoE layer")):
        assert main(["profile", TINY, "--microbatch-sizes", "2", "-o", str(tmp_path / "x.json"), *flags]) != 0
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


def test_plan_with_an_expert_parallel_profile_searches_its_ep_only(tmp_path, tiny, capsys):
    from parsim.cli import main

    profile = _table(tmp_path, tiny, "ep2.json", ep=2)
    assert main(["plan", TINY, "--cluster", "local-cpu:1x2", "--profile", profile, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["plan"]["parallel"]["ep"] == 2
    assert main(["plan", TINY, "--cluster", "local-cpu:1x2", "--profile", profile, "--ep", "1"]) != 0
    assert "taken without --ep" in capsys.readouterr().err


@pytest.mark.parametrize("scale,picked_ep", [(10.0, 1), (0.1, 2)])
def test_the_planner_prices_ep_candidates_from_their_profile(tmp_path, tiny, scale, picked_ep):
    """plan(ep_compute=...): an ep=2 candidate is priced from the ep profile, the others from the
    plain one, so a profile of split experts ten times slower keeps the pick at ep=1 and one ten
    times faster moves it to ep=2 (dp=2 on two ranks either way)."""
    from parsim.search.planner import Constraints, plan

    plain = ProfiledCompute(load_profile_table(_table(tmp_path, tiny, "plain.json")), None)
    doc = json.loads(open(_table(tmp_path, tiny, "ep2.json", ep=2)).read())
    for row in doc["layers"]:
        row["fwd_s"] = [t * scale for t in row["fwd_s"]]
        row["bwd_s"] = [t * scale for t in row["bwd_s"]]
    (tmp_path / "ep2.json").write_text(json.dumps(doc))
    split = ProfiledCompute(load_profile_table(str(tmp_path / "ep2.json")), None)
    # recompute none: the profiles here have no analytical fallback to price a recomputed part with
    chosen = plan(tiny, load_cluster("local-cpu:1x2"), plain, Constraints(dp=2, microbatch_sizes=(2, 4), tp=1,
                                                                           recompute="none"),
                  progress=False, ep_compute={2: split}).chosen
    assert chosen.config.ep == picked_ep
