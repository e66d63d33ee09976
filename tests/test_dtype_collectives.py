"""Collectives per training dtype (Collectives.dtypes, profile-comm --dtypes): the profile section,
its pricing in the simulator (closed forms), profiles without it, and profile-comm's writing of it."""

import pytest

from parsim.cli import main
from parsim.cost.comm import collective_time_s
from parsim.hardware import load_cluster
from parsim.hardware.cluster import load_profile
from parsim.hardware.collectives import REDUCED_DTYPES, DtypeCollectives
from parsim.model.graph import Layer, LayerGraph
from parsim.model.spec import DTYPES, Training
from parsim.plan import ParallelConfig
from parsim.profile.comm import all_reduce_key, hidden_share, profile_yaml
from parsim.schedule.actions import Kind
from parsim.sim import simulate
from tests.test_sim import UnitCost

LINK_BYTES_PER_S, LINK_LATENCY_S = 0.05e9, 100e-6
FITS = {"fp32": (0.5, 20e-6, 0.25), "bf16": (0.4, 50e-6, 0.1)}     # (bandwidth efficiency, latency s, overlap)
PROFILE = f"""schema_version: 1
name: two-dtypes
device: {{name: d, memory: 64GiB, memory_bandwidth_gb_per_s: 10, peak_tflops: {{fp32: 1}}}}
node: {{devices: 2, group_link: {{bandwidth_gb_per_s: {LINK_BYTES_PER_S / 1e9}, latency_us: {LINK_LATENCY_S * 1e6:g}}}}}
collective: {{library: gloo, bandwidth_efficiency: 0.5, latency_us: 20, overlap: 0.25,
             dtypes: {{bf16: {{bandwidth_efficiency: 0.4, latency_us: 50, overlap: 0.1}}}}}}
"""
PARAMS = 8_000_000        # per layer: 32 MB of fp32, 16 MB of bf16 gradients; two layers make two buckets in each


@pytest.fixture
def cluster(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(PROFILE)
    return load_cluster(str(path))


def ring_s(nbytes: float, dtype: str) -> float:
    """Ring all-reduce over 2 ranks (parsim.cost.comm): 2(n-1) (link + library latency) + 2(n-1)/n S / (B eff)."""
    eff, latency_s, _ = FITS[dtype]
    return 2 * (LINK_LATENCY_S + latency_s) + nbytes / (LINK_BYTES_PER_S * eff)


def test_a_profile_reads_its_dtypes_and_a_run_takes_its_own(cluster):
    coll = cluster.profile.collectives
    (dtype, fit), = coll.dtypes
    assert dtype == "bf16" and isinstance(fit, DtypeCollectives)
    assert (fit.bandwidth_efficiency, fit.latency_s, fit.overlap) == pytest.approx(FITS["bf16"], rel=1e-12)
    bf16 = cluster.for_dtype("bf16")
    assert (bf16.profile.collectives.bandwidth_efficiency, bf16.profile.collectives.latency_s,
            bf16.profile.collectives.overlap) == pytest.approx(FITS["bf16"])
    assert bf16.for_dtype("bf16") is bf16 and cluster.for_dtype("bf16") == bf16    # a resolved cluster resolves to itself
    assert cluster.for_dtype("fp32") is cluster and cluster.for_dtype("fp16") is cluster    # not listed: fp32's
    assert collective_time_s(bf16, [0, 1], 20e6) == pytest.approx(ring_s(20e6, "bf16"), rel=1e-12)
    assert collective_time_s(cluster, [0, 1], 20e6) == pytest.approx(ring_s(20e6, "fp32"), rel=1e-12)


def test_an_old_profile_without_dtypes_prices_every_dtype_as_fp32():
    cluster = load_cluster("dgx-a100:1x8")           # measured in no dtype but its own
    assert cluster.profile.collectives.dtypes == ()
    assert cluster.for_dtype("bf16") is cluster
    cpu = load_cluster("local-cpu")                   # profile-comm measured bf16's all-reduce here
    assert cpu.for_dtype("bf16").profile.collectives.bandwidth_efficiency < cpu.profile.collectives.bandwidth_efficiency


def test_the_reduced_dtypes_are_the_training_dtypes_besides_fp32():
    assert set(REDUCED_DTYPES) == set(DTYPES) - {"fp32"}


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_dp2_step_prices_its_buckets_and_their_stolen_cycles_in_its_dtype(cluster, dtype):
    """Two layers, F = 1 and B = 2 each (UnitCost), dp = 2, one micro-batch: layer 1's bucket is
    ready half-way through the backward (t = 4), layer 0's at its end (t = 6).  Each all-reduce
    takes (1 - overlap) of its time from the compute stream, so the optimizer starts at
    6 + (1 - overlap)(d0 + d1), or when the last bucket is done, whichever is later."""
    width = 4 if dtype == "fp32" else 2
    g = LayerGraph("two", tuple(Layer(f"l{i}", 1.0, 2.0, PARAMS, PARAMS * width, 8.0, 8.0) for i in range(2)))
    e = simulate(g, Training(global_batch_size=2, dtype=dtype), cluster,
                 ParallelConfig(dp=2, pp=1, microbatches=1, bounds=(0, 2)), UnitCost())
    d = ring_s(PARAMS * width, dtype)
    reduces = sorted((r[3], r[4]) for r in e.timeline.records if r[1].kind is Kind.REDUCE_GRAD)
    second = max(6.0, 4.0 + d)
    # flat, since pytest >= 9.2 refuses approx over a list of tuples
    assert [t for pair in reduces for t in pair] == pytest.approx([4.0, 4.0 + d, second, second + d], rel=1e-12)
    overlap = FITS[dtype][2]
    assert d < 2.0 and 6.0 + (1 - overlap) * 2 * d > reduces[1][1]       # the stolen cycles set the step here
    assert e.step_time_s == pytest.approx(6.0 + (1 - overlap) * 2 * d, rel=1e-12)


def test_profile_comm_writes_each_dtypes_fit_and_overlap(tmp_path):
    """A known all-reduce per dtype, t = alpha + S / beta, fitted as a ring over 2 ranks against the
    point-to-point link: efficiency = beta / link bandwidth, latency per step = alpha / 2 - link latency."""
    sizes = [4 << 10, 1 << 20, 64 << 20]
    link_s, link_bps = 1e-4, 2e9
    links = {"group": (sizes, [link_s + n / link_bps for n in sizes]),
             all_reduce_key("fp32"): (sizes, [4e-4 + n / 1e9 for n in sizes]),
             all_reduce_key("bf16"): (sizes, [5e-4 + n / 0.8e9 for n in sizes])}
    device = {"peak_flops_per_s": 1e11, "efficiency": [(1e6, 0.5), (1e9, 1.0)], "copy_bytes_per_s": 2e10}
    out = tmp_path / "c.yaml"
    out.write_text(profile_yaml("t", device, links, 2, 2, "gloo", 1 << 30, "parsim profile-comm", 0.08, 0,
                                dtype_overlaps={"bf16": 0.03}))
    c = load_profile(str(out)).collectives
    assert (c.bandwidth_efficiency, c.latency_s, c.overlap) == pytest.approx((0.5, 1e-4, 0.08), abs=1e-3)
    (dtype, fit), = c.dtypes
    assert dtype == "bf16"
    assert (fit.bandwidth_efficiency, fit.latency_s, fit.overlap) == pytest.approx((0.4, 1.5e-4, 0.03), abs=1e-3)


def test_the_hidden_share_is_what_running_both_saves():
    assert hidden_share(10.0, 4.0, 10.0) == 1.0              # the all-reduce hid entirely
    assert hidden_share(10.0, 4.0, 14.0) == 0.0              # as if run one after the other
    assert hidden_share(10.0, 4.0, 13.0) == pytest.approx(0.25)
    assert hidden_share(10.0, 4.0, 16.0) == 0.0              # worse than serial: clamped


@pytest.mark.parametrize("dtypes", ["bf16,fp32", "fp32,bf16,bf16", "fp32,int8"])
def test_profile_comm_refuses_bad_dtypes_in_one_line(capsys, dtypes):
    assert main(["profile-comm", "--dtypes", dtypes, "-o", "/tmp/never-written.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--dtypes {dtypes}" in err and "fp32 first" in err


def test_calibrate_keeps_the_dtypes(tmp_path):
    cpu = tmp_path / "local-cpu.yaml"
    shipped = "dtypes: {bf16: {bandwidth_efficiency: 0.423, latency_us: 110, overlap: 0.08}}"
    text = open("hardware_profiles/local-cpu.yaml").read()
    assert shipped in text
    cpu.write_text(text.replace(shipped, "dtypes: {bf16: {bandwidth_efficiency: 0.417, latency_us: 119.0, overlap: 0.05}}"))
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", "tests/data/profile_table.yaml", "--model", "tests/data/two_layers.yaml",
                 "--cluster", str(cpu), "-o", str(out)]) == 0
    kept = load_profile(str(out)).collectives.dtypes
    assert kept == load_profile(str(cpu)).collectives.dtypes and kept[0][1].overlap == 0.05
