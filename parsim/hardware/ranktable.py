"""Ascend rank tables (the seeds' ``rank_table_8pcs.json``, HCCL format version 1.0) as clusters::

    {"version": "1.0", "server_count": "2",
     "server_list": [{"server_id": "10.0.0.1",
                      "device": [{"device_id": "0", "device_ip": "192.1.27.6", "rank_id": "0"}, ...]}],
     "status": "completed"}

Devices take the ``ascend910`` profile unless the table names another in ``"parsim_profile"``.
"""

from __future__ import annotations

from parsim.errors import InputError
from parsim.hardware.cluster import Cluster, check_world_size, load_profile, profile_path
from parsim.inputs import load_file


def _int(value, where: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: expected an integer (as a string or number), got {value!r}") from None


def load_rank_table(path: str) -> Cluster:
    data = load_file(path, "an Ascend rank-table JSON")
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object with server_count and server_list")
    for key in ("server_list",):
        if key not in data:
            raise InputError(f"{path}: {key}: missing; a rank table lists its servers under server_list")
    servers = data["server_list"]
    if not isinstance(servers, list) or not servers:
        raise InputError(f"{path}: server_list: expected a non-empty list of servers")
    count = _int(data.get("server_count", len(servers)), f"{path}: server_count")
    if count != len(servers):
        raise InputError(f"{path}: server_count: says {count} but server_list has {len(servers)} servers")
    profile = load_profile(profile_path(data.get("parsim_profile", "ascend910")))
    ranks: dict[int, tuple[str, int]] = {}
    per_node = None
    for s, server in enumerate(servers):
        where = f"{path}: server_list[{s}]"
        devices = server.get("device") if isinstance(server, dict) else None
        if not isinstance(devices, list) or not devices:
            raise InputError(f"{where}.device: expected a non-empty list of devices")
        if per_node is None:
            per_node = len(devices)
        elif len(devices) != per_node:
            raise InputError(f"{where}.device: every server must list the same number of devices ({per_node})")
        for d, dev in enumerate(devices):
            dw = f"{where}.device[{d}]"
            if not isinstance(dev, dict):
                raise InputError(f"{dw}: expected an object with device_id, device_ip and rank_id")
            rank = _int(dev.get("rank_id"), f"{dw}.rank_id")
            device_id = _int(dev.get("device_id"), f"{dw}.device_id")
            if "device_ip" not in dev:
                raise InputError(f"{dw}.device_ip: missing")
            if rank in ranks:
                raise InputError(f"{dw}.rank_id: rank {rank} appears twice")
            if not 0 <= device_id < profile.devices_per_node:
                raise InputError(f"{dw}.device_id: {device_id} is not a device of a {profile.name} server "
                                 f"(0..{profile.devices_per_node - 1})")
            ranks[rank] = (str(server.get("server_id", s)), device_id)
    world = len(ranks)
    check_world_size(world, f"{path}: server_list")
    if sorted(ranks) != list(range(world)):
        raise InputError(f"{path}: rank_id: ranks must be 0..{world - 1} exactly once")
    assert per_node is not None
    hosts = [str(server.get("server_id", s)) for s, server in enumerate(servers)]
    for r, (host, _) in ranks.items():
        if hosts.index(host) != r // per_node:
            raise InputError(f"{path}: rank_id: rank {r} must sit on server {r // per_node} (ranks fill servers in order)")
    return Cluster(profile, len(servers), per_node, tuple(ranks[r] for r in range(world)), spec=path)
