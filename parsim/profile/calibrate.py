"""``parsim calibrate``: fit the analytical cost model's efficiency parameters to a layer profile,
so that a device with a profile but no datasheet still gets an analytical model (which, unlike
a profile, extrapolates to other models and sizes).

The analytical roofline (parsim.cost.compute.AnalyticalCompute) prices a layer at b samples as
max(b*FLOPs / (peak * eff(b*FLOPs)), weight_bytes / BW) + b*mem_bytes / (BW * mem_eff).  With
the device's peak and bandwidth held, this fits eff at log-spaced work sizes (interpolated in
log10 between them, as the profiles express it) and mem_eff, by least squares on
log(predicted / measured) over every layer, kind (F, B) and micro-batch size in the profile.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy.optimize import least_squares

from parsim.cost.compute import AnalyticalCompute, ProfileTable
from parsim.hardware.device import Device
from parsim.model.graph import LayerGraph


def _points(graph: LayerGraph, table: ProfileTable):
    rows = []
    for layer in graph.layers:
        t = table.times(layer.name)
        for j, b in enumerate(table.microbatch_sizes):
            rows.append((layer, "F", b, t.fwd_s[j]))
            rows.append((layer, "B", b, t.bwd_s[j]))
    return rows


def calibrate(graph: LayerGraph, table: ProfileTable, device: Device, dtype: str = "fp32",
              knots: int = 6) -> tuple[Device, dict]:
    points = [p for p in _points(graph, table) if p[3] > 0]
    works = [(l.fwd_flops if k == "F" else l.bwd_flops) * b for l, k, b, _ in points]
    lo, hi = math.log10(max(min(w for w in works if w > 0), 1.0)), math.log10(max(works))
    grid = [10 ** x for x in np.linspace(lo, hi, knots)]

    def device_for(x):
        eff = tuple((w, float(e)) for w, e in zip(grid, x[:-1]))
        return replace(device, efficiency=eff, memory_efficiency=float(x[-1]))

    def residuals(x):
        model = AnalyticalCompute(device_for(x), dtype)
        return [math.log(max(model.layer_time_s(l, k, b), 1e-12) / t) for l, k, b, t in points]

    x0 = [0.5] * knots + [0.5]
    fit = least_squares(residuals, x0, bounds=([1e-4] * (knots + 1), [1.0] * (knots + 1)))
    calibrated = device_for(fit.x)
    model = AnalyticalCompute(calibrated, dtype)
    errors = [model.layer_time_s(l, k, b) / t - 1 for l, k, b, t in points]
    per_step = []
    for b in table.microbatch_sizes:
        meas = sum(t for l, k, bb, t in points if bb == b)
        pred = sum(model.layer_time_s(l, k, b) for l, k, bb, t in points if bb == b)
        per_step.append({"microbatch": b, "measured_s": meas, "predicted_s": pred, "error": pred / meas - 1})
    report = {
        "points": len(points),
        "layer_mape": float(np.mean(np.abs(errors))),
        "layer_max_error": float(np.max(np.abs(errors))),
        "step_mape": float(np.mean([abs(r["error"]) for r in per_step])),
        "per_step": per_step,
        "at_bound": [round(w, 1) for w, e in calibrated.efficiency if e >= 0.999],
        "memory_efficiency": calibrated.memory_efficiency,
        "efficiency": [list(p) for p in calibrated.efficiency],
    }
    return calibrated, report


def profile_yaml(profile, device: Device, source: str) -> str:
    """The cluster profile with the calibrated device, in the hardware_profiles schema."""
    links = dict(profile.links)
    lines = [f"# {profile.name} with its device efficiency calibrated by `parsim calibrate` from {source}",
             "schema_version: 1", f"name: {profile.name}-calibrated",
             f"description: {profile.description} (efficiency calibrated from {source})", "device:",
             f"  name: {device.name}", f"  memory: {device.memory_bytes}",
             f"  memory_bandwidth_gb_per_s: {device.memory_bandwidth_bytes_per_s / 1e9:.4f}",
             f"  memory_efficiency: {device.memory_efficiency:.4f}   # fitted", "  peak_tflops:"]
    lines += [f"    {k}: {v / 1e12:.6g}" for k, v in device.peak_flops_per_s]
    lines.append("  efficiency: [" + ", ".join(f"[{w:.4g}, {e:.4f}]" for w, e in device.efficiency) + "]   # fitted")
    lines += ["node:", f"  devices: {profile.devices_per_node}", f"  groups: {[list(g) for g in profile.groups]}"]
    for cls, key in (("group", "group_link"), ("node", "node_link")):
        link = links[cls]
        lines.append(f"  {key}: {{bandwidth_gb_per_s: {link.bandwidth_bytes_per_s / 1e9:.6g}, "
                     f"latency_us: {link.latency_s * 1e6:.4g}, efficiency: {link.efficiency}}}")
    net = links["network"]
    lines += ["network:", f"  nics_per_node: {profile.nics_per_node}",
              f"  nic_bandwidth_gb_per_s: {net.bandwidth_bytes_per_s * profile.devices_per_node / min(profile.nics_per_node, profile.devices_per_node) / 1e9:.6g}",
              f"  latency_us: {net.latency_s * 1e6:.4g}", f"  efficiency: {net.efficiency}"]
    c = profile.collectives
    lines.append(f"collective: {{library: {c.library}, bandwidth_efficiency: {c.bandwidth_efficiency}, "
                 f"latency_us: {c.latency_s * 1e6:.4g}, overlap: {c.overlap}}}")
    pipe = profile.input_pipeline
    if pipe is not None:                       # as measured for the profile (parsim profile-data), unchanged
        rate = f"host_samples_per_s: {pipe.host_samples_per_s:.6g}" if pipe.overlap else \
            f"per_sample_s: {pipe.per_sample_s:.6g}"
        lines.append(f"input_pipeline: {{overlap: {str(pipe.overlap).lower()}, {rate}"
                     + (f", sample_elements: {pipe.sample_elements}" if pipe.sample_elements else "")
                     + f"}}   # from {profile.source or profile.name}")
    return "\n".join(lines) + "\n"
