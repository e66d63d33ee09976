"""Hybrid sharded data parallelism (HSDP, ParallelConfig.dp_shard): ZeRO's shards span groups of
dp_shard data-parallel ranks that replicate one another.  The groups, the collectives and bytes
priced against closed forms, memory as ZeRO over the shard group, the inputs (plan.json, CLI), and
the executor against the single-process reference."""

import json
import os
from collections import Counter
from dataclasses import replace

import pytest

from parsim.cli import main
from parsim.cost.comm import collective_time_s, shard_padded_bytes
from parsim.cost.memory import bytes_per_param
from parsim.errors import InfeasibleError, InputError
from parsim.fmt import human_time
from parsim.hardware import load_cluster
from parsim.model.spec import Training, load_model
from parsim.plan import ParallelConfig, Plan
from parsim.refusals import shard_refusal
from parsim.sim import simulate

from test_sim import IDEAL, UnitCost, assert_step_adds_up, uniform_graph

A100 = load_cluster("dgx-a100:2x8")          # two nodes: a shard group of 8 inside one, replicas across
WIDTH = bytes_per_param("fp16", "adam")["grads"]


def _run(zero, dp=16, dp_shard=8, m=1, params=1001, n_layers=4, cluster=A100):
    g = uniform_graph(n_layers, params=params)
    cfg = ParallelConfig(dp=dp, pp=1, microbatches=m, bounds=(0, n_layers), zero=zero, dp_shard=dp_shard)
    return cfg, simulate(g, Training(dp * m, "fp16", "adam"), cluster, cfg, UnitCost(1.0))


@pytest.mark.parametrize("dp,dp_shard,cp,pp,placement", [
    (8, 4, 1, 1, "pp-inner"), (8, 2, 2, 2, "pp-inner"), (8, 4, 2, 2, "dp-inner"), (6, 3, 1, 3, "dp-inner"),
])
def test_shard_groups_partition_the_gradient_group_and_replicas_take_one_rank_of_each(dp, dp_shard, cp, pp, placement):
    cfg = ParallelConfig(dp=dp, pp=pp, microbatches=1, cp=cp, zero=1, dp_shard=dp_shard, placement=placement)
    assert (cfg.shard_ranks, cfg.shard_replicas) == (dp_shard * cp, dp // dp_shard)
    for p in range(pp):
        shards = [cfg.shard_group(p, 0, k) for k in range(cfg.shard_replicas)]
        assert sorted(r for s in shards for r in s) == sorted(cfg.grad_group(p))
        assert all(len(s) == cfg.shard_ranks for s in shards)
        # a shard group is dp_shard consecutive replicas: the inner dim, as torchtitan's mesh
        assert [cfg.coordinates(r)[0] for r in shards[1]][::cp] == list(range(dp_shard, 2 * dp_shard))
        for j in range(cfg.shard_ranks):
            assert cfg.replicate_group(p, 0, j) == tuple(s[j] for s in shards)
    plain = replace(cfg, dp_shard=0)
    assert plain.shard_group(0) == plain.grad_group(0) and plain.shard_replicas == 1


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_the_collectives_and_their_bytes_are_the_shard_groups_then_the_replicas(zero):
    """dp 16 as 2 shard groups of 8 (one per node): every gradient buffer is reduce-scattered over
    its 8 ranks, then each 1/8 shard all-reduced over its 2 replicas; parameters are gathered
    within the group.  Ring bytes, over every rank: (n - 1) x the buffer in each of the R shard
    groups for a reduce-scatter or a gather, on the node's links; 2 (R - 1) x each shard in each
    of the n replica groups for the all-reduce, on the network."""
    m, n, R, dp = 3, 8, 2, 16
    cfg, e = _run(zero, m=m)
    got = Counter(e.sharded_collectives[0])
    if zero == 1:          # one bucket a step; the updated shards gathered after the optimizer
        x = shard_padded_bytes(4 * 1001 * WIDTH, WIDTH, n)
        assert e.grad_buckets_bytes == ((x,),)
        assert got == Counter({("reduce_scatter", x): 1, ("all_reduce", x / n): 1, ("all_gather", x): 1})
        reductions, gathers = x, x
    else:                  # FSDP2's units, one per layer, reduced every micro-batch
        x = shard_padded_bytes(1001 * WIDTH, WIDTH, n)
        gathered = 4 if zero == 2 else 8 * m
        assert got == Counter({("reduce_scatter", x): 4 * m, ("all_reduce", x / n): 4 * m, ("all_gather", x): gathered})
        reductions, gathers = 4 * m * x, gathered * x
    assert e.comm_bytes["group"] == pytest.approx((dp - R) * (reductions + gathers))
    assert e.comm_bytes["network"] == pytest.approx(2 * (R - 1) * reductions)
    assert set(e.comm_bytes) == {"group", "network"}
    assert_step_adds_up(e)


def test_a_reduction_costs_the_reduce_scatter_then_the_shards_all_reduce():
    """pp = 1, m = 1, ZeRO-1, one bucket ready at the backward's end: the step is forward (4 x 1),
    backward (4 x 2), the bucket's reduce-scatter over the shard group and then its shard's
    all-reduce over the replicas, the optimizer (1 s), the gather of the updated shards."""
    cfg, e = _run(1, params=10**6)
    x = e.grad_buckets_bytes[0][0]
    rs = collective_time_s(A100, list(cfg.shard_group(0)), x, "reduce_scatter")
    ar = collective_time_s(A100, list(cfg.replicate_group(0)), x / 8, "all_reduce")
    ag = collective_time_s(A100, list(cfg.shard_group(0)), x, "all_gather")
    assert rs > 0 and ar > 0 and ag > 0
    assert e.step_time_s == pytest.approx(4 + 8 + rs + ar + 1.0 + ag)


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_memory_is_zero_over_the_shard_group(zero):
    """A rank's parameters, gradients and optimizer state under HSDP (dp 16 in groups of 4) are
    those of plain ZeRO over 4 ranks, at the same micro-batch size."""
    _, hybrid = _run(zero, dp=16, dp_shard=4)
    _, plain = _run(zero, dp=4, dp_shard=0)
    parts = ("params_bytes", "grads_bytes", "optimizer_bytes", "comm_buffers_bytes", "activations_bytes")
    assert [getattr(hybrid.ranks[0].memory, k) for k in parts] == [getattr(plain.ranks[0].memory, k) for k in parts]
    _, fully = _run(zero, dp=16, dp_shard=0)
    assert fully.ranks[0].memory.optimizer_bytes == pytest.approx(plain.ranks[0].memory.optimizer_bytes / 4)


class OptimizerByParams(UnitCost):
    """UnitCost's layers, and an optimizer step of 1 s per parameter it steps."""

    def optimizer_time_s(self, param_count, bytes_per_param_moved):
        return float(param_count)


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_a_rank_steps_its_shard_of_the_group(zero):
    """On a cluster whose collectives are free, the step is forward, backward and the optimizer:
    under HSDP (dp 16 in groups of 4) a rank steps a quarter of the 4 x 1001 parameters, as under
    plain ZeRO over 4 ranks, not a sixteenth."""
    def step(dp, dp_shard):
        g = uniform_graph(4, params=1001)
        cfg = ParallelConfig(dp=dp, pp=1, microbatches=1, bounds=(0, 4), zero=zero, dp_shard=dp_shard)
        return simulate(g, Training(dp, "fp16", "adam"), IDEAL, cfg, OptimizerByParams()).step_time_s
    assert step(16, 4) == pytest.approx(4 + 8 + 4 * 1001 / 4) == pytest.approx(step(4, 0))
    assert step(16, 0) == pytest.approx(4 + 8 + 4 * 1001 / 16)


@pytest.mark.parametrize("zero", [1, 3])
def test_a_shard_group_of_every_rank_is_plain_zero(zero):
    _, hybrid = _run(zero, dp=16, dp_shard=16)
    _, plain = _run(zero, dp=16, dp_shard=0)
    assert hybrid.step_time_s == plain.step_time_s and hybrid.comm_bytes == plain.comm_bytes
    assert hybrid.sharded_collectives == plain.sharded_collectives
    assert hybrid.ranks[0].memory == plain.ranks[0].memory


@pytest.mark.parametrize("kwargs,says", [
    (dict(dp=8, zero=1, dp_shard=3), "does not divide dp = 8"),
    (dict(dp=8, zero=0, dp_shard=4), "set zero 1, 2 or 3"),
    (dict(dp=8, zero=1, dp_shard=1), "leaves nothing to shard"),
    (dict(dp=8, zero=1, dp_shard=4, ep=2), "drop dp_shard or use ep 1"),
])
def test_layouts_hybrid_sharding_cannot_take_are_refused_in_one_line(kwargs, says):
    cfg = ParallelConfig(pp=1, microbatches=1, bounds=(0, 4), **kwargs)
    field, why = shard_refusal(cfg)
    assert field == "dp_shard" and says in why and "\n" not in why
    with pytest.raises(InfeasibleError, match="dp_shard" if "ep" not in kwargs else "ep=2"):   # no experts to shard
        simulate(uniform_graph(4), Training(8, "fp16", "adam"), A100, cfg, UnitCost(1.0))
    assert shard_refusal(replace(cfg, dp_shard=0)) is None


def test_plan_json_keeps_dp_shard_and_names_a_bad_one(tmp_path, capsys):
    path = tmp_path / "plan.json"
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu:2x2", "--dp", "4", "--pp", "1",
                 "--microbatches", "2", "--zero", "2", "--dp-shard", "2", "-o", str(path)]) == 0
    assert "zero=2 dp_shard=2" in capsys.readouterr().out
    d = json.loads(path.read_text())
    assert d["parallel"]["dp_shard"] == 2 and d["estimate"]["config"]["dp_shard"] == 2
    assert Plan.from_json(d, str(path)).config.dp_shard == 2
    d["parallel"]["dp_shard"] = 3
    with pytest.raises(InputError, match=r"plan.json: parallel.dp_shard: 3 does not divide dp = 4"):
        Plan.from_json(d, str(path))
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu:2x2", "--dp", "4", "--pp", "1",
                 "--dp-shard", "2"]) != 0
    err = capsys.readouterr().err
    assert "--dp-shard 2: hybrid sharding shards ZeRO's states" in err and "Traceback" not in err



def _tiny_with(tmp_path, parallel: str) -> str:
    path = tmp_path / "tiny.yaml"
    path.write_text(open("examples/gpt_tiny_local.yaml").read() + f"parallel: {{{parallel}}}\n")
    return str(path)


def test_model_yaml_gives_the_shard_group_as_dp_shard_does(tmp_path, capsys):
    """model.yaml's parallel.dp_shard is the shard group simulate prices where --dp-shard is not
    given, as it prices --dp-shard (plan.json keeps it); a bad one is refused in one line naming the
    file and the field, at load where the file alone shows it, else when priced."""
    flags = ["--cluster", "local-cpu:2x2", "--dp", "4", "--pp", "1", "--microbatches", "2", "--zero", "2"]
    hinted, given = tmp_path / "hinted.json", tmp_path / "given.json"
    assert main(["simulate", _tiny_with(tmp_path, "dp_shard: 2"), *flags, "-o", str(hinted)]) == 0
    assert main(["simulate", "examples/gpt_tiny_local.yaml", *flags, "--dp-shard", "2", "-o", str(given)]) == 0
    capsys.readouterr()
    a, b = (json.loads(x.read_text()) for x in (hinted, given))
    assert a["parallel"]["dp_shard"] == 2 and a["estimate"]["step_time_s"] == b["estimate"]["step_time_s"]
    for parallel, says in [("dp: 4, zero: 0, dp_shard: 2", "parallel.dp_shard: 2: hybrid sharding shards ZeRO's"),
                           ("dp: 4, zero: 1, dp_shard: 3", "parallel.dp_shard: 3 does not divide dp = 4")]:
        with pytest.raises(InputError, match=r"tiny.yaml: " + says.replace(".", r"\.")):
            load_model(_tiny_with(tmp_path, parallel))
    bad = _tiny_with(tmp_path, "dp_shard: 2")           # zero left to the command line: 0 here
    assert main(["simulate", bad, "--cluster", "local-cpu:2x2", "--dp", "4", "--pp", "1"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tiny.yaml: parallel.dp_shard: 2: hybrid sharding shards ZeRO's states" in err[0]


def test_the_planner_prices_its_ranked_plans_with_a_given_shard_group(tmp_path, capsys):
    """parsim plan --dp-shard 4 (or model.yaml's parallel.dp_shard): the search offers only the ZeRO
    plans a group of 4 applies to (parsim.refusals.shard_refusal: zero 1-3, 4 dividing dp) and prices its
    ranked plans again with the group, each as simulate prices it; a plan of dp 4 is ZeRO over every
    dp rank already.  --hybrid-shard beside it is refused in one line."""
    out = tmp_path / "plan.json"
    assert main(["plan", "examples/gpt_tiny_local.yaml", "--cluster", "dgx-a100:2x8", "--dp-shard", "4", "--tp", "1",
                 "--top", "4", "--json", "-o", str(out)]) == 0
    got = json.loads(capsys.readouterr().out)
    spec, cluster = load_model("examples/gpt_tiny_local.yaml"), load_cluster("dgx-a100:2x8")
    assert len(got["candidates"]) == 4
    for c in got["candidates"]:
        assert c["zero"] >= 1 and c["dp"] % 4 == 0 and c.get("dp_shard", 0) == (0 if c["dp"] == 4 else 4), c
    assert any(c["dp"] > 4 for c in got["candidates"])
    chosen = Plan.from_json(json.loads(out.read_text()), str(out)).config
    assert simulate(spec.graph, spec.training, cluster, chosen).step_time_s == pytest.approx(
        got["plan"]["estimate"]["step_time_s"], rel=1e-12)
    hinted = tmp_path / "hinted.json"
    assert main(["plan", _tiny_with(tmp_path, "dp_shard: 4"), "--cluster", "dgx-a100:2x8", "--tp", "1", "--top", "4",
                 "-o", str(hinted)]) == 0
    assert json.loads(hinted.read_text())["parallel"] == json.loads(out.read_text())["parallel"]
    capsys.readouterr()
    assert main(["plan", "examples/gpt_tiny_local.yaml", "--cluster", "dgx-a100:2x8", "--dp-shard", "4",
                 "--hybrid-shard"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["parsim: error: --dp-shard 4 fixes the shard group and --hybrid-shard searches one; give one"]



def test_the_model_yaml_split_takes_its_shard_group(tmp_path):
    """The model.yaml's own split (pipeline_stage:), priced beside the search's plans, takes its
    parallel.dp_shard as they do."""
    from parsim.cost.compute import AnalyticalCompute
    from parsim.search.planner import plan

    path = tmp_path / "split.yaml"
    path.write_text(open("examples/resnet50_cifar10_seeds_split.yaml").read().replace(
        "parallel: {dp: 4, pp: 2, microbatches: 2, schedule: gpipe}",
        "parallel: {dp: 4, pp: 2, microbatches: 2, schedule: gpipe, zero: 1, dp_shard: 2}"))
    spec, cluster = load_model(str(path)), load_cluster("ascend910:1x8")
    r = plan(spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training), progress=False)
    assert r.manual is not None and r.manual.config.bounds == (0, 8, 18) and r.manual.config.dp_shard == 2
    assert all(c.config.dp_shard == 2 or c.config.dp == 2 for c in r.ranked)      # dp 2: ZeRO over its group


# ----------------------------------------------------------------------------- the executor

@pytest.mark.parametrize("zero", [1, 3])
def test_hsdp_runs_as_the_reference_with_the_priced_collectives(tmp_path, capfd, zero):
    """dp 4 as 2 shard groups of 2 (4 ranks on 2 cores): ZeRO-1 through parsim's buckets (each
    slice all-reduced over its replicas after the reduce-scatter), ZeRO-3 through FSDP2 on a 2-D
    mesh.  Three steps equal the single-process reference; the collectives that ran, kind and
    bytes, are the simulator's; a rank holds half the optimizer state (not a quarter), as priced."""
    from test_exec import assert_same_as_reference, make_plan, run

    model = "examples/gpt_tiny_local.yaml"
    plan = make_plan(tmp_path, f"hsdp-zero{zero}", "--dp", "4", "--pp", "1", "--microbatches", "2", "--zero",
                     str(zero), "--dp-shard", "2", "--cluster", "local-cpu:2x2", model=model)
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "3") == 0
    m = assert_same_as_reference(plan, out, 3)
    saved = json.loads(open(plan).read())["estimate"]
    counted = Counter(tuple(c) for c in m["sharded_collectives"][0])
    assert counted == Counter(tuple(c) for c in saved["sharded_collectives"][0])
    assert counted["all_reduce", max(b for op, b in counted if op == "all_reduce")] >= 1
    spec = load_model(model)
    whole = spec.graph.param_count * bytes_per_param(spec.training.dtype, spec.training.optimizer)["optimizer"]
    measured, predicted = m["peak_memory_parts"][0], saved["memory_breakdown"][0]
    assert measured["optimizer_bytes"] == pytest.approx(predicted["optimizer_bytes"], rel=0.01) \
        == pytest.approx(whole / 2, rel=0.01)


# ----------------------------------------------------------------------------- the planner

@pytest.mark.parametrize("dp,pp,tp,cp,placement,per_node,expect", [
    (128, 1, 1, 1, "pp-inner", 8, 8),      # pure data parallelism: a node's 8 replicas
    (64, 1, 2, 1, "pp-inner", 8, 4),       # tp 2: 4 replicas a node
    (16, 2, 2, 1, "pp-inner", 8, 2),       # pp-inner puts a replica's 2 pipeline ranks between replicas
    (16, 2, 2, 1, "dp-inner", 8, 4),
    (12, 1, 1, 1, "pp-inner", 8, 4),       # the most that divide dp and keep to a node (6 would straddle two)
    (8, 1, 1, 1, "pp-inner", 8, 0),        # one node holds every replica: plain ZeRO
    (16, 8, 1, 1, "pp-inner", 8, 0),       # one replica a node
    (16, 4, 1, 2, "dp-inner", 8, 4),       # a shard group of 4 replicas x cp 2
])
def test_the_node_shard_keeps_each_group_inside_one_node(dp, pp, tp, cp, placement, per_node, expect):
    from parsim.search.hybrid_shard import node_shard, shard_sizes

    cfg = ParallelConfig(dp=dp, pp=pp, microbatches=1, tp=tp, cp=cp, zero=1, placement=placement)
    shard = node_shard(cfg, per_node)
    assert shard == expect
    if shard:
        assert shard_sizes(cfg, per_node)[0] == shard
        hybrid = replace(cfg, dp_shard=shard)
        assert shard_refusal(hybrid) is None
        for k in range(hybrid.shard_replicas):
            assert len({r // per_node for r in hybrid.shard_group(0, 0, k)}) == 1


def test_shard_sizes_double_from_a_nodes_replicas():
    from parsim.search.hybrid_shard import shard_sizes

    cfg = ParallelConfig(dp=128, pp=1, microbatches=1, zero=3)
    assert shard_sizes(cfg, 8) == [8, 16, 32, 64]
    assert shard_sizes(replace(cfg, dp=96), 8) == [8, 16, 32]                 # 64 does not divide 96
    # a node holds one replica (tp 8): groups of two nodes, then four
    assert shard_sizes(ParallelConfig(dp=8, pp=1, microbatches=1, tp=8, zero=1), 8) == [2, 4]
    assert shard_sizes(replace(cfg, dp=8), 8) == []                           # every replica on one node


def test_the_planner_keeps_shards_within_a_node_where_that_is_faster_when_asked(tmp_path, capsys):
    """Llama 2 7B on 16 DGX A100 nodes, one sequence a GPU, ZeRO-1 (results/simulated/2026-12-01-
    hsdp.txt): with --hybrid-shard the pick shards within each node, faster than sharding over all
    128 ranks as the search priced it, and says so; the plan.json it writes keeps the groups."""
    model = tmp_path / "llama2_7b.yaml"
    text = open("examples/llama2_7b.yaml").read()
    model.write_text(text.replace("hf: llama2_7b/config.json", "hf: " + os.path.abspath("examples/llama2_7b/config.json"))
                     .replace("global_batch_size: 1024", "global_batch_size: 128 #"))
    out = tmp_path / "plan.json"
    capsys.readouterr()
    assert main(["plan", str(model), "--cluster", "dgx-a100:16x8", "--dp", "128", "--pp", "1", "--microbatches", "1",
                 "--recompute", "full", "--zero", "1", "--hybrid-shard", "--top", "1", "--json", "-o", str(out)]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["plan"]["parallel"]["dp_shard"] == 8
    plan = Plan.from_json(json.loads(out.read_text()), str(out))
    spec = load_model(str(model))
    plain = simulate(spec.graph, spec.training, load_cluster("dgx-a100:16x8"), replace(plan.config, dp_shard=0))
    assert got["plan"]["estimate"]["step_time_s"] < plain.step_time_s
    line = next(x for x in got["explanation"] if x.startswith("hybrid sharding: ZeRO-1's shards over groups of 8 "))
    for shard in (16, 32, 64):          # the larger groups it tried are slower
        wider = simulate(spec.graph, spec.training, load_cluster("dgx-a100:16x8"), replace(plan.config, dp_shard=shard))
        assert wider.step_time_s > got["plan"]["estimate"]["step_time_s"]
    assert f"against {human_time(plain.step_time_s)} sharding over all 128" in line
