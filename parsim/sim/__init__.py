"""The discrete-event simulator: a lowered schedule, priced by the cost model, run on every rank."""

from parsim.sim.estimate import Estimate
from parsim.sim.simulate import simulate

__all__ = ["Estimate", "simulate"]
