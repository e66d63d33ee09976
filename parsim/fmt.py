"""Human-readable numbers for tables (binary prefixes for bytes, SI for FLOPs and rates): a utility
below every package, as parsim.fileio is (the planner's explanation, the executor's summary and
the report all print them)."""

from __future__ import annotations


_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def bytes_unit(n: float) -> tuple[str, float]:
    """(unit, bytes per unit) that shows ``n`` bytes as 1 to 1023.99 of it (B below 1 KiB, TiB
    above): the unit human_bytes prints, and a chart's axis of values up to ``n``."""
    scale = 1.0
    for unit in _BYTE_UNITS:
        if abs(n) < 1024 * scale or unit == _BYTE_UNITS[-1]:
            return unit, scale
        scale *= 1024
    raise AssertionError


def human_bytes(n: float) -> str:
    unit, scale = bytes_unit(n)
    return f"{n:.0f} {unit}" if unit == "B" else f"{n / scale:.2f} {unit}"


def memory_margin(peak_bytes: float, device, max_memory_bytes: int | None = None) -> str:
    """A peak against the bound it must keep (``Device.memory_cap_bytes``), with what the bound is
    made of and the margin left: 'peak 54.06 GiB of 61.06 GiB usable (74.51 GiB raw less 0.37 GiB
    runtime context and 2.29 GiB collective buffers, then 15% fragmentation): margin 7.00 GiB'."""
    cap = device.memory_cap_bytes(max_memory_bytes)
    if max_memory_bytes:
        bound = f"the {human_bytes(cap)} cap given ({human_bytes(device.memory_bytes)} raw)"
    else:
        r = device.reserve
        less = [f"{human_bytes(b)} {what}" for b, what in ((r.runtime_context_bytes, "runtime context"),
                                                          (r.collective_buffers_bytes, "collective buffers")) if b]
        made = (f" less {' and '.join(less)}" if less else "") + \
            (f", then {r.fragmentation_fraction:.0%} fragmentation" if r.fragmentation_fraction else "")
        bound = f"{human_bytes(cap)} usable ({human_bytes(device.memory_bytes)} raw{made or ', nothing reserved'})"
    return f"peak {human_bytes(peak_bytes)} of {bound}: margin {human_bytes(cap - peak_bytes)}"


def human_si(n: float, unit: str = "") -> str:
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {prefix}{unit}"
    return f"{n:.3g} {unit}".rstrip()


def time_unit(s: float) -> tuple[str, float]:
    """(unit, seconds per unit) human_time prints ``s`` seconds in: s from 1 s, ms from 1 ms,
    else us; a chart's time axis of a span of ``s`` takes the same, so it reads as the page does."""
    if s >= 1:
        return "s", 1.0
    if s >= 1e-3:
        return "ms", 1e-3
    return "us", 1e-6


def human_time(s: float) -> str:
    unit, scale = time_unit(s)
    return f"{s / scale:{'.3f' if unit == 's' else '.2f' if unit == 'ms' else '.1f'}} {unit}"
