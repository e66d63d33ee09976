"""hardware_profiles/aws-p5.yaml against the public nccl-tests tables its network was fitted to
(hardware_profiles/comm/aws-p5, PROVENANCE.md there; the fit: results/2026-12-05g-intel-xeon/efa_profile_fit.py,
both through parsim.profile.comm_fit):
the all-to-all rows within the error the profile states, its efficiency the fit's optimum, and the rows
not fitted priced as the profile's comments say."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from parsim.hardware.cluster import load_profile
from parsim.profile.comm_fit import OPS, load_table, log_error, ratios, with_network

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "hardware_profiles" / "comm" / "aws-p5"


def _rows(test: str):
    return load_table(TABLES / f"nccl_{test}.csv")


def _ratios(profile, test: str) -> list[float]:
    """measured / priced over every row of the test's table, 8 ranks a node."""
    return ratios(profile, test, _rows(test))


@pytest.fixture(scope="module")
def profile():
    return load_profile(ROOT / "hardware_profiles" / "aws-p5.yaml")


def test_the_tables_are_the_committed_ones():
    rows = {op: _rows(op) for op in OPS}
    assert [len(rows[op]) for op in OPS] == [35, 45, 35]
    assert sorted({r.nodes for r in rows["alltoall"]}) == [2, 4, 8, 16, 32]
    # 2 nodes, 2 GiB: out-of-place algbw 84.53 GB/s (data/nccl_alltoall.csv at a77f70db)
    assert rows["alltoall"][6].measured_s == pytest.approx(2**31 / 84.53e9)


def test_a_gpu_has_four_100_gbps_efa_interfaces_summed(profile):
    network = dict(profile.links)["network"]
    assert network.bandwidth_bytes_per_s == pytest.approx(50e9)      # 32 x 100 Gb/s over 8 GPUs
    assert network.efficiency == pytest.approx(0.895)
    assert profile.collectives.net_overhead_s == pytest.approx(2e-6)  # an AMD host (tuning.cc)


def test_all_to_all_rows_within_the_profiles_stated_error(profile):
    ratios = _ratios(profile, "alltoall")
    assert statistics.mean(abs(r - 1) for r in ratios) == pytest.approx(0.080, abs=0.002)
    assert min(ratios) == pytest.approx(0.800, abs=0.001) and max(ratios) == pytest.approx(1.348, abs=0.001)


def test_the_efficiency_is_the_fits_optimum(profile):
    def error(efficiency):
        return log_error(with_network(profile, efficiency), "alltoall", _rows("alltoall"))
    best = error(0.895)
    assert best < error(0.88) and best < error(0.91)


def test_the_rows_not_fitted_price_as_the_profile_says(profile):
    gather = _ratios(profile, "all_gather")
    assert statistics.mean(abs(r - 1) for r in gather) == pytest.approx(0.136, abs=0.002)
    reduce = dict(zip([(r.nodes, r.size_bytes) for r in _rows("all_reduce")], _ratios(profile, "all_reduce")))
    assert statistics.mean(abs(r - 1) for r in reduce.values()) == pytest.approx(0.458, abs=0.002)
    assert max(reduce.values()) == pytest.approx(2.541, abs=0.002)         # 32 nodes, 64 MiB: priced too fast
    assert reduce[(2, 8 * 2**30)] == pytest.approx(0.659, abs=0.002)        # 2 nodes, 8 GiB: priced too slow
