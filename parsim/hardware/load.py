"""``--cluster``: every form a cluster is named in, read into a Cluster (parsim.hardware.cluster
for profiles, parsim.hardware.ranktable for Ascend rank tables)."""

from __future__ import annotations

import re

from parsim.errors import InputError
from parsim.hardware.cluster import Cluster, check_world_size, load_profile, profile_path
from parsim.hardware.ranktable import load_rank_table

_SPEC = re.compile(r"^([A-Za-z0-9_.-]+):(\d+)(?:x(\d+))?$")


def load_cluster(spec: str) -> Cluster:
    """``ascend910:4x8`` (nodes x devices), ``dgx-a100:16``, a profile name, a profile YAML,
    or a rank-table JSON."""
    if spec.endswith(".json"):
        return load_rank_table(spec)
    if spec.endswith((".yaml", ".yml")):
        profile = load_profile(spec)
        return Cluster(profile, profile.default_nodes, profile.devices_per_node, spec=spec)
    m = _SPEC.match(spec)
    if not m and ":" not in spec:
        profile = load_profile(profile_path(spec))
        return Cluster(profile, profile.default_nodes, profile.devices_per_node, spec=spec)
    if not m:
        raise InputError(f"--cluster: {spec!r} is not PROFILE:NODESxDEVICES (e.g. ascend910:4x8)")
    profile = load_profile(profile_path(m.group(1)))
    nodes = int(m.group(2))
    per_node = int(m.group(3)) if m.group(3) else profile.devices_per_node
    if nodes <= 0 or per_node <= 0:
        raise InputError(f"--cluster: {spec!r}: node and device counts must be positive")
    if per_node > profile.devices_per_node:
        raise InputError(f"--cluster: {spec!r}: a {profile.name} node has {profile.devices_per_node} devices, "
                         f"not {per_node}")
    check_world_size(nodes * per_node, f"--cluster {spec}")
    return Cluster(profile, nodes, per_node, spec=spec)
