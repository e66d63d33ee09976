"""The planner's floor of a family before it prices a layer (parsim.search.bound.BranchAndBound.
family_floor): each kernel's floor, affine in the micro-batch (parsim.cost.kernels.
kernel_floor_terms), is at most its time; a layer's floor with its tensor-parallel collectives,
hidden or not (parsim.sim.overlap.layer_floor_s), and its exposed all-to-alls is at most the phase
the search prices (Bounds.floor_phase_times against Bounds.phase_times); and a search that takes
each family at that floor first ranks, bit for bit, what one pricing every family at once ranks."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from parsim.cost.compute import AnalyticalCompute
from parsim.cost.kernels import kernel_floor_terms, kernel_time_s
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.hardware.device import KernelExecution
from parsim.model.spec import load_model
from parsim.search import bound
from parsim.search.planner import Constraints, plan
from parsim.search.split import Bounds
from parsim.shard.prepare import expert_graph, per_device_graph

SIZES = (1, 2, 3, 7, 64, 1024)
MODELS = ("examples/resnet50_cifar10_local.yaml", "examples/gpt_tiny_local.yaml",
          "examples/gpt_tiny_local_bf16.yaml", "examples/moe_tiny_local.yaml")
# the shipped profiles that price by kernels (local-cpu prices layers by the roofline: no floor)
PROFILES = sorted(p.stem for p in Path("hardware_profiles").glob("*.yaml")
                  if load_cluster(f"{p.stem}:1x1").device.kernels is not None)


def _cpu_device():
    """A CPU whose convolutions take torch's CPU paths (parsim.cost.conv_backend)."""
    base = load_cluster("local-cpu").device
    ex = KernelExecution(gemm_efficiency=0.8, k_half=100.0, cpu_threads=1, weight_touch_bytes_per_s=5e9,
                         per_sample_gemm_efficiency=((1.0, 0.2), (4.0, 0.05), (16.0, 0.9)))
    return replace(base, kernels=ex, memory_efficiency=1.0)


@pytest.mark.parametrize("profile", PROFILES + ["cpu-paths"])
def test_a_kernels_floor_is_at_most_its_time_at_every_size(profile):
    device = _cpu_device() if profile == "cpu-paths" else load_cluster(f"{profile}:1x1").device
    checked, tightest = 0, 0.0
    for path in MODELS:
        spec = load_model(path)
        try:
            engines = AnalyticalCompute.for_training(device, spec.training).engines
        except InputError:                    # a dtype the device has no engine for
            continue
        for layer in spec.graph.layers:
            for kernel in layer.kernels:
                for share in (1.0, 0.25):
                    a0, a1, m0, m1, c = kernel_floor_terms(kernel, device, engines, share)
                    for b in SIZES:
                        t = kernel_time_s(kernel, b, device, engines, share)
                        floor = max(a0 + a1 * b, m0 + m1 * b) + c
                        assert floor <= t * (1 + 1e-12), (path, layer.name, kernel.op, share, b)
                        checked += 1
                        if kernel.klass != "mem" and not device.kernels.cpu_threads:
                            tightest = max(tightest, floor / t)
    assert checked
    # where the shape efficiency is near 1 (a large GEMM), the floor is the kernel's time
    assert device.kernels.cpu_threads or tightest > 0.9


def _bounds(path, cluster_spec, tp=1, layout="", recompute=False, ep=1, overlap=False):
    spec = load_model(path)
    cluster = load_cluster(cluster_spec).for_dtype(spec.training.dtype)
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    graph = per_device_graph(spec.graph, tp, layout, recompute, spec.shard, cluster, spec.training)
    if ep > 1:
        graph = expert_graph(graph, ep, spec.training)
    return Bounds(spec, graph, cluster, compute, overlap, exposed_a2a=ep > 1)


CASES = [("examples/gpt_small_local.yaml", "dgx-h100:1x8", 8, "megatron-sp", "none"),
         ("examples/gpt_small_local.yaml", "dgx-h100:1x8", 4, "megatron-sp", "full"),
         ("examples/gpt_small_local.yaml", "dgx-a100:1x8", 2, "megatron-sp", "selective"),
         ("examples/gpt_small_local.yaml", "atlas-900-a2:1x8", 8, "megatron-sp", "full"),   # MC2: no units taken
         ("examples/gpt_small_local.yaml", "dgx-a100:1x8", 4, "megatron", "none")]


@pytest.mark.parametrize("path,cluster_spec,tp,layout,recompute", CASES)
def test_a_layers_floor_is_at_most_its_phase_with_or_without_the_tp_overlap(path, cluster_spec, tp, layout, recompute):
    tightest = 0.0
    for overlap in ((False, True) if layout == "megatron-sp" else (False,)):
        bnd = _bounds(path, cluster_spec, tp, layout, recompute, overlap=overlap)
        for b in (1, 2, 3, 8, 32):
            floors = bnd.floor_phase_times(b)
            exact = np.diff(bnd.phase_times(b), axis=1)
            assert np.all(floors <= exact * (1 + 1e-9)), (overlap, b, np.max(floors / np.maximum(exact, 1e-30)))
            if overlap:
                tightest = max(tightest, float(np.max(floors[:2, 1:-1] / exact[:2, 1:-1])))
    # the overlap's floor counts the collectives it cannot hide: near the phase on some block
    assert layout != "megatron-sp" or tightest > 0.9


def test_a_moe_layers_floor_holds_its_exposed_all_to_alls():
    bnd = _bounds("examples/moe_tiny_local.yaml", "dgx-h100:2x8", ep=4)
    moe = [i for i, layer in enumerate(bnd.graph.layers) if layer.experts is not None]
    for b in (1, 2, 8):
        floors, exact = bnd.floor_phase_times(b), np.diff(bnd.phase_times(b), axis=1)
        assert np.all(floors <= exact * (1 + 1e-9))
        a2a = [bnd.least_a2a_s(i, "F", b) for i in moe]
        assert min(a2a) > 0 and np.all(floors[0, moe] >= a2a)        # the all-to-alls are in the floor


@pytest.mark.parametrize("path,cluster_spec,kw", [
    ("examples/moe_tiny_local.yaml", "dgx-h100:2x8", {}),
    ("examples/gpt_small_local.yaml", "dgx-h100:2x8", {"top": 5}),
    ("examples/gpt_small_local.yaml", "atlas-900-a2:2x8", {}),
    ("examples/resnet50_cifar10.yaml", "ascend910:8x8", {})])
def test_a_search_taking_families_at_their_floor_ranks_what_one_pricing_them_all_ranks(monkeypatch, path,
                                                                                       cluster_spec, kw):
    spec = load_model(path)
    cluster = load_cluster(cluster_spec)
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    floors = []
    family_floor = bound.BranchAndBound.family_floor

    def kept(self, *args):
        floors.append(family_floor(self, *args))
        return floors[-1]
    monkeypatch.setattr(bound.BranchAndBound, "family_floor", kept)
    lazy = plan(spec, cluster, compute, Constraints(**kw), progress=False)
    assert floors and all(f is not None for f in floors)        # every family was taken at its floor
    monkeypatch.setattr(bound.BranchAndBound, "family_floor", lambda self, *args: None)
    eager = plan(spec, cluster, compute, Constraints(**kw), progress=False)

    def ranked(result):
        return [(c.config, c.estimate.step_time_s, c.peak_memory_bytes) for c in result.ranked]
    assert ranked(lazy) == ranked(eager)
    assert (lazy.simulated, lazy.considered, lazy.explanation) == (eager.simulated, eager.considered,
                                                                   eager.explanation)
