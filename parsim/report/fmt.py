"""Human-readable numbers for tables (binary prefixes for bytes, SI for FLOPs and rates)."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    raise AssertionError


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


def human_time(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"
