"""The executor on CPU with 2 gloo processes, one thread each, against a single-process reference.

Each run trains ResNet-50 (CIFAR-10 shape) for a few steps on synthetic data; these tests take
about two and a half minutes together on the 2-core machine.
"""

import json
from collections import Counter
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from executor_checks import assert_equals_reference
from parsim.cli import main
from parsim.exec.reference import distributed_params, reference_run
from parsim.model.spec import load_model
from parsim.shard.graph import collective_counts
from parsim.shard.prepare import per_device_graph

MODEL = "examples/resnet50_cifar10_local.yaml"
SEEDS = "examples/resnet50_cifar10_seeds_split.yaml"
SYNTH = "256"


def make_plan(tmp_path, name, *flags, model=MODEL):
    path = str(tmp_path / f"{name}.json")
    assert main(["simulate", model, "--cluster", "local-cpu", *flags, "-o", path, "--json"]) == 0
    return path


def run(plan, out, *flags):
    return main(["run", plan, "--out", str(out), "--synthetic-size", SYNTH, *flags])


def assert_updates_near_reference(plan, out, buffers=False):
    """One step of a split layout: the same loss as one process, and each parameter's update within
    3% of the reference's (split contractions sum in another order, and BatchNorm's backward over
    small micro-batches amplifies it: test_resnet_searched_layout_...).  Returns the reference's
    state after the step (with its buffers if ``buffers``)."""
    m = json.loads((out / "measured.json").read_text())
    torch.set_num_threads(1)
    _, before = reference_run(plan, 0, synthetic_size=int(SYNTH))
    losses, ref = reference_run(plan, 1, synthetic_size=int(SYNTH), buffers=buffers)
    torch.testing.assert_close(torch.tensor(m["loss"]), torch.tensor(losses))
    got = distributed_params(str(out), plan)
    assert set(got) == set(before)
    for name in got:
        want = ref[name] - before[name]
        assert (got[name] - before[name] - want).norm() <= 0.03 * want.norm(), name
    return ref


def gpt64(tmp_path) -> str:
    """gpt-tiny with 64 samples a step, where the strategy search splits (a model.yaml in tmp_path)."""
    model = str(tmp_path / "gpt64.yaml")
    with open(model, "w") as f:
        f.write(open("examples/gpt_tiny_local.yaml").read().replace("global_batch_size: 8", "global_batch_size: 64"))
    return model


def mlp_classes(tmp_path) -> str:
    """mlp_semi_auto with its classifier split by columns too: the logits split by classes, which
    the loss takes vocabulary-parallel (a model.yaml in tmp_path).  Momentum, not Adam: Adam's
    first steps take about the sign of each gradient, so fp32 rounding of gradients near zero
    (the loss's sums in another order) moves updates by up to 2e-4 relative."""
    model = str(tmp_path / "mlp_classes.yaml")
    with open(model, "w") as f:
        f.write(open("examples/mlp_semi_auto.yaml").read().replace("optimizer: adam", "optimizer: momentum")
                + '  "9": [[1, 1], [1, 2]]\n')
    return model


def assert_same_as_reference(plan, out, steps):
    return assert_equals_reference(plan, out, steps, int(SYNTH))[0]


def assert_grad_buckets_as_simulated(plan, measured):
    """The data-parallel all-reduces that ran, per stage, count and bytes, are the simulator's."""
    predicted = json.loads(open(plan).read())["estimate"]["grad_buckets_bytes"]
    assert measured["grad_buckets_bytes"] == predicted
    return predicted


@pytest.mark.parametrize("name,flags", [
    ("dp2", ["--dp", "2", "--pp", "1", "--microbatches", "2"]),
    # the buckets after the backward (Megatron-Core without --overlap-grad-reduce): the same sums
    ("dp2-after-backward", ["--dp", "2", "--pp", "1", "--microbatches", "2", "--no-overlap-grad-reduce"]),
    ("gpipe", ["--dp", "1", "--pp", "2", "--microbatches", "4", "--schedule", "gpipe"]),
    ("1f1b", ["--dp", "1", "--pp", "2", "--microbatches", "4", "--schedule", "1f1b"]),
    ("interleaved", ["--dp", "1", "--pp", "2", "--microbatches", "4", "--schedule", "interleaved", "--chunks", "2"]),
    ("zbh1", ["--dp", "1", "--pp", "2", "--microbatches", "4", "--schedule", "zbh1"]),
])
def test_matches_single_process_reference(tmp_path, capfd, name, flags):
    plan = make_plan(tmp_path, name, *flags)
    capfd.readouterr()
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "4") == 0
    assert "epoch: 1 step: 4, loss is" in capfd.readouterr().out
    m = assert_same_as_reference(plan, out, 4)
    assert m["step_time_s"] > 0 and all(p > 0 for p in m["peak_memory_bytes"])
    assert m["peak_memory_reserved_bytes"] is None is m["allocator_fragmentation"]   # CPU: no caching allocator
    buckets = assert_grad_buckets_as_simulated(plan, m)
    if "dp2" in name:       # ResNet-50's 94.1 MB (89.8 MiB) of fp32 gradients in torch DDP's buckets: each closes
        # once it holds its cap, 1 MiB for the first, 25 MiB after (parsim.cost.comm.ddp_buckets)
        assert len(buckets[0]) == 4 and sum(buckets[0]) == 4 * sum(
            layer.param_count for layer in load_model(MODEL).graph.layers)
    kinds = {a[1].lstrip("0123456789")[0] for a in m["actions"]}
    assert {"F", "I", "W"} <= kinds if name == "zbh1" else {"F", "B"} <= kinds     # a split backward: I and W
    trace = json.loads((out / "measured_trace.json").read_text())
    assert any(e.get("name") == "0F0" for e in trace["traceEvents"])


@pytest.mark.parametrize("dp,cluster,layout", [(1, "local-cpu", "megatron"), (1, "local-cpu", "megatron-sp"),
                                               (2, "local-cpu:2x2", "megatron")])
def test_tensor_parallel_gpt_matches_reference(tmp_path, capfd, dp, cluster, layout):
    """Megatron's layout with tp=2 (ColwiseParallel/RowwiseParallel blocks, a vocabulary-parallel
    embedding and the tied head), and with sequence parallelism, against one process; dp=2 x tp=2
    runs 4 ranks on the (dp, pp, tp) mesh, more ranks than cores, so it checks values only."""
    plan = str(tmp_path / "tp.json")
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", cluster, "--tp", "2", "--tp-layout",
                 layout, "--dp", str(dp), "--pp", "1", "--microbatches", "2", "-o", plan, "--json"]) == 0
    saved = json.loads(open(plan).read())
    assert saved["parallel"]["tp"] == 2 and saved["parallel"]["tp_layout"] == layout
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "5") == 0
    m = assert_same_as_reference(plan, out, 5)
    assert m["config"]["tp"] == 2 and m["world_size"] == 2 * dp and m["step_time_s"] > 0
    assert m["loss"][-1] < m["loss"][0]
    # the collectives that ran are the ones the simulator prices
    spec = load_model("examples/gpt_tiny_local.yaml")
    predicted = collective_counts(per_device_graph(spec.graph, 2, layout), 2)
    assert m["tp_collectives_per_step"] == predicted
    assert_grad_buckets_as_simulated(plan, m)          # dp=2: the tp shards' gradients, in the simulator's buckets
    # the loss vocabulary-parallel: 3 all-reduces per micro-batch, no gather of the logits
    if layout == "megatron":
        assert predicted == {"all_reduce": 36 + 3 * 2}
    else:       # every block all-reduce became an all-gather plus a reduce-scatter; the loss's stay
        assert predicted["reduce_scatter_tensor"] > 0 and predicted["all_reduce"] == 3 * 2


@pytest.mark.parametrize("name,model,flags,expected", [
    # mlp_semi_auto's shard: (a column then a row split, Adam): the row split's sum completed
    # forward once per micro-batch; no backward all-reduce, the images take no gradient
    ("model-mlp", "examples/mlp_semi_auto.yaml", ["--microbatches", "2"], {"all_reduce": 2}),
    # the GPT's searched layout at 32 samples a micro-batch: every MLP column- then row-split (an
    # all-reduce each way per block) and the head's rows split, its logits gathered for the loss
    ("auto-gpt", "gpt64", ["--tp-layout", "auto", "--microbatches", "2"],
     {"all_reduce": 16, "all_gather_into_tensor": 4}),
    # and its classifier split by columns (classes): its input's gradient all-reduced backward,
    # and the loss's 3 all-reduces (vocabulary-parallel), per micro-batch, nothing gathered
    ("model-mlp-classes", "mlp_classes", ["--microbatches", "2"], {"all_reduce": 2 * (1 + 1 + 3)}),
])
def test_per_operator_layouts_match_reference(tmp_path, capfd, name, model, flags, expected):
    """The model and auto layouts run as per-operator DTensor plans (parsim.exec.op_parallel):
    tp=2 equals one process after 2 steps, and the tensor-parallel collectives that ran are the
    simulator's count for that layout."""
    if model in ("gpt64", "mlp_classes"):
        model = {"gpt64": gpt64, "mlp_classes": mlp_classes}[model](tmp_path)
    plan = str(tmp_path / "plan.json")
    assert main(["simulate", model, "--cluster", "local-cpu", "--dp", "1", "--pp", "1", "--tp", "2", *flags,
                 "-o", plan, "--json"]) == 0
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "2", "--warmup", "0") == 0
    m = assert_same_as_reference(plan, out, 2)
    from parsim.hardware import load_cluster
    from parsim.plan import load_plan
    from parsim.shard.prepare import plan_strategies
    from parsim.shard.graph import shard_graph

    cfg, spec = load_plan(plan).config, load_model(model)
    predicted = collective_counts(shard_graph(spec.graph, plan_strategies(spec.graph, cfg, spec.shard,
                                                                          load_cluster("local-cpu"), spec.training),
                                              2), cfg.microbatches)
    assert m["tp_collectives_per_step"] == predicted == expected


@pytest.mark.parametrize("mode", ["ring", "allgather"])
def test_context_parallel_gpt_matches_reference(tmp_path, capfd, mode):
    """cp=2 on 2 ranks (parsim.exec.context_parallel): each rank trains on its zigzag half of every
    sequence, attention by a ring of K, V (and dK, dV) sends, or by all-gathered K, V and
    reduce-scattered dK, dV (Llama 3's all-gather cp), gradients averaged over the cp ranks in the
    simulator's buckets; loss and parameters equal one process's, and the ring (the collectives)
    sent the bytes the simulator counts."""
    plan = str(tmp_path / "cp.json")
    assert main(["simulate", "examples/gpt_small_local.yaml", "--cluster", "local-cpu", "--dp", "1", "--cp", "2",
                 "--cp-mode", mode, "--microbatches", "2", "-o", plan, "--json"]) == 0
    assert json.loads(open(plan).read())["parallel"]["cp_mode"] == mode
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "2", "--warmup", "1") == 0
    m = assert_same_as_reference(plan, out, 2)
    assert m["config"]["cp"] == 2 and m["world_size"] == 2 and m["step_time_s"] > 0
    predicted = json.loads(open(plan).read())["estimate"]["cp_ring_bytes"]
    # 4 blocks x 2 micro-batches x (K, V forward; K, V and dK, dV backward) of 4 sequences' 64 tokens x
    # 8 heads x 32, fp32
    assert m["cp_ring_bytes"] == predicted == [4 * 2 * 3 * (2 * 4 * 64 * 8 * 32 * 4)]
    assert_grad_buckets_as_simulated(plan, m)          # over the 2 cp ranks


def test_resnet_searched_layout_splits_channels_and_matches_reference(tmp_path, capfd):
    """ResNet-50's searched layout at tp=2 (parsim.shard.auto) on local-cpu, with its measured
    all-gather and reduce-scatter fits: convolutions split by output channels (column: each rank
    its channels) and by input channels (row: partial sums), BatchNorm by channels, the classifier
    replicated.  In layer1.0 and layer3.0 the block's input feeds two convolutions split by output
    channels (conv1 and the downsample), each giving a partial input gradient: the executor sums
    them and all-reduces once, as the simulator prices it.  parsim.exec.op_parallel runs it, one
    step, as one process does.  fp32 rounding differs from the reference's (split contractions sum
    in another order) and BatchNorm's backward over 16-sample micro-batches with 1 x 1 maps
    amplifies it, a ReLU near zero flipping here and there: each parameter's update is within 3%
    of the reference's (1.3% at most measured; in float64 the same run agrees to 3.4e-9).  The
    running statistics, split with their channels, equal the reference's; the collectives that
    ran are the simulator's."""
    from parsim.exec.op_parallel import unit_shardings
    from parsim.exec.reference import assemble_model
    from parsim.hardware import load_cluster
    from parsim.model.graph import FROM_LAYER_INPUT
    from parsim.plan import load_plan
    from parsim.shard.graph import shard_graph
    from parsim.shard.prepare import plan_strategies

    plan = make_plan(tmp_path, "tp-auto", "--dp", "1", "--pp", "1", "--tp", "2", "--tp-layout", "auto",
                     "--microbatches", "2")
    loaded, spec = load_plan(plan), load_model(MODEL)
    cluster = load_cluster(loaded.cluster)
    assert cluster.profile.collectives.op_fits != ()           # the shipped profile, its fits measured
    splits, shared = set(), []
    for sharding, layer in zip(unit_shardings(spec, loaded, cluster), spec.graph.layers):
        for op, sh in zip(layer.ops, sharding.shardings if sharding else ()):
            w = sh.inputs[-1].normalized()
            if op.kind in ("Conv2d", "MatMul", "BatchNorm") and w.device_matrix and 0 in w.tensor_map:
                splits.add((op.kind, w.tensor_map.index(0)))    # the weight's split dimension
        partial_dx = [op.name for op, sh in zip(layer.ops, sharding.shardings if sharding else ())
                      if op.inputs_from[:1] == (FROM_LAYER_INPUT,) and sh.input_grads[0].partial]
        if len(partial_dx) > 1:
            shared.append((layer.name, sorted(partial_dx)))
    # conv: output channels (0) and input channels (1); BatchNorm its channels; fc whole
    assert splits == {("Conv2d", 0), ("Conv2d", 1), ("BatchNorm", 0)}
    # a block input read by two output-channel splits: two partial dX, summed, then one all-reduce
    assert shared == [(block, ["conv1:convolution", "downsample.0:convolution"]) for block in ("layer1.0", "layer3.0")]
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "1", "--warmup", "0") == 0
    m = json.loads((out / "measured.json").read_text())
    ref = assert_updates_near_reference(plan, out, buffers=True)
    stats = {k: v for k, v in assemble_model(str(out), plan).named_buffers() if "running" in k}
    assert len(stats) == 2 * 53                                    # ResNet-50's 53 BatchNorms
    for name, value in stats.items():
        torch.testing.assert_close(value, ref[name], rtol=1e-4, atol=1e-5, msg=name)
    predicted = collective_counts(shard_graph(spec.graph, plan_strategies(spec.graph, loaded.config, spec.shard,
                                                                          cluster, spec.training),
                                              2), 2)
    assert m["tp_collectives_per_step"] == predicted
    assert predicted["all_reduce"] > 0 and predicted["all_gather_into_tensor"] > 0


@pytest.mark.parametrize("name,cluster,flags", [
    ("pp2", "local-cpu", ["--pp", "2", "--microbatches", "4"]),
    ("pp2-tp2", "local-cpu:2x2", ["--pp", "2", "--tp", "2", "--tp-layout", "megatron", "--microbatches", "2"]),
])
def test_gpt_pipeline_keeps_the_tied_embedding_in_step(tmp_path, capfd, name, cluster, flags):
    """The GPT with pp=2: the head on the last stage holds a copy of the word embedding, whose
    gradient is summed with the first stage's after the backward (Megatron's embedding group), so
    the run equals one process with the tied weight; the all-reduce that ran is the simulator's.
    pp=2 x tp=2 runs 4 ranks on 2 cores: values only."""
    plan = str(tmp_path / f"{name}.json")
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", cluster, "--dp", "1", *flags,
                 "-o", plan, "--json"]) == 0
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "4") == 0
    m = assert_same_as_reference(plan, out, 4)
    predicted = json.loads(open(plan).read())["estimate"]["tied_grad_bytes"]
    tp = 2 if "tp2" in name else 1
    vocab, hidden = 512, 64                              # gpt-tiny
    assert predicted == {"0": vocab * hidden * 4 / tp, "1": vocab * hidden * 4 / tp}   # fp32, vocabulary-split
    assert m["tied_grad_bytes"] == predicted
    from parsim.exec import checkpoint
    first, last = checkpoint.load(str(out), 0)["stages"][0], checkpoint.load(str(out), tp)["stages"][0]
    torch.testing.assert_close(last["head.wte.weight"], first["embed.wte.weight"], rtol=0, atol=0)


def _tp_collectives_per_pipe_rank(plan, model) -> list[dict]:
    """The simulator's tensor-parallel collectives per step for each pipeline rank: those of its
    stages' layers (a stage boundary issues none)."""
    from parsim.hardware import load_cluster
    from parsim.plan import load_plan
    from parsim.shard.graph import shard_graph
    from parsim.shard.prepare import plan_strategies

    loaded, spec = load_plan(plan), load_model(model)
    cfg = loaded.config
    graph = shard_graph(spec.graph, plan_strategies(spec.graph, cfg, spec.shard, load_cluster(loaded.cluster),
                                                    spec.training), cfg.tp)
    return [collective_counts(graph, cfg.microbatches, cfg.rank_layers(r)) for r in range(cfg.pp)]


@pytest.mark.parametrize("name,model,flags,boundaries,expected", [
    # mlp_semi_auto's shard: interleaved over 4 stages, cut after the column split (each rank sends
    # its half of the columns) and after the row split (each rank sends its partial sum, completed
    # by the next stage's first edge: one all-reduce per micro-batch on rank 0's stage 2)
    ("model-mlp", "examples/mlp_semi_auto.yaml",
     ["--tp-layout", "model", "--schedule", "interleaved", "--chunks", "2", "--microbatches", "4",
      "--split", "0,2,4,7,10"], ["split", "partial", "whole"], [{"all_reduce": 4}, {}]),
    # the GPT's searched layout: the head, on stage 1, splits its rows, so its copy of the tied
    # embedding has a partial gradient, summed over the tp group before the stages' sum
    ("auto-gpt", "gpt64", ["--tp-layout", "auto", "--microbatches", "2"], ["whole"],
     [{"all_reduce": 8}, {"all_reduce": 8, "all_gather_into_tensor": 4}]),
    # ResNet-50's searched layout, cut after layer1.2, whose output is split by channels
    ("auto-resnet", MODEL, ["--tp-layout", "auto", "--microbatches", "2", "--split", "0,4,18"], ["split"], None),
])
def test_per_operator_layouts_cross_pipeline_stages(tmp_path, capfd, name, model, flags, boundaries, expected):
    """The model and auto layouts with pp=2 x tp=2 on 4 ranks: each tensor-parallel rank sends its
    piece of a stage's output, as the plan lays it out, to its peer of the next stage (a split's
    part, a partial sum's term, or the whole), with no collective at the boundary: each pipeline
    rank's collectives are the simulator's for its stages' layers, and one step equals one
    process (values only: 4 ranks on 2 cores)."""
    from parsim.exec.op_parallel import unit_shardings
    from parsim.hardware import load_cluster
    from parsim.plan import load_plan

    if model == "gpt64":
        model = gpt64(tmp_path)
    plan = str(tmp_path / "plan.json")
    assert main(["simulate", model, "--cluster", "local-cpu:2x2", "--dp", "1", "--pp", "2", "--tp", "2", *flags,
                 "-o", plan, "--json"]) == 0
    loaded = load_plan(plan)
    cfg, spec = loaded.config, load_model(model)
    laid = unit_shardings(spec, loaded, load_cluster(loaded.cluster))
    cuts = [laid[b - 1].output.normalized() for b in cfg.bounds[1:-1]]
    assert ["partial" if lay.partial else "split" if any(d != -1 for d in lay.tensor_map) else "whole"
            for lay in cuts] == boundaries
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "1", "--warmup", "0") == 0
    m = json.loads((out / "measured.json").read_text())
    predicted = _tp_collectives_per_pipe_rank(plan, model)
    assert m["tp_collectives_per_pipe_rank"] == predicted and m["tp_collectives_per_step"] == predicted[0]
    if expected is not None:
        assert predicted == expected
    if "resnet" not in name:
        assert_same_as_reference(plan, out, 1)
    else:       # BatchNorm amplifies the split contractions' rounding (test_resnet_searched_layout_...)
        assert_updates_near_reference(plan, out)
    if "gpt" in name:               # the tied copies stay equal
        from parsim.exec import checkpoint
        first, last = checkpoint.load(str(out), 0)["stages"][0], checkpoint.load(str(out), 2)["stages"][0]
        torch.testing.assert_close(last["head.wte.weight"], first["embed.wte.weight"], rtol=0, atol=0)


@pytest.mark.parametrize("name,model,flags", [
    ("resnet-dp2", "examples/resnet50_cifar10_local_bf16.yaml", ["--dp", "2", "--pp", "1", "--microbatches", "1"]),
    # one micro-batch: the tied gradient is then one sum of two terms, the same in either order
    ("gpt-pp2", "examples/gpt_tiny_local_bf16.yaml",
     ["--dp", "1", "--pp", "2", "--microbatches", "1", "--schedule", "gpipe"]),
    # Adam on the fp32 masters, as Megatron's and DeepSpeed's bf16 runs keep it: 2 + 2 + (4 + 4 + 4)
    ("gpt-pp2-adam", "examples/gpt_tiny_local_bf16.yaml",
     ["--dp", "1", "--pp", "2", "--microbatches", "1", "--schedule", "gpipe"]),
])
def test_bf16_runs_with_fp32_master_weights_as_priced(tmp_path, capfd, name, model, flags):
    """bf16 mixed precision: the model, gradients and activations in bf16, fp32 master weights and
    momentum in the optimizer.  Values equal the single-process reference in bf16; the bytes held
    between steps are the memory model's 2 + 2 + (4 + 4) per parameter; the gradient buckets and
    the tied embedding's all-reduce carry bf16.

    ResNet-50 runs a global batch of 8 (one micro-batch of 4 a rank), not the example's 32, for three
    steps (the third, the last warm-up step, is the one whose memory is measured): on a CPU without
    bf16 instructions its bf16 convolutions run about 8x slower than fp32 ones; the example's batch
    over four steps took 211 s of the suite on such a host (results/2026-11-30c-amd-epyc/
    suite-durations.txt), a batch of 16 in two micro-batches 92 s and this batch 52 s, alone on such
    a host (results/2026-12-01d-amd-epyc/trimmed-tests.txt).  Every check below reads the same
    parts at any batch (bf16 gradients summed over micro-batches: the GPT's rows of
    test_zero1_shards_the_optimizer_and_runs_the_priced_collectives); micro-batches of 2 are too
    few for BatchNorm at the seeds' learning rate (the loss reached 2e5 in four steps, so any
    rounding difference is amplified past the tolerance)."""
    steps = 4
    if "resnet" in name:
        small = tmp_path / "resnet50_bf16_batch8.yaml"
        small.write_text(open(model).read().replace("global_batch_size: 32", "global_batch_size: 8"))
        assert small.read_text() != open(model).read()
        model, steps = str(small), 3
    if "adam" in name:
        adam = tmp_path / "gpt_tiny_bf16_adam.yaml"
        adam.write_text(open(model).read().replace("optimizer: momentum", "optimizer: adam"))
        assert adam.read_text() != open(model).read()
        model = str(adam)
    if "pp2" in name:               # priced as the executor runs a pipeline, on torch's PipelineStage
        runtime = tmp_path / "gpt_tiny_bf16_torch_pipeline.yaml"
        runtime.write_text(open(model).read().replace("training: {", "training: {pipeline_runtime: torch, "))
        assert runtime.read_text() != open(model).read()
        model = str(runtime)
    plan = make_plan(tmp_path, name, *flags, model=model)
    out = tmp_path / "run"
    assert run(plan, out, "--steps", str(steps)) == 0
    m = assert_same_as_reference(plan, out, steps)
    saved = json.loads(open(plan).read())["estimate"]
    for rank, (predicted, measured) in enumerate(zip(saved["memory_breakdown"], m["peak_memory_parts"])):
        # torch's Adam also keeps a 4-byte step count a parameter tensor, which the memory model leaves out
        counters = 0
        if "adam" in name:
            from parsim.exec import checkpoint
            inner = [o["inner"]["state"] for o in checkpoint.load(str(out), rank)["optimizers"]]
            counters = 4 * sum(1 for state in inner for st in state.values() if "step" in st)
            assert counters > 0
        for part in ("params_bytes", "grads_bytes", "optimizer_bytes"):
            assert measured[part] == predicted[part] + (counters if part == "optimizer_bytes" else 0), part
    # torch's pipelining keeps a receive buffer a micro-batch across steps, for the input on the last rank and
    # for the output's gradient on the first: the boundary activation each (parsim.exec.measure)
    spec, config = load_model(model), json.loads(open(plan).read())["parallel"]
    boundary = spec.graph.layers[config["bounds"][1] - 1].output_bytes * 8 if "pp2" in name else 0
    assert [p["pipeline_buffers_bytes"] for p in m["peak_memory_parts"]] == [boundary] * len(m["peak_memory_parts"])
    assert [p["comm_buffers_bytes"] for p in saved["memory_breakdown"]] == [boundary] * config["pp"]   # a pipeline rank
    params = spec.graph.param_count
    if "dp2" in name:
        assert sum(assert_grad_buckets_as_simulated(plan, m)[0]) == 2 * params      # bf16 gradients
    else:
        assert m["tied_grad_bytes"] == saved["tied_grad_bytes"] == {"0": 512 * 64 * 2, "1": 512 * 64 * 2}


@pytest.mark.parametrize("name,model,flags", [
    ("resnet-dp2", MODEL, ["--dp", "2", "--pp", "1", "--microbatches", "2"]),
    ("gpt-bf16-dp2", "examples/gpt_tiny_local_bf16.yaml", ["--dp", "2", "--pp", "1", "--microbatches", "2"]),
    # over DTensor's tensor-parallel shards: each rank's buckets hold its local shards (4 ranks, values only)
    ("gpt-dp2-tp2", "examples/gpt_tiny_local.yaml",
     ["--dp", "2", "--pp", "1", "--microbatches", "2", "--tp", "2", "--cluster", "local-cpu:2x2"]),
    # a searched layout's local shards in the buckets: test_zero1_under_resnets_searched_layout_buckets_the_local_shards;
    # the buckets under hybrid sharding (4 ranks): tests/test_hsdp.py
    # the tied embedding on the first and last stage: a bucket of its own on each, summed over them
    # after the reduce-scatter, as Megatron's distributed optimizer (4 ranks, values only)
    ("gpt-dp2-pp2", "examples/gpt_tiny_local.yaml",
     ["--dp", "2", "--pp", "2", "--microbatches", "2", "--cluster", "local-cpu:2x2"]),
])
def test_zero1_shards_the_optimizer_and_runs_the_priced_collectives(tmp_path, capfd, name, model, flags):
    """ZeRO stage 1: the buckets are reduce-scattered, each rank steps its slice of every bucket
    and all-gathers the result.  One step equals the single-process reference (to fp32 rounding:
    the optimizer's element-wise kernels meet other tensor boundaries, and with this learning rate
    the seeds' ResNet amplifies a one-ulp difference to percents of the loss within three steps,
    ZeRO or not); the collectives that ran (kind and bytes, in order) are the simulator's; each
    rank's momentum covers half the parameters.  The GPT case runs in bf16 (fp32 master slices)."""
    plan = make_plan(tmp_path, name, *flags, "--zero", "1", model=model)
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "1") == 0
    m = assert_same_as_reference(plan, out, 1)
    saved = json.loads(open(plan).read())["estimate"]
    if "pp2" in name:         # the head's tied copy and the rest of its unit are ready in the same backward:
        # the order of their two reduce-scatters is autograd's, not priced (both start at the unit's end)
        assert [Counter(map(tuple, c)) for c in m["sharded_collectives"]] == \
            [Counter(map(tuple, c)) for c in saved["sharded_collectives"]]
    else:
        assert m["sharded_collectives"] == saved["sharded_collectives"]
    kinds = [c[0] for c in m["sharded_collectives"][0]]
    assert kinds == ["reduce_scatter"] * (len(kinds) // 2) + ["all_gather"] * (len(kinds) // 2)
    if "pp2" in name:
        wte = 512 * 64 * 4                     # the tied embedding's fp32 gradient, alone in a bucket on both stages
        assert m["tied_grad_bytes"] == saved["tied_grad_bytes"] == {"0": wte, "1": wte}
        assert all(["reduce_scatter", wte] in stage for stage in m["sharded_collectives"])
    if name == "resnet-dp2":
        from parsim.exec import checkpoint
        momentum = [sum(t.numel() for t in _tensors(checkpoint.load(str(out), rank)["optimizers"]))
                    for rank in (0, 1)]
        params, buckets = load_model(model).graph.param_count, len(kinds) // 2
        assert 0 <= sum(momentum) - params <= buckets          # every parameter once, buckets padded to even
        assert all(params / 2 <= n <= params / 2 + buckets for n in momentum)


MIRROR_MLP = """schema_version: 1
name: mlp-mirror
module: "examples.mlp_module:mlp"
args: {width: 256, depth: 4}
input: {shape: [3, 32, 32], dtype: float32}
training: {global_batch_size: 64, dtype: fp32, optimizer: sgd}
parallel: {tp: 2}
shard:
  "1": [[1, 1], [1, 2]]
  "3": [[1, 2], [2, 1]]
  "5": [[2, 1], [1, 1]]
"""


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_zero_under_a_per_operator_layout_sums_a_mirror_once(tmp_path, capfd, zero):
    """ZeRO over the dp ranks of a per-operator (``model``) layout at tp=2, 4 ranks, SGD (Adam's
    first steps hide a gradient's scale): the MLP's unit 5 splits its batch over the tp group, so
    its weight's gradient is a partial sum (a mirror), summed over tp once per step beside the
    reduce-scatter over dp.  Two steps equal the single-process reference, and the collectives
    that ran are the simulator's.  Under ZeRO-1 the mirror's parameter is re-made on its bucket's
    storage (torch.utils.swap_tensors, which swaps the objects' __dict__): it lost its partial
    layout, and its gradient was summed twice."""
    from parsim.exec.op_parallel import unit_shardings
    from parsim.hardware import load_cluster
    from parsim.plan import load_plan

    model = tmp_path / "mlp_mirror.yaml"
    model.write_text(MIRROR_MLP)
    plan = str(tmp_path / "plan.json")
    assert main(["simulate", str(model), "--cluster", "local-cpu:2x2", "--dp", "2", "--pp", "1", "--tp", "2",
                 "--tp-layout", "model", "--microbatches", "2", "--zero", str(zero), "-o", plan, "--json"]) == 0
    loaded, spec = load_plan(plan), load_model(str(model))
    shardings = unit_shardings(spec, loaded, load_cluster("local-cpu:2x2"))
    assert sum(1 for sh in shardings if sh for op in sh.shardings if op.mirrors) == 1
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "2") == 0
    m = assert_same_as_reference(plan, out, 2)
    saved = json.loads(open(plan).read())["estimate"]
    assert [Counter(map(tuple, c)) for c in m["sharded_collectives"]] == \
        [Counter(map(tuple, c)) for c in saved["sharded_collectives"]]


def test_zero1_under_resnets_searched_layout_buckets_the_local_shards(tmp_path, capfd):
    """ResNet-50, dp=2 x tp=2 on 4 ranks, the searched layout, ZeRO-1: the buckets hold each rank's
    local shards, BatchNorm's affine weight and bias split with its channels, and the simulator's
    per-device graph counts them so (it counted them whole: 4 KiB more in a bucket than ran).
    The reduce-scatters and all-gathers that ran are the simulator's, kind and bytes; each update is
    within 3% of the reference's (split contractions sum in another order, as in the searched
    layout's test above)."""
    plan = str(tmp_path / "plan.json")
    assert main(["simulate", MODEL, "--cluster", "local-cpu:2x2", "--dp", "2", "--pp", "1", "--tp", "2",
                 "--tp-layout", "auto", "--microbatches", "2", "--zero", "1", "-o", plan, "--json"]) == 0
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "1") == 0
    m = json.loads((out / "measured.json").read_text())
    assert m["sharded_collectives"] == json.loads(open(plan).read())["estimate"]["sharded_collectives"]
    assert_updates_near_reference(plan, out)


@pytest.mark.parametrize("name,model,zero,steps", [
    # one step: the seeds' ResNet amplifies one-ulp differences within three (see ZeRO-1's test)
    ("resnet-dp2-zero3", MODEL, 3, 1),
    # the tied embedding and head share one FSDP unit, the stage's root (parsim.cost.comm.fsdp_units)
    ("gpt-dp2-zero2", "examples/gpt_tiny_local.yaml", 2, 3),
    ("gpt-dp2-zero3", "examples/gpt_tiny_local.yaml", 3, 3),
    # one step: FSDP2 reduce-scatters bf16 gradients with its own rounding (one bf16 ulp in three steps)
    ("gpt-bf16-dp2-zero3", "examples/gpt_tiny_local_bf16.yaml", 3, 1),
    # FSDP2 over DTensor's tensor-parallel shards (2-D, as torchtitan): 4 ranks on 2 cores, values only
    ("gpt-dp2-tp2-zero3", "examples/gpt_tiny_local.yaml", 3, 1),
    # (zero 2 under the searched layout ran here until 2026-12-01: the searched layout's FSDP2 runs
    # at stage 3 below, stage 2 at dp2 above, and FSDP2 on a 2-D mesh in tests/test_hsdp.py)
    ("gpt-dp2-tp2-auto-zero3", "examples/gpt_tiny_local.yaml", 3, 1),
])
def test_zero2_and_zero3_run_as_fsdp2_with_the_priced_collectives(tmp_path, capfd, name, model, zero, steps):
    """ZeRO stages 2 and 3 through torch FSDP2, two micro-batches: values equal the single-process
    reference; the all-gathers and reduce-scatters FSDP2 issued (kind and bytes; their order
    interleaves with its prefetching) are the simulator's, unit for unit; between steps a rank
    holds half the gradients and half the optimizer state, and at stage 3 half the parameters
    (the memory model adds the gathered working set to those), as priced."""
    tp = ["--tp", "2", "--cluster", "local-cpu:2x2"] if "tp2" in name else []
    if "auto" in name:
        tp += ["--tp-layout", "auto"]
    plan = make_plan(tmp_path, name, "--dp", "2", "--pp", "1", "--microbatches", "2", "--zero", str(zero), *tp,
                     model=model)
    out = tmp_path / "run"
    assert run(plan, out, "--steps", str(steps)) == 0
    m = assert_same_as_reference(plan, out, steps)
    saved = json.loads(open(plan).read())["estimate"]
    counted = [Counter(tuple(c) for c in stage) for stage in m["sharded_collectives"]]
    assert counted == [Counter(tuple(c) for c in stage) for stage in saved["sharded_collectives"]]
    assert counted[0]["reduce_scatter", max(b for _, b in counted[0])] >= 2      # every micro-batch
    if steps < 3:
        return                  # memory is measured on the third step
    half = load_model(model).graph.param_count * 4 / 2          # fp32: parameters, gradients, momentum
    for predicted, measured in zip(saved["memory_breakdown"], m["peak_memory_parts"]):
        assert measured["grads_bytes"] == pytest.approx(predicted["grads_bytes"], rel=0.01) == pytest.approx(half, rel=0.01)
        assert measured["optimizer_bytes"] == pytest.approx(predicted["optimizer_bytes"], rel=0.01)
        # FSDP2 reshards after the step's last backward: between steps each rank holds its half of
        # the parameters; the prediction holds what the step gathers besides (at stage 2 an unsharded
        # copy of all of them)
        assert measured["params_bytes"] == pytest.approx(half, rel=0.01)
        assert predicted["params_bytes"] > 1.1 * half and (zero == 3 or predicted["params_bytes"] == 3 * half)


@pytest.mark.parametrize("zero", [2, 3])
def test_fsdp2_without_sync_reduce_scatters_once_a_step(tmp_path, capfd, zero):
    """ParallelConfig.no_sync: FSDP2's set_requires_gradient_sync(False) on the first of two
    micro-batches, the second's backward reduce-scattering their sum.  Two steps equal the
    single-process reference, and the collectives FSDP2 issued are the simulator's: each unit's
    reduce-scatter once a step, its all-gathers as without it."""
    plan = make_plan(tmp_path, f"no-sync-{zero}", "--dp", "2", "--pp", "1", "--microbatches", "2", "--zero",
                     str(zero), "--no-sync", model="examples/gpt_tiny_local.yaml")
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "2") == 0
    m = assert_same_as_reference(plan, out, 2)
    saved = json.loads(open(plan).read())["estimate"]
    counted = [Counter(tuple(c) for c in stage) for stage in m["sharded_collectives"]]
    assert counted == [Counter(tuple(c) for c in stage) for stage in saved["sharded_collectives"]]
    units = len(saved["grad_buckets_bytes"][0])            # FSDP2's units, each reduce-scattered once
    assert sum(n for (op, _), n in counted[0].items() if op == "reduce_scatter") == units > 1


def _tensors(state):
    if isinstance(state, dict):
        return [t for v in state.values() for t in _tensors(v)]
    if isinstance(state, (list, tuple)):
        return [t for v in state for t in _tensors(v)]
    return [state] if torch.is_tensor(state) else []


def test_split_backward_with_data_parallelism_matches_reference(tmp_path, capfd):
    """ZB-H1 (weight gradients in their own W steps) with dp=2 x pp=2: each bucket's all-reduce
    starts from the W steps' gradient hooks.  4 ranks on 2 cores: values and buckets only."""
    plan = str(tmp_path / "zb.json")
    assert main(["simulate", MODEL, "--cluster", "local-cpu:2x2", "--dp", "2", "--pp", "2", "--microbatches", "4",
                 "--schedule", "zbh1", "-o", plan, "--json"]) == 0
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "3") == 0
    m = assert_same_as_reference(plan, out, 3)
    buckets = assert_grad_buckets_as_simulated(plan, m)
    assert all(buckets)                      # both stages reduce


def test_seeds_split_matches_reference(tmp_path, capfd):
    plan = make_plan(tmp_path, "seeds", "--dp", "1", "--pp", "2", "--split", "manual", model=SEEDS)
    saved = json.loads(open(plan).read())
    assert saved["parallel"]["stages"] == [["head", "layer2.3"], ["layer3.0", "fc"]]
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "3") == 0
    assert_same_as_reference(plan, out, 3)


def test_channels_last_runs_nhwc_and_matches_reference(tmp_path, capfd):
    model = tmp_path / "resnet_nhwc.yaml"
    model.write_text(open(MODEL).read() + "  memory_format: channels_last\n")
    plan = make_plan(tmp_path, "nhwc", "--dp", "1", "--pp", "2", "--microbatches", "2", "--schedule", "1f1b",
                     model=str(model))
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "2") == 0
    assert_same_as_reference(plan, out, 2)


@pytest.mark.parametrize("model,flags", [
    (MODEL, ["--dp", "1", "--pp", "2", "--microbatches", "2", "--schedule", "1f1b"]),
    # tensor-parallel ranks load whole tensors and keep their shards; momentum comes back as DTensors
    ("examples/gpt_tiny_local.yaml", ["--dp", "1", "--pp", "1", "--tp", "2", "--tp-layout", "megatron",
                                      "--microbatches", "2"]),
], ids=["resnet-pp2", "gpt-tp2"])
def test_resume_continues_with_identical_parameters(tmp_path, capfd, model, flags):
    plan = make_plan(tmp_path, "p", *flags, model=model)
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    assert run(plan, straight, "--steps", "4") == 0
    assert run(plan, halves, "--steps", "2") == 0
    assert run(plan, halves, "--steps", "4", "--resume") == 0
    a = distributed_params(str(straight), plan)
    b = distributed_params(str(halves), plan)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)
    la = json.loads((straight / "measured.json").read_text())["loss"]
    lb = json.loads((halves / "measured.json").read_text())["loss"]
    assert la[2:] == lb


def test_dry_run_and_bad_plans(tmp_path, capfd):
    plan = make_plan(tmp_path, "p", "--dp", "2", "--pp", "1", "--microbatches", "1")
    capfd.readouterr()
    assert main(["run", plan, "--dry-run"]) == 0
    assert "dry run" in capfd.readouterr().out
    assert main(["run", plan, "--nproc", "3"]) == 2
    assert "--nproc 2" in capfd.readouterr().err
    d = json.loads(open(plan).read())
    d["schema_version"] = 7
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    assert main(["run", str(bad)]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "schema_version" in err


def test_the_failure_named_is_the_cause_whenever_the_ranks_are_seen_to_end():
    """parsim.exec.launch._cause, which the launcher asks as it polls and once more where every rank ended
    within one poll's sleep (a killed rank's peer exits within milliseconds, so both are often seen down
    together): a rank killed by a signal comes before one that exited because its peer vanished."""
    from parsim.exec.launch import _cause

    assert _cause([(0, 1), (1, -9)]) == (1, -9)
    assert _cause([(0, None), (1, 2), (2, 1)]) == (1, 2)
    assert _cause([(0, 0), (1, None)]) is None


def test_killed_rank_stops_the_run_with_a_clear_error(tmp_path):
    plan = make_plan(tmp_path, "p", "--dp", "1", "--pp", "2", "--microbatches", "2")
    timeout = 15
    proc = subprocess.Popen([sys.executable, "-m", "parsim.cli", "run", plan, "--steps", "200", "--timeout",
                             str(timeout), "--out", str(tmp_path / "run"), "--synthetic-size", SYNTH],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:                      # rank 0 logs each step; wait for training to run
        if "step: 2," in line:
            break
    victim = None
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
            stat = open(f"/proc/{pid}/stat").read().split()
        except OSError:
            continue
        if b"parsim.run" in cmdline and b"RANK=1" in environ and int(stat[3]) == proc.pid:
            victim = int(pid)
    assert victim is not None
    os.kill(victim, signal.SIGKILL)
    t = time.monotonic()
    _, err = proc.communicate(timeout=timeout + 60)
    assert proc.returncode != 0
    assert time.monotonic() - t < timeout + 30
    assert "rank 1 was killed by signal 9" in err
    assert "Traceback" not in err


def test_sdpa_gpt_pipeline_matches_reference(tmp_path, capfd):
    """The zoo GPT with attention: sdpa (torch's fused CPU attention) on pp=2, 2 ranks, equals one
    process: the executor builds the same module as the reference."""
    model = tmp_path / "gpt_sdpa.yaml"
    model.write_text(open("examples/gpt_tiny_local.yaml").read().replace("attention: eager}", "attention: sdpa}"))
    assert "attention: sdpa" in model.read_text()
    assert any(op.kind == "Attention" for op in load_model(str(model)).graph.layers[1].ops)
    plan = str(tmp_path / "pp2.json")
    assert main(["simulate", str(model), "--cluster", "local-cpu", "--dp", "1", "--pp", "2", "--microbatches", "2",
                 "-o", plan, "--json"]) == 0
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "3") == 0
    m = assert_same_as_reference(plan, out, 3)
    assert m["loss"][-1] < m["loss"][0]


def test_vit_pipeline_sends_its_strided_patches_dense_and_matches_reference(tmp_path, capfd):
    """A ViT's patch embedding leaves a strided view (``flatten(2).transpose(1, 2)``), which gloo
    refuses to send ("input tensor has to be contiguous"): at pp > 1 every stage's boundary sends
    dense tensors.  A two-layer ViT of the held-out set's family on pp=2 equals one process."""
    model = tmp_path / "vit.yaml"
    model.write_text(open("results/heldout/models/vit_tiny_cifar.yaml").read()
                     .replace("hidden: 192, layers: 6, heads: 3, mlp: 768", "hidden: 32, layers: 2, heads: 2, mlp: 64")
                     .replace("global_batch_size: 24", "global_batch_size: 8"))
    plan = str(tmp_path / "pp2.json")
    assert main(["simulate", str(model), "--cluster", "local-cpu", "--dp", "1", "--pp", "2", "--microbatches", "2",
                 "--schedule", "1f1b", "-o", plan, "--json"]) == 0
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "2") == 0
    assert_same_as_reference(plan, out, 2)
