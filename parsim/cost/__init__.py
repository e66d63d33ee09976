"""Cost models: compute (analytical or profiled, one interface), communication, memory.
Reads model and hardware; knows nothing of schedules' order."""

from parsim.cost.compute import AnalyticalCompute, ComputeModel, ProfiledCompute, load_profile_table

__all__ = ["AnalyticalCompute", "ComputeModel", "ProfiledCompute", "load_profile_table"]
