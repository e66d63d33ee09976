"""Hardware profiles, cluster specs and Ascend rank tables."""

import pytest

from parsim.hardware import load_cluster
from parsim.hardware.cluster import available_profiles


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
    d = load_cluster("dgx-a100").device
    assert d.compute_efficiency(1e10) == pytest.approx((0.35 + 0.65) / 2)
    assert d.compute_efficiency(1e3) == 0.05 and d.compute_efficiency(1e15) == 0.75
