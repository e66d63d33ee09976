"""Published measurements reproduced within stated tolerances (tensor x pipeline x data parallel).

Narayanan et al. 2021 (arXiv 2104.04473), Table 1, the 39.1B row: 48 layers, hidden 8192, 64
heads, sequence 2048, vocabulary 51,200, t=8, p=2, 512 A100 80GB in DGX A100 nodes, batch 1536,
mixed precision, activation recomputation: 138 teraFLOP/s per GPU.  FLOPs are counted as the
paper's Equation 3 (which includes the recomputed forward):

    F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h))

The micro-batch size is not in Table 1; we take 1 (m = 48 per pipeline), the smallest, and the
1F1B schedule (the paper's non-interleaved default).
"""

from dataclasses import replace

import pytest

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.hardware.cluster import InputPipeline
from parsim.model.extract import InputSpec, extract_graph
from parsim.model.spec import Training, load_model
from parsim.model.zoo import resnet50
from parsim.plan import ParallelConfig
from parsim.errors import DoesNotFitError
from parsim.report.fmt import human_bytes
from parsim.search.planner import Constraints, plan
from parsim.search.resolve import resolve_config
from parsim.sim import simulate

MEASURED_TFLOPS_PER_GPU = 138.0


def eq3_flops(B, s, l, h, V):
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


@pytest.fixture(scope="module")
def megatron_39b():
    spec = load_model("examples/megatron_39b.yaml")
    cluster = load_cluster("dgx-a100:64x8")
    return spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training)


@pytest.fixture(scope="module")
def paper_config(megatron_39b):
    spec, cluster, compute = megatron_39b
    cfg = resolve_config(spec, cluster, compute, dp=32, pp=2, tp=8, tp_layout="megatron", microbatches=48,
                         schedule="1f1b", recompute=True)
    return cfg, simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)


def test_narayanan_39b_row_within_15_percent(megatron_39b, paper_config):
    cluster = megatron_39b[1]
    cfg, est = paper_config
    assert (cfg.dp, cfg.tp, cfg.pp, cfg.world_size) == (32, 8, 2, 512)
    flops = eq3_flops(1536, 2048, 48, 8192, 51200)
    predicted = flops / est.step_time_s / 512 / 1e12
    assert predicted == pytest.approx(MEASURED_TFLOPS_PER_GPU, rel=0.15), predicted
    # the paper ran it, so it must fit what an A100 leaves a training process (the profile's
    # memory_reserved), not only its raw 80 GB: a check that the headroom is not overstated
    assert max(est.peak_memory_bytes) <= cluster.device.usable_memory_bytes


def test_planner_beats_or_matches_the_papers_configuration(megatron_39b, paper_config):
    spec, cluster, compute = megatron_39b
    result = plan(spec, cluster, compute, Constraints(top=3), progress=False)
    best = result.chosen
    assert best.estimate.step_time_s <= paper_config[1].step_time_s
    assert best.peak_memory_bytes <= result.capacity_bytes
    assert best.config.world_size == 512 and best.config.tp > 1


def test_gpt3_175b_on_1024_a100_fits_with_three_factors():
    spec = load_model("examples/gpt3_175b.yaml")
    cluster = load_cluster("dgx-a100:128x8")
    result = plan(spec, cluster, AnalyticalCompute(cluster.device, "fp16"), Constraints(top=8), progress=False)
    c = result.chosen.config
    assert c.dp * c.tp * c.pp == 1024 and c.tp > 1
    assert c.tp <= 8                                    # tensor parallelism stays inside a DGX node
    # a three-factor plan (Narayanan et al. 2021's shape) fits and ranks within 5% of the pick; since
    # selective recomputation (2026-11-27) the pick may instead be dp=128 tp=8 with ZeRO-3, priced
    # 0.6% faster: a near tie, not a three-factor plan
    three = [x for x in result.ranked if x.config.tp > 1 and x.config.pp > 1]
    assert three and three[0].peak_memory_bytes <= result.capacity_bytes
    assert three[0].estimate.step_time_s <= 1.05 * result.chosen.estimate.step_time_s
    # with headroom counted (runtime context, NCCL buffers, fragmentation) the pick fits the usable
    # memory, and the explanation shows by how much
    assert result.capacity_bytes == cluster.device.usable_memory_bytes < cluster.device.memory_bytes
    assert result.margin_bytes == result.capacity_bytes - result.chosen.peak_memory_bytes >= 0
    memory = next(line for line in result.explanation if line.startswith("memory: "))
    assert memory.endswith(f"margin {human_bytes(result.margin_bytes)}") and " usable (74.51 GiB raw less " in memory
    print(f"{c.dp=} {c.tp=} {c.pp=} {c.schedule=}: {memory}")
    assert any("bottleneck" in line for line in result.explanation)
    # without tensor parallelism and without ZeRO nothing fits the usable memory, recomputing or
    # not (the smallest plan misses it by about 2 GiB); given the raw 80 GB as the cap, one fits by
    # recomputing; sharding the optimizer state over dp (ZeRO-1) fits one into the usable memory;
    # the pick is faster than both
    fp16 = AnalyticalCompute(cluster.device, "fp16")
    with pytest.raises(DoesNotFitError, match="usable"):
        plan(spec, cluster, fp16, Constraints(top=1, tp=1, zero=0), progress=False)
    no_tp = plan(spec, cluster, fp16, Constraints(top=1, tp=1, zero=0, max_memory_bytes=cluster.device.memory_bytes),
                 progress=False)
    assert no_tp.chosen.config.recompute                # which fits only by recomputing
    sharded = plan(spec, cluster, fp16, Constraints(top=1, tp=1), progress=False)
    assert sharded.chosen.config.zero >= 1 and sharded.chosen.peak_memory_bytes <= sharded.capacity_bytes
    assert result.chosen.estimate.step_time_s < min(no_tp.chosen.estimate.step_time_s,
                                                    sharded.chosen.estimate.step_time_s)


def test_gpt3_175b_without_tensor_parallelism_or_recomputation_does_not_fit():
    spec = load_model("examples/gpt3_175b.yaml")
    cluster = load_cluster("dgx-a100:128x8")
    with pytest.raises(DoesNotFitError, match="tensor parallelism"):
        plan(spec, cluster, AnalyticalCompute(cluster.device, "fp16"), Constraints(top=1, tp=1, recompute=False),
             progress=False)


# NVIDIA DeepLearningExamples' ResNet-50 v1.5 on one DGX A100 (benchmarks/bench_published.py): the
# 8-GPU AMP row is data parallel over the node, and the node's loader workers feed all eight
# replicas.  The shipped profile has no input_pipeline (no public per-core rate for that loader on
# an EPYC 7742 was found), so the rates here are synthetic, set around the compute-bound figure:
# the closed form is the point, not the rate.
@pytest.fixture(scope="module")
def dle_resnet50_amp():
    graph = extract_graph(resnet50(1000, "imagenet"), InputSpec((3, 224, 224)), name="resnet50", dtype="fp16")
    return graph, Training(global_batch_size=256, dtype="fp16", optimizer="momentum", memory_format="channels_last")


def _dle_throughput(graph, training, gpus, pipe):
    cluster = load_cluster(f"dgx-a100:1x{gpus}")
    cluster = replace(cluster, profile=replace(cluster.profile, input_pipeline=pipe))
    training = replace(training, global_batch_size=256 * gpus)
    compute = AnalyticalCompute.for_training(cluster.device, training)
    est = simulate(graph, training, cluster, ParallelConfig(gpus, 1, 1, "1f1b", 1, (0, len(graph))), compute,
                   keep_timeline=False)
    return 256 * gpus / est.step_time_s, est


def test_node_loader_bounds_8_gpu_throughput_as_min_of_compute_and_node_rate(dle_resnet50_amp):
    graph, training = dle_resnet50_amp
    compute8, free8 = _dle_throughput(graph, training, 8, None)
    compute1, _ = _dle_throughput(graph, training, 1, None)
    assert free8.input is None and not free8.input_bound and compute8 > 7 * compute1
    for factor in (0.8, 1.25):
        rate = factor * compute8                               # images/s for the whole node
        pipe = InputPipeline(True, host_samples_per_s=rate, sample_elements=3 * 224 * 224)
        tput8, est8 = _dle_throughput(graph, training, 8, pipe)
        assert tput8 == pytest.approx(min(compute8, rate), rel=1e-9)
        assert est8.input_bound == (rate < compute8)
        # one GPU has the node's loader to itself: the same rate leaves the 1-GPU row compute-bound
        tput1, est1 = _dle_throughput(graph, training, 1, pipe)
        assert tput1 == pytest.approx(min(compute1, rate), rel=1e-9) and not est1.input_bound
    # a rate measured for another input (CIFAR's 3 x 32 x 32) does not price ImageNet samples
    cifar = InputPipeline(True, host_samples_per_s=0.5 * compute8, sample_elements=3 * 32 * 32)
    assert _dle_throughput(graph, training, 8, cifar)[0] == pytest.approx(compute8, rel=1e-12)
