"""The planner: pruning is sound, choices respect constraints, plan.json is deterministic and
round-trips, the seeds' split is a table line, and 'nothing fits' explains itself (exit 3)."""

import json
from dataclasses import replace

import pytest
import yaml

from parsim.cli import main
from parsim.cost.compute import AnalyticalCompute
from parsim.errors import DoesNotFitError
from parsim.hardware import load_cluster
from parsim.model.recompute import Recompute
from parsim.model.spec import load_model
from parsim.fmt import human_bytes
from parsim.plan import ParallelConfig
from parsim.search import bound, split
from parsim.search.enumerate import divisors, schedules, variants
from parsim.search.resolve import boundary_links
from parsim.search.floor import floor_s
from parsim.search.planner import Constraints, plan
from parsim.sim import simulate


@pytest.fixture(scope="module")
def cifar():
    return load_model("examples/resnet50_cifar10_seeds_split.yaml")


def _compute(cluster, spec):
    return AnalyticalCompute.for_training(cluster.device, spec.training)


@pytest.fixture(scope="module")
def tiny_gpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt") / "gpt.yaml"
    # eager attention (not the zoo's fused default): its selective recomputation has something to
    # recompute, and its batched matmuls split 8 ways over 4 heads
    path.write_text("schema_version: 1\nmodel: gpt\nargs: {preset: gpt-tiny, attention: eager}\n"
                    "training: {global_batch_size: 16, dtype: fp16, optimizer: adam}\n")
    return load_model(path)


def _check_lower_bound(spec, cluster, compute, variants) -> int:
    checked = 0
    for tp, layout, recompute, cp, graph in variants:
        bnd = split.Bounds(spec, graph, cluster, compute)
        for pp in divisors(cluster.world_size // (tp * cp)):
            dp = cluster.world_size // (tp * cp) // pp
            if spec.training.global_batch_size % dp or pp > len(graph):
                continue
            for m in divisors(spec.training.global_batch_size // dp):
                b = spec.training.global_batch_size // dp // m
                if b < graph.min_microbatch:
                    continue
                for schedule, v in schedules(pp, m, len(graph), Constraints()):
                    for placement in ("pp-inner", "dp-inner"):
                        cfg = ParallelConfig(dp, pp, m, schedule, v, (), placement, tp, layout, recompute,
                                                     cp=cp)
                        links = boundary_links(cluster, cfg)
                        bounds = bnd.split(schedule, m, pp, v, b, cfg.grad_ranks, links, float("inf"))
                        cfg = replace(cfg, bounds=bounds)
                        est = simulate(graph, spec.training, cluster, cfg, compute, keep_timeline=False)
                        lb = bnd.lower_bound_s(cfg, b)
                        assert lb <= est.step_time_s * (1 + 1e-9), cfg
                        # the split-free floor the search bounds a candidate by first
                        assert floor_s(*bnd.phase_times(b), m, pp, v, schedule == "zbh1") <= lb, cfg
                        checked += 1
    return checked


def test_divisors_rising_and_in_square_root_steps():
    assert all(divisors(n) == [d for d in range(1, n + 1) if n % d == 0] for n in range(1, 2000))
    assert divisors(2**40) == [2**k for k in range(41)]      # 2^20 steps, not 2^40
    assert divisors(999_999_000_001) == [1, 999_999_000_001]  # a prime near 10^12


@pytest.mark.parametrize("cluster_spec", ["ascend910:1x8", "dgx-a100:2x8", "local-cpu"])
def test_lower_bound_never_exceeds_the_simulated_step(cifar, cluster_spec):
    cluster = load_cluster(cluster_spec)
    compute = _compute(cluster, cifar)
    assert _check_lower_bound(cifar, cluster, compute, [(1, "", False, 1, cifar.graph)]) > 20


def test_lower_bound_holds_with_tensor_parallelism_and_recomputation(tiny_gpt):
    cluster = load_cluster("dgx-a100:1x8")
    settings = variants(tiny_gpt, cluster, Constraints())
    none, sel, full = Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL
    assert {(tp, layout, rc) for tp, layout, rc, _, _ in settings} >= {(1, "", none), (2, "megatron", full),
                                                                    (2, "megatron", sel), (8, "megatron-sp", none)}
    assert _check_lower_bound(tiny_gpt, cluster, _compute(cluster, tiny_gpt), settings) > 100


def test_pruned_search_equals_exhaustive(cifar):
    cluster = load_cluster("ascend910:1x8")
    pruned = plan(cifar, cluster, _compute(cluster, cifar), Constraints(top=5), progress=False)
    full = plan(cifar, cluster, _compute(cluster, cifar), Constraints(top=5, prune=False), progress=False)
    assert full.simulated > pruned.simulated
    assert [c.key() for c in pruned.ranked] == [c.key() for c in full.ranked]


def test_searching_auto_layouts_ahead_changes_no_answer(tiny_gpt, monkeypatch):
    """The planner searches the auto layout at the sizes likely to come up next in one pass
    (parsim.search.bound.SEARCH_AHEAD, auto.search_sizes); the ranking is the one it finds searching each
    size as it comes up, and more than one size was searched at once."""
    from parsim.shard import auto, prepare
    cluster = load_cluster("dgx-a100:1x8")
    batches = []
    monkeypatch.setattr(prepare, "search_sizes",
                        lambda *a, **k: (batches.append(len(set(a[5]))), auto.search_sizes(*a, **k))[1])

    def ranked():
        r = plan(tiny_gpt, cluster, _compute(cluster, tiny_gpt), Constraints(top=8, tp_layout="auto"), progress=False)
        return [(c.key(), c.estimate.step_time_s, c.peak_memory_bytes) for c in r.ranked]

    ahead = ranked()
    assert max(batches) >= 2
    monkeypatch.setattr(bound, "search_auto_sizes", lambda *a, **k: None)
    assert ranked() == ahead


def test_constraints_are_respected_and_the_pick_beats_the_seeds_split(cifar):
    cluster = load_cluster("ascend910:1x8")
    r = plan(cifar, cluster, _compute(cluster, cifar), Constraints(pp=2, schedule="1f1b"), progress=False)
    # on all 8 devices (dp x tp = 4), or tp = 1 on fewer where a layout split nothing
    assert all(c.config.pp == 2 and c.config.schedule == "1f1b"
               and (c.config.dp * c.config.tp == 4 or (c.config.tp == 1 and c.config.world_size < 8)) for c in r.ranked)
    assert r.manual is not None and r.manual.label == "manual"
    assert r.manual.config.bounds == (0, 8, 18)                       # evaluated as given
    assert r.chosen.estimate.throughput_samples_per_s >= r.manual.estimate.throughput_samples_per_s
    times = [c.estimate.step_time_s for c in r.ranked]
    assert times == sorted(times)
    mems = [c.peak_memory_bytes for c in r.pareto]
    assert mems == sorted(mems, reverse=True) and r.pareto[0] is r.chosen
    e = r.chosen.estimate
    said = next(line for line in r.explanation if "bottleneck" in line)
    assert f"bubble {e.bubble_fraction:.1%}, waiting on other ranks {e.sync_wait_fraction:.1%}" in said


def test_a_layout_that_replicates_everything_is_a_plan_on_fewer_devices(cifar):
    """On one Ascend server the searched layout for ResNet-50 at CIFAR size, batch 128 on one
    pipeline of 2, replicates every operator over the tp=4 group (sharing the work costs more in
    communication than it saves): the planner shows it as what it is, tp=1 on 2 of the 8 devices,
    simulated so (its pipeline neighbours adjacent), never as a tensor-parallel group; under these
    constraints no plan uses all 8, and the explanation says so."""
    from parsim.shard.graph import replicates_every_operator
    from parsim.shard.prepare import auto_memory_bytes, per_device_graph

    cluster = load_cluster("ascend910:1x8")
    compute = _compute(cluster, cifar)
    r = plan(cifar, cluster, compute, Constraints(top=3, dp=1, pp=2, tp=4, tp_layout="auto", microbatches=1),
             progress=False)
    graph = per_device_graph(cifar.graph, 4, "auto", False, cifar.shard, cluster, cifar.training, 128,
                             auto_memory_bytes(cluster, 2))
    assert graph.tp == 4 and replicates_every_operator(graph)
    assert r.ranked and all(c.config.tp == 1 and c.config.tp_layout == "" and c.config.world_size == 2
                            for c in r.ranked)
    # priced as the 2-device plan it is: the same estimate as simulating that plan directly
    c = r.chosen.config
    direct = simulate(cifar.graph, cifar.training, cluster.for_dtype(cifar.training.dtype), c, compute,
                      keep_timeline=False)
    assert direct.step_time_s == pytest.approx(r.chosen.estimate.step_time_s, rel=1e-12)
    assert r.all_devices is None and r.world_size == 8
    said = r.explanation[0]
    assert said.startswith("the pick uses 2 of the 8 devices (dp=1 pp=2 tp=1 m=1") and "the other 6 idle" in said
    assert "no plan on all 8 fits the constraints" in said
    assert not any("replicates" in line for line in r.explanation)
    # under a memory cap the replicated layout cannot meet, the search splits operators
    tight = per_device_graph(cifar.graph, 4, "auto", False, cifar.shard, cluster, cifar.training, 128,
                             sum(layer.param_bytes for layer in cifar.graph.layers) * 4)
    assert not replicates_every_operator(tight)


def test_where_fewer_devices_win_the_best_plan_on_all_of_them_is_shown_beside(cifar):
    """The same model searched freely: the pick (a 2-device pipeline) leaves 6 devices idle; the
    result carries the best plan on all 8 (found by a second search when none is ranked: top=2),
    the table shows each row's devices and an 'all 8' row, and use_all_devices searches only those."""
    from parsim.report.cli_text import plan_rows

    cluster = load_cluster("ascend910:1x8")
    compute = _compute(cluster, cifar)
    r = plan(cifar, cluster, compute, Constraints(top=2), progress=False)
    assert r.chosen.config.world_size < 8 and all(c.config.world_size < 8 for c in r.ranked)
    full = plan(cifar, cluster, compute, Constraints(top=5, use_all_devices=True), progress=False)
    assert all(c.config.world_size == 8 for c in full.ranked)
    assert r.all_devices is not None and r.all_devices.key() == full.chosen.key()
    assert r.all_devices.estimate.step_time_s > r.chosen.estimate.step_time_s
    rows = plan_rows(r)
    assert [row[""] for row in rows] == ["*", "2", "all 8", "manual"]
    assert rows[0]["devices"] == f"{r.chosen.config.world_size}/8" and rows[2]["devices"] == "8/8"
    said = r.explanation[0]
    a = r.all_devices.estimate.step_time_s
    assert f"the best on all 8 (dp={r.all_devices.config.dp} pp={r.all_devices.config.pp}" in said
    assert "row all 8" in said and f"{a / r.chosen.estimate.step_time_s - 1:.1%} more" in said
    # where it is ranked, the explanation points at its row and the table adds none
    wide = plan(cifar, cluster, compute, Constraints(top=10), progress=False)
    row = next(i + 1 for i, c in enumerate(wide.ranked) if c.config.world_size == 8)
    assert wide.all_devices.key() == wide.ranked[row - 1].key() and f"row {row})" in wide.explanation[0]
    assert [x[""] for x in plan_rows(wide)][-1] == "manual" and len(plan_rows(wide)) == 11


def test_the_quick_start_plans_the_seeds_scenario_on_every_device(tmp_path, capsys):
    """README's quick start: the seeds' ResNet-50 on CIFAR-10 resized to 224 px, 32 samples per
    device on 8 Ascend 910s, an fp32 graph under CANN's allow_fp32_to_fp16, on the default
    cluster; its pick uses all 8 devices, so nothing is said of idle ones."""
    spec = load_model("examples/resnet50_cifar10_seeds.yaml")
    assert tuple(spec.input.shape) == (3, 224, 224) and spec.training.global_batch_size == 32 * 8
    assert spec.training.dtype == "fp32" and spec.training.ascend_precision_mode == "allow_fp32_to_fp16"
    out = tmp_path / "plan.json"
    assert main(["plan", "examples/resnet50_cifar10_seeds.yaml", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("resnet50-cifar10-seeds on ascend910:1x8 (8 devices, global batch 256, fp32)")
    pick = next(line for line in printed.splitlines() if line.lstrip().startswith("*"))
    assert " 8/8 " in pick and "idle" not in printed
    assert json.loads(out.read_text())["cluster"] == {"spec": "ascend910:1x8", "world_size": 8}


def test_memory_cap_changes_the_plan_and_is_respected(cifar):
    cluster = load_cluster("ascend910:1x8")
    free = plan(cifar, cluster, _compute(cluster, cifar), Constraints(top=3), progress=False)
    assert len(free.pareto) >= 2
    cap = int((free.pareto[0].peak_memory_bytes + free.pareto[1].peak_memory_bytes) / 2)
    capped = plan(cifar, cluster, _compute(cluster, cifar), Constraints(top=3, max_memory_bytes=cap), progress=False)
    assert all(c.peak_memory_bytes <= cap for c in capped.ranked)
    assert capped.chosen.key() != free.chosen.key()


def _ascend_with_memory(tmp_path, memory_bytes: int, runtime_context_bytes: int = 0) -> str:
    """The ascend910 profile with another raw capacity and runtime context (no buffers, no fragmentation)."""
    d = yaml.safe_load(open("hardware_profiles/ascend910.yaml"))
    d["device"]["memory"] = memory_bytes
    d["device"]["memory_reserved"] = {"runtime_context": runtime_context_bytes, "collective_buffers": 0,
                                      "fragmentation_fraction": 0.0}
    path = tmp_path / f"ascend-{memory_bytes}-{runtime_context_bytes}.yaml"
    path.write_text(yaml.safe_dump(d))
    return str(path)


def test_a_plan_that_fits_the_raw_capacity_but_not_the_usable_memory_is_refused(cifar, tmp_path):
    """The fastest plan fits the device's raw memory; with a runtime context reserved the usable
    memory falls just below its peak, and the planner must pick what a cap there would pick.
    --max-memory at the raw capacity is taken as given and brings the raw capacity's pick back."""
    # no searched layouts: a key means one graph, one peak; zero fixed: under the smaller cap a
    # memory-constrained split of a ZeRO candidate can simulate faster than the free pick's
    fixed = Constraints(tp=1, top=3, zero=0)
    big = load_cluster("ascend910:1x8")
    free = plan(cifar, big, _compute(big, cifar), fixed, progress=False)
    peak = free.chosen.peak_memory_bytes
    raw, usable = int(peak * 1.1), int(peak) - 1
    exact = load_cluster(_ascend_with_memory(tmp_path, raw))
    fits_raw = plan(cifar, exact, _compute(exact, cifar), fixed, progress=False)
    # the free pick fits, so the pick under the raw capacity is it or faster: a cap sends candidates whose
    # time-optimal split overruns it to the memory-constrained partition, whose split may simulate faster (here
    # dp2 pp4 GPipe cut at 5, 11, 15: 5.03 ms and 138.5 MiB, against the free pick's pp8 ZB-H1, 5.88 ms and 133.8 MiB;
    # results/2026-12-07h-amd-epyc/planner-free-split.txt)
    assert fits_raw.capacity_bytes == raw and fits_raw.chosen.peak_memory_bytes <= raw
    assert fits_raw.chosen.estimate.step_time_s <= free.chosen.estimate.step_time_s

    reserved = load_cluster(_ascend_with_memory(tmp_path, raw, raw - usable))
    assert reserved.device.usable_memory_bytes == usable < peak <= raw
    r = plan(cifar, reserved, _compute(reserved, cifar), fixed, progress=False)
    capped = plan(cifar, big, _compute(big, cifar), replace(fixed, max_memory_bytes=usable), progress=False)
    assert r.capacity_bytes == usable and r.chosen.key() == capped.chosen.key() != free.chosen.key()
    assert all(c.peak_memory_bytes <= usable for c in r.ranked) and r.margin_bytes >= 0
    line = next(x for x in r.explanation if x.startswith("memory: "))
    assert f"of {human_bytes(usable)} usable ({human_bytes(raw)} raw less {human_bytes(raw - usable)} " \
           "runtime context)" in line and line.endswith(f"margin {human_bytes(r.margin_bytes)}")

    given = plan(cifar, reserved, _compute(reserved, cifar), replace(fixed, max_memory_bytes=raw), progress=False)
    assert given.capacity_bytes == raw and given.chosen.key() == fits_raw.chosen.key()
    assert f"of the {human_bytes(raw)} cap given" in next(x for x in given.explanation if x.startswith("memory: "))


def test_recomputation_is_tried_when_the_simulated_peak_misses_the_cap(tiny_gpt):
    """The closed-form memory bound has no workspace term: here it says the plan fits without
    recomputation, the simulation says it does not, and the recomputing twin must be tried."""
    cluster = load_cluster("dgx-a100:1x2")
    compute = _compute(cluster, tiny_gpt)
    only = dict(tp=1, cp=1, pp=2, microbatches=4, schedule="1f1b")
    (_, _, _, _, graph), = [v for v in variants(tiny_gpt, cluster, Constraints(**only)) if not v[2]]
    bnd = split.Bounds(tiny_gpt, graph, cluster, compute)
    bounds = bnd.split("1f1b", 4, 2, 1, 4, 1, ("group",), float("inf"))
    mem = bnd.memory_fn("1f1b", 4, 2, 1, 4, 1)
    closed = max(float(mem(j, bounds[j], bounds[j + 1])) for j in range(2))
    cfg = ParallelConfig(1, 2, 4, "1f1b", 1, bounds)
    simulated = max(simulate(graph, tiny_gpt.training, cluster, cfg, compute, keep_timeline=False).peak_memory_bytes)
    assert closed < simulated
    cap = int((closed + simulated) / 2)
    r = plan(tiny_gpt, cluster, compute, Constraints(max_memory_bytes=cap, **only), progress=False)
    assert r.chosen.config.recompute and r.chosen.peak_memory_bytes <= cap


def test_stage_boundaries_are_priced_on_the_link_that_joins_the_stages(tiny_gpt):
    """Layer 1's output is large: cutting after it is cheap over NVSwitch (3 ms) and dear over
    InfiniBand (40 ms, more than a layer's 13 ms), so across nodes the split moves."""
    from dataclasses import replace

    from parsim.model.graph import Layer, LayerGraph
    from parsim.search.resolve import resolve_config

    big = 500e6
    layers = tuple(Layer(f"l{i}", 1e12, 2e12, 1000, 2000, big if i == 1 else 1e3, 1e3) for i in range(4))
    spec = replace(tiny_gpt, graph=LayerGraph("four", layers), manual_stages=None)
    splits = {}
    for cs in ("dgx-a100:1x2", "dgx-a100:2x1"):
        cluster = load_cluster(cs)
        compute = _compute(cluster, spec)
        cfg = resolve_config(spec, cluster, compute, dp=1, pp=2, microbatches=16)
        r = plan(spec, cluster, compute, Constraints(pp=2, tp=1, microbatches=16, schedule="1f1b"), progress=False)
        assert r.chosen.config.bounds == cfg.bounds
        splits[cs] = cfg.bounds
        if cs == "dgx-a100:2x1":       # the moved split is the faster one there
            slow = simulate(spec.graph, spec.training, cluster, replace(cfg, bounds=splits["dgx-a100:1x2"]), compute)
            assert r.chosen.estimate.step_time_s < slow.step_time_s
    assert splits["dgx-a100:1x2"] == (0, 2, 4) and 2 not in splits["dgx-a100:2x1"]


def test_an_auto_layout_plan_simulates_back_from_its_config_alone(tiny_gpt):
    """The planner searches the auto layout per micro-batch size; simulate() must find the same
    layout from the plan's configuration."""
    cluster = load_cluster("local-cpu")
    compute = _compute(cluster, tiny_gpt)
    r = plan(tiny_gpt, cluster, compute, Constraints(tp=2, tp_layout="auto", top=3), progress=False)
    for cand in r.ranked:
        again = simulate(tiny_gpt.graph, tiny_gpt.training, cluster, cand.config, compute, keep_timeline=False)
        assert again.step_time_s == cand.estimate.step_time_s
        assert again.peak_memory_bytes == cand.estimate.peak_memory_bytes


def test_nothing_fits_says_by_how_much_and_exits_3(capsys):
    with pytest.raises(DoesNotFitError, match=r"needs .* more; try more pipeline stages"):
        spec = load_model("examples/resnet50_cifar10.yaml")
        cluster = load_cluster("ascend910:1x8")
        plan(spec, cluster, _compute(cluster, spec), Constraints(max_memory_bytes=10 * 2**20), progress=False)
    assert main(["plan", "examples/resnet50_cifar10.yaml", "--max-memory", "10MiB"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MiB more" in err


def test_plan_json_is_deterministic_and_simulates_back(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["plan", "examples/resnet50_cifar10_seeds_split.yaml", "-o", str(a), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert main(["plan", "examples/resnet50_cifar10_seeds_split.yaml", "-o", str(b)]) == 0
    capsys.readouterr()
    assert a.read_bytes() == b.read_bytes()
    assert {"search_time_s", "plan", "candidates", "pareto", "manual"} <= set(out)
    assert out["manual"]["label"] == "manual"
    saved = json.loads(a.read_text())
    assert saved["schema_version"] == 1 and saved["parallel"]["stages"][0][0] == "head"
    assert main(["simulate", str(a), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["step_time_s"] == pytest.approx(saved["estimate"]["step_time_s"])


def _rename_layer(d, old, new):
    """A plan made for a model whose layer `old` has since been renamed (kept consistent)."""
    d["model"]["layers"] = [new if n == old else n for n in d["model"]["layers"]]
    d["parallel"]["stages"] = [[new if n == old else n for n in pair] for pair in d["parallel"]["stages"]]


@pytest.mark.parametrize("edit,words", [
    (lambda d: d.update(schema_version=99), "schema_version"),
    (lambda d: d["parallel"].update(bounds=[0, 3]), "parallel.bounds"),
    (lambda d: _rename_layer(d, "layer2.1", "layer2.1b"), "model.layers"),
    (lambda d: d["parallel"].update(colour=1), "parallel.colour"),
])
def test_bad_plan_json_is_one_line(tmp_path, capsys, edit, words):
    good = tmp_path / "p.json"
    assert main(["plan", "examples/resnet50_cifar10.yaml", "-o", str(good), "--json"]) == 0
    capsys.readouterr()
    d = json.loads(good.read_text())
    edit(d)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    assert main(["simulate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


def test_tensor_parallel_candidates_use_their_own_compute_model(tiny_gpt):
    """`parsim plan --tp-profile`: a profile of the shards prices its (tp, layout) candidates."""
    cluster = load_cluster("local-cpu")

    class Free:            # a compute model under which megatron's tp=2 shards cost next to nothing
        includes_tp_comm = True

        def layer_time_s(self, layer, kind, microbatch):
            return 1e-9

        def optimizer_time_s(self, param_count, bytes_per_param_moved):
            return 1e-9
    base = _compute(cluster, tiny_gpt)
    without = plan(tiny_gpt, cluster, base, Constraints(top=1), progress=False).chosen.config
    picked = plan(tiny_gpt, cluster, base, Constraints(top=1), progress=False,
                  tp_compute={(2, "megatron"): Free()}).chosen.config
    assert (picked.tp, picked.tp_layout) == (2, "megatron") != (without.tp, without.tp_layout)
