"""Hardware profiles, cluster specs and Ascend rank tables."""

import json

import pytest
import yaml

from parsim.cli import main
from parsim.hardware import load_cluster
from parsim.hardware.cluster import available_profiles
from parsim.hardware.device import Device, MemoryReserve
from parsim.inputs import parse_bytes


@pytest.mark.parametrize("name", ["ascend910", "dgx-a100", "dgx-h100", "dgx1-v100", "local-cpu"])
def test_shipped_profiles_load(name):
    assert name in available_profiles()
    c = load_cluster(name)
    assert c.device.memory_bytes > 0 and c.device.peak("fp32") > 0


def test_ascend_groups_and_link_classes():
    c = load_cluster("ascend910:2x8")
    assert c.world_size == 16
    assert c.link_class(0, 3) == "group"       # same HCCS group
    assert c.link_class(3, 4) == "node"        # across the two groups, over PCIe
    assert c.link_class(7, 8) == "network"     # across servers
    assert c.link(0, 1).bandwidth_bytes_per_s > c.link(7, 8).bandwidth_bytes_per_s


def test_partial_node():
    c = load_cluster("ascend910:1x4")
    assert c.world_size == 4 and c.groups == ((0, 1, 2, 3),)


def test_rank_table_reads_as_two_ascend_servers():
    c = load_cluster("tests/data/rank_table_16pcs.json")
    assert (c.num_nodes, c.devices_per_node, c.world_size) == (2, 8, 16)
    assert c.rank_devices[9] == ("10.155.111.141", 1)
    assert c.link_class(8, 12) == "node"


def test_efficiency_interpolates_in_log_space():
    d = load_cluster("dgx-a100").device          # efficiency: [[1e7, 0.006], [1e9, 0.27], [1e11, 0.678], [1e12, 0.706]]
    assert d.compute_efficiency(1e10) == pytest.approx((0.27 + 0.678) / 2)
    assert d.compute_efficiency(1e3) == 0.006 and d.compute_efficiency(1e15) == 0.706


# ----------------------------------------------------------------------------- memory headroom

SHIPPED = ["ascend910", "dgx-a100", "dgx-h100", "dgx1-v100", "local-cpu"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profiles_carry_their_reserved_memory_with_sources(name):
    """Every shipped profile says what its runtime, collective library and allocator take, and
    each figure cites where it comes from (a comment on its line or right below it)."""
    path = f"hardware_profiles/{name}.yaml"
    raw = yaml.safe_load(open(path))["device"]["memory_reserved"]
    assert set(raw) == {"runtime_context", "collective_buffers", "fragmentation_fraction"}
    lines = open(path).read().splitlines()
    for i, line in enumerate(lines):
        if any(f"{k}:" in line for k in raw):
            assert "#" in line or lines[i + 1].lstrip().startswith("#"), line
    r = load_cluster(name).device.reserve
    assert (r.runtime_context_bytes, r.collective_buffers_bytes, r.fragmentation_fraction) == (
        parse_bytes(raw["runtime_context"], allow_zero=True), parse_bytes(raw["collective_buffers"], allow_zero=True),
        raw["fragmentation_fraction"])


def test_reserved_figures_follow_their_derivations():
    """The figures the profiles' comments derive: NCCL 2 x 688 MB (tp and dp groups) + 2 x 544 MB
    (pipeline pairs), HCCL 4 communicators x 2 x HCCL_BUFFSIZE (200 MB); the CPU has no pool to fragment."""
    for name in ("dgx-a100", "dgx-h100", "dgx1-v100"):
        r = load_cluster(name).device.reserve
        assert r.collective_buffers_bytes == 2 * 688e6 + 2 * 544e6 and r.runtime_context_bytes == 400e6
    ascend = load_cluster("ascend910").device.reserve
    assert ascend.collective_buffers_bytes == 4 * 2 * 200e6
    assert ascend.runtime_context_bytes + ascend.collective_buffers_bytes == 2e9     # MindSpore's 2 GB kept back
    cpu = load_cluster("local-cpu").device.reserve
    assert cpu.collective_buffers_bytes == 0 and cpu.fragmentation_fraction == 0 and cpu.runtime_context_bytes > 0


def test_usable_memory_closed_form():
    d = load_cluster("dgx-a100").device
    assert d.memory_bytes == 80e9
    assert d.usable_memory_bytes == pytest.approx((80e9 - 400e6 - 2464e6) * (1 - 0.15), rel=1e-12)
    assert MemoryReserve(100, 300, 0.25).usable_bytes(1000) == (1000 - 100 - 300) * 0.75
    assert Device("d", (("fp32", 1.0),), 1000, 1.0).usable_memory_bytes == 1000      # nothing reserved by default
    assert load_cluster("tests/data/ideal.yaml").device.usable_memory_bytes == 2**40  # a profile without the section


def test_an_explicit_cap_is_taken_as_given_up_to_the_raw_capacity():
    d = load_cluster("dgx-a100").device
    assert d.memory_cap_bytes() == d.usable_memory_bytes
    assert d.memory_cap_bytes(70 * 2**30) == 70 * 2**30 > d.usable_memory_bytes        # above usable: as given
    assert d.memory_cap_bytes(10 * 2**30) == 10 * 2**30
    assert d.memory_cap_bytes(100 * 2**40) == d.memory_bytes                           # never above the device


def _profile_with(tmp_path, reserved: str) -> str:
    path = tmp_path / "p.yaml"
    path.write_text("schema_version: 1\nname: tiny\n"
                    "device: {name: d, memory: 1GiB, memory_bandwidth_gb_per_s: 10, peak_tflops: {fp32: 1},\n"
                    f"         memory_reserved: {reserved}}}\n"
                    "node: {devices: 2, group_link: {bandwidth_gb_per_s: 1}}\ncollective: {library: gloo}\n")
    return str(path)


def test_memory_reserved_loads_sizes_with_units_and_zero(tmp_path):
    c = load_cluster(_profile_with(tmp_path, "{runtime_context: 256MiB, collective_buffers: 0, "
                                             "fragmentation_fraction: 0.5}"))
    assert c.device.reserve == MemoryReserve(2**28, 0, 0.5)
    assert c.device.usable_memory_bytes == (2**30 - 2**28) * 0.5


@pytest.mark.parametrize("reserved, words", [
    ("{runtime_context: -1}", ["device.memory_reserved.runtime_context", ">= 0"]),
    ("{collective_buffers: -2GiB}", ["device.memory_reserved.collective_buffers", "24GiB"]),
    ("{fragmentation_fraction: 1.0}", ["device.memory_reserved.fragmentation_fraction", "[0, 1)"]),
    ("{fragmentation_fraction: -0.1}", ["device.memory_reserved.fragmentation_fraction", "[0, 1)"]),
    ("{runtime_context: 768MiB, collective_buffers: 256MiB}",
     ["device.memory_reserved.runtime_context", "leave nothing", "less than device.memory"]),
    ("{runtime_context: 2GiB}", ["device.memory_reserved.runtime_context", "leave nothing"]),
    ("{context: 1MiB}", ["device.memory_reserved.context", "unknown key"]),
])
def test_bad_memory_reserved_is_one_line(tmp_path, capsys, reserved, words):
    path = _profile_with(tmp_path, reserved)
    assert main(["cluster", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and path in err, err
    for w in words:
        assert w in err, (w, err)


def test_cluster_reports_usable_memory(capsys):
    assert main(["cluster", "dgx-a100:1x8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["device"]
    assert d["usable_memory_bytes"] == load_cluster("dgx-a100").device.usable_memory_bytes
    assert d["memory_reserved"] == {"runtime_context_bytes": 400_000_000, "collective_buffers_bytes": 2_464_000_000,
                                    "fragmentation_fraction": 0.15}
    assert main(["cluster", "dgx-a100:1x8"]) == 0
    assert "usable memory 61.06 GiB: less 381.47 MiB runtime context and 2.29 GiB collective buffers, then 15% " \
           "fragmentation" in capsys.readouterr().out


def test_hgx_h800_is_the_h100_device_with_a_400_gb_per_s_nvlink():
    """hardware_profiles/hgx-h800.yaml: DeepSeek-V3's nodes differ from a DGX H100 in NVLink
    alone (H800 datasheet: 400 GB/s total against 900), one 400 Gb/s NIC per GPU on its own
    plane (Zhao et al., ISCA 2025), 256 nodes (DeepSeek-V3 report Sec. 3.1)."""
    h800, h100 = load_cluster("hgx-h800"), load_cluster("dgx-h100")
    assert "hgx-h800" in available_profiles() and h800.world_size == 2048
    assert h800.device == h100.device and h800.profile.collectives == h100.profile.collectives
    assert h800.link(0, 1).bandwidth_bytes_per_s == 200e9 == 400e9 / 2           # per direction
    assert h800.link(0, 8).bandwidth_bytes_per_s == h100.link(0, 8).bandwidth_bytes_per_s == 50e9
    # the multi-plane fat tree: another plane is reached over NVLink first (the "rail" class)
    assert h800.link_class(0, 8) == "network" and h800.link_class(0, 9) == "rail"
    # DeepSeek's all-to-all kernels reach 160 GB/s of the 200 (V3 report Sec. 3.2.2); NCCL's share as
    # fitted on the public rows (results/published/fit.yaml) prices at least that
    assert h800.profile.collectives.bandwidth_efficiency * h800.link_for("group").efficiency * 200 >= 160
