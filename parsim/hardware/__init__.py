"""Hardware: devices, links and clusters, read from hardware_profiles/*.yaml (no model here)."""

from parsim.hardware.cluster import Cluster, load_cluster
from parsim.hardware.device import Device
from parsim.hardware.links import Link

__all__ = ["Cluster", "Device", "Link", "load_cluster"]
