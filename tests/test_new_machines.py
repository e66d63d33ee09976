"""The machines of issue 38: Ascend 910B (atlas-900-a2, atlas-800t-a2) and 910C (cloudmatrix384),
H200, Grand Teton H100, B200 and GB200 NVL72 / NVL576.  Every number in their files is cited or
marked unconfirmed, and the unconfirmed ones are listed here; the scale-up domain's tiers; HCCL's
algorithms as its documentation prices them; extends chains and patch."""

import math
import re
from dataclasses import replace

import nccl_closed_form
import pytest

from parsim.cli import main
from parsim.cost.comm import all_to_all_time_s, collective_time_s
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.hardware.cluster import available_profiles, load_profile
from parsim.hardware.numerics import MathMode, engines

NEW = ("atlas-900-a2", "atlas-800t-a2", "cloudmatrix384", "dgx-h200", "grand-teton-h100", "dgx-b200", "gb200-nvl72",
       "gb200-nvl576", "aws-p5")

# The numbers each new profile marks unconfirmed (key paths; the file's comments say why).  Adding one
# without listing it here, or confirming one without striking it, fails test_unconfirmed_numbers_are_listed.
UNCONFIRMED = {
    "atlas-900-a2": {"device.peak_tflops.fp32", "device.kernels.compute_units",
                     "device.kernels.tiles", "device.kernels.k_half", "device.kernels.launch_us",
                     "device.kernels.host_dispatch_us", "device.efficiency", "device.memory_reserved.runtime_context",
                     "device.memory_reserved.fragmentation_fraction", "node.group_link", "network.nics_per_node",
                     "network.latency_us", "collective.latency_us", "collective.tp_overlap_comm_units"},
    "atlas-800t-a2": {"patch.device.peak_tflops.fp16", "patch.device.peak_tflops.bf16", "patch.device.peak_tflops.fp32"},
    "cloudmatrix384": {"node.group_link", "node.node_link", "network.scale_up.latency_us", "network.nics_per_node",
                       "network.latency_us", "collective.bandwidth_efficiency", "collective.latency_us",
                       "collective.tp_overlap_comm_units", "collective.overlap"},
    "dgx-h200": set(),
    "grand-teton-h100": {"patch.device.peak_tflops.fp16", "patch.device.peak_tflops.bf16",
                         "patch.device.peak_tflops.fp32", "patch.device.peak_tflops.tf32",
                         "patch.device.peak_tflops.fp8", "network.efficiency", "network.latency_us"},
    # and, carried over from dgx-h100 (its header says so), every device and collective number it does
    # not patch: test_b200_carries_h100s_numbers_as_h100_holds_them
    "dgx-b200": {"patch.device.kernels.compute_units", "patch.collective.overlap", "node.group_link",
                 "network.latency_us"},
    "gb200-nvl72": {"node.group_link", "network.scale_up.latency_us", "network.latency_us"},
    "gb200-nvl576": {"patch.network.scale_up.latency_us"},
    "aws-p5": {"patch.collective.net_overhead_us"},
}
_KEY = re.compile(r"^( *)([A-Za-z_]\w*):(.*)$")
_NOT_NUMBERS = ("schema_version", "name", "description", "extends")


def _keys(name: str):
    """(dotted key path, its comment text, its value) of every key of a profile file: the comment
    is the line's own, the comment lines introducing a nested key at its indentation, and the
    deeper-indented comment lines that continue it."""
    lines = open(f"hardware_profiles/{name}.yaml").read().splitlines()
    stack, out = [], []
    for i, line in enumerate(lines):
        m = _KEY.match(line)
        if not m:
            continue
        ind = len(m.group(1))
        while stack and stack[-1][0] >= ind:
            stack.pop()
        stack.append((ind, m.group(2)))
        text = [line.split("#", 1)[1]] if "#" in m.group(3) else []
        j = i - 1
        while ind and j >= 0 and lines[j].lstrip().startswith("#") and len(lines[j]) - len(lines[j].lstrip()) == ind:
            text.append(lines[j])
            j -= 1
        j = i + 1
        while j < len(lines) and lines[j].lstrip().startswith("#") and len(lines[j]) - len(lines[j].lstrip()) > ind:
            text.append(lines[j])
            j += 1
        out.append((".".join(k for _, k in stack), " ".join(text), m.group(3).split("#", 1)[0].strip()))
    return out


@pytest.mark.parametrize("name", NEW)
def test_unconfirmed_numbers_are_listed(name):
    marked = {path for path, text, _ in _keys(name) if "unconfirmed" in text.lower()}
    assert marked == UNCONFIRMED[name], (f"{name}: newly unconfirmed {sorted(marked - UNCONFIRMED[name])}, no longer "
                                         f"{sorted(UNCONFIRMED[name] - marked)}")


@pytest.mark.parametrize("name", NEW)
def test_every_number_cites_its_source(name):
    """A key holding a number carries a comment (a source, a derivation, or "unconfirmed"), on its
    own lines or its section's; the calibrated: and fitted: sections are the calibration's and the
    public fit's own records."""
    keys = _keys(name)
    texts = {path: text for path, text, _ in keys}
    for path, text, value in keys:
        if (path.split(".")[0] in _NOT_NUMBERS + ("calibrated", "fitted") or path.endswith(".name")
                or not re.search(r"\d", value)):
            continue
        parent = path.rsplit(".", 1)[0] if "." in path else ""
        assert text.strip() or texts.get(parent, "").strip(), f"{name}: {path} = {value} cites nothing"


@pytest.mark.parametrize("name", NEW)
def test_each_new_profile_loads_plans_and_simulates(name, capsys):
    assert name in available_profiles()
    c = load_cluster(name)
    per_node = c.devices_per_node
    nodes = max(1, 8 // per_node)
    spec = f"{name}:{nodes}x{min(per_node, 8)}"
    model = "examples/gpt_tiny_local_bf16.yaml"
    assert main(["simulate", model, "--cluster", spec, "--dp", str(nodes * min(per_node, 8)), "--json"]) == 0
    capsys.readouterr()
    assert main(["plan", model, "--cluster", spec, "--json"]) == 0


def test_bf16_where_the_device_has_it():
    """The 910 (Hot Chips 31: the Cube is fp16 and int8) refuses bf16; every newer Ascend has it."""
    mode = MathMode(dtype="bf16")
    with pytest.raises(InputError, match="Ascend 910 has no bf16 units"):
        engines(load_cluster("ascend910").device, mode)
    for name in ("atlas-900-a2", "atlas-800t-a2", "cloudmatrix384"):
        assert engines(load_cluster(name).device, mode)["matmul"].dtype == "bf16"
    for name in ("dgx-h200", "grand-teton-h100", "dgx-b200", "gb200-nvl72"):
        assert load_cluster(name).device.has_rate("fp8")
    for name in ("dgx-b200", "gb200-nvl72", "gb200-nvl576"):
        assert load_cluster(name).device.has_rate("fp4")


# ----------------------------------------------------------------------------- scale-up domains

def test_nvl72_a_group_inside_the_rack_is_nvlink_though_it_crosses_trays():
    c = load_cluster("gb200-nvl72:36x4")                  # two racks
    assert c.link_class(0, 3) == "group"                  # one tray
    assert c.link_class(0, 4) == "domain" == c.link_class(0, 71)   # other trays of rack 0: NVLink switch trays
    assert c.link_class(0, 72) == "network" == c.link_class(71, 72)
    assert c.link(0, 71).bandwidth_bytes_per_s == c.link(0, 1).bandwidth_bytes_per_s == 900e9
    assert c.link(0, 72).bandwidth_bytes_per_s == 50e9
    nvl576 = load_cluster("gb200-nvl576:288x4")
    assert nvl576.link_class(0, 575) == "domain" and nvl576.link_class(0, 576) == "network"


def test_the_cloudmatrix384_tiers():
    c = load_cluster("cloudmatrix384:96x16")              # two supernodes of 48 servers x 16 dies
    assert [c.link_class(0, r) for r in (1, 2, 16, 767, 768)] == ["group", "node", "domain", "domain", "network"]


def test_collectives_across_trays_are_priced_on_the_domain_link():
    c = load_cluster("gb200-nvl72")
    link, coll = c.link_for("domain"), c.profile.collectives
    a, b = link.latency_s + coll.latency_s, link.bandwidth_bytes_per_s * coll.bandwidth_efficiency
    n, S = 72, 1e9
    # the ring's latency: NCCL's model over one NVLink domain, every step an NVLink hop (the 18 trays
    # are one domain, as NCCL's multi-node NVLink runs them: parsim.cost.comm.group_shape)
    assert collective_time_s(c, list(range(n)), S, algorithm="ring") == pytest.approx(
        nccl_closed_form.ring_s("all_reduce", n, 1, 1.0) + 2 * (n - 1) / n * S / b)
    ranks = list(range(8))                                # two trays: every peer through the GPU's NVLink port
    assert all_to_all_time_s(c, ranks, S) == pytest.approx(7 * a + 7 / 8 * S / b)
    racks = load_cluster("gb200-nvl72:36x4")
    assert collective_time_s(racks, [0, 72], S) > 10 * collective_time_s(racks, [0, 71], S)


# ----------------------------------------------------------------------------- HCCL's algorithms

def _ab(c, cls):
    link, coll = c.link_for(cls), c.profile.collectives
    return link.latency_s + coll.latency_s, link.bandwidth_bytes_per_s * link.efficiency * coll.bandwidth_efficiency


def test_mesh_drives_every_hccs_link_of_the_910b_server():
    """hicann/hccl Mesh.md: AllReduce 2 alpha + 2/p n beta (beta per link); AllGather alpha + n/p beta."""
    c = load_cluster("atlas-900-a2")
    a, b = _ab(c, "group")
    S, p = 1e9, 8
    mesh = collective_time_s(c, list(range(p)), S, algorithm="mesh")
    assert mesh == pytest.approx(2 * a + 2 * S / (p * b))
    assert mesh < collective_time_s(c, list(range(p)), S, algorithm="ring") / 3
    assert collective_time_s(c, list(range(p)), S) == mesh                       # auto takes it
    assert collective_time_s(c, list(range(p)), S, "all_gather") == pytest.approx(a + S / (p * b))
    assert all_to_all_time_s(c, list(range(p)), S) == pytest.approx(a + S / (p * b))
    assert math.isinf(collective_time_s(c, list(range(16)), S, algorithm="mesh"))   # across servers: no mesh


def test_pipeline_and_nhr_as_hccl_prices_them():
    """Pipeline.md: AllReduce = 2 (max(s/p beta_inter + alpha_inter, s/p beta_intra + alpha_intra)
    (p_inter - 1) + s/p beta_intra + alpha_intra); NHR.md: 2 ceil(log2 p) alpha + 2 (p-1)/p n beta."""
    c = load_cluster("atlas-900-a2:4x8")
    S, ranks = 1e9, list(range(32))
    (ai, bi), (ao, bo) = _ab(c, "group"), _ab(c, "network")
    intra, inter = ai + S / 32 / bi, ao + S / 32 / bo
    assert collective_time_s(c, ranks, S, algorithm="pipeline") == pytest.approx(2 * (max(inter, intra) * 3 + intra))
    servers = [0, 8, 16]                                  # 3 servers, one rank each: not a power of two
    assert collective_time_s(c, servers, S, algorithm="nhr") == pytest.approx(2 * 2 * ao + 2 * 2 / 3 * S / bo)
    assert math.isinf(collective_time_s(c, servers, S, algorithm="halving-doubling"))


def test_algorithms_are_per_product():
    """The 910's Atlas 800 keeps HCCL's defaults (Pipeline is Atlas A2 and later); a profile naming
    an algorithm its library lacks is refused with the field."""
    old = load_cluster("ascend910:2x8")
    with pytest.raises(InputError, match="does not implement it"):
        collective_time_s(old, list(range(16)), 1e9, algorithm="pipeline")


def test_a_bad_algorithm_list_names_the_profile_field(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text("extends: dgx-h100\nname: p\npatch:\n  collective: {algorithms: [ring, mesh]}\n")
    import shutil
    shutil.copy("hardware_profiles/dgx-h100.yaml", tmp_path / "dgx-h100.yaml")
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", str(path), "--dp", "8"]) == 2
    err = capsys.readouterr().err
    assert "collective.algorithms: nccl does not implement mesh" in err and err.count("\n") == 1


# ----------------------------------------------------------------------------- extends and patch

def test_extends_chains_and_patch_changes_single_fields():
    nvl576, nvl72, b200 = (load_profile(f"hardware_profiles/{n}.yaml") for n in ("gb200-nvl576", "gb200-nvl72",
                                                                                  "dgx-b200"))
    assert nvl576.device == nvl72.device != b200.device
    assert nvl72.device.kernels == b200.device.kernels and nvl72.device.memory_bytes == 186e9
    assert (nvl576.fabric.domain_nodes, nvl72.fabric.domain_nodes) == (144, 18)
    assert nvl576.fabric.domain_link.bandwidth_bytes_per_s == nvl72.fabric.domain_link.bandwidth_bytes_per_s
    h200, h100 = load_profile("hardware_profiles/dgx-h200.yaml"), load_profile("hardware_profiles/dgx-h100.yaml")
    assert h200.device.kernels == h100.device.kernels and h200.device.peak_flops_per_s == h100.device.peak_flops_per_s
    assert (h200.device.memory_bytes, h200.device.memory_bandwidth_bytes_per_s) == (141e9, 4.8e12)


@pytest.mark.parametrize("text, words", [
    ("extends: b\nname: a\n", ["b.yaml: extends", "a -> b -> a", "circle"]),
    ("extends: dgx-h100\nname: a\npatch: {fabric: {x: 1}}\n", ["a.yaml: patch", "no section fabric"]),
])
def test_bad_chains_and_patches_are_one_line(tmp_path, capsys, text, words):
    import shutil
    shutil.copy("hardware_profiles/dgx-h100.yaml", tmp_path / "dgx-h100.yaml")
    (tmp_path / "b.yaml").write_text("extends: a\nname: b\n")
    (tmp_path / "a.yaml").write_text(text)
    assert main(["cluster", str(tmp_path / "a.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    for w in words:
        assert w in err, (w, err)


def test_the_a2_rank_table_reads_as_two_atlas_800t_a2_servers():
    c = load_cluster("examples/rank_table_a2_16pcs.json")
    assert (c.profile.name, c.num_nodes, c.devices_per_node) == ("atlas-800t-a2", 2, 8)
    assert c.link_class(0, 7) == "group" and c.link_class(7, 8) == "network"


def test_b200_carries_h100s_numbers_as_h100_holds_them():
    """dgx-b200 says its GEMM kernel model, memory-bound share, attention and FP8 efficiencies, launch
    and host times, memory headroom and NCCL efficiency are dgx-h100's, carried over unconfirmed.
    It extends dgx-h100, so they are whatever H100's refits leave there (until 2026-12-01 they were
    copies, several left behind: k_half 29.8 against 72.5).  Its own numbers are the datasheet's."""
    b200, h100 = load_cluster("dgx-b200:1x8"), load_cluster("dgx-h100:1x8")
    assert replace(b200.device.kernels, compute_units=h100.device.kernels.compute_units) == h100.device.kernels
    assert b200.device.kernels.compute_units == 148
    assert b200.device.memory_efficiency == h100.device.memory_efficiency
    assert b200.device.reserve == h100.device.reserve and b200.device.efficiency == h100.device.efficiency
    assert b200.profile.collectives.bandwidth_efficiency == h100.profile.collectives.bandwidth_efficiency
    assert b200.device.peak("bf16") == 2250e12 and b200.device.memory_bandwidth_bytes_per_s == 8000e9
    gb200 = load_cluster("gb200-nvl72:18x4")
    assert gb200.device.kernels.k_half == h100.device.kernels.k_half
