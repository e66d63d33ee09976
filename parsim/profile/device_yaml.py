"""The hardware profile ``parsim profile-device`` writes, built from its tables (parsim.profile.device):

- peak_tflops: per dtype, the best GEMM rate of the grid (``--peak`` gives a datasheet's instead);
- efficiency: the roofline's (work FLOPs, fraction of peak) points, the median fraction of the GEMMs
  in each decade of work, in the dtype the peak is first given for;
- memory_bandwidth_gb_per_s: the copy's read + write bytes over its time;
- on CUDA, the kernel-level model (parsim.cost.kernels): compute_units (SMs), gemm_efficiency,
  k_half, m_half and gemm_latency_us fitted to the fp16 rows and vector_gemm_efficiency to the fp32
  ones by parsim.profile.kernel_fit (as the shipped profiles' are to Vidur's and NeuSight's tables),
  conv_efficiency the median of the forward convolutions' rate over the peak, launch_us and
  host_dispatch_us as measured;
- node, network and collective: those ``parsim profile-comm`` measured (``--links``), or a node of
  one device, whose links nothing crosses.
Every number's comment says how it was measured or that it is unconfirmed.
"""

from __future__ import annotations

import datetime
import math
import statistics

from parsim.errors import InputError
from parsim.profile.device import Measurement

# CUTLASS/cuBLAS's output tiles, as the shipped NVIDIA profiles list them (unconfirmed there too)
CUDA_TILES = [[256, 128], [128, 256], [128, 128], [128, 64], [64, 128], [64, 64]]


def peaks(m: Measurement, given: dict[str, float] | None = None) -> dict[str, float]:
    """dtype -> FLOP/s: ``given`` (a datasheet's, FLOP/s) where it names the dtype, else the best
    measured GEMM rate in that dtype."""
    given = given or {}
    out = {}
    for g in m.gemms:
        out[g.dtype] = max(out.get(g.dtype, 0.0), g.flops / g.time_s)
    return {**out, **{d: v for d, v in given.items() if d in out}}


def efficiency_points(m: Measurement, dtype: str, peak: float) -> list[tuple[float, float]]:
    """(work FLOPs, fraction of ``peak``): per decade of work, the median work and the median
    fraction of the GEMMs in ``dtype`` there, fractions clamped to (0, 1]."""
    decades: dict[int, list[tuple[float, float]]] = {}
    for g in m.gemms:
        if g.dtype == dtype:
            decades.setdefault(int(math.floor(math.log10(g.flops))), []).append((g.flops, g.flops / g.time_s / peak))
    return [(statistics.median(w for w, _ in rows), min(1.0, max(1e-3, statistics.median(e for _, e in rows))))
            for _, rows in sorted(decades.items())]


def kernel_fit(m: Measurement, peak: dict[str, float]):
    """The kernel model's numbers fitted to the measured GEMMs (parsim.profile.kernel_fit), with the
    measured device as its one part."""
    from parsim.hardware.device import Device, KernelExecution
    from parsim.profile.kernel_fit import GemmSample, Part, fit

    if "fp16" not in peak:
        raise InputError("profile-device: the kernel model needs fp16 GEMM rows (the matrix engine); measure on cuda")
    part = Part(m.info.name, "measured", True, m.info.compute_units,
                tuple((d, peak[d]) for d in ("fp16", "fp32") if d in peak), m.copy_bytes_per_s)
    device = Device(m.info.name, tuple(peak.items()), m.info.memory_bytes, m.copy_bytes_per_s,
                    kernels=KernelExecution(compute_units=m.info.compute_units,
                                            tiles=tuple(map(tuple, CUDA_TILES))))
    samples = [GemmSample("profile-device", m.info.name, g.dtype, g.m, g.n, g.k, 1, g.time_s) for g in m.gemms
               if g.dtype in ("fp16", "fp32")]
    return fit(samples, {part.name: part}, {"measured": device})


def _flow(points) -> str:
    return "[" + ", ".join(f"[{w:.3g}, {e:.3f}]" for w, e in points) + "]"


def device_section(m: Measurement, given_peaks: dict[str, float] | None = None, ranks_per_node: int = 1) -> list[str]:
    """The ``device:`` lines of the profile."""
    peak = peaks(m, given_peaks)
    first = "fp16" if "fp16" in peak else "fp32"
    how = {d: ("given (--peak)" if d in (given_peaks or {}) else "measured: best GEMM of gemm.csv") for d in peak}
    cpu = m.info.backend == "cpu"
    memory = m.info.memory_bytes // ranks_per_node if cpu else m.info.memory_bytes
    lines = ["device:",
             f"  name: {m.info.name}",
             f"  memory: {memory}   # " + ("measured: machine memory / ranks per node" if cpu
                                            else "measured: torch.cuda.get_device_properties total_memory"),
             f"  memory_bandwidth_gb_per_s: {m.copy_bytes_per_s / 1e9:.4f}   # measured: tensor copy, read + write",
             "  memory_efficiency: 1.0   # the bandwidth above is the one a copy reaches",
             "  peak_tflops:"]
    lines += [f"    {d}: {v / 1e12:.5g}   # {how[d]}" for d, v in peak.items()]
    lines.append(f"  efficiency: {_flow(efficiency_points(m, first, peak[first]))}   # measured: median {first} GEMM "
                 "rate / peak per decade of work (gemm.csv)")
    if not cpu:
        f = kernel_fit(m, peak)
        fwd = [c.flops / c.fwd_s / peak[c.dtype] for c in m.convs if c.fwd_s > 0 and c.dtype in peak]
        lines += ["  kernels:                      # parsim.cost.kernels",
                  f"    compute_units: {m.info.compute_units}   # measured: torch.cuda.get_device_properties SMs",
                  f"    tiles: {CUDA_TILES}   # unconfirmed: as the shipped NVIDIA profiles",
                  f"    gemm_efficiency: {f.gemm_efficiency:.3f}   # fitted to the fp16 rows of gemm.csv "
                  "(parsim.profile.kernel_fit)",
                  f"    k_half: {f.k_half:.1f}   # fitted, as gemm_efficiency",
                  f"    m_half: {f.m_half:.1f}   # fitted, as gemm_efficiency",
                  f"    gemm_latency_us: {f.gemm_latency_s * 1e6:.2f}   # fitted, as gemm_efficiency"]
        if f.vector_gemm_efficiency is not None:
            lines.append(f"    vector_gemm_efficiency: {f.vector_gemm_efficiency:.3f}   # fitted to the fp32 rows")
        if fwd:
            lines.append(f"    conv_efficiency: {min(1.0, statistics.median(fwd)):.3f}   # measured: median forward "
                         "convolution rate / peak (conv.csv)")
        lines += [f"    launch_us: {m.launch_s * 1e6:.3g}   # measured: one-element kernels back to back",
                  f"    host_dispatch_us: {m.host_dispatch_s * 1e6:.3g}   # measured: host time per call",
                  "    asynchronous: true          # CUDA streams: the host enqueues ahead of the device",
                  "    nhwc_matrix_engine: true    # tensor-core convolutions take NHWC (NVIDIA, \"Convolutional "
                  "Layers User's Guide\")"]
    reserve = (f"{{runtime_context: {m.info.runtime_bytes}, collective_buffers: 0, fragmentation_fraction: 0.0}}"
               + ("   # measured: the process's resident set; the CPU allocator keeps no pool" if cpu else
                  "   # measured: device memory taken before any tensor; collective buffers come with the "
                  "communicators (profile-comm), fragmentation with a run (parsim run measures it)"))
    lines.append(f"  memory_reserved: {reserve}")
    if cpu:
        lines.append(f"  # launch overhead: measured {m.launch_s * 1e6:.3g} us per eager one-element operation; a "
                     "CPU profile prices layers whole (the roofline above), so no kernels section")
    return lines


def links_sections(links_path: str | None, m: Measurement) -> list[str]:
    """node, network, collective (and the input pipeline) of ``links_path`` (a profile
    profile-comm wrote), else a node of one device."""
    if links_path is None:
        return ["node:", "  devices: 1",
                f"  group_link: {{bandwidth_gb_per_s: {m.copy_bytes_per_s / 1e9:.4f}, latency_us: 0}}   # one device: "
                "no link is crossed (the copy bandwidth stands in); measure links with parsim profile-comm, then "
                "parsim profile-device --links",
                "collective: {library: " + ("nccl" if m.info.backend == "cuda" else "gloo")
                + ", bandwidth_efficiency: 1.0, latency_us: 0}   # one device: no collective runs"]
    from parsim.hardware.cluster import load_profile
    from parsim.inputs import read_text
    load_profile(links_path)                              # its own errors first, naming it
    text = read_text(links_path, "a hardware profile YAML")
    out, keep = [], False
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            keep = line.split(":", 1)[0] in ("node", "network", "collective", "input_pipeline")
        if keep:
            out.append(line)
    return [f"# node, network, collective: from {links_path} (parsim profile-comm)"] + out


def profile_text(m: Measurement, name: str, command: str, tables: str, links: str | None = None,
                 given_peaks: dict[str, float] | None = None) -> str:
    """The whole profile YAML."""
    from parsim.hardware.machine import this_machine
    here = this_machine()
    today = datetime.date.today().isoformat()
    ranks = 1
    if links is not None:
        from parsim.hardware.cluster import load_profile
        ranks = load_profile(links).devices_per_node
    head = [f"# Measured {today} with `{command}` on {m.info.name} ({m.info.backend}); kernel tables in {tables}",
            "schema_version: 1", f"name: {name}",
            f"description: measured by parsim profile-device on {today}, {m.info.name}",
            f"measured: {{date: '{today}', machine: '{m.info.name}', cpu_model: '{here.cpu_model}', "
            f"torch: '{here.torch}', command: '{command}'}}"]
    return "\n".join(head + device_section(m, given_peaks, ranks) + links_sections(links, m)) + "\n"


def parse_peaks(text: str | None) -> dict[str, float]:
    """``--peak fp16=989,fp32=67`` (TFLOPS) as FLOP/s per dtype."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        dtype, _, value = part.partition("=")
        try:
            tflops = float(value)
        except ValueError:
            tflops = -1.0
        if dtype not in ("fp16", "bf16", "fp32") or not tflops > 0:
            raise InputError(f"--peak {text}: expected dtype=TFLOPS pairs, dtypes among fp16, bf16, fp32, e.g. "
                             "fp16=989,fp32=67")
        out[dtype] = tflops * 1e12
    return out


def run(device: str, output: str, name: str, command: str, tables: str | None = None, links: str | None = None,
        peak: str | None = None, quick: bool = False, repeats: int = 5, budget_s: float | None = None,
        threads: int = 1, log=print) -> str:
    """``parsim profile-device``: probe, say how long it will take, measure, write the tables, build
    the profile from them and write it; returns the tables' folder."""
    import os

    from parsim.fileio import write_text
    from parsim.hardware.cluster import load_profile
    from parsim.profile import device as dev

    given = parse_peaks(peak)
    if links is not None:
        load_profile(links)                               # bad input before the measuring
    backend = dev.backend_for(device, threads)
    tables = tables or os.path.splitext(output)[0] + ".kernels"
    rate, call_s, copy = dev.probe(backend)
    p = dev.plan(backend.name, quick, repeats)
    p = dev.within_budget(p, lambda q: q.estimate_s(rate, call_s, copy), budget_s or dev.BUDGET_S)
    est = p.estimate_s(rate, call_s, copy)
    from parsim.fmt import human_time
    log(f"profile-device: {backend.name}: {len(p.gemms)} GEMMs, {len(p.convs)} convolutions (3 passes each), a "
        f"{p.copy_bytes >> 20} MiB copy and {dev.LAUNCHES} launches, {p.repeats} repeats each: about {human_time(est)} "
        f"(at the probe's {rate / 1e12:.3g} TFLOP/s)"
        + (f"; the {p.cut} largest GEMMs left out to stay within {(budget_s or dev.BUDGET_S) / 60:.0f} minutes"
           if p.cut else ""))
    dev.write_tables(tables, dev.measure(backend, p, log))
    write_text(output, profile_text(dev.read_tables(tables), name, command, tables, links, given))
    return tables
