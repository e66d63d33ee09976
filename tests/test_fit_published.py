"""parsim calibrate --published: the profile editor keeps every other line, and a fit moves only
the fields named, to values that reproduce the figure it was fitted on."""

import shutil

import pytest
import yaml

from parsim.cli import main
from parsim.hardware.cluster import load_profile
from parsim.profile.profile_edit import get_field, set_field, set_section
from parsim.profile.published import load_figures, price

PROFILE = """# a comment at the top
schema_version: 1
name: p
device:
  memory: 80GB                  # datasheet
  memory_efficiency: 0.85       # unconfirmed
  kernels:                      # parsim.cost.kernels
    compute_units: 108          # whitepaper
    gemm_efficiency: 0.8        # unconfirmed
collective: {library: nccl, bandwidth_efficiency: 0.8, latency_us: 5}   # unconfirmed
"""


def test_set_field_in_a_block_keeps_every_other_line():
    out = set_field(PROFILE, "device.memory_efficiency", "0.9", "fitted")
    assert get_field(out, "device.memory_efficiency") == 0.9
    changed = [(a, b) for a, b in zip(PROFILE.split("\n"), out.split("\n")) if a != b]
    assert changed == [("  memory_efficiency: 0.85       # unconfirmed", "  memory_efficiency: 0.9   # fitted")]


def test_set_field_inside_a_flow_mapping_and_again_keeps_the_original_comment_once():
    out = set_field(PROFILE, "collective.bandwidth_efficiency", "0.5", "fitted")
    assert yaml.safe_load(out)["collective"] == {"library": "nccl", "bandwidth_efficiency": 0.5, "latency_us": 5}
    again = set_field(out, "collective.bandwidth_efficiency", "0.6", "fitted")
    line = next(l for l in again.split("\n") if l.startswith("collective:"))
    assert line.endswith("# bandwidth_efficiency fitted; before calibration: unconfirmed")


def test_an_absent_field_is_added_to_its_block():
    out = set_field(PROFILE, "device.kernels.conv_efficiency", "0.4", "fitted")
    data = yaml.safe_load(out)
    assert data["device"]["kernels"] == {"conv_efficiency": 0.4, "compute_units": 108, "gemm_efficiency": 0.8}
    assert len(out.split("\n")) == len(PROFILE.split("\n")) + 1


def test_a_field_holding_a_mapping_is_refused():
    with pytest.raises(ValueError, match="mapping"):
        set_field(PROFILE, "device.kernels", "0.4")


def test_set_section_replaces_its_block_only():
    once = set_section(PROFILE, "calibrated", "calibrated:\n  command: a\n")
    twice = set_section(once, "calibrated", "calibrated:\n  command: b\n")
    assert yaml.safe_load(twice)["calibrated"] == {"command": "b"}
    assert twice.startswith(PROFILE.rstrip("\n")) and twice.count("calibrated:") == 1


def test_calibrate_published_fits_the_named_field_and_writes_its_provenance(tmp_path, monkeypatch, capsys):
    """One field from one figure (the V100's AMP ResNet-50 row): the written profile prices the
    row at its measured value, every other field is as shipped, and the profile says where the
    number came from."""
    folder = tmp_path / "profiles"
    shutil.copytree("hardware_profiles", folder)
    text = (folder / "dgx1-v100.yaml").read_text()
    assert "\ncalibrated:" not in text and "\nfitted:" in text    # the public fit's record, which stays
    monkeypatch.setenv("PARSIM_PROFILES", str(folder))
    out = tmp_path / "v100.yaml"
    code = main(["calibrate", "--published", "results/published/figures.yaml", "--cluster", "dgx1-v100",
                 "--rows", "dle-rn50-v100-fp32-1gpu", "--fit", "device.kernels.vector_conv_efficiency",
                 "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    new = yaml.safe_load(out.read_text())
    old = yaml.safe_load(text)
    assert new["calibrated"]["fields"] == {"device.kernels.vector_conv_efficiency":
                                           new["device"]["kernels"]["vector_conv_efficiency"]}
    assert "--fit device.kernels.vector_conv_efficiency" in new["calibrated"]["command"]
    del new["calibrated"]
    fitted = new["device"]["kernels"].pop("vector_conv_efficiency")
    old["device"]["kernels"].pop("vector_conv_efficiency", None)     # the public fit's value, replaced
    assert new == old and 0.02 <= fitted <= 1.0
    figure = load_figures("results/published/figures.yaml").by_id("dle-rn50-v100-fp32-1gpu")
    assert price(figure, load_profile(out)).error == pytest.approx(0.0, abs=2e-3)


@pytest.mark.parametrize("name", ["dgx-a100", "dgx1-v100"])
def test_a_layer_profile_calibration_keeps_the_end_to_end_convolution_efficiencies(tmp_path, name):
    """`parsim calibrate PROFILE.json` (layer timings) writes a whole profile: the convolution
    efficiencies fitted end to end come through it unchanged."""
    from parsim.hardware import load_cluster
    from parsim.profile.calibrate import profile_yaml

    cluster = load_cluster(name)
    out = tmp_path / "p.yaml"
    out.write_text(profile_yaml(cluster.profile, cluster.device, "x.json"))
    ex, got = cluster.device.kernels, load_profile(out).device.kernels
    assert (got.conv_efficiency, got.vector_conv_efficiency) == (ex.conv_efficiency, ex.vector_conv_efficiency)
    assert ex.conv_efficiency is not None
