"""ZeRO stages 0-3 (Rajbhandari et al. 2020): memory per rank, the collectives priced, the
planner's search over them, and the configuration's inputs (plan.json, model.yaml, CLI)."""

import functools
import json
import math
from collections import Counter
from dataclasses import replace

import pytest

from parsim.cli import main
from parsim.cost.compute import AnalyticalCompute
from parsim.cost.comm import collective_time_s, fsdp_unit_s, prefetched_gather_s, shard_padded_bytes
from parsim.cost.memory import bytes_per_param, fsdp_gathered_param_bytes
from parsim.errors import InfeasibleError
from parsim.hardware import load_cluster
from parsim.model.spec import Training, load_model
from parsim.plan import ParallelConfig
from parsim.search import split
from parsim.search.enumerate import schedules
from parsim.search.resolve import boundary_links
from parsim.search.planner import Constraints, plan
from parsim.sim import simulate

from test_sim import IDEAL, UnitCost, assert_step_adds_up, uniform_graph

A100 = load_cluster("dgx-a100:1x8")


def _run(zero, dp=4, m=1, pp=1, n_layers=4, params=1000, cluster=IDEAL, training=None, **parallel):
    """(graph, config, estimate) of a uniform graph at ZeRO stage ``zero``; ``parallel``: more ParallelConfig fields."""
    g = uniform_graph(n_layers, params=params)
    per = n_layers // pp
    cfg = ParallelConfig(dp=dp, pp=pp, microbatches=m, bounds=tuple(range(0, n_layers + 1, per)), zero=zero,
                         **parallel)
    return g, cfg, simulate(g, training or Training(dp * m, "fp16", "adam"), cluster, cfg, UnitCost(1.0))


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_memory_per_rank_is_zeros_table(zero):
    """ZeRO Sec. 5.1, fp16 + Adam (K = 12), Psi parameters over Nd = 4 ranks: (2 + 2 + K) Psi,
    (2 + 2) Psi + K Psi / Nd, 2 Psi + (2 + K) Psi / Nd, (2 + 2 + K) Psi / Nd; plus what FSDP2
    holds besides: at stage 2 its shards of the parameters (2 Psi / Nd) beside the unsharded
    copies, at stage 3 two gathered layers' parameters, and from stage 2 two layers' unsharded
    gradients (the running unit's and the reduce-scatter input of the one before), held in the
    second layer's backward from the end, after the last layer freed its 100 saved bytes and the
    loss its 8 (the last layer's 8-byte output in fp32); no pipeline buffers at pp = 1."""
    g, cfg, e = _run(zero)
    psi, nd = 4 * 1000, 4
    mem = e.ranks[0].memory
    expected = {0: 16 * psi, 1: 4 * psi + 12 * psi / nd, 2: 2 * psi + 14 * psi / nd, 3: 16 * psi / nd}[zero]
    besides = {2: 2 * psi / nd, 3: 2 * 2 * 1000}.get(zero, 0)          # 1000 params a layer, 2 bytes
    assert mem.params_bytes + mem.grads_bytes + mem.optimizer_bytes == pytest.approx(expected + besides)
    assert mem.comm_buffers_bytes == pytest.approx(2 * 2 * 1000 - 100 - 8 if zero >= 2 else 0)


def test_zero3_gathers_units_beside_the_activations_not_yet_freed():
    """ZeRO-3's gathered parameters (the running unit's and the prefetched one's) are counted in
    the backward of the layer that holds them, beside the activations the micro-batch has not yet
    freed (fsdp_gathered_param_bytes), not on top of the forward's activation peak: two big layers
    first, two small ones last, 100 saved bytes and 8-byte outputs each, fp16 Adam, dp=4, b=1."""
    from parsim.model.graph import Layer, LayerGraph

    counts = [10000, 10000, 10, 10]
    g = LayerGraph("g", tuple(Layer(f"l{i}", 1.0, 2.0, n, n * 4, 8.0, 100.0) for i, n in enumerate(counts)))
    cfg = ParallelConfig(dp=4, pp=1, microbatches=1, bounds=(0, 4), zero=3)
    mem = simulate(g, Training(4, "fp16", "adam"), IDEAL, cfg, UnitCost(1.0)).ranks[0].memory
    full = [0.0] + [2.0 * n for n in counts]                          # fp16 parameters per unit; no root
    units = [[]] + [[i] for i in range(4)]
    assert fsdp_gathered_param_bytes(units, full, 4) == [20000, 40000, 20020, 40]
    # per layer, backward order: held gradients (fsdp_held_grad_bytes) + gathered, less what the
    # later layers and the loss (8 bytes) freed, plus the 2 x 8-byte output gradients
    grads = [40000, 20020, 40, 20]
    freed = [308, 208, 108, 8]
    with_grads = max(h + 16 - f for h, f in zip(grads, freed))                      # 39708 at l0
    with_all = max(h + x + 16 - f for h, x, f in zip(grads, [20000, 40000, 20020, 40], freed))   # 59828 at l1
    assert mem.params_bytes == pytest.approx(2 * sum(counts) / 4 + with_all - with_grads)       # 10010 + 20120
    # before: the largest pair of units (2 x 20000) on top of the forward's peak: 10010 + 40000


def test_collectives_counted_per_stage_and_bytes_moved():
    dp, m = 4, 3
    width = bytes_per_param("fp16", "adam")["grads"]
    for zero in (1, 2, 3):
        g, cfg, e = _run(zero, dp=dp, m=m, params=1001, cluster=A100)
        assert e.config["zero"] == zero
        layer = shard_padded_bytes(1001 * width, width, dp)            # 1001 elements padded to 1004
        assert layer == 1004 * width
        got = Counter(e.sharded_collectives[0])
        if zero == 1:            # one DDP bucket, reduce-scattered once, gathered after the optimizer
            bucket = shard_padded_bytes(4 * 1001 * width, width, dp)
            assert e.grad_buckets_bytes == ((bucket,),)
            assert got == Counter({("reduce_scatter", bucket): 1, ("all_gather", bucket): 1})
            moved = (dp - 1) * bucket * 2
        else:                    # FSDP2's units, one per layer: reduce-scattered every micro-batch;
            # gathered once per step (2), or before every forward and backward (3)
            gathers = 4 if zero == 2 else 8 * m
            assert e.grad_buckets_bytes == ((layer,) * 4,)
            assert got == Counter({("reduce_scatter", layer): 4 * m, ("all_gather", layer): gathers})
            moved = (dp - 1) * layer * (4 * m + gathers)
        assert sum(e.comm_bytes.values()) == pytest.approx(moved)
        assert_step_adds_up(e)
        js = e.to_json()
        assert Counter(tuple(c) for c in js["sharded_collectives"][0]) == got and js["config"]["zero"] == zero
    assert _run(0, cluster=A100)[2].sharded_collectives == ((),)


def test_zero1_exposes_the_parameter_gather_after_a_sharded_optimizer():
    """pp = 1, m = 1: the step is forward, backward, the buckets' tail, the optimizer (1 s per
    stage with UnitCost, the same whatever the shard: the engine takes its price), then at stage
    1-2 the all-gather of the updated shards on the compute stream."""
    _, _, e0 = _run(0, cluster=A100, params=10**6)
    g, cfg, e1 = _run(1, cluster=A100, params=10**6)
    bucket = e1.grad_buckets_bytes[0][0]
    ag = collective_time_s(A100, cfg.dp_group(0), bucket, "all_gather")
    rs = collective_time_s(A100, cfg.dp_group(0), bucket, "reduce_scatter")
    # DDP: torch's 1 MiB first bucket closes on the first layer's 2 MB, the other three layers
    # fill the second, ready at the backward's end (the first is reduced under the backward)
    assert e0.grad_buckets_bytes == ((2e6, 6e6),)
    ar = collective_time_s(A100, cfg.dp_group(0), e0.grad_buckets_bytes[0][-1], "all_reduce")
    overlap = A100.profile.collectives.overlap
    # the last bucket is ready at the backward's end; its time delays the optimizer, its stolen
    # cycles already count inside it
    assert e0.step_time_s == pytest.approx(4 + 8 + ar + 1.0)
    assert e1.step_time_s == pytest.approx(4 + 8 + rs + 1.0 + ag)
    assert e1.ranks[0].exposed_comm_s == pytest.approx(rs + ag)
    assert overlap >= 0


def test_prefetch_hides_a_gather_behind_the_previous_layer():
    assert prefetched_gather_s([1.0, 1.0, 1.0], [2.0, 2.0, 2.0], 1.0) == 1.0      # only the first waits
    assert prefetched_gather_s([1.0, 3.0], [2.0, 2.0], 1.0) == 2.0                # 1 + (3 - 2)
    assert prefetched_gather_s([1.0, 3.0], [2.0, 2.0], 0.25) == pytest.approx(1 + 1 + 0.75 * 2)
    assert prefetched_gather_s([], [], 0.5) == 0.0


def test_prefetch_queues_a_gather_behind_the_reduce_scatter_before_it():
    """One process group runs one collective at a time (parsim.cost.comm.serial_group): layer
    i+1's gather, issued as layer i starts, waits for layer i-1's reduce-scatter."""
    # a gather of 1 and a reduce-scatter of 0.5 fit in a compute of 2: only the first gather waits
    assert prefetched_gather_s([1.0] * 3, [2.0] * 3, 1.0, [0.5] * 3) == 1.0
    # 1 + 1.5 > 2: layer 1's gather is issued at 3, queues behind layer 0's reduce-scatter (3 to
    # 4.5), is in at 5.5, so layer 2 starts at 5.5, not 5; the others fit
    assert prefetched_gather_s([1.0] * 3, [2.0] * 3, 1.0, [1.5] * 3) == pytest.approx(1.5)
    # four layers of compute 1, gathers 1, reduce-scatters 1: layer 1's gather goes before any
    # reduce-scatter; layers 2 and 3 each wait 1 for the one before theirs
    assert prefetched_gather_s([1.0] * 4, [1.0] * 4, 1.0, [1.0] * 4) == pytest.approx(1 + 2 * 1)
    # no reduce-scatters: the prefetch rule as before, overlap's charge included
    assert prefetched_gather_s([1.0, 3.0], [2.0, 2.0], 0.25, [0.0, 0.0]) == pytest.approx(1 + 1 + 0.75 * 2)


def test_post_backward_prefetch_exposes_every_gather():
    """torch FSDP's BACKWARD_POST (Composer's default): layer i+1's gather is issued as layer i's
    backward ends, ahead of layer i's reduce-scatter on the one queue, so nothing hides it; the
    reduce-scatter runs beside the next backward and delays the gather after it only where it
    outlasts that backward."""
    post = functools.partial(prefetched_gather_s, prefetch="post")
    # every gather waits in full, whatever the compute beside it (the default hides all but the first)
    assert post([1.0] * 3, [2.0] * 3, 1.0) == pytest.approx(3.0)
    assert post([1.0] * 3, [2.0] * 3, 1.0, [0.5] * 3) == pytest.approx(3.0)     # 0.5 < 2: reduce-scatters hidden
    assert prefetched_gather_s([1.0] * 3, [2.0] * 3, 1.0, [0.5] * 3) == 1.0
    # compute 1, gathers 1, reduce-scatters 3: layer 1 starts at 2 (gather 1 + compute 1 + gather 1)
    # and ends at 3; layer 0's reduce-scatter (2 to 5) holds the queue, so layer 2's gather runs
    # 5 to 6: 1 + 1 + (6 - 3) exposed
    assert post([1.0] * 3, [1.0] * 3, 1.0, [3.0] * 3) == pytest.approx(5.0)
    # a layer inside the unit before it (no gather) waits for nothing; the overlap charge is moot
    assert post([1.0, 0.0, 1.0], [2.0] * 3, 0.25, [0.0, 0.0, 0.0]) == pytest.approx(2.0)
    assert post([], [], 0.5) == 0.0


def test_zero3_backward_under_backward_post_waits_for_each_gather():
    """training.fsdp_backward_prefetch post prices a ZeRO-3 backward with every layer's gather
    exposed: the step grows by the gathers the default hides, and nothing else moves."""
    _, cfg, pre = _run(3, cluster=A100, params=10**6)
    _, _, post = _run(3, cluster=A100, params=10**6,
                      training=Training(4, "fp16", "adam", fsdp_backward_prefetch="post"))
    layer = pre.grad_buckets_bytes[0][0]
    t = collective_time_s(A100, cfg.dp_group(0), layer, "all_gather")
    overlap = A100.profile.collectives.overlap
    assert 0 < t < 2.0                              # each gather hides under a backward of 2 s by default
    hidden = prefetched_gather_s([t] * 4, [2.0] * 4, overlap)
    assert post.step_time_s - pre.step_time_s == pytest.approx(4 * t - hidden)
    assert post.ranks[0].memory == pre.ranks[0].memory


def test_fsdp_backward_prefetch_is_read_and_checked():
    """model.yaml's training.fsdp_backward_prefetch: pre by default (torch FSDP's BACKWARD_PRE),
    post where given; anything else names the field and its choices."""
    from parsim.errors import InputError
    from parsim.model.spec import model_from_mapping
    base = {"model": "gpt", "args": {"preset": "gpt-tiny"}, "training": {"global_batch_size": 2, "dtype": "bf16"}}
    assert model_from_mapping(base, "t").training.fsdp_backward_prefetch == "pre"
    post = {**base, "training": {**base["training"], "fsdp_backward_prefetch": "post"}}
    assert model_from_mapping(post, "t").training.fsdp_backward_prefetch == "post"
    bad = {**base, "training": {**base["training"], "fsdp_backward_prefetch": "none"}}
    with pytest.raises(InputError, match="fsdp_backward_prefetch: must be one of pre, post"):
        model_from_mapping(bad, "t")


def test_the_executor_refuses_backward_post(tmp_path, capsys):
    """The executor's FSDP2 prefetches the backward's gathers before each unit (pre): a plan whose
    model says post is refused in one line naming the field, before anything runs."""
    import yaml

    from parsim.errors import InputError
    from parsim.exec.train import RunOptions, check_run
    doc = {"schema_version": 1, "name": "gpt-post", "model": "gpt",
           "args": {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 256},
           "training": {"global_batch_size": 4, "dtype": "fp32", "optimizer": "adam", "fsdp_backward_prefetch": "post"}}
    model = tmp_path / "model.yaml"
    model.write_text(yaml.safe_dump(doc))
    out = tmp_path / "plan.json"
    assert main(["plan", str(model), "--cluster", "local-cpu:1x2", "--zero", "3", "--pp", "1", "--top", "1",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    with pytest.raises(InputError, match=r"model.yaml: training.fsdp_backward_prefetch: the executor's FSDP2"):
        check_run(RunOptions(plan=str(out), synthetic_size=256))


def test_llm_foundry_rows_run_their_harness_backward_prefetch():
    """The 2023 tables' rows (sweep.sh passes no --fsdp_config_backward_prefetch: Composer's default
    BACKWARD_POST) say post; the large-scale table's (sweep.py: BACKWARD_PRE) keep the default
    (the files' headers quote the sources)."""
    import yaml

    def prefetch(path):
        rows = yaml.safe_load(open(path).read())["figures"]
        return {r["model"]["training"].get("fsdp_backward_prefetch", "pre") for r in rows}
    assert prefetch("results/published/llmfoundry_figures.yaml") == {"post"}
    assert prefetch("results/published/llmfoundry_narrow_figures.yaml") == {"post"}
    assert prefetch("results/published/fsdp_scale_figures.yaml") == {"pre"}


def test_zero3_backward_gathers_wait_for_the_reduce_scatters_on_nccl(monkeypatch):
    """A ZeRO-3 backward on NCCL whose gathers and reduce-scatters outlast its compute (1 s of
    forward, 2 s of backward a layer with UnitCost; 2e11 parameters a layer in fp16 over 4 A100s):
    the backward's wait is prefetched_gather_s with each layer's reduce-scatter queued on the
    gathers' group, plus each unit's copies (fsdp_unit_s: the copy-out after its gather, the
    copy-in before its reduce-scatter); without that rule (a library whose group runs collectives
    at once) the step is shorter by the difference."""
    import parsim.cost.comm as comm
    g, cfg, serial = _run(3, cluster=A100, params=2 * 10**11)
    layer = serial.grad_buckets_bytes[0][0]
    gather = collective_time_s(A100, cfg.dp_group(0), shard_padded_bytes(layer, 2, 4), "all_gather")
    reduce = collective_time_s(A100, cfg.dp_group(0), layer, "reduce_scatter")
    overlap = A100.profile.collectives.overlap
    assert gather + reduce > 2.0 > gather           # the rule matters here, and a gather alone hides
    unit = shard_padded_bytes(layer, 2, 4)
    copies = 4 * (fsdp_unit_s(A100, "all_gather", unit, unit) + fsdp_unit_s(A100, "reduce_scatter", layer, layer))
    backward = prefetched_gather_s([gather] * 4, [2.0] * 4, overlap, [reduce] * 4) + copies
    waits = [end - start for rank, a, stream, start, end in serial.timeline.records
             if stream == "dp" and a.kind.value == "B"]
    assert waits == [pytest.approx(backward)]
    monkeypatch.setattr(comm, "SERIAL_GROUP_LIBRARIES", ())
    _, _, parallel = _run(3, cluster=A100, params=2 * 10**11)
    assert serial.step_time_s - parallel.step_time_s == pytest.approx(
        backward - copies - prefetched_gather_s([gather] * 4, [2.0] * 4, overlap))


def test_zero3_gathers_delay_each_forward_and_backward():
    """Each forward and backward of each micro-batch waits for its prefetched gathers and their
    copy-outs; the backward for its reduce-scatters' copy-ins too (fsdp_unit_s)."""
    g, cfg, e = _run(3, cluster=A100, params=10**6, m=2)
    layer = e.grad_buckets_bytes[0][0]
    t = collective_time_s(A100, cfg.dp_group(0), layer, "all_gather")
    overlap = A100.profile.collectives.overlap
    copy_out = 4 * fsdp_unit_s(A100, "all_gather", layer, layer)
    per_pass = prefetched_gather_s([t] * 4, [1.0] * 4, overlap) + copy_out     # F: 1 s per layer (UnitCost)
    copy_in = 4 * fsdp_unit_s(A100, "reduce_scatter", layer, layer)
    gathers = [(a, end - start) for rank, a, stream, start, end in e.timeline.records
               if stream == "dp" and a.kind.value in ("F", "B")]
    assert len(gathers) == 2 * 2 and copy_out > 0 and copy_in > 0
    assert all(d == pytest.approx(per_pass + (copy_in if a.kind.value == "B" else 0.0)) for a, d in gathers)
    assert_step_adds_up(e)


def test_an_nccl_collective_beside_compute_takes_the_sms_it_runs_on():
    """NCCL runs a collective as one thread block per channel, each on an SM that the compute
    beside it loses, so every NVIDIA profile's collective.overlap is under 1: one fitted parameter
    (results/published/fit.yaml, nccl-overlap), its prior 1 - 16 / (132 - 16) from 16 channels of
    H100's 132 SMs.  A ZeRO-3 step on 4 A100s (its prefetched gathers and its reduce-scatters)
    grows as overlap falls: the shipped value's step lies between overlap 1's (nothing charged)
    and overlap 0.5's."""
    from parsim.profile.loso import load_fit_spec

    spec = load_fit_spec("results/published/fit.yaml")
    param = next(p for p in spec.parameters if p.name == "nccl-overlap")
    sms = load_cluster("dgx-h100:1x1").device.kernels.compute_units
    assert param.prior == round(1 - 16 / (sms - 16), 2)
    for name in {profile for profile, _ in param.fields} | {"hgx-h800", "dgx-h100-superpod", "dgx-b200", "gb200-nvl72"}:
        assert 0.3 <= load_cluster(name).profile.collectives.overlap < 1, name
    colls = A100.profile.collectives

    def step(overlap):
        cluster = replace(A100, profile=replace(A100.profile, collectives=replace(colls, overlap=overlap)))
        return _run(3, cluster=cluster, params=10**6, m=2)[2].step_time_s
    assert step(1.0) < step(colls.overlap) < step(0.5)


def test_zero_needs_data_parallel_ranks_and_an_unsplit_backward_at_stage_3():
    with pytest.raises(InfeasibleError, match="leaves nothing to shard"):
        _run(1, dp=1)
    g = uniform_graph(4)
    cfg = ParallelConfig(dp=2, pp=1, microbatches=2, schedule="zbh1", chunks=2, bounds=(0, 2, 4), zero=3)
    with pytest.raises(InfeasibleError, match="zero=3 with zbh1"):
        simulate(g, Training(4), IDEAL, cfg, UnitCost())
    with pytest.raises(InfeasibleError, match="zero=3 with pp=2: beside a pipeline"):     # tests/test_fsdp_pipeline.py
        _run(3, dp=2, pp=2, m=2)
    assert _run(1, dp=2, pp=2, m=2)[2].step_time_s > 0


def test_planner_searches_zero_and_its_pruning_stays_exact():
    spec = load_model("examples/resnet50_cifar10_seeds_split.yaml")
    cluster = load_cluster("ascend910:1x8")
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    c = Constraints(top=8, tp=1, pp=4)
    pruned = plan(spec, cluster, compute, c, progress=False)
    full = plan(spec, cluster, compute, replace(c, prune=False), progress=False)
    assert full.simulated > pruned.simulated
    assert [x.key() for x in pruned.ranked] == [x.key() for x in full.ranked]
    assert len({x.config.zero for x in full.ranked}) > 1
    fixed = plan(spec, cluster, compute, replace(c, zero=1), progress=False)
    assert {x.config.zero for x in fixed.ranked} == {1}
    assert {x.config.zero for x in full.ranked} <= {0, 1}        # pp=4: ZeRO-2 only where fixed (test_fsdp_pipeline)


def test_lower_bound_holds_under_every_zero_stage():
    spec = load_model("examples/resnet50_cifar10_seeds_split.yaml")
    compute = AnalyticalCompute.for_training(A100.device, spec.training)
    bnd = split.Bounds(spec, spec.graph, A100, compute)
    checked = 0
    for dp, pp in ((8, 1), (4, 2), (2, 4)):
        for m in (1, 2, 4):
            b = spec.training.global_batch_size // dp // m
            for schedule, _ in schedules(pp, m, len(spec.graph), Constraints(chunk_options=())):
                for zero in (1, 2, 3):
                    if (zero == 3 and schedule == "zbh1") or (zero == 3 and pp > 1):
                        continue
                    cfg = ParallelConfig(dp, pp, m, schedule, zero=zero)
                    links = boundary_links(A100, cfg)
                    cfg = replace(cfg, bounds=bnd.split(schedule, m, pp, 1, b, dp, links, float("inf"), zero=zero))
                    est = simulate(spec.graph, spec.training, A100, cfg, compute, keep_timeline=False)
                    assert bnd.lower_bound_s(cfg, b) <= est.step_time_s * (1 + 1e-9), cfg
                    checked += 1
    assert checked > 20


def test_zero_in_plan_json_model_yaml_and_cli(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", "dgx-a100:1x8", "--dp", "8", "--pp", "1",
                 "--microbatches", "1", "--zero", "2", "-o", str(out)]) == 0
    assert "zero=2" in capsys.readouterr().out
    d = json.loads(out.read_text())
    assert d["parallel"]["zero"] == 2 and d["estimate"]["config"]["zero"] == 2
    del d["parallel"]["zero"]                              # plans written before ZeRO read as zero 0
    out.write_text(json.dumps(d))
    assert main(["simulate", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["zero"] == 0
    d["parallel"]["zero"] = 4
    out.write_text(json.dumps(d))
    assert main(["simulate", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "parallel.zero" in err and "0, 1, 2, 3" in err

    y = tmp_path / "m.yaml"
    y.write_text("schema_version: 1\nmodel: gpt\nargs: {preset: gpt-tiny}\ntraining: {global_batch_size: 8}\n"
                 "parallel: {dp: 8, pp: 1, microbatches: 1, zero: 3}\n")
    assert main(["simulate", str(y), "--cluster", "dgx-a100:1x8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["zero"] == 3
    y.write_text(y.read_text().replace("zero: 3", "zero: 5"))
    assert main(["simulate", str(y), "--cluster", "dgx-a100:1x8"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "parallel.zero" in err
    y.write_text(y.read_text().replace("zero: 5", "zero: 1").replace("dp: 8", "dp: 1"))
    assert main(["simulate", str(y), "--cluster", "dgx-a100:1x8"]) != 0
    assert "nothing to shard" in capsys.readouterr().err


@pytest.mark.parametrize("flags,why,edit", [
    # a plan edited by hand: parsim writes none (parsim.sim refuses ZeRO-3 with pp > 1; ZeRO-2 beside a
    # pipeline runs: tests/test_fsdp_pipeline.py)
    (["--dp", "2", "--pp", "2", "--microbatches", "2", "--zero", "1"], "ZeRO-3 runs with pp=1 only", 3),
])
def test_the_executor_refuses_what_it_does_not_run_before_launching(tmp_path, capsys, flags, why, edit):
    """What parsim never writes and the executor does not run (ZeRO-3 with pp > 1): refused in one
    line, never run as another stage in its place."""
    out = tmp_path / "plan.json"
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu:2x2", *flags,
                 "-o", str(out)]) == 0
    capsys.readouterr()
    if edit:
        d = json.loads(out.read_text())
        d["parallel"]["zero"] = edit
        out.write_text(json.dumps(d))
    assert main(["run", str(out), "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "parallel.zero" in err and why in err


def test_gloo_reduce_scatters_as_a_whole_all_reduce():
    """torch's gloo backend runs reduce_scatter_tensor as an all-reduce of the whole buffer
    (ProcessGroupGloo::reduce_scatter_tensor_coalesced); NCCL runs a ring reduce-scatter, half an
    all-reduce's bytes."""
    cpu, group, nbytes = _with_collectives(load_cluster("local-cpu"), op_fits=()), [0, 1], 64 * 2**20
    assert collective_time_s(cpu, group, nbytes, "reduce_scatter") == collective_time_s(cpu, group, nbytes, "all_reduce")
    rs, ar = (collective_time_s(A100, group, nbytes, op) for op in ("reduce_scatter", "all_reduce"))
    assert rs < 0.6 * ar


def _with_collectives(cluster, **fields):
    return replace(cluster, profile=replace(cluster.profile, collectives=replace(cluster.profile.collectives, **fields)))


def test_a_measured_all_gather_and_reduce_scatter_fit_prices_them():
    """Where profile-comm fitted an op, it is priced as a ring at that op's own latency and
    efficiency, (n-1)(a_link + a_op) + (n-1)/n S / (B_link e_op), whatever the library."""
    cpu = _with_collectives(load_cluster("local-cpu"), op_fits=(("all_gather", 1e-4, 0.25), ("reduce_scatter", 2e-4, 0.125)))
    link = cpu.link(0, 1)
    bw = link.bandwidth_bytes_per_s * link.efficiency
    for op, a, e in cpu.profile.collectives.op_fits:
        for n, group in ((2, [0, 1]), (4, [0, 1, 2, 3])):
            want = (n - 1) * (link.latency_s + a) + (n - 1) / n * 2**24 / (bw * e)
            assert collective_time_s(cpu, group, 2**24, op) == pytest.approx(want)
    assert collective_time_s(cpu, [0, 1], 2**24, "all_reduce") == collective_time_s(
        _with_collectives(cpu, op_fits=()), [0, 1], 2**24, "all_reduce")        # the all-reduce keeps its own


@pytest.mark.parametrize("zero", [2, 3])
def test_fsdp_host_overhead_adds_per_unit_and_collective(zero):
    """FSDP2's per-unit host time (Collectives.fsdp_*_overhead_s) lands on the compute stream:
    ZeRO-2 gathers each of the 4 units once per step and reduce-scatters each every micro-batch
    (4 + 4m overheads); ZeRO-3 gathers before every forward and backward too (3 x 4m)."""
    x, m, units = 1e-3, 3, 4
    base = _with_collectives(IDEAL, fsdp_gather_overhead_s=0.0, fsdp_reduce_scatter_overhead_s=0.0)
    slow = _with_collectives(IDEAL, fsdp_gather_overhead_s=x, fsdp_reduce_scatter_overhead_s=2 * x)
    _, _, e0 = _run(zero, dp=2, m=m, cluster=base)
    _, _, e1 = _run(zero, dp=2, m=m, cluster=slow)
    gathers = units * (1 if zero == 2 else 2 * m)
    assert e1.step_time_s - e0.step_time_s == pytest.approx(gathers * x + units * m * 2 * x)
    assert_step_adds_up(e1)


@pytest.mark.parametrize("zero", [2, 3])
def test_fsdp_host_copy_rate_adds_each_units_bytes(zero):
    """FSDP2's per-byte host time (Collectives.fsdp_*_copy_bytes_per_s) lands on the compute stream
    with the per-unit one: each unit's gathered buffer at the gather rate, once per step (ZeRO-2) or
    before every forward and backward (ZeRO-3), and its gradient at the reduce-scatter rate every
    micro-batch."""
    m, rate = 3, 1e9
    base = _with_collectives(IDEAL, fsdp_gather_overhead_s=0.0, fsdp_reduce_scatter_overhead_s=0.0)
    slow = _with_collectives(base, fsdp_gather_copy_bytes_per_s=rate, fsdp_reduce_scatter_copy_bytes_per_s=rate / 2)
    _, _, e0 = _run(zero, dp=2, m=m, cluster=base)
    _, _, e1 = _run(zero, dp=2, m=m, cluster=slow)
    unit_bytes = [b for _, b in e0.sharded_collectives[0] if _ == "reduce_scatter"][:4]
    assert len(unit_bytes) == 4
    gathers = 1 if zero == 2 else 2 * m
    want = gathers * sum(unit_bytes) / rate + m * sum(unit_bytes) / (rate / 2)
    assert e1.step_time_s - e0.step_time_s == pytest.approx(want)
    assert_step_adds_up(e1)


def _with_memory_bandwidth(cluster, bytes_per_s):
    device = replace(cluster.device, memory_bandwidth_bytes_per_s=bytes_per_s, memory_efficiency=1.0)
    return replace(cluster, profile=replace(cluster.profile, device=device))


@pytest.mark.parametrize("zero", [2, 3])
@pytest.mark.parametrize("grad_dtype", [None, "fp32"])
def test_fsdp2_copies_are_priced_at_the_devices_memory_bandwidth(zero, grad_dtype):
    """Where the profile measured no copy rate (GPUs, NPUs), FSDP2's copies around its
    collectives take the compute stream at the device's memory bandwidth (parsim.cost.comm.
    fsdp_unit_s, as torch's _fsdp_collectives.py runs them): after every all-gather,
    split_with_sizes_copy reads and writes the gathered parameters (2 x its bytes); before every
    micro-batch's reduce-scatter, chunk_cat reads the gradients in the parameters' dtype (fp16: 2
    bytes each) and writes them in the reduce dtype (the buffer's bytes).  A measured rate (on
    CPU, profile-comm's) holds them already: priced once, not twice."""
    m, bw = 3, 1e9
    slow = _with_memory_bandwidth(IDEAL, bw)
    measured = _with_collectives(slow, fsdp_gather_copy_bytes_per_s=math.inf, fsdp_reduce_scatter_copy_bytes_per_s=math.inf)
    training = Training(2 * m, "fp16", "adam", grad_reduce_dtype=grad_dtype)
    _, _, e0 = _run(zero, dp=2, m=m, cluster=measured, training=training)
    _, _, e1 = _run(zero, dp=2, m=m, cluster=slow, training=training)
    ops = e0.sharded_collectives[0]
    gathered = sum(b for op, b in ops if op == "all_gather")              # every gather of the step
    reduced = sum(b for op, b in ops if op == "reduce_scatter")           # every micro-batch's
    read = reduced * 2 / (4 if grad_dtype == "fp32" else 2)
    assert gathered > 0 and reduced > 0
    assert e1.step_time_s - e0.step_time_s == pytest.approx((2 * gathered + read + reduced) / bw)
    assert_step_adds_up(e1)


@pytest.mark.parametrize("library", ["gloo", "nccl"])
def test_zero1_on_gloo_holds_every_buckets_copy_after_the_backward(library):
    """gloo reduce-scatters a copy of each bucket, and the executor waits on the buckets after the
    backward: at that moment, with the activations freed, every copy is live.  The rank's peak is
    the larger of the backward's (activations + workspace) and the copies'; NCCL keeps none."""
    cluster = _with_collectives(IDEAL, library=library)
    _, _, e = _run(1, dp=2, params=10**5, cluster=cluster)        # 4 layers x 10^5 params, fp16 gradients
    mem = e.ranks[0].memory
    grads = 4 * 2 * 10**5
    assert grads > mem.activations_bytes + mem.workspace_bytes > 0
    extra = grads - mem.activations_bytes - mem.workspace_bytes if library == "gloo" else 0.0
    assert mem.comm_buffers_bytes == pytest.approx(extra)            # pp = 1: no pipeline buffers


@pytest.mark.parametrize("path", ["examples/resnet50_cifar10_local.yaml", "examples/gpt_small_local.yaml"])
@pytest.mark.parametrize("zero", [2, 3])
def test_planners_closed_form_takes_fsdps_gradients_by_the_simulators_rule(path, zero):
    """The planner's closed-form stage memory (split.StageMemory) adds for ZeRO-2 and -3 what
    the FSDP units' unsharded gradients add to the simulated backward peak, byte for byte (one
    rule: cost.memory.fsdp_held_grad_bytes), and stays below the simulated peak."""
    import numpy as np
    spec, cluster = load_model(path), load_cluster("local-cpu")
    g, compute = spec.graph, AnalyticalCompute(cluster.device)
    L, m, dp = len(spec.graph.layers), 2, 2
    b = spec.training.global_batch_size // (dp * m)
    runs = {z: simulate(g, spec.training, cluster, ParallelConfig(dp=dp, pp=1, microbatches=m, bounds=(0, L), zero=z),
                        compute) for z in (0, zero)}
    added = runs[zero].ranks[0].memory.comm_buffers_bytes - runs[0].ranks[0].memory.comm_buffers_bytes
    bnd = split.Bounds(spec, g, cluster, compute)
    assert added > 0 and bnd.fsdp_grad_bytes(b) == pytest.approx(added, rel=1e-12)
    closed = float(bnd.memory_fn("1f1b", m, 1, 1, b, dp, zero)(0, np.array([0]), np.array([L]))[0])
    assert closed <= runs[zero].ranks[0].memory.total_bytes


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_gradients_reduced_in_fp32_under_bf16(zero):
    """training.grad_reduce_dtype: fp32 (FSDP MixedPrecision(reduce_dtype=float32), llm-foundry's
    DEFAULT; Megatron's grad_reduce_in_fp32): every gradient collective moves 4 bytes a gradient,
    twice bf16's, the parameters' gathers stay at 2, and the gradients held take 4 bytes too."""
    dp, m, params = 4, 2, 1000
    bf16 = Training(dp * m, "bf16", "adam")
    fp32 = replace(bf16, grad_reduce_dtype="fp32")
    _, _, e2 = _run(zero, dp=dp, m=m, params=params, cluster=A100, training=bf16)
    _, _, e4 = _run(zero, dp=dp, m=m, params=params, cluster=A100, training=fp32)
    assert [2 * x for x in e2.grad_buckets_bytes[0]] == list(e4.grad_buckets_bytes[0])
    ops = lambda e, op: sorted(x for o, x in e.sharded_collectives[0] if o == op)   # noqa: E731
    assert ops(e4, "reduce_scatter") == [2 * x for x in ops(e2, "reduce_scatter")]
    assert ops(e4, "all_gather") == ops(e2, "all_gather")
    assert e4.ranks[0].memory.grads_bytes == pytest.approx(2 * e2.ranks[0].memory.grads_bytes)
    assert e4.step_time_s >= e2.step_time_s
    with pytest.raises(Exception, match="grad_reduce_dtype"):
        from parsim.model.spec import model_from_mapping
        model_from_mapping({"model": "gpt", "args": {"preset": "gpt-tiny"},
                            "training": {"global_batch_size": 2, "dtype": "bf16", "grad_reduce_dtype": "fp16"}}, "t")
