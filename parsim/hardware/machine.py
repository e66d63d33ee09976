"""The machine a measurement was taken on, and the check that a measurement is used on it.

Profiles (``parsim profile``, ``parsim profile-comm``) record it; loading one taken on another
CPU model or torch version warns (``ProfileMachineWarning``): the numbers may not hold here.
"""

from __future__ import annotations

import datetime
import os
import platform
import warnings
from dataclasses import dataclass
from importlib import metadata


@dataclass(frozen=True)
class Machine:
    """Where a profile was measured (``this_machine`` below)."""
    cpu_model: str = ""
    cores: int = 0
    torch: str = ""
    numpy: str = ""
    python: str = ""
    date: str = ""

    def differences(self, other: "Machine") -> list[str]:
        """What makes timings taken on ``self`` doubtful on ``other``: the CPU model and torch version."""
        return [f"{key} {getattr(self, key)!r}, here {getattr(other, key)!r}" for key in ("cpu_model", "torch")
                if getattr(self, key) and getattr(other, key) and getattr(self, key) != getattr(other, key)]


class ProfileMachineWarning(UserWarning):
    """A profile measured on another machine (CPU model or torch version): its times may not hold here."""


def this_machine() -> Machine:
    """This machine: CPU model (/proc/cpuinfo "model name", else ``platform.processor()``), cores,
    and the versions that change kernels (read from the installed packages, without importing torch)."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    versions = []
    for pkg in ("torch", "numpy"):
        try:
            versions.append(metadata.version(pkg))
        except metadata.PackageNotFoundError:
            versions.append("")
    return Machine(cpu or platform.processor() or platform.machine(), os.cpu_count() or 0, *versions,
                   platform.python_version(), datetime.date.today().isoformat())


def warn_if_elsewhere(recorded: Machine, source: str, here: Machine | None = None) -> None:
    """One ``ProfileMachineWarning`` when ``recorded`` differs from ``here`` (default: this machine)."""
    diff = recorded.differences(here if here is not None else this_machine())
    if diff:
        warnings.warn(f"{source}: measured on another machine ({'; '.join(diff)}): its numbers may not hold "
                      f"here; measure again on this one", ProfileMachineWarning, stacklevel=3)
