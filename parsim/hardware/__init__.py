"""Hardware: devices, links and clusters, read from hardware_profiles/*.yaml (no model here)."""

from parsim.hardware.cluster import Cluster
from parsim.hardware.device import Device
from parsim.hardware.links import Link
from parsim.hardware.load import load_cluster

__all__ = ["Cluster", "Device", "Link", "load_cluster"]
