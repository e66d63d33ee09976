"""Pipeline schedules as data: actions per rank, built by pure functions (no torch here).

One schedule feeds both the simulator (parsim.sim) and the executor (parsim.exec), so every
prediction lines up, action by action, with a measurement.
"""

from parsim.schedule.actions import Action, Kind, Schedule
from parsim.schedule.generators import SCHEDULES, build_schedule
from parsim.schedule.lower import lower
from parsim.schedule.validate import validate

__all__ = ["Action", "Kind", "Schedule", "SCHEDULES", "build_schedule", "lower", "validate"]
