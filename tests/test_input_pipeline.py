"""The input pipeline as a resource: the profile section, its pricing (parsim.cost.input), its
effect in the simulator, and `parsim profile-data` on a few synthetic samples."""

from dataclasses import replace

import pytest
import yaml

from parsim.cost.input import input_cost
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.hardware.cluster import InputPipeline, load_profile
from parsim.model.spec import Training
from parsim.plan import ParallelConfig
from tests.test_sim import IDEAL, UnitCost, assert_step_adds_up, uniform_graph

IDEAL_TEXT = open("tests/data/ideal.yaml").read()


def _profile(tmp_path, section: str):
    path = tmp_path / "p.yaml"
    path.write_text(IDEAL_TEXT + section)
    return path


def test_profile_reads_both_loader_kinds(tmp_path):
    p = load_profile(_profile(tmp_path, "input_pipeline: {overlap: true, host_samples_per_s: 12000}\n"))
    assert p.input_pipeline == InputPipeline(True, host_samples_per_s=12000.0)
    p = load_profile(_profile(tmp_path, "input_pipeline:\n  overlap: false\n  per_sample_s: 2.0e-4\n"
                                        "  measured: {date: '2026-11-23', machine: m, command: c}\n"))
    assert p.input_pipeline == InputPipeline(False, per_sample_s=2e-4)
    assert load_profile("tests/data/ideal.yaml").input_pipeline is None


@pytest.mark.parametrize("section,needle", [
    ("input_pipeline: {overlap: true, host_samples_per_s: 100, prefetch: 2}\n", "input_pipeline.prefetch: unknown key"),
    ("input_pipeline: {overlap: true}\n", "input_pipeline.host_samples_per_s: missing"),
    ("input_pipeline: {overlap: false, host_samples_per_s: 100}\n", "give per_sample_s"),
    ("input_pipeline: {overlap: true, per_sample_s: 0.1}\n", "give host_samples_per_s"),
    ("input_pipeline: {overlap: false, per_sample_s: -1}\n", "must be positive"),
    ("input_pipeline: {per_sample_s: 0.1}\n", "input_pipeline.overlap: missing"),
    ("input_pipeline: {overlap: yes please, per_sample_s: 0.1}\n", "expected true or false"),
])
def test_profile_rejects_bad_sections_in_one_line(tmp_path, section, needle):
    with pytest.raises(InputError) as e:
        load_profile(_profile(tmp_path, section))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_loader_figure_prices_only_the_input_it_was_measured_for():
    c = load_cluster("tests/data/ideal.yaml")
    cifar = InputPipeline(False, per_sample_s=1e-4, sample_elements=3072)
    assert input_cost(cifar, c, [0], 8, sample_elements=3072).microbatch_s == pytest.approx(8e-4)
    assert input_cost(cifar, c, [0], 8, sample_elements=64) is None        # e.g. a token sequence


def test_profile_data_figure_applies_to_the_cifar_resnet_not_the_gpt(tmp_path):
    import shutil

    from parsim.cli import main
    from parsim.model.spec import load_model
    from parsim.sim import simulate

    path = tmp_path / "cpu.yaml"
    shutil.copy("hardware_profiles/local-cpu.yaml", path)
    assert main(["profile-data", "-o", str(path), "--samples", "16", "--batch", "8", "--repeats", "1"]) == 0
    cluster = load_cluster(str(path))
    for model, priced in (("examples/resnet50_cifar10_local.yaml", True), ("examples/gpt_tiny_local.yaml", False)):
        spec = load_model(model)
        cfg = ParallelConfig(dp=1, pp=1, microbatches=1, schedule="1f1b", bounds=(0, len(spec.graph)))
        e = simulate(spec.graph, spec.training, cluster, cfg)
        assert (e.input is not None) == priced and (e.ranks[0].input_s > 0) == priced


def _with_input(cluster, pipe):
    return replace(cluster, profile=replace(cluster.profile, input_pipeline=pipe))


def test_pricing_closed_forms_shared_per_node():
    c = load_cluster("tests/data/ideal.yaml")                  # one node of 64 devices
    inline = input_cost(InputPipeline(False, per_sample_s=0.01), c, [0, 1, 2, 3], 8)
    assert inline.microbatch_s == pytest.approx(0.08)           # each process loads its own, not shared
    workers = input_cost(InputPipeline(True, host_samples_per_s=100.0), c, [0, 1, 2, 3], 8)
    assert workers.readers_on_node == 4
    assert workers.microbatch_s == pytest.approx(4 * 8 / 100.0)   # four replicas share the node's loader
    two_nodes = replace(c, num_nodes=2, devices_per_node=2)       # readers 0, 1 | 2, 3
    assert input_cost(InputPipeline(True, host_samples_per_s=100.0), two_nodes, [0, 1, 2, 3], 8).readers_on_node == 2
    assert input_cost(None, c, [0], 8) is None


def _step(pipe, p=1, m=4, dp=1):
    g = uniform_graph(p)
    cfg = ParallelConfig(dp=dp, pp=p, microbatches=m, schedule="1f1b", bounds=tuple(range(p + 1)))
    return simulate_(g, Training(global_batch_size=m * dp), _with_input(IDEAL, pipe), cfg)


def simulate_(g, training, cluster, cfg):
    from parsim.sim import simulate
    return simulate(g, training, cluster, cfg, UnitCost())


def test_absent_section_changes_nothing():
    base = _step(None, p=2)
    assert base.input is None and not base.input_bound and all(r.input_s == 0 for r in base.ranks)
    assert base.step_time_s == pytest.approx(3 * (4 + 2 - 1))


def test_inline_loading_adds_per_microbatch_on_the_input_rank():
    # p=1, m=4, F=1, B=2 per micro-batch of 1 sample: 4 x (3 + load)
    e = _step(InputPipeline(False, per_sample_s=0.5), p=1)
    assert e.step_time_s == pytest.approx(4 * 3.5)
    assert e.ranks[0].input_s == pytest.approx(4 * 0.5)
    assert e.ranks[0].bubble_s == pytest.approx(0.0)
    # pipelined: only stage 0's rank loads; the last stage sees it as bubble, not as input
    e2 = _step(InputPipeline(False, per_sample_s=0.5), p=2)
    assert e2.ranks[0].input_s == pytest.approx(4 * 0.5) and e2.ranks[1].input_s == 0
    assert e2.step_time_s > 3 * (4 + 2 - 1)
    assert_step_adds_up(e)                                   # loading is input, not idle
    assert_step_adds_up(e2)


@pytest.mark.parametrize("rate,expected", [(1.0, 4.0 * 3), (0.5, 4 * 2.0), (0.25, 4 * 4.0), (0.2, 4 * 5.0)])
def test_overlapped_loader_is_max_of_compute_and_load(rate, expected):
    # compute 3 s per micro-batch; the loader needs 1/rate s per sample: step = max(4 x 3, 4 / rate)
    e = _step(InputPipeline(True, host_samples_per_s=rate), p=1)
    assert e.step_time_s == pytest.approx(max(12.0, 4 / rate))
    assert e.input_bound == (4 / rate > 12.0)
    if e.input_bound:
        assert e.ranks[0].input_s == pytest.approx(e.step_time_s - 12.0)
    assert_step_adds_up(e)


def test_overlapped_loader_shared_by_replicas_on_a_node():
    # dp=4 on one node: the loader serves four replicas, so each sees a quarter of its rate
    alone = _step(InputPipeline(True, host_samples_per_s=1.0), p=1, dp=1)
    shared = _step(InputPipeline(True, host_samples_per_s=1.0), p=1, dp=4)
    assert not alone.input_bound and alone.step_time_s == pytest.approx(12.0)
    assert shared.input_bound and shared.step_time_s == pytest.approx(4 * 4 / 1.0)


def test_overlapped_loader_behind_a_pipeline():
    # p=2, m=4: compute-bound step 3 (m + p - 1) = 15; a loader at 4 s per micro-batch binds: 16
    e = _step(InputPipeline(True, host_samples_per_s=0.25), p=2)
    assert e.input_bound and e.step_time_s == pytest.approx(16.0)
    assert e.ranks[0].input_s > 0 and e.ranks[1].input_s == 0


def test_profile_data_writes_the_section(tmp_path):
    from parsim.cli import main

    out = tmp_path / "c.yaml"
    out.write_text(IDEAL_TEXT + "input_pipeline: {overlap: true, host_samples_per_s: 5}\n")
    for _ in range(2):                                           # a second run replaces the first
        assert main(["profile-data", "-o", str(out), "--samples", "16", "--batch", "8", "--repeats", "3"]) == 0
    text = out.read_text()
    assert text.count("input_pipeline:") == 1 and "# An idealised cluster" in text   # replaced, the rest kept
    assert text.count("# input_pipeline measured") == 1 and text.count("# input_pipeline median") == 1
    pipe = load_profile(out).input_pipeline
    assert not pipe.overlap and 1e-7 < pipe.per_sample_s < 1.0
    meta = yaml.safe_load(text)["input_pipeline"]["measured"]
    assert "parsim profile-data" in meta["command"] and meta["date"]


def test_profile_data_bad_input_is_one_line(tmp_path, capsys):
    from parsim.cli import main

    assert main(["profile-data", "-o", str(tmp_path / "missing.yaml"), "--samples", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("parsim: error:") and "\n" not in err
    assert main(["profile-data", "-o", str(tmp_path / "x.yaml"), "--data", str(tmp_path)]) == 2
