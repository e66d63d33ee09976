"""``parsim calibrate``: fit the analytical cost model to a layer profile, so that a device with
a profile but no datasheet still gets an analytical model (which, unlike a profile, extrapolates
to other models and sizes), and say how well it predicts sizes it was not fitted on.

Kernel-level (``parsim.cost.kernels``), for graphs extracted with their kernels: with the device's
peak and bandwidth held, fit four numbers -- the large-GEMM efficiency, the reduction length at
half efficiency (k_half), the per-kernel launch cost and the memory efficiency -- by least
squares on log(predicted / measured) over every layer, kind (F, B) and micro-batch size.

Layer-level roofline (``parsim.cost.compute.AnalyticalCompute`` without kernels), for graphs
given as ``layers:`` tables: max(b*FLOPs / (peak * eff(b*FLOPs)), weight_bytes / BW) +
b*mem_bytes / (BW * mem_eff); fit eff at log-spaced work sizes and mem_eff the same way.

Held out: ``held_out`` fits on every other profiled micro-batch size and reports the error on the
sizes in between, per layer, which is the error a plan at an unprofiled size would see; then the
same with the two halves swapped.  Nothing is fitted on the sizes it is judged on.

On a CPU (a profile whose ``device`` says ``cpu``), a convolution runs where torch sends it
(``parsim.cost.conv_backend``), and the fit adds numbers shared by every layer: oneDNN's
weight-reorder rates in the forward and in the backward, slow_conv2d's per-sample GEMM efficiency
at 1, 4, 16 and 64 rows, the rows at which a GEMM runs at half its efficiency (m_half), oneDNN's
own reduction length at half efficiency (conv_k_half: a weight gradient's K is one image's rows), the
fraction of the memory bandwidth each family of memory-bound kernels reaches (norms and pooling,
forward and backward, ``parsim.cost.kernels.memory_family``; the graph's own families only), and
the host time per layer call (``layer_call_s``: a layer runs cold after the layers before it).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import numpy as np
from scipy.optimize import least_squares

from parsim.errors import InputError
from parsim.cost.compute import AnalyticalCompute, ProfileTable
from parsim.cost.kernels import memory_family
from parsim.hardware.device import Device, KernelExecution
from parsim.hardware.collectives import collectives_flow
from parsim.model.graph import LayerGraph, twin_signature


def profiled_layers(graph: LayerGraph) -> tuple:
    """The graph's layers as a layer profile times them: the last holding the loss's kernels and
    bytes too (LayerGraph.loss_layer), in the one call the profiler times it with the run's loss
    (parsim.profile.layers), so the model is fitted to both.  (The simulator prices the loss as a
    call of its own, parsim.cost.layer.loss_time_s: on a CPU, whose kernel-level model charges
    each call ``layer_call_us``, one call more a micro-batch's forward and backward.)"""
    loss, last = graph.loss_layer, graph.layers[-1]
    if loss is None or loss.tp_share != last.tp_share:
        return graph.layers
    both = replace(last, kernels=last.kernels + loss.kernels, fwd_mem_bytes=last.fwd_mem_bytes + loss.fwd_mem_bytes,
                   bwd_mem_bytes=last.bwd_mem_bytes + loss.bwd_mem_bytes)
    return graph.layers[:-1] + (both,)


def _points(graph: LayerGraph, table: ProfileTable, sizes=None):
    rows = []
    for layer in profiled_layers(graph):
        t = table.times(layer.name)
        for j, b in enumerate(table.microbatch_sizes):
            if sizes is None or b in sizes:
                rows.append((layer, "F", b, t.fwd_s[j]))
                rows.append((layer, "B", b, t.bwd_s[j]))
    return [p for p in rows if p[3] > 0]


def _twins(points) -> tuple[list[tuple], list[int]]:
    """The (layer, kind, size) of ``points`` to price once each, and per point its index among them:
    layers with the same twin_signature hold the same work and the analytical model prices them
    alike (parsim.model.graph.twin_signature; parsim.sim.prices' layer classes rest on the same
    rule), so the fit's residuals, which price every point at every step, price each class once
    (a transformer's identical blocks, ResNet's repeated bottlenecks): the same residuals, sooner
    (ResNet-50's profile: 180 points, 100 classes; its fit took 5.8-7.0 s before, 4.0-4.9 s after,
    results/2026-12-01d-amd-epyc/startup-ab.txt)."""
    first: dict[tuple, int] = {}
    unique, index = [], []
    for layer, kind, b, _ in points:
        key = (twin_signature(layer), kind, b)
        if key not in first:
            first[key] = len(unique)
            unique.append((layer, kind, b))
        index.append(first[key])
    return unique, index


def _log_errors(model, unique, index, points) -> list[float]:
    """log(predicted / measured) at every point, each class priced once (_twins)."""
    times = [model.layer_time_s(layer, kind, b) for layer, kind, b in unique]
    return [math.log(max(times[j], 1e-12) / t) for j, (_, _, _, t) in zip(index, points)]


# Rows per sample at which a CPU's per-sample GEMM efficiency is fitted (slow_conv2d, parsim.cost.
# conv_backend): ResNet's 1x1 convolutions see 64, 16, 4 and 1 output positions per image at 32x32.
PER_SAMPLE_KNOTS = (1.0, 4.0, 16.0, 64.0)
# Memory-bound kernel families with a fitted bandwidth fraction of their own on a CPU; the rest
# (activations, adds, copies) run at the device's memory efficiency.
MEMORY_FAMILIES = ("norm", "norm_backward", "pool", "pool_backward")


def _cpu_threads(table: ProfileTable) -> int:
    """Intra-op threads of a profile taken on a CPU (``parsim profile`` writes ``device: "cpu: ..."``),
    0 for an accelerator's."""
    return table.threads if table.device.startswith("cpu") else 0


def _fit_kernels(points, device: Device, dtype: str, cpu_threads: int = 0) -> Device:
    """Least squares on log(predicted / measured).  Every device: large-GEMM efficiency, k_half,
    launch (us) and memory efficiency.  A CPU (torch eager) adds oneDNN's weight-reorder rates
    (GB/s, forward and backward), slow_conv2d's per-sample GEMM efficiency at ``PER_SAMPLE_KNOTS``,
    m_half, oneDNN's own k_half (conv_k_half), the bandwidth fraction of each of
    ``MEMORY_FAMILIES`` that the layers run, and the host time per layer call (us)."""
    ex = replace(device.kernels or KernelExecution(), cpu_threads=cpu_threads)
    ops = {k.op for layer, _, _, _ in points for k in layer.kernels if k.klass == "mem"}
    families = [f for f in MEMORY_FAMILIES if any(memory_family(op) == f for op in ops)] if cpu_threads else []
    knots, nf = len(PER_SAMPLE_KNOTS), len(families)

    def device_for(x):
        eff, k_half, launch_us, mem_eff = x[:4]
        cpu = {}
        if cpu_threads:
            rest = x[5 + knots:]
            cpu = dict(weight_touch_bytes_per_s=float(x[4]) * 1e9,
                       per_sample_gemm_efficiency=tuple((r, float(e))
                                                        for r, e in zip(PER_SAMPLE_KNOTS, x[5:5 + knots])),
                       backward_weight_touch_bytes_per_s=float(rest[0]) * 1e9, m_half=float(rest[1]),
                       conv_k_half=float(rest[2]),
                       memory_family_efficiency=tuple((f, float(e)) for f, e in zip(families, rest[3:3 + nf])),
                       layer_call_s=float(rest[3 + nf]) * 1e-6)
        return replace(device, kernels=replace(ex, gemm_efficiency=float(eff), k_half=float(k_half),
                                               launch_s=float(launch_us) * 1e-6, **cpu),
                       memory_efficiency=float(mem_eff))

    unique, index = _twins(points)

    def residuals(x):
        return _log_errors(AnalyticalCompute(device_for(x), dtype), unique, index, points)

    x0, lo, hi = [0.5, 64.0, 10.0, 0.5], [1e-3, 0.0, 0.0, 1e-3], [1.0, 8192.0, 1000.0, 1.0]
    if cpu_threads:       # family fractions up to 4: a kernel whose tensors stay in cache beats the copy rate
        x0 = x0 + [5.0] + [0.3] * knots + [5.0, 4.0, 4.0] + [0.5] * nf + [10.0]
        lo = lo + [0.1] + [1e-3] * knots + [0.1, 0.0, 1e-3] + [1e-3] * nf + [0.0]
        hi = hi + [1000.0] + [1.0] * knots + [1000.0, 1e4, 8192.0] + [4.0] * nf + [1e4]
    fit = least_squares(residuals, x0, bounds=(lo, hi))
    return device_for(fit.x)


def _fit_roofline(points, device: Device, dtype: str, knots: int) -> Device:
    works = [(l.fwd_flops if k == "F" else l.bwd_flops) * b for l, k, b, _ in points]
    lo, hi = math.log10(max(min(w for w in works if w > 0), 1.0)), math.log10(max(works))
    grid = [10 ** x for x in np.linspace(lo, hi, knots)]

    def device_for(x):
        eff = tuple((w, float(e)) for w, e in zip(grid, x[:-1]))
        return replace(device, efficiency=eff, memory_efficiency=float(x[-1]), kernels=None)

    unique, index = _twins(points)

    def residuals(x):
        return _log_errors(AnalyticalCompute(device_for(x), dtype), unique, index, points)

    fit = least_squares(residuals, [0.5] * knots + [0.5], bounds=([1e-4] * (knots + 1), [1.0] * (knots + 1)))
    return device_for(fit.x)


def _fit(graph: LayerGraph, table: ProfileTable, device: Device, dtype: str, knots: int, sizes=None) -> Device:
    points = _points(graph, table, sizes)
    if all(layer.kernels for layer in graph.layers):
        return _fit_kernels(points, device, dtype, _cpu_threads(table))
    return _fit_roofline(points, device, dtype, knots)


def calibrated_device(graph: LayerGraph, table: ProfileTable, device: Device, dtype: str = "fp32",
                      knots: int = 6) -> Device:
    """``device`` with its kernel (or roofline) efficiencies fitted to every point of ``table``:
    the fit alone, without ``calibrate``'s report (whose held-out protocol fits twice more)."""
    return _fit(graph, table, device, dtype, knots)


def calibrate(graph: LayerGraph, table: ProfileTable, device: Device, dtype: str = "fp32",
              knots: int = 6) -> tuple[Device, dict]:
    calibrated = calibrated_device(graph, table, device, dtype, knots)
    points = _points(graph, table)
    model = AnalyticalCompute(calibrated, dtype)
    errors = [model.layer_time_s(l, k, b) / t - 1 for l, k, b, t in points]
    per_step = []
    for b in table.microbatch_sizes:
        meas = sum(t for l, k, bb, t in points if bb == b)
        pred = sum(model.layer_time_s(l, k, b) for l, k, bb, t in points if bb == b)
        per_step.append({"microbatch": b, "measured_s": meas, "predicted_s": pred, "error": pred / meas - 1})
    report = {
        "model": "kernel-level" if calibrated.kernels is not None else "roofline",
        "points": len(points),
        "layer_mape": float(np.mean(np.abs(errors))),
        "layer_max_error": float(np.max(np.abs(errors))),
        "step_mape": float(np.mean([abs(r["error"]) for r in per_step])),
        "per_step": per_step,
        "memory_efficiency": calibrated.memory_efficiency,
        "convolutions": any(k.conv is not None for layer in graph.layers for k in layer.kernels),
    }
    if calibrated.kernels is not None:
        ex = calibrated.kernels
        report.update(gemm_efficiency=ex.gemm_efficiency, k_half=ex.k_half, launch_s=ex.launch_s)
        if ex.cpu_threads:
            report.update(weight_touch_bytes_per_s=ex.weight_touch_bytes_per_s,
                          backward_weight_touch_bytes_per_s=ex.backward_weight_touch_bytes_per_s,
                          m_half=ex.m_half, conv_k_half=ex.conv_k_half, layer_call_s=ex.layer_call_s,
                          memory_family_efficiency=[list(p) for p in ex.memory_family_efficiency],
                          per_sample_gemm_efficiency=[list(p) for p in ex.per_sample_gemm_efficiency])
    else:
        report.update(efficiency=[list(p) for p in calibrated.efficiency],
                      at_bound=[round(w, 1) for w, e in calibrated.efficiency if e >= 0.999])
    report["held_out"] = held_out(graph, table, device, dtype, knots)
    return calibrated, report


def held_out_split(graph: LayerGraph, table: ProfileTable, fit_sizes, test_sizes, device: Device,
                   dtype: str = "fp32", knots: int = 6) -> dict:
    """Fit on ``fit_sizes`` only, predict ``test_sizes``: per layer, the median |error| over its
    held-out (kind, size) points, and per held-out size the whole forward+backward's error."""
    model = AnalyticalCompute(_fit(graph, table, device, dtype, knots, set(fit_sizes)), dtype)
    test = _points(graph, table, set(test_sizes))
    per_layer = {}
    for l, k, b, t in test:
        per_layer.setdefault(l.name, []).append(abs(model.layer_time_s(l, k, b) / t - 1))
    layer_medians = {name: statistics.median(v) for name, v in per_layer.items()}
    per_size = []
    for b in test_sizes:
        meas = sum(t for l, k, bb, t in test if bb == b)
        pred = sum(model.layer_time_s(l, k, b) for l, k, bb, t in test if bb == b)
        per_size.append({"microbatch": b, "measured_s": meas, "predicted_s": pred, "error": pred / meas - 1})
    return {"fit_sizes": list(fit_sizes), "held_out_sizes": list(test_sizes),
            "median_layer_error": statistics.median(layer_medians.values()),
            "max_layer_median_error": max(layer_medians.values()),
            "per_layer_median_error": layer_medians, "per_size": per_size}


def held_out(graph: LayerGraph, table: ProfileTable, device: Device, dtype: str = "fp32", knots: int = 6) -> dict:
    """The held-out protocol: fit on every other profiled micro-batch size (the first, third, ...),
    predict the others (``held_out_split``); then the other way round (``swapped``: fit on the
    second, fourth, ..., predict the first, third, ...).  Needs at least two sizes."""
    sizes = table.microbatch_sizes
    if len(sizes) < 2:
        return {"fit_sizes": list(sizes), "held_out_sizes": [], "note": "needs at least two profiled sizes"}
    out = held_out_split(graph, table, sizes[::2], sizes[1::2], device, dtype, knots)
    out["swapped"] = held_out_split(graph, table, sizes[1::2], sizes[::2], device, dtype, knots)
    return out


def leave_size_out(graph: LayerGraph, table: ProfileTable, device: Device, size: int, dtype: str = "fp32",
                   knots: int = 6) -> AnalyticalCompute | None:
    """The analytical model calibrated to every profiled size but ``size``: how a plan at ``size``
    would be priced had nobody profiled it (the validation's analytical column, judged on sizes
    its fit did not see).  None where no other size is left to fit."""
    rest = set(table.microbatch_sizes) - {size}
    if not rest:
        return None
    return AnalyticalCompute(_fit(graph, table, device, dtype, knots, rest), dtype)


def profile_yaml(profile, device: Device, source: str) -> str:
    """The cluster profile with the calibrated device, in the hardware_profiles schema."""
    links = dict(profile.links)
    lines = [f"# {profile.name} with its device efficiency calibrated by `parsim calibrate` from {source}",
             "schema_version: 1", f"name: {profile.name}-calibrated",
             f"description: {profile.description} (efficiency calibrated from {source})", "device:",
             f"  name: {device.name}", f"  memory: {device.memory_bytes}",
             f"  memory_reserved: {{runtime_context: {device.reserve.runtime_context_bytes}, "
             f"collective_buffers: {device.reserve.collective_buffers_bytes}, "
             f"fragmentation_fraction: {device.reserve.fragmentation_fraction}}}   # from {profile.source or profile.name}",
             f"  memory_bandwidth_gb_per_s: {device.memory_bandwidth_bytes_per_s / 1e9:.4f}",
             f"  memory_efficiency: {device.memory_efficiency:.4f}   # fitted", "  peak_tflops:"]
    lines += [f"    {k}: {v / 1e12:.6g}" for k, v in device.peak_flops_per_s]
    lines.append("  efficiency: [" + ", ".join(f"[{w:.4g}, {e:.4f}]" for w, e in device.efficiency) + "]"
                 + ("" if device.kernels else "   # fitted"))
    if device.kernels is not None:
        ex = device.kernels
        lines += ["  kernels:                      # parsim.cost.kernels; the starred numbers are fitted",
                  f"    compute_units: {ex.compute_units}",
                  f"    tiles: {[list(t) for t in ex.tiles]}",
                  f"    gemm_efficiency: {ex.gemm_efficiency:.4f}   # *",
                  *([f"    conv_efficiency: {ex.conv_efficiency:.4g}   # from {profile.source or profile.name}"]
                    if ex.conv_efficiency is not None else []),
                  *([f"    vector_conv_efficiency: {ex.vector_conv_efficiency:.4g}   # from {profile.source or profile.name}"]
                    if ex.vector_conv_efficiency is not None else []),
                  f"    k_half: {ex.k_half:.4g}   # *",
                  f"    launch_us: {ex.launch_s * 1e6:.4g}   # *",
                  f"    host_dispatch_us: {ex.host_dispatch_s * 1e6:.4g}",
                  f"    layer_call_us: {ex.layer_call_s * 1e6:.4g}" + ("   # *" if ex.cpu_threads else ""),
                  f"    asynchronous: {str(ex.asynchronous).lower()}"]
        if ex.cpu_threads:
            lines += [f"    cpu_threads: {ex.cpu_threads}",
                      f"    weight_touch_gb_per_s: {ex.weight_touch_bytes_per_s / 1e9:.4g}   # *",
                      f"    backward_weight_touch_gb_per_s: {ex.backward_weight_touch_bytes_per_s / 1e9:.4g}   # *",
                      f"    m_half: {ex.m_half:.4g}   # *",
                      f"    conv_k_half: {ex.conv_k_half:.4g}   # *",
                      "    memory_family_efficiency: {"
                      + ", ".join(f"{f}: {e:.4f}" for f, e in ex.memory_family_efficiency) + "}   # *",
                      "    per_sample_gemm_efficiency: ["
                      + ", ".join(f"[{r:.4g}, {e:.4f}]" for r, e in ex.per_sample_gemm_efficiency) + "]   # *"]
    if device.fp16_cube:
        lines.append("  fp16_cube: true")
    lines += ["node:", f"  devices: {profile.devices_per_node}", f"  groups: {[list(g) for g in profile.groups]}"]
    if profile.group_topology != "switch":
        lines.append(f"  group_topology: {profile.group_topology}")
    for cls, key in (("group", "group_link"), ("node", "node_link")):
        link = links[cls]
        lines.append(f"  {key}: {{bandwidth_gb_per_s: {link.bandwidth_bytes_per_s / 1e9:.6g}, "
                     f"latency_us: {link.latency_s * 1e6:.4g}, efficiency: {link.efficiency}}}")
    net = links["network"]
    lines += ["network:", f"  nics_per_node: {profile.nics_per_node}",
              f"  nic_bandwidth_gb_per_s: {net.bandwidth_bytes_per_s * profile.devices_per_node / min(profile.nics_per_node, profile.devices_per_node) / 1e9:.6g}",
              f"  latency_us: {net.latency_s * 1e6:.4g}", f"  efficiency: {net.efficiency}"]
    fabric = profile.fabric             # the tiers above the NICs (parsim.hardware.fabric), unchanged
    if fabric.rail_optimized:
        lines.append("  rail_optimized: true")
    if fabric.pod_nodes:
        lines += [f"  pod_nodes: {fabric.pod_nodes}", f"  spine: {{oversubscription: {fabric.oversubscription}, "
                  f"latency_us: {fabric.spine_latency_s * 1e6:.4g}}}"]
    if fabric.domain_nodes:
        dom = fabric.domain_link
        lines.append(f"  scale_up: {{nodes: {fabric.domain_nodes}, bandwidth_gb_per_s: {dom.bandwidth_bytes_per_s / 1e9:.6g}, "
                     f"latency_us: {dom.latency_s * 1e6:.4g}, efficiency: {dom.efficiency}}}")
    lines.append(f"collective: {collectives_flow(profile.collectives)}")
    pipe = profile.input_pipeline
    if pipe is not None:                       # as measured for the profile (parsim profile-data), unchanged
        rate = f"host_samples_per_s: {pipe.host_samples_per_s:.6g}" if pipe.overlap else \
            f"per_sample_s: {pipe.per_sample_s:.6g}"
        lines.append(f"input_pipeline: {{overlap: {str(pipe.overlap).lower()}, {rate}"
                     + (f", sample_elements: {pipe.sample_elements}" if pipe.sample_elements else "")
                     + f"}}   # from {profile.source or profile.name}")
    return "\n".join(lines) + "\n"


def profiled_compute(table: ProfileTable, graph: LayerGraph, device: Device, dtype: str = "fp32"):
    """The profiled cost model, with the analytical model calibrated to the same profile as the
    fallback for the sizes it did not measure.  A tensor-parallel profile timed shards, not the
    graph's layers, so its fallback is the device's analytical model as it stands."""
    from parsim.cost.compute import ProfiledCompute

    if table.dtype != graph.dtype:
        raise InputError(f"--profile: dtype: the profile timed the model in {table.dtype}, but it trains in "
                         f"{graph.dtype}; profile it again with parsim profile")
    # the fit alone: calibrate's report (its held-out fits) would triple the time and be dropped
    fitted = device if table.tp > 1 else calibrated_device(graph, table, device, dtype)
    return ProfiledCompute(table, AnalyticalCompute(fitted, dtype))
