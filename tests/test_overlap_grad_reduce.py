"""Data-parallel gradient buckets reduced after the backward (ParallelConfig.overlap_grad_reduce
false: Megatron-Core without --overlap-grad-reduce) as well as under it (the default): the lowering
holds every bucket until the rank's backward is done, the engine starts none before the rank's last
compute, the executor starts none during the backward, and plans, Megatron's flags and the other
frameworks' exports keep or refuse it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from torch import nn

from parsim.cli import main
from parsim.exec.grad_sync import GradBuckets
from parsim.schedule import build_schedule, lower
from parsim.schedule.actions import Kind
from parsim.schedule.deps import dependencies
from parsim.sim import engine

from test_engine_deps import BUCKETS, _costs as unequal_costs

COMPUTE_KINDS = (Kind.F, Kind.B, Kind.I, Kind.W)
SCHEDULES = [("1f1b", 2, 4, 1), ("interleaved", 2, 4, 2), ("zbh1", 2, 4, 1), ("gpipe", 3, 3, 1)]


def _lowered(name, pp, m, v, after):
    schedule = build_schedule(name, pp, m, v)
    return lower(schedule, {s: BUCKETS for s in range(schedule.num_stages)}, (), reduce_after_backward=after)


def _costs(lowered, after: bool) -> engine.Costs:
    """tests/test_engine_deps.py's unequal prices, every bucket hidden under compute (no cycles taken
    from it: with them a bucket under the backward may delay the pipeline more than after it)."""
    return replace(unequal_costs(lowered), overlap=1.0, reduce_after_backward=after)


@pytest.mark.parametrize("name,pp,m,v", SCHEDULES)
def test_the_lowering_holds_every_bucket_until_the_ranks_backward_is_done(name, pp, m, v):
    """After the backward: each rank's buckets, every stage's in stage then bucket order, come after
    its last compute action and before its optimizer steps, and wait for what deps says.  Under it
    (the default) a stage's buckets follow that stage's last backward, before the rank's other
    chunks' work where it has some (interleaved)."""
    after, under = _lowered(name, pp, m, v, True), _lowered(name, pp, m, v, False)
    waits = engine.waits(after)
    for r in range(after.num_ranks):
        acts = list(after.actions(r))
        kinds = [a.kind for a in acts]
        first = kinds.index(Kind.REDUCE_GRAD)
        held = acts[first:first + kinds.count(Kind.REDUCE_GRAD)]
        assert all(a.kind is Kind.REDUCE_GRAD for a in held)
        assert [(a.stage, a.microbatch) for a in held] == sorted((a.stage, a.microbatch) for a in held)
        assert len(held) == BUCKETS * len({a.stage for a in acts if a.kind in COMPUTE_KINDS})
        assert not any(k in COMPUTE_KINDS for k in kinds[first:])
        assert kinds[-1] is Kind.OPTIMIZER and Kind.OPTIMIZER not in kinds[:first]
        assert sorted(map(str, acts)) == sorted(map(str, under.actions(r)))      # the same actions, moved
        for a, deps in zip(acts, waits[r]):
            assert list(deps) == dependencies(a, after.num_stages, after.rank_of, lowered=True,
                                              split_backward=after.split_backward, last_microbatch=m - 1,
                                              buckets=BUCKETS, tied=False)
    if v > 1:
        kinds = [a.kind for a in under.actions(0)]
        assert any(k in COMPUTE_KINDS for k in kinds[kinds.index(Kind.REDUCE_GRAD):])


@pytest.mark.parametrize("name,pp,m,v", SCHEDULES)
def test_without_overlap_no_bucket_starts_before_the_ranks_last_compute(name, pp, m, v):
    """The engine: every bucket of a rank starts once the rank's compute before it is done, the
    buckets run back to back on the dp stream, a stage's optimizer waits for its own; the step is no
    shorter than with the buckets under the backward, at the same prices."""
    lowered = _lowered(name, pp, m, v, True)
    tl = engine.run(lowered, _costs(lowered, True))
    for r in range(lowered.num_ranks):
        mine = [(a, s0, s1) for rr, a, _, s0, s1 in tl.records if rr == r]
        compute_end = max(s1 for a, _, s1 in mine if a.kind in COMPUTE_KINDS)
        buckets = sorted((s0, s1) for a, s0, s1 in mine if a.kind is Kind.REDUCE_GRAD)
        assert buckets and buckets[0][0] >= compute_end - 1e-12
        assert all(b[0] == pytest.approx(a[1]) for a, b in zip(buckets, buckets[1:]))   # back to back
        for a, s0, _ in mine:                       # a stage's step waits for its own buckets
            if a.kind is Kind.OPTIMIZER:
                assert s0 >= max(e for b, _, e in mine if b.kind is Kind.REDUCE_GRAD and b.stage == a.stage) - 1e-12
    overlapped = _lowered(name, pp, m, v, False)
    assert max(tl.end_s) >= max(engine.run(overlapped, _costs(overlapped, False)).end_s) - 1e-12


def test_a_bucket_first_in_line_still_waits_for_the_ranks_backward():
    """The wait is the rank's compute before the bucket, not only its own stage's backward nor the
    dp stream's order: with the later chunk's buckets put first on each rank (a chunk 1 backward
    ends before chunk 0's), they still start after the rank's last compute."""
    from dataclasses import replace

    lowered = _lowered("interleaved", 2, 4, 2, True)
    order = []
    for r in range(lowered.num_ranks):
        acts = list(lowered.actions(r))
        held = [a for a in acts if a.kind is Kind.REDUCE_GRAD]
        first = acts.index(held[0])
        order.append(tuple(acts[:first] + sorted(held, key=lambda a: -a.stage) + acts[first + len(held):]))
    tl = engine.run(replace(lowered, order=tuple(order)), _costs(lowered, True))
    for r in range(lowered.num_ranks):
        mine = [(a, s0, s1) for rr, a, _, s0, s1 in tl.records if rr == r]
        compute_end = max(s1 for a, _, s1 in mine if a.kind in COMPUTE_KINDS)
        assert min(s0 for a, s0, _ in mine if a.kind is Kind.REDUCE_GRAD) >= compute_end - 1e-12


def test_the_executors_buckets_wait_for_finish(monkeypatch):
    """GradBuckets without overlap: the backward starts no bucket; finish() starts every one, in
    order.  With overlap (the default) the backward starts them as their gradients are final."""
    started = []

    class Done:
        def wait(self):
            pass

    def start(self, k):
        started.append(k)
        self.handles[k] = Done()
    monkeypatch.setattr(GradBuckets, "_start", start)
    stage = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    after = GradBuckets(stage, None, 2, 1, overlap=False)
    stage(torch.ones(3, 4)).sum().backward()
    assert started == []
    after.finish()
    assert started == list(range(len(after.flat))) and started
    started.clear()
    stage = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    GradBuckets(stage, None, 2, 1)
    stage(torch.ones(3, 4)).sum().backward()
    assert started == list(range(len(started))) and started


def _sim(capsys, *flags):
    rc = main(["simulate", "examples/resnet50_imagenet.yaml", "--cluster", "ascend910:2x8", "--dp", "16", *flags,
               "--json"])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else None), err


def test_a_plan_keeps_it_and_zero_3_refuses_it(tmp_path, capsys):
    """--no-overlap-grad-reduce: a slower step (ResNet-50's buckets exposed after the backward),
    written into the plan as parallel.overlap_grad_reduce false and read back; the default plan
    writes nothing.  ZeRO 2-3 and a bad value: one line naming the field, exit 2."""
    rc, under, _ = _sim(capsys)
    assert rc == 0
    plan = tmp_path / "plan.json"
    rc, after, _ = _sim(capsys, "--no-overlap-grad-reduce", "-o", str(plan))
    assert rc == 0 and after["step_time_s"] > under["step_time_s"]
    assert after["config"]["overlap_grad_reduce"] is False and "overlap_grad_reduce" not in under["config"]
    assert main(["simulate", "examples/resnet50_imagenet.yaml", "--cluster", "ascend910:2x8", "--dp", "16",
                 "--no-overlap-grad-reduce"]) == 0
    assert " grads-after-backward microbatches=1 " in capsys.readouterr().out.splitlines()[0]
    saved = json.loads(plan.read_text())
    assert saved["parallel"]["overlap_grad_reduce"] is False
    assert main(["simulate", str(plan), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] == pytest.approx(after["step_time_s"], rel=1e-12)
    assert main(["simulate", str(plan), "--overlap-grad-reduce", "--json"]) == 0       # a flag overrides the plan
    assert json.loads(capsys.readouterr().out)["step_time_s"] == pytest.approx(under["step_time_s"], rel=1e-12)
    rc, _, _ = _sim(capsys, "-o", str(tmp_path / "default.json"))
    assert "overlap_grad_reduce" not in json.loads((tmp_path / "default.json").read_text())["parallel"]
    rc, _, err = _sim(capsys, "--zero", "3", "--no-overlap-grad-reduce")
    assert rc == 2 and err.count("\n") == 1 and "overlap_grad_reduce" in err and "zero 3" in err, err
    plan.write_text(json.dumps({**saved, "parallel": {**saved["parallel"], "zero": 3}}))
    assert main(["simulate", str(plan)]) == 2          # the file's field named, as the plan is read
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{plan}: parallel.overlap_grad_reduce: false with zero 3" in err, err
    saved["parallel"]["overlap_grad_reduce"] = "no"
    plan.write_text(json.dumps(saved))
    assert main(["simulate", str(plan)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "parallel.overlap_grad_reduce" in err, err


MEGATRON = """--num-layers 8 --hidden-size 1024 --num-attention-heads 8 --seq-length 512 --max-position-embeddings 512
--vocab-size 1024 --micro-batch-size 2 --global-batch-size 64 --bf16 --use-distributed-optimizer {flag}
"""


@pytest.mark.parametrize("flag,overlap", [("", False), ("--overlap-grad-reduce", True),
                                          ("--use-torch-fsdp2", True)])
def test_megatron_reads_the_flag_and_its_default(tmp_path, capsys, flag, overlap):
    """Megatron-Core reduces after the backward unless --overlap-grad-reduce (its default false);
    torch FSDP2 overlaps whatever it is given.  Read so, and priced so: the flag's absence costs
    the exposed reductions."""
    steps = {}
    for f in {flag, "--overlap-grad-reduce"}:
        args = tmp_path / f"args{len(steps)}.txt"
        args.write_text(MEGATRON.format(flag=f))
        plan = tmp_path / f"plan{len(steps)}.json"
        assert main(["simulate", "--from", "megatron", str(args), "--cluster", "dgx-a100:2x8", "-o", str(plan),
                     "--json"]) == 0, capsys.readouterr().err
        steps[f] = json.loads(capsys.readouterr().out)["step_time_s"]
        p = json.loads(plan.read_text())["parallel"]
        assert p.get("overlap_grad_reduce", True) is (overlap if f == flag else True)
    if flag == "":
        assert steps[""] > steps["--overlap-grad-reduce"]


def test_exports_run_what_was_priced(tmp_path, capsys):
    """Megatron's export passes --overlap-grad-reduce where the plan overlaps (DDP, ZeRO-1), none
    where it does not; DeepSpeed's ZeRO 1-2 set overlap_comm alike; torchtitan (DDP and FSDP2
    always overlap) refuses a plan that does not, in one line naming the field."""
    texts = {}
    for overlap in ("--overlap-grad-reduce", "--no-overlap-grad-reduce"):
        for zero, targets in (("0", ("megatron", "torchtitan")), ("1", ("deepspeed",))):
            plan = tmp_path / f"plan{overlap}{zero}.json"
            assert main(["simulate", "examples/llama3_8b.yaml", "--cluster", "dgx-h100:2x8", "--dp", "16",
                         "--microbatches", "2", "--zero", zero, overlap, "-o", str(plan)]) == 0
            capsys.readouterr()
            for target in targets:
                out = tmp_path / f"{target}{overlap}"
                rc = main(["export", str(plan), "--to", target, "-o", str(out)])
                err = capsys.readouterr().err
                texts[(target, overlap)] = (rc, out.read_text() if rc == 0 else err)
    assert "--overlap-grad-reduce" in texts[("megatron", "--overlap-grad-reduce")][1].splitlines()
    assert "--overlap-grad-reduce" not in texts[("megatron", "--no-overlap-grad-reduce")][1]
    assert json.loads(texts[("deepspeed", "--overlap-grad-reduce")][1])["zero_optimization"]["overlap_comm"] is True
    assert json.loads(texts[("deepspeed", "--no-overlap-grad-reduce")][1])["zero_optimization"]["overlap_comm"] is False
    assert texts[("torchtitan", "--overlap-grad-reduce")][0] == 0
    rc, err = texts[("torchtitan", "--no-overlap-grad-reduce")]
    assert rc == 2 and err.count("\n") == 1 and "parallel.overlap_grad_reduce" in err, err


@pytest.mark.parametrize("path, cluster_spec", [("examples/gpt_small_local.yaml", "dgx-a100:2x8"),
                                                ("examples/resnet50_cifar10.yaml", "ascend910:2x8")])
def test_the_planner_prices_its_ddp_plans_after_the_backward_and_prunes_as_it_ranks(path, cluster_spec):
    """Constraints.overlap_grad_reduce false: every ranked DDP and ZeRO-1 plan carries it and is
    priced so, ZeRO 2-3 plans keep their overlap (FSDP); the pruned
    search ranks what the exhaustive one ranks (its bounds count no bucket under the backward)."""
    from parsim.cost.compute import AnalyticalCompute
    from parsim.hardware import load_cluster
    from parsim.model.spec import load_model
    from parsim.search.planner import Constraints, plan
    from parsim.sim import simulate

    spec, cluster = load_model(path), load_cluster(cluster_spec)
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    pruned = plan(spec, cluster, compute, Constraints(top=8, overlap_grad_reduce=False), progress=False)
    full = plan(spec, cluster, compute, Constraints(top=8, prune=False, overlap_grad_reduce=False), progress=False)
    assert [x.key() for x in pruned.ranked] == [x.key() for x in full.ranked]
    assert [x.estimate.step_time_s for x in pruned.ranked] == [x.estimate.step_time_s for x in full.ranked]
    assert all(x.config.overlap_grad_reduce is (x.config.zero >= 3) for x in full.ranked)
    best = pruned.ranked[0]
    again = simulate(spec.graph, spec.training, cluster, best.config, compute, keep_timeline=False)
    assert again.step_time_s == pytest.approx(best.estimate.step_time_s, rel=1e-12)


@pytest.mark.parametrize("zero, extra, pp, overlap", [(0, {}, 1, False), (1, {}, 1, False),
                                                      (1, {"overlap_comm": True}, 1, True),
                                                      (1, {"overlap_comm": True}, 2, False),
                                                      (2, {}, 1, False), (2, {"overlap_comm": False}, 1, False),
                                                      (2, {"overlap_comm": True}, 1, True), (3, {}, 1, True)])
def test_deepspeed_reads_overlap_comm_as_it_runs_it(tmp_path, capsys, zero, extra, pp, overlap):
    """DeepSpeed 0.19 reduces after the backward at stage 0 (engine.allreduce_gradients), under its
    pipeline engine whatever overlap_comm says (ReduceGrads, after the last backward), at stage 1
    unless zero_optimization.overlap_comm (its default: stage 3 only), and at stage 2 on the compute
    stream unless overlap_comm (reduce_ipg_grads: current_stream()); stage 3 is priced overlapped
    as FSDP (its reduce-scatters as the backward runs), and overlap_comm false there is refused."""
    config = tmp_path / "ds.json"
    config.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
                                  "zero_optimization": {"stage": zero, **extra}, "bf16": {"enabled": True},
                                  **({"pipeline": {"stages": pp}} if pp > 1 else {})}))
    plan = tmp_path / "plan.json"
    assert main(["simulate", "--from", "deepspeed", str(config), "--model", "examples/gpt_tiny_local.yaml",
                 "--cluster", f"local-cpu:{pp}x2", "-o", str(plan)]) == 0, capsys.readouterr().err
    assert json.loads(plan.read_text())["parallel"].get("overlap_grad_reduce", True) is overlap


@pytest.mark.parametrize("flags, refused", [
    (["--zero", "0"], True), (["--zero", "1"], False),
    (["--zero", "1", "--pp", "2", "--placement", "dp-inner", "--split", "0,3,6"], True),
    (["--zero", "1", "--pp", "2", "--placement", "dp-inner", "--split", "0,3,6", "--no-overlap-grad-reduce"], False),
    (["--zero", "0", "--dp", "1"], False)])          # one replica: nothing reduced, nothing to refuse
def test_deepspeed_export_refuses_an_overlap_it_does_not_run(tmp_path, capsys, flags, refused):
    """DeepSpeed reduces after the backward at stage 0 and under its pipeline engine: an exported
    plan priced with its buckets under the backward there would run slower than priced, so the
    export refuses it in one line naming the field; ZeRO-1 without pp overlaps (overlap_comm)."""
    plan = tmp_path / "plan.json"
    dp = [] if "--dp" in flags else ["--dp", "2"]
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu:2x2", "--microbatches", "2",
                 "-o", str(plan)] + dp + flags) == 0, capsys.readouterr().err
    capsys.readouterr()
    rc = main(["export", str(plan), "--to", "deepspeed", "-o", str(tmp_path / "ds.json")])
    err = capsys.readouterr().err
    if refused:
        assert rc == 2 and err.count("\n") == 1 and "parallel.overlap_grad_reduce: True: DeepSpeed" in err \
            and "--no-overlap-grad-reduce" in err, err
    else:
        assert rc == 0, err


def test_zero2_without_overlap_charges_every_bucket_to_compute():
    """ZeRO-2 with overlap_grad_reduce false (DeepSpeed's overlap_comm false): every micro-batch's
    reduce-scatters run on the compute stream as the backward readies them, so each rank's exposed
    communication holds the whole of every bucket, the step is slower than with them overlapped, and
    by no more than the buckets' time (the overlapped step already holds their exposed share)."""
    from parsim.hardware import load_cluster
    from parsim.model.spec import load_model
    from parsim.plan import ParallelConfig
    from parsim.sim import simulate

    spec = load_model("examples/resnet50_imagenet.yaml")
    cluster = load_cluster("ascend910:2x8")
    cfg = ParallelConfig(dp=16, pp=1, microbatches=2, bounds=(0, len(spec.graph.layers)), zero=2)
    over = simulate(spec.graph, spec.training, cluster, cfg, keep_timeline=True)
    block = simulate(spec.graph, spec.training, cluster, replace(cfg, overlap_grad_reduce=False), keep_timeline=True)
    buckets = {rank.rank: 0.0 for rank in block.ranks}      # the ranks simulated (one a stage: replicas alike)
    for r, a, stream, start, end in block.timeline.records:
        if a.kind is Kind.REDUCE_GRAD:
            buckets[r] += end - start
    assert all(x > 0 for x in buckets.values())
    assert all(rank.exposed_comm_s >= buckets[rank.rank] * (1 - 1e-9) for rank in block.ranks)
    most = max(buckets.values())
    assert over.step_time_s < block.step_time_s <= over.step_time_s + most * (1 + 1e-9)
    assert max(rank.exposed_comm_s for rank in over.ranks) < most        # overlapped, the profile hides some


def test_zero2_without_overlap_runs_with_deepspeed_not_the_executor_or_megatron(tmp_path, capsys):
    """The plan keeps it; DeepSpeed's export writes overlap_comm false; the executor (torch FSDP2,
    its reduce-scatters on their own stream) and Megatron's export (FSDP2 too) refuse it in one line
    naming the field."""
    path = str(tmp_path / "p.json")
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu:1x2", "--dp", "2", "--zero", "2",
                 "--microbatches", "2", "--no-overlap-grad-reduce", "-o", path, "--json"]) == 0
    capsys.readouterr()
    assert json.loads(open(path).read())["parallel"]["overlap_grad_reduce"] is False
    assert main(["export", path, "--to", "deepspeed", "-o", str(tmp_path / "ds.json")]) == 0
    assert json.loads((tmp_path / "ds.json").read_text())["zero_optimization"] == {"stage": 2, "overlap_comm": False}
    capsys.readouterr()
    assert main(["run", path, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "parallel.overlap_grad_reduce" in err[0] and "--overlap-grad-reduce" in err[0], err
    from parsim.errors import InputError
    from parsim.export.megatron import _zero_args
    from parsim.plan import Plan

    cfg = Plan.from_json(json.loads(open(path).read()), path).config
    with pytest.raises(InputError, match="parallel.overlap_grad_reduce: False: Megatron-LM .* --overlap-grad-reduce"):
        _zero_args(cfg, path)
    assert _zero_args(replace(cfg, overlap_grad_reduce=True), path) == ["--use-torch-fsdp2",
                                                                        "--torch-fsdp2-no-reshard-after-forward"]


def test_deepspeed_reader_refuses_zero3_without_overlap(tmp_path, capsys):
    """DeepSpeed's stage 3 with overlap_comm false is not priced (parsim prices ZeRO-3's
    reduce-scatters overlapped): one line naming the key."""
    config = tmp_path / "ds.json"
    config.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
                                  "zero_optimization": {"stage": 3, "overlap_comm": False}}))
    rc = main(["simulate", "--from", "deepspeed", str(config), "--model", "examples/gpt_tiny_local.yaml",
               "--cluster", "local-cpu:1x2"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "zero_optimization.overlap_comm: False: parsim" in err, err


def test_deepspeed_reader_refuses_zero2_under_its_pipeline(tmp_path, capsys):
    """DeepSpeed's pipeline engine asserts ZeRO stage < 2 (runtime/pipe/engine.py): the reader says so
    in one line naming the key, rather than a plan DeepSpeed would not run."""
    config = tmp_path / "ds.json"
    config.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
                                  "zero_optimization": {"stage": 2}, "pipeline": {"stages": 2}}))
    rc = main(["simulate", "--from", "deepspeed", str(config), "--model", "examples/gpt_tiny_local.yaml",
               "--cluster", "local-cpu:2x2"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "zero_optimization.stage: 2: DeepSpeed" in err, err


@pytest.mark.parametrize("overlapped", [False, True])
def test_plan_from_a_config_says_what_of_its_margin_is_the_overlap(tmp_path, capsys, overlapped):
    """`plan --from megatron` of a config that reduces after the backward (Megatron's default) ranks
    plans that overlap: the explanation prices the pick with its buckets after the backward too,
    so the margin that is the setting alone is told apart; nothing is said where the config overlaps."""
    args = tmp_path / "run.args"
    lines = open("results/frameworks/gpt_plan.megatron.args").read().splitlines()
    args.write_text("\n".join(x for x in lines if overlapped or x != "--overlap-grad-reduce") + "\n")
    plan = tmp_path / "plan.json"
    assert main(["plan", "--from", "megatron", str(args), "--cluster", "dgx-h100:1x8", "--top", "3", "--dp", "4",
                 "--pp", "2", "--microbatches", "4", "-o", str(plan)]) == 0
    out = capsys.readouterr().out
    said = [x for x in out.splitlines() if x.startswith("the pick reduces its gradients under the backward")]
    assert "--overlap-grad-reduce" in lines          # the committed export overlaps (the rows above differ by it)
    if overlapped:
        assert said == []
        return
    assert main(["simulate", str(plan), "--no-overlap-grad-reduce", "--json"]) == 0
    after = json.loads(capsys.readouterr().out)["step_time_s"]
    assert len(said) == 1 and f"it takes {after:.4g} s" in said[0], said
    assert after > json.loads(plan.read_text())["estimate"]["step_time_s"] * 1.005    # the setting shows here
