"""Multi-tier networks (parsim.hardware.fabric): rail-optimised leaves, PXN across rails, a spine
between pods at its oversubscription; one-tier profiles priced by the closed forms (NCCL's rings
between nodes on every NIC of a node's ranks since 2026-11-29)."""

import collections
import itertools
import json
import math
import re
import shutil
from dataclasses import replace

import nccl_closed_form
import pytest
import yaml

from parsim.cli import main
from parsim.cost.comm import collective_time_s, group_link_class, p2p_time_s
from parsim.hardware import load_cluster
from parsim.hardware.cluster import available_profiles, load_profile
from parsim.hardware.links import Link
from parsim.profile.calibrate import profile_yaml
from parsim.profile.loso import load_fit_spec

TIERED = {"dgx-h100-superpod", "dgx-h100-roce", "hgx-h800"}
POD = load_cluster("dgx-h100-superpod:64x8")        # two scalable units of 32 nodes, 8 rails


def _raw(name: str) -> dict:
    return yaml.safe_load(open(f"hardware_profiles/{name}.yaml"))


def _rank(node: int, local: int) -> int:
    return node * 8 + local


# ------------------------------------------------------------------------------- tiers of pairs and groups

@pytest.mark.parametrize("a,b,tier", [
    ((0, 0), (0, 7), "group"),           # one node: NVSwitch
    ((0, 0), (1, 0), "network"),         # one SU, rail 0: one leaf
    ((5, 3), (31, 3), "network"),        # the SU's first and last node, rail 3
    ((0, 0), (1, 1), "rail"),            # one SU, rails 0 and 1: PXN
    ((0, 7), (31, 0), "rail"),
    ((0, 0), (32, 0), "spine"),          # SU 0 and SU 1 on one rail
    ((31, 2), (32, 5), "spine"),         # neighbouring nodes in different SUs, different rails
])
def test_the_tier_of_a_pair(a, b, tier):
    assert POD.link_class(_rank(*a), _rank(*b)) == tier
    assert POD.link_class(_rank(*b), _rank(*a)) == tier
    assert group_link_class(POD, [_rank(*a), _rank(*b)]) == tier


def test_the_tier_of_a_group_is_the_farthest_of_any_two_members():
    assert group_link_class(POD, list(range(8))) == "group"
    assert group_link_class(POD, [_rank(n, 4) for n in range(32)]) == "network"       # a tp=8 dp group in one SU
    assert group_link_class(POD, [_rank(n, 4) for n in range(64)]) == "spine"         # ... across both SUs
    assert group_link_class(POD, list(range(16))) == "rail"                           # two whole nodes
    # The first rank (node 0, rail 1) is one node or one rail from each other member, but ranks 0
    # and 9 differ in both: the farthest pair need not include the first rank.
    assert group_link_class(POD, [_rank(0, 1), _rank(0, 0), _rank(1, 1)]) == "rail"
    assert group_link_class(POD, [_rank(0, 1), _rank(1, 1), _rank(33, 1)]) == "spine"


def test_a_group_priced_by_identity_is_priced_as_by_value():
    """collective_time_s prices a group by its ranks' values (a memo keyed by identity, comm._shape_of,
    once looked a tuple up by id(); results/2026-12-04f-intel-xeon/mutations.py puts one back and this
    goes red): every tuple is priced as an equal list, a tuple built where a freed one of the same size lived (CPython
    reuses the address, hence the id) is priced by its own ranks, and a list changed in place is
    priced as it is now."""
    across = [_rank(n, 4) for n in range(64)]            # rail 4 of 64 nodes, both SUs: the spine
    inside = list(range(64))                             # eight whole nodes of SU 0
    assert group_link_class(POD, across) == "spine" and group_link_class(POD, inside) != "spine"
    by_value = {name: collective_time_s(POD, ranks, 1e8) for name, ranks in (("across", across), ("inside", inside))}
    assert by_value["across"] != by_value["inside"]
    for name in ("across", "inside", "across", "inside", "across"):
        group = tuple(across if name == "across" else inside)          # a new tuple each time
        assert collective_time_s(POD, group, 1e8) == by_value[name], name
        assert collective_time_s(POD, group, 1e8) == by_value[name], name     # and when asked again
        del group
    ranks = [_rank(n, 4) for n in range(32)]
    one_su = collective_time_s(POD, ranks, 1e8)
    ranks += [_rank(n, 4) for n in range(32, 64)]
    assert collective_time_s(POD, ranks, 1e8) == by_value["across"] != one_su


def test_sixteen_thousand_gpus_in_64_scalable_units():
    big = load_cluster("dgx-h100-superpod:2048x8")
    assert big.world_size == 16384 == load_cluster("dgx-h100-superpod").world_size    # the profile's nodes
    last = big.world_size - 1
    assert big.link_class(0, last) == "spine"
    assert big.link_class(last - 8 * 31, last) == "network"        # SU 63's first and last node, rail 7
    assert big.link_class(last - 8 * 32, last) == "spine"          # SU 62's last node
    assert big.node_of(last) // big.profile.fabric.pod_nodes == 63


def test_the_roce_fabric_has_pods_of_3072_gpus_and_no_rails():
    c = load_cluster("dgx-h100-roce")
    raw = _raw("dgx-h100-roce")["network"]
    assert c.world_size == 16384 and c.profile.fabric.pod_nodes * 8 == 3072
    assert c.link_class(_rank(0, 0), _rank(1, 1)) == "network"     # a top-of-rack fabric: no rails to cross
    assert c.link_class(_rank(0, 0), _rank(383, 7)) == "network"
    assert c.link_class(_rank(383, 0), _rank(384, 0)) == "spine"
    spine, net = c.link_for("spine"), c.link_for("network")
    assert spine.bandwidth_bytes_per_s == net.bandwidth_bytes_per_s / raw["spine"]["oversubscription"]
    assert net.efficiency == spine.efficiency == raw["efficiency"] < 1
    assert "rail" not in dict(c.profile.links)


# ------------------------------------------------------------------------------- prices

def test_rail_is_the_pxn_path_and_spine_the_nic_over_the_oversubscription():
    raw = _raw("dgx-h100-superpod")["network"]
    base = _raw("dgx-h100")["node"]["group_link"]
    S = 3e8
    nic = raw["nic_bandwidth_gb_per_s"] * 1e9
    same_rail = p2p_time_s(POD, _rank(0, 0), _rank(1, 0), S)
    assert same_rail == pytest.approx(raw["latency_us"] * 1e-6 + S / nic)
    # PXN: NVLink to the GPU on the receiver's rail, then its NIC; the NIC is the narrower
    assert p2p_time_s(POD, _rank(0, 0), _rank(1, 1), S) == pytest.approx(
        (base["latency_us"] + raw["latency_us"]) * 1e-6 + S / min(nic, base["bandwidth_gb_per_s"] * 1e9))
    assert p2p_time_s(POD, _rank(0, 0), _rank(32, 0), S) == pytest.approx(
        (raw["latency_us"] + raw["spine"]["latency_us"]) * 1e-6 + S * raw["spine"]["oversubscription"] / nic)


def _pods_profile(folder, oversubscription: float, name: str = "pods") -> None:
    """Two-node pods over a copy of dgx-h100 (through ``extends``), spine at ``oversubscription``."""
    shutil.copy("hardware_profiles/dgx-h100.yaml", folder / "dgx-h100.yaml")
    (folder / f"{name}.yaml").write_text(f"""extends: dgx-h100
name: {name}
network:
  nics_per_node: 8
  nic_bandwidth_gb_per_s: 50
  latency_us: 5
  rail_optimized: true
  pod_nodes: 2
  spine: {{oversubscription: {oversubscription}, latency_us: 1.5}}
""")


@pytest.mark.parametrize("op,algorithm", [("all_reduce", "ring"), ("all_reduce", "tree"), ("all_gather", "ring"),
                                          ("reduce_scatter", "ring")])
@pytest.mark.parametrize("nodes", [range(6), range(0, 12, 2)], ids=["two-nodes-a-pod", "a-node-a-pod"])
def test_collective_time_across_pods_grows_with_oversubscription_by_the_closed_form(tmp_path, monkeypatch,
                                                                                   op, algorithm, nodes):
    """Across pods a ring's hops between pods are p of its N hops between nodes; every group of its
    kind running at once, a pod sends p/N of its NICs' ring traffic over a spine that carries 1/o
    of it at speed, so the ring's bandwidth is the NIC's / max(1, o p / N) (ring_spine_relief). Six
    nodes two a pod: p/N = 1/2, the NIC's speed up to o = 2; six nodes a pod apart: p = N, the
    spine's own (NIC / o), as a tree always is (it crosses a pod boundary once a level)."""
    monkeypatch.setenv("PARSIM_PROFILES", str(tmp_path))
    across = [_rank(n, 2) for n in nodes]              # rail 2 of six nodes
    inside = [_rank(0, 2), _rank(1, 2)]                # one pod
    n, S = len(across), 4e9
    share = len({node // 2 for node in nodes}) / n      # p / N
    times, bandwidth_term, in_pod = {}, {}, set()
    for o in (1.0, 2.0, 3.5, 7.0):
        _pods_profile(tmp_path, o, f"pods{int(o * 10)}")
        c = load_cluster(f"pods{int(o * 10)}:12x8")
        coll, net = c.profile.collectives, c.link_for("network")
        slowdown = o if algorithm == "tree" else max(1.0, o * share)
        beta = net.bandwidth_bytes_per_s * net.efficiency * coll.bandwidth_efficiency / slowdown
        bus = {("all_reduce", "ring"): 2 * (n - 1) / n, ("all_reduce", "tree"): 2.0,
               ("all_gather", "ring"): (n - 1) / n, ("reduce_scatter", "ring"): (n - 1) / n}[(op, algorithm)]
        # the latency: NCCL's model (dgx-h100's latency_model: nccl), one rank a node on six nodes
        latency = (nccl_closed_form.tree_s(n, n) if algorithm == "tree"
                   else nccl_closed_form.ring_s(op, n, n, coll.net_overhead_s * 1e6))
        bandwidth_term[o] = bus * S / beta
        times[o] = collective_time_s(c, across, S, op, algorithm)
        assert times[o] == pytest.approx(latency + bandwidth_term[o], rel=1e-12)
        in_pod.add(collective_time_s(c, inside, S, op, algorithm))
    for o, t in times.items():     # only the bandwidth term grows, in proportion to the spine's slowdown
        slowdown = o if algorithm == "tree" else max(1.0, o * share)
        assert t - times[1.0] == pytest.approx((slowdown - 1) * bandwidth_term[1.0], rel=1e-9, abs=1e-15)
    if algorithm == "ring" and share < 1:
        assert times[2.0] == pytest.approx(times[1.0], rel=1e-12)    # 1:2 carries half the NICs' traffic
    assert len(in_pod) == 1                            # inside a pod the spine plays no part


def test_a_ring_of_a_layout_crosses_the_spine_as_its_pods_share_of_its_hops_says():
    """Llama 3 405B's data-parallel rings on 16,384 GPUs of Meta's RoCE cluster (dgx-h100-roce:
    1:7 between pods of 384 nodes; data parallelism outermost): 128 nodes in 6 pods, o p / N =
    0.33, so the reduce-scatter of a gradient bucket runs at the NIC's speed, 7 times the spine's;
    the same ring with a node in each of 6 pods (p = N) runs at the spine's."""
    c = load_cluster("dgx-h100-roce:2048x8")
    dp = [16 * 8 * i for i in range(128)]              # tp 8 x pp 16 inside, dp outermost
    spread = [384 * 8 * i for i in range(6)]           # one node in each of six pods
    S = 2e9
    nic = c.link_for("network")
    beta = nic.bandwidth_bytes_per_s * nic.efficiency * c.profile.collectives.bandwidth_efficiency
    for ranks, slowdown in ((dp, 1.0), (spread, c.profile.fabric.oversubscription)):
        n = len(ranks)
        t = collective_time_s(c, ranks, S, "reduce_scatter")
        latency = collective_time_s(c, ranks, 1e-3, "reduce_scatter") - (n - 1) / n * 1e-3 * slowdown / beta
        assert t - latency == pytest.approx((n - 1) / n * S * slowdown / beta, rel=1e-9), n


# ------------------------------------------------------------------------------- one-tier profiles unchanged

def _old_link_class(c, a, b) -> str:
    """The rule before tiers (main at 822fa00, Cluster.link_class), written out."""
    if c.node_of(a) != c.node_of(b):
        return "network"
    return "group" if c.group_of(a) == c.group_of(b) else "node"


def _old_group_class(c, ranks) -> str:
    """Before tiers (parsim.cost.comm._group_shape): the farthest class from the first rank."""
    order = ("group", "node", "network")
    return order[max([0] + [order.index(_old_link_class(c, ranks[0], r)) for r in ranks[1:]])]


ONE_TIER = ["ascend910:3x8", "ascend910:2x4", "dgx-a100:3x8", "dgx-h100:5x8", "dgx-h100:2x4", "dgx1-v100:2x8",
            "local-cpu:3x2", "tests/data/rank_table_16pcs.json"]


def test_only_the_new_profiles_have_tiers():
    for name in available_profiles():
        p = load_cluster(name).profile
        assert p.fabric.tiered == (name in TIERED), name
        # a rail-optimised fabric of one pod (hgx-h800: pod_nodes 0) has no spine to cross
        rails = ["group", "node", "network", "rail"] + (["spine"] if p.fabric.pod_nodes else [])
        classes = [cls for cls, _ in p.links if cls != "domain"]     # a scale-up domain: tests/test_new_machines.py
        assert classes == (rails if p.fabric.rail_optimized
                           else ["group", "node", "network", "spine"] if p.fabric.tiered
                           else ["group", "node", "network"]), name
        assert ("domain" in dict(p.links)) == bool(p.fabric.domain_nodes), name


@pytest.mark.parametrize("spec", ONE_TIER)
def test_one_tier_profiles_keep_every_class_and_price(spec):
    c = load_cluster(spec)
    n = c.world_size
    for a, b in itertools.product(range(n), repeat=2):
        assert c.link_class(a, b) == _old_link_class(c, a, b), (a, b)
    raw = yaml.safe_load(open(c.profile.source))
    net = raw.get("network", {})
    if "nic_bandwidth_gb_per_s" in net:     # the network link as read before: NICs shared by the node's devices
        per_device = net["nic_bandwidth_gb_per_s"] * 1e9 * min(1.0, net.get("nics_per_node", c.profile.devices_per_node)
                                                                / c.profile.devices_per_node)
        assert c.link_for("network") == Link(per_device, net.get("latency_us", 0.0) * 1e-6, net.get("efficiency", 1.0))
    coll, S = c.profile.collectives, 2.5e8
    groups = [list(range(n)), list(range(0, n, 2)), list(range(0, n, c.devices_per_node)), [n - 1, 0, 1],
              list(range(1, n, 3)), [0, 1]]
    for g in groups:
        cls = _old_group_class(c, g)
        assert group_link_class(c, g) == cls
        link, k = c.link_for(cls), len(g)
        per_node = collections.Counter(c.node_of(r) for r in g)
        fewest = min(per_node.values())
        first_node = [r for r in g if c.node_of(r) == c.node_of(g[0])]
        inner = c.link_for(_old_group_class(c, first_node)) if len(first_node) > 1 else link

        def spread(beta, efficiency):
            """NCCL across nodes: each node's traffic over its fewest ranks' NICs at once, up to
            what the node's own link carries beside it (parsim.cost.comm._between_nodes)."""
            if len(per_node) > 1 and fewest > 1 and coll.library == "nccl":
                beta_in = inner.bandwidth_bytes_per_s * inner.efficiency * efficiency
                return min(fewest * beta, fewest / (fewest - 1) * beta_in)
            return beta
        alpha = link.latency_s + coll.latency_s
        beta = spread(link.bandwidth_bytes_per_s * link.efficiency * coll.bandwidth_efficiency,
                      coll.bandwidth_efficiency)

        def latency(op, steps, step_s):
            """NCCL's model where the profile asks for it (its rings' steps by hop), else alpha-beta steps"""
            if coll.latency_model == "nccl":
                return nccl_closed_form.ring_s(op, k, len(per_node), coll.net_overhead_s * 1e6)
            return steps * step_s
        assert collective_time_s(c, g, S, "all_reduce", "ring") == pytest.approx(
            latency("all_reduce", 2 * (k - 1), alpha) + 2 * (k - 1) / k * S / beta, rel=1e-12)
        fit = coll.op_fit("all_gather")      # local-cpu: measured as gloo runs it (Collectives.op_fits)
        if fit is not None:
            alpha, beta = link.latency_s + fit[0], spread(link.bandwidth_bytes_per_s * link.efficiency * fit[1], fit[1])
        assert collective_time_s(c, g, S, "all_gather") == pytest.approx(
            latency("all_gather", k - 1, alpha) + (k - 1) / k * S / beta, rel=1e-12)


def test_hierarchical_between_nodes_is_still_the_network_link_on_one_tier():
    c = load_cluster("ascend910:4x8")
    S, coll = 1e9, c.profile.collectives
    inner, outer = c.link_for("node"), c.link_for("network")       # 8 ranks per node span both HCCS groups

    def ab(link):
        return link.latency_s + coll.latency_s, link.bandwidth_bytes_per_s * link.efficiency * coll.bandwidth_efficiency
    (a_in, b_in), (a_out, b_out) = ab(inner), ab(outer)
    rs = 7 * a_in + 7 / 8 * S / b_in
    ring4 = 2 * 3 * a_out + 2 * 3 / 4 * (S / 8) / b_out
    hd4 = 2 * 2 * a_out + 2 * 3 / 4 * (S / 8) / b_out
    assert collective_time_s(c, list(range(32)), S, algorithm="hierarchical") == pytest.approx(
        2 * rs + min(ring4, hd4), rel=1e-12)


def test_nccl_rings_between_nodes_leave_on_every_nic_of_the_nodes_ranks():
    """NCCL's channels cross between nodes on different NICs (parsim.cost.comm._between_nodes): a
    group with k ranks on every node moves its ring traffic between nodes over k NICs at once, up
    to what the node's link carries beside it; one rank a node, gloo and HCCL keep one NIC a rank;
    a scale-up domain gives each rank its own link already."""
    S = 1e9
    c = load_cluster("dgx-a100:2x8")
    coll = c.profile.collectives
    net, nvl = c.link_for("network"), c.link_for("group")
    b_net = net.bandwidth_bytes_per_s * net.efficiency * coll.bandwidth_efficiency        # 25 GB/s x 0.9...
    b_nvl = nvl.bandwidth_bytes_per_s * nvl.efficiency * coll.bandwidth_efficiency        # 300 GB/s x 0.83 x 0.9...
    # the latency: NCCL's model (dgx-a100: latency_model nccl, AMD hosts), two nodes
    def lat(op, n):
        return nccl_closed_form.ring_s(op, n, 2, 2.0)
    # 16 ranks, 8 a node: 8 NICs at once (200 GB/s) under NVLink's 8/7 x b_nvl
    b16 = min(8 * b_net, 8 / 7 * b_nvl)
    assert b16 == 8 * b_net
    assert collective_time_s(c, list(range(16)), S, "all_gather") == pytest.approx(
        lat("all_gather", 16) + 15 / 16 * S / b16, rel=1e-12)
    assert collective_time_s(c, list(range(16)), S, "all_reduce", "ring") == pytest.approx(
        lat("all_reduce", 16) + 2 * 15 / 16 * S / b16, rel=1e-12)
    # 4 ranks a node (a tp = 2 plan's dp group): 4 NICs
    group = [r for r in range(16) if r % 2 == 0]
    assert collective_time_s(c, group, S, "reduce_scatter") == pytest.approx(
        lat("reduce_scatter", 8) + 7 / 8 * S / (4 * b_net), rel=1e-12)
    # the node with the fewest of the group's ranks sets it: 3 on node 0, 1 on node 1 is one NIC
    assert collective_time_s(c, [0, 1, 2, 8], S, "all_gather") == pytest.approx(
        lat("all_gather", 4) + 3 / 4 * S / b_net, rel=1e-12)
    # one rank a node: its own NIC, as before
    assert collective_time_s(c, [0, 8], S, "all_gather") == pytest.approx(lat("all_gather", 2) + S / 2 / b_net,
                                                                          rel=1e-12)
    # where the node's link is the narrower, it caps: NVLink at a tenth of its speed
    slow = replace(c, profile=replace(c.profile, links=tuple(
        (cls, replace(link, efficiency=link.efficiency / 10) if cls == "group" else link)
        for cls, link in c.profile.links)))
    assert collective_time_s(slow, list(range(16)), S, "all_gather") == pytest.approx(
        lat("all_gather", 16) + 15 / 16 * S / (8 / 7 * b_nvl / 10), rel=1e-12)
    # HCCL's flat ring and gloo's keep one NIC a rank
    for spec in ("ascend910:2x8", "local-cpu:2x2"):
        other = load_cluster(spec)
        n, link = other.world_size, other.link_for("network")
        fit = other.profile.collectives.op_fit("all_gather")
        a, eff = fit or (other.profile.collectives.latency_s, other.profile.collectives.bandwidth_efficiency)
        assert collective_time_s(other, list(range(n)), S, "all_gather") == pytest.approx(
            (n - 1) * (link.latency_s + a) + (n - 1) / n * S / (link.bandwidth_bytes_per_s * link.efficiency * eff),
            rel=1e-12), spec
    # an NVLink domain across trays: each rank's own link, no multiple
    nvl72 = load_cluster("gb200-nvl72:36x4")
    dom = nvl72.link_for("domain")
    c72 = nvl72.profile.collectives
    assert collective_time_s(nvl72, list(range(8)), S, "all_gather") == pytest.approx(       # one NVLink domain
        nccl_closed_form.ring_s("all_gather", 8, 1, 1.0) + 7 / 8 * S / (dom.bandwidth_bytes_per_s * dom.efficiency
                                                                         * c72.bandwidth_efficiency), rel=1e-12)


# ------------------------------------------------------------------------------- reading, describing, writing

def test_extends_takes_the_base_and_replaces_whole_sections():
    sp, base = load_profile("hardware_profiles/dgx-h100-superpod.yaml"), load_profile("hardware_profiles/dgx-h100.yaml")
    assert sp.device == base.device and sp.collectives == base.collectives and sp.groups == base.groups
    assert dict(sp.links)["group"] == dict(base.links)["group"] and sp.name == "dgx-h100-superpod"
    assert sp.default_nodes == 2048 and base.default_nodes == 1


def test_cluster_describes_its_tiers(capsys):
    assert main(["cluster", "dgx-h100-superpod:64x8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["fabric"] == {"rail_optimized": True, "pod_nodes": 32, "oversubscription": 1.0, "spine_latency_s": 1e-6}
    assert set(d["links"]) == {"group", "node", "network", "rail", "spine"}
    assert main(["cluster", "dgx-h100-roce:2x8"]) == 0
    assert "network tiers: pods of 384 nodes, spine oversubscribed 7:1" in capsys.readouterr().out
    assert main(["cluster", "dgx-h100:2x8"]) == 0
    assert "network tiers" not in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(TIERED))
def test_calibrate_writes_the_tiers_back(tmp_path, name):
    p = load_profile(f"hardware_profiles/{name}.yaml")
    out = tmp_path / "cal.yaml"
    out.write_text(profile_yaml(p, p.device, "x.json"))
    again = load_profile(out)
    assert again.fabric == p.fabric and again.links == p.links


PAPER_MODEL = """schema_version: 1
layers:
  - {name: a, fwd_flops: 2.0e+8, params: 1000, output_bytes: 4096, saved_bytes: 16384}
  - {name: b, fwd_flops: 2.0e+7, params: 100, output_bytes: 40, saved_bytes: 4096}
training: {global_batch_size: 8}
"""


def test_simulate_and_plan_show_the_spine(tmp_path, monkeypatch, capsys):
    """dp=2 over two nodes in two pods: the gradient all-reduce (1,100 fp32 parameters, one DDP
    bucket) moves 2 (n-1) x 4,400 bytes over the spine, all ranks together."""
    monkeypatch.setenv("PARSIM_PROFILES", str(tmp_path))
    _pods_profile(tmp_path, 4.0)
    (tmp_path / "pods.yaml").write_text((tmp_path / "pods.yaml").read_text().replace("pod_nodes: 2", "pod_nodes: 1"))
    (tmp_path / "m.yaml").write_text(PAPER_MODEL)
    argv = ["simulate", str(tmp_path / "m.yaml"), "--cluster", "pods:2x1", "--dp", "2", "--pp", "1"]
    assert main(argv + ["--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert est["comm_bytes"] == {"spine": 2 * (2 - 1) * 1100 * 4}
    assert main(argv) == 0
    assert "bytes moved per step: spine 8.59 KiB" in capsys.readouterr().out
    assert main(["plan", str(tmp_path / "m.yaml"), "--cluster", "pods:2x1", "--dp", "2", "--pp", "1"]) == 0
    assert "the pick's bytes moved per step: spine 8.59 KiB" in capsys.readouterr().out


# ------------------------------------------------------------------------------- bad tier fields: one line

NET = """  nics_per_node: 8
  nic_bandwidth_gb_per_s: 50
"""


@pytest.mark.parametrize("network,words", [
    (NET + "  spine: {oversubscription: 2}\n", ["p.yaml: network.spine", "needs pod_nodes"]),
    (NET + "  pod_nodes: 32\n  spine: {oversubscription: 0.5}\n",
     ["network.spine.oversubscription", "must be >= 1", "got 0.5"]),
    (NET + "  pod_nodes: 32\n  spine: {latency_us: -1}\n", ["network.spine.latency_us", ">= 0"]),
    (NET + "  pod_nodes: 32\n  spine: {ratio: 2}\n", ["network.spine.ratio", "unknown key", "oversubscription"]),
    (NET + "  pod_nodes: 0\n", ["network.pod_nodes", "positive integer"]),
    (NET + "  rail_optimized: yes please\n", ["network.rail_optimized", "true or false"]),
    ("  nics_per_node: 8\n  pod_nodes: 32\n", ["network.pod_nodes", "nic_bandwidth_gb_per_s"]),
    ("  nics_per_node: 8\n  rail_optimized: true\n", ["network.rail_optimized", "nic_bandwidth_gb_per_s"]),
], ids=["spine without pods", "undersubscribed spine", "negative spine latency", "unknown spine key",
        "zero pod nodes", "rails not a boolean", "pods without nic bandwidth", "rails without nic bandwidth"])
def test_bad_tier_fields_give_one_line(tmp_path, capsys, network, words):
    shutil.copy("hardware_profiles/dgx-h100.yaml", tmp_path / "dgx-h100.yaml")
    (tmp_path / "p.yaml").write_text("extends: dgx-h100\nname: p\nnetwork:\n" + network)
    assert main(["cluster", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("parsim: error: "), err
    for w in words:
        assert w in err, (w, err)


@pytest.mark.parametrize("text,words", [
    ("extends: nosuch\nname: p\n", ["p.yaml: extends", "no profile nosuch.yaml beside this file", "dgx-h100"]),
    ("extends: dgx-h100\n", ["p.yaml: name", "names itself"]),
    ("extends: p\nname: p\n", ["p.yaml: extends", "p -> p: extends goes round in a circle"]),
    ("extends: [dgx-h100]\nname: p\n", ["p.yaml: extends", "expected a string"]),
], ids=["missing base", "no name", "extends itself", "not a name"])
def test_bad_extends_gives_one_line(tmp_path, capsys, text, words):
    shutil.copy("hardware_profiles/dgx-h100.yaml", tmp_path / "dgx-h100.yaml")
    (tmp_path / "p.yaml").write_text(text)
    assert main(["cluster", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    for w in words:
        assert w in err, (w, err)


# nccl-tests' all-reduce bus bandwidths between HGX A100 nodes with 4 x 200 Gb/s NICs each:
# (nodes, GPUs a node, GB/s, source)
NCCL_TESTS_ROWS = [
    (2, 8, 91.0, "NVIDIA/nccl-tests#100"),
    (2, 8, 86.0, "NVIDIA/nccl#1048"),
    (4, 4, 45.0, "NVIDIA/nccl#1168"),
    (4, 8, 90.0, "NVIDIA/nccl#1168"),
]


def _nccl_tests_bus_gb_per_s(tmp_path, monkeypatch, nodes, per_node, efficiency=None) -> float:
    """parsim's all-reduce bus bandwidth (2 (n - 1)/n S / t at S = 8 GiB) on dgx-a100 cut to the
    HGX's 4 NICs a node, at the shipped NCCL efficiency or ``efficiency``."""
    src = open("hardware_profiles/dgx-a100.yaml").read()
    assert "nics_per_node: 8 " in src
    src = src.replace("nics_per_node: 8 ", "nics_per_node: 4 ").replace("name: dgx-a100", "name: hgx-a100-4nic")
    if efficiency is not None:
        src, n = re.subn(r"bandwidth_efficiency: [0-9.]+", f"bandwidth_efficiency: {efficiency}", src)
        assert n == 1
    (tmp_path / "hgx-a100-4nic.yaml").write_text(src)
    monkeypatch.setenv("PARSIM_PROFILES", str(tmp_path))
    c = load_cluster(f"hgx-a100-4nic:{nodes}x8").for_dtype("fp32")
    ranks = [node * 8 + i for node in range(nodes) for i in range(per_node)]
    S, k = 8 * 2**30, len(ranks)
    return 2 * (k - 1) / k * S / collective_time_s(c, ranks, S, "all_reduce") / 1e9


@pytest.mark.parametrize("nodes, per_node, measured_gb_per_s, source", NCCL_TESTS_ROWS)
def test_nccl_all_reduce_between_nodes_matches_published_bus_bandwidths(tmp_path, monkeypatch, nodes, per_node,
                                                                         measured_gb_per_s, source):
    """NCCL's all-reduce across HGX A100 nodes with 4 x 200 Gb/s NICs each, as nccl-tests reports
    it (bus bandwidth 2 (n - 1)/n S / t at a large S), against the published measurements that
    parsim.cost.comm._between_nodes cites: within 12%.  A rank's traffic leaves its node over every
    NIC of the node's ranks (NCCL's channels); one NIC a rank would give 25 GB/s x NCCL's
    efficiency, under a third of the measured."""
    bus_gb_per_s = _nccl_tests_bus_gb_per_s(tmp_path, monkeypatch, nodes, per_node)
    assert bus_gb_per_s == pytest.approx(measured_gb_per_s, rel=0.12), source


def test_the_nccl_prior_is_the_one_nccl_tests_rows_imply(tmp_path, monkeypatch):
    """results/published/fit.yaml's nccl prior is the efficiency the nccl-tests rows above imply
    (each row's: the efficiency at which parsim gives its bus bandwidth; their geometric mean),
    and its own prior_sigma is at least their spread in log: the end-to-end fit starts from a
    measurement, and may move it only as far as the measurement's error."""
    nccl = {p.name: p for p in load_fit_spec("results/published/fit.yaml").parameters}["nccl"]
    implied = [nccl.prior * measured / _nccl_tests_bus_gb_per_s(tmp_path, monkeypatch, nodes, per_node, nccl.prior)
               for nodes, per_node, measured, _ in NCCL_TESTS_ROWS]
    logs = [math.log(x) for x in implied]
    mean = sum(logs) / len(logs)
    assert nccl.prior == pytest.approx(math.exp(mean), rel=0.005), implied
    spread = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    assert spread <= nccl.prior_sigma <= 3 * spread, (spread, nccl.prior_sigma)
