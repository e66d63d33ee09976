"""Fit the kernel-level GEMM model's per-device numbers to public per-kernel measurements.

The tables in hardware_profiles/kernels/ (their sources and transformation: PROVENANCE.md there)
hold measured GEMM kernel times by shape on V100, A100 and H100.  The model is
parsim.cost.kernels' (tile and wave quantization, K fill, M fill, roofline), for one GEMM kernel:

    t = max(FLOPs / (peak * efficiency * shape_efficiency(M, N, K, batch)), bytes / (BW * gemm_memory_efficiency))
        + gemm_latency

with FLOPs = 2 x batch x M x N x K (2 x MACs) and bytes = dtype bytes x batch x (MK + KN + MN).  The
launch gap between kernels (``launch_us``) is not in a kernel's measured duration and is not fitted.

- fp16 rows (tensor cores) fit the matrix engine's numbers of a device: ``gemm_efficiency``,
  ``k_half``, ``m_half`` and ``gemm_latency_us``, least squares on log(predicted / measured);
- fp32 rows (CUDA-core SGEMM, TF32 off) then fit ``vector_gemm_efficiency`` with the others held.

Each row's part (devices.csv: SMs, peaks and bandwidth from its datasheet) names the shipped profile
of its architecture, whose tiles and GEMM memory floor the model takes (``kernels.
gemm_memory_efficiency``, else its ``memory_efficiency``: where the profile gives its GEMMs a floor of
their own, the end-to-end fit of the memory-bound kernels' share does not move this fit).  ``held_out`` fits on some
profiles' rows and prices another's with the fitted numbers and that device's datasheet figures
(NeuSight, ASPLOS 2025, reports its error the same way: median relative error on an unseen GPU).

    python benchmarks/bench_kernels.py      # fitted values, in-sample and held-out errors
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from parsim.cost.kernels import gemm_candidates, kernel_time_s
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.hardware.cluster import profiles_dir
from parsim.hardware.device import KernelExecution
from parsim.hardware.numerics import Engine
from parsim.model.graph import Kernel

DTYPE_BYTES = {"fp16": 2, "fp32": 4}
# (file, whether its M and N are swapped against parsim's convention: M = the rows that grow with
# the batch).  DeepBench lists the batch as N (its gemm_problems.h: "M, N, K ... N is the batch").
GEMM_TABLES = (("gemm_deepbench_v100.csv", True), ("gemm_vidur.csv", False), ("gemm_neusight_fp32.csv", False))


def tables_dir() -> Path:
    return profiles_dir() / "kernels"


@dataclass(frozen=True)
class Part:
    """A measured GPU part, from its datasheet (devices.csv), and the shipped profile of its architecture."""

    name: str
    profile: str                  # hardware_profiles/<profile>.yaml: tiles and memory_efficiency come from it
    same_part: bool               # the profile's own device (its numbers must agree)
    compute_units: int
    peak_flops_per_s: tuple[tuple[str, float], ...]
    memory_bandwidth_bytes_per_s: float


@dataclass(frozen=True)
class GemmSample:
    """One measured GEMM kernel: batch x (M x K times K x N) in ``dtype``, and its time."""

    source: str
    device: str
    dtype: str
    m: int
    n: int
    k: int
    batch: int
    time_s: float


@dataclass(frozen=True)
class GemmFit:
    """Fitted numbers of one device (or of several, for a held-out check)."""

    gemm_efficiency: float
    k_half: float
    m_half: float
    gemm_latency_s: float
    vector_gemm_efficiency: float | None = None


def _rows(path: Path):
    try:
        with open(path, newline="") as f:
            yield from csv.DictReader(f)
    except OSError as e:
        raise InputError(f"{path}: cannot read the kernel table ({e.strerror})") from None


def _field(path: Path, row: dict, key: str, kind):
    try:
        value = kind(row[key])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{path}: field {key}: expected a {kind.__name__}, got {row.get(key)!r}") from None
    if kind is not str and not value > 0:
        raise InputError(f"{path}: field {key}: must be > 0, got {value}")
    return value


def load_parts(folder: Path | None = None) -> dict[str, Part]:
    path = (folder or tables_dir()) / "devices.csv"
    out = {}
    for r in _rows(path):
        out[r["device"]] = Part(name=r["device"], profile=_field(path, r, "profile", str),
                                same_part=r.get("same_part") == "yes",
                                compute_units=_field(path, r, "compute_units", int),
                                peak_flops_per_s=(("fp16", _field(path, r, "fp16_tflops", float) * 1e12),
                                                  ("fp32", _field(path, r, "fp32_tflops", float) * 1e12)),
                                memory_bandwidth_bytes_per_s=_field(path, r, "memory_bandwidth_gb_per_s", float) * 1e9)
    return out


def load_gemms(folder: Path | None = None) -> list[GemmSample]:
    """Every GEMM row of the committed tables, in parsim's convention (M grows with the batch)."""
    folder = folder or tables_dir()
    parts = load_parts(folder)
    out = []
    for name, swapped in GEMM_TABLES:
        path = folder / name
        for r in _rows(path):
            dtype = _field(path, r, "dtype", str)
            if dtype not in DTYPE_BYTES or r.get("device") not in parts:
                raise InputError(f"{path}: row {r}: dtype must be one of {', '.join(DTYPE_BYTES)} and device a "
                                 f"device of devices.csv")
            m, n = _field(path, r, "m", int), _field(path, r, "n", int)
            if swapped:
                m, n = n, m
            out.append(GemmSample(source=name, device=r["device"], dtype=dtype, m=m, n=n, k=_field(path, r, "k", int),
                                  batch=int(r.get("batch") or 1), time_s=_field(path, r, "time_us", float) * 1e-6))
    return out


def gemm_memory_efficiency(device) -> float:
    """The share of the memory bandwidth a GEMM's memory floor takes (parsim.cost.kernels.kernel_time_s):
    the profile's kernels.gemm_memory_efficiency, else its memory_efficiency."""
    return device.kernels.gemm_memory_efficiency or device.memory_efficiency


class _Design:
    """The samples as arrays, with each one's (quant, split-K) candidates computed once."""

    def __init__(self, samples: list[GemmSample], parts: dict[str, Part], devices: dict | None = None):
        """``devices``: profile name -> Device whose tiles and memory_efficiency to take (default:
        the shipped profiles'; parsim.profile.device passes the one it is measuring)."""
        devices = devices or {p: load_cluster(f"{p}:1x1").device for p in {parts[s.device].profile for s in samples}}
        self.time_s = np.array([s.time_s for s in samples])
        self.m = np.array([float(s.m) for s in samples])
        self.k = np.array([float(s.k) for s in samples])
        self.flops = np.array([2.0 * s.batch * s.m * s.n * s.k for s in samples])
        peak, mem_s, quant, split = [], [], [], []
        for s in samples:
            part = parts[s.device]
            device = devices[part.profile]
            peak.append(dict(part.peak_flops_per_s)[s.dtype])
            nbytes = DTYPE_BYTES[s.dtype] * s.batch * (s.m * s.k + s.k * s.n + s.m * s.n)
            mem_s.append(nbytes / (part.memory_bandwidth_bytes_per_s * gemm_memory_efficiency(device)))
            ex = KernelExecution(compute_units=part.compute_units, tiles=device.kernels.tiles)
            c = gemm_candidates(s.m, s.n, s.k, s.batch, ex)
            quant.append([q for q, _ in c])
            split.append([sk for _, sk in c])
        width = max(len(q) for q in quant)
        self.peak, self.mem_s = np.array(peak), np.array(mem_s)
        self.quant = np.array([q + [0.0] * (width - len(q)) for q in quant])
        self.split = np.array([sk + [1] * (width - len(sk)) for sk in split], dtype=float)

    def predict_s(self, efficiency, k_half, m_half, latency_s):
        """parsim.cost.kernels.kernel_time_s of each sample (its launch gap left out), vectorized."""
        ks = self.k[:, None] / self.split
        shape = (self.quant * ks / (ks + k_half)).max(axis=1) * self.m / (self.m + m_half)
        return np.maximum(self.flops / (self.peak * efficiency * shape), self.mem_s) + latency_s


def relative_errors(predicted_s, measured_s) -> np.ndarray:
    return np.abs(np.asarray(predicted_s) / np.asarray(measured_s) - 1.0)


def _fit_matrix(design: _Design) -> tuple[float, float, float, float]:
    """Least squares on log(predicted / measured) over (efficiency, k_half, m_half, latency in us)."""
    res = least_squares(lambda x: np.log(design.predict_s(x[0], x[1], x[2], x[3] * 1e-6) / design.time_s),
                        x0=(0.8, 64.0, 16.0, 5.0), bounds=([0.05, 0.0, 0.0, 0.0], [1.0, 4096.0, 4096.0, 50.0]),
                        x_scale=(0.1, 10.0, 10.0, 1.0))
    return float(res.x[0]), float(res.x[1]), float(res.x[2]), float(res.x[3]) * 1e-6


def _fit_vector(design: _Design, fit: GemmFit) -> float:
    res = least_squares(lambda x: np.log(design.predict_s(x[0], fit.k_half, fit.m_half, fit.gemm_latency_s)
                                         / design.time_s), x0=(0.8,), bounds=([0.05], [1.0]))
    return float(res.x[0])


def fit(samples: list[GemmSample], parts: dict[str, Part], devices: dict | None = None) -> GemmFit:
    """The matrix engine's numbers from the fp16 rows, then the vector units' efficiency from the fp32
    rows (``devices``: as _Design's)."""
    half = [s for s in samples if s.dtype == "fp16"]
    single = [s for s in samples if s.dtype == "fp32"]
    if not half:
        raise InputError("kernel tables: no fp16 rows to fit the matrix engine on")
    out = GemmFit(*_fit_matrix(_Design(half, parts, devices)))
    if single:
        out = replace(out, vector_gemm_efficiency=_fit_vector(_Design(single, parts, devices), out))
    return out


def predict_s(samples: list[GemmSample], parts: dict[str, Part], f: GemmFit) -> np.ndarray:
    """Each sample's predicted kernel time under the fitted numbers (fp32 rows at the vector efficiency)."""
    out = np.empty(len(samples))
    for dtype, eff in (("fp16", f.gemm_efficiency), ("fp32", f.vector_gemm_efficiency)):
        idx = [i for i, s in enumerate(samples) if s.dtype == dtype]
        if idx and eff is not None:
            out[idx] = _Design([samples[i] for i in idx], parts).predict_s(eff, f.k_half, f.m_half, f.gemm_latency_s)
    return out


def by_profile(samples: list[GemmSample], parts: dict[str, Part]) -> dict[str, list[GemmSample]]:
    out: dict[str, list[GemmSample]] = {}
    for s in samples:
        out.setdefault(parts[s.device].profile, []).append(s)
    return out


def fit_profiles(folder: Path | None = None) -> dict[str, GemmFit]:
    """Each shipped profile's numbers, fitted on its own architecture's rows (what the profiles hold)."""
    parts = load_parts(folder)
    return {p: fit(rows, parts) for p, rows in sorted(by_profile(load_gemms(folder), parts).items())}


def error_summary(samples, parts, f: GemmFit) -> dict[str, tuple[int, float, float]]:
    """dtype -> (rows, median, p90 relative error of the kernel time)."""
    pred = predict_s(samples, parts, f)
    out = {}
    for dtype in DTYPE_BYTES:
        idx = [i for i, s in enumerate(samples) if s.dtype == dtype]
        if idx:
            e = relative_errors(pred[idx], [samples[i].time_s for i in idx])
            out[dtype] = (len(idx), float(np.median(e)), float(np.percentile(e, 90)))
    return out


def held_out(fit_on=("dgx1-v100", "dgx-a100"), test="dgx-h100", folder: Path | None = None):
    """Fit one set of numbers on the ``fit_on`` profiles' rows together and price ``test``'s rows with
    them: (the fit, test's error summary)."""
    parts = load_parts(folder)
    rows = by_profile(load_gemms(folder), parts)
    f = fit([s for p in fit_on for s in rows[p]], parts)
    return f, error_summary(rows[test], parts, f)


# How the shipped profiles write each fitted number (benchmarks/bench_kernels.py prints them so):
# efficiencies to 0.001, rows and reduction lengths to 0.1, the latency to 0.01 us
ROUNDING = {"gemm_efficiency": 3, "vector_gemm_efficiency": 3, "k_half": 1, "m_half": 1, "gemm_latency_us": 2}


def shipped_values(f: GemmFit) -> dict[str, float]:
    raw = {"gemm_efficiency": f.gemm_efficiency, "k_half": f.k_half, "m_half": f.m_half,
           "gemm_latency_us": f.gemm_latency_s * 1e6, "vector_gemm_efficiency": f.vector_gemm_efficiency}
    return {key: round(v, ROUNDING[key]) + 0.0 for key, v in raw.items() if v is not None}


def write_profiles(fits: dict[str, GemmFit]) -> list[str]:
    """Each fit's shipped_values written into its profile's ``device.kernels`` fields, each field's
    comment kept (the fixed point with the end-to-end fit: docs/hardware.md, Calibration).
    Returns the paths written."""
    import re

    from parsim.fileio import write_text
    from parsim.hardware.cluster import profile_path
    from parsim.profile.profile_edit import set_field

    written = []
    for name, f in fits.items():
        path = profile_path(name)
        text = open(path).read()
        for key, value in shipped_values(f).items():
            kept = re.search(rf"^\s+{key}: [^#\n]*#(.*)$", text, re.M)
            comment = kept.group(1).strip() if kept else ""
            text = set_field(text, f"device.kernels.{key}", f"{value:g}", comment)
        write_text(path, text)
        written.append(path)
    return written


@dataclass(frozen=True)
class ConvSample:
    """One measured convolution pass (DeepBench): NCHW input N x C x H x W, K filters of C x R x S."""

    device: str
    dtype: str
    phase: str                   # "F" forward, "I" data gradient, "W" filter gradient
    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    pad: tuple[int, int]         # (h, w)
    stride: tuple[int, int]      # (h, w)
    time_s: float

    @property
    def out_hw(self) -> tuple[int, int]:
        return ((self.h + 2 * self.pad[0] - self.r) // self.stride[0] + 1,
                (self.w + 2 * self.pad[1] - self.s) // self.stride[1] + 1)

    def gemm(self) -> tuple[int, int, int]:
        """(M, N, K) of its implicit GEMM, as parsim.model.extract writes a convolution's."""
        p, q = self.out_hw
        rows, taps = self.n * p * q, self.c * self.r * self.s
        return {"F": (rows, self.k, taps), "I": (rows, self.c, self.k * self.r * self.s),
                "W": (self.k, taps, rows)}[self.phase]


def load_convs(folder: Path | None = None) -> list[ConvSample]:
    path = (folder or tables_dir()) / "conv_deepbench_v100.csv"
    out = []
    for r in _rows(path):
        for phase, key in (("F", "fwd_us"), ("I", "bwd_data_us"), ("W", "bwd_filter_us")):
            if not r.get(key):
                continue             # DeepBench ran no algorithm for it
            if phase == "I" and int(r["c"]) < 4:
                continue             # the input layer (1 to 3 channels): frameworks skip its data gradient
            v = {f: _field(path, r, f, int) for f in ("n", "c", "h", "w", "k", "r", "s", "stride_h", "stride_w")}
            out.append(ConvSample(device=r["device"], dtype=r["dtype"], phase=phase, n=v["n"], c=v["c"], h=v["h"],
                                  w=v["w"], k=v["k"], r=v["r"], s=v["s"], pad=(int(r["pad_h"]), int(r["pad_w"])),
                                  stride=(v["stride_h"], v["stride_w"]), time_s=_field(path, r, key, float) * 1e-6))
    return out


def _conv_predictions(rows: list[ConvSample], parts: dict[str, Part], dtype: str, ratio: float) -> list[float]:
    """Each pass's time as an implicit GEMM at ``ratio`` x the profile's GEMM efficiency (tensor
    cores for fp16, the CUDA cores' for fp32), the launch gap left out."""
    pred = []
    for s in rows:
        device = load_cluster(f"{parts[s.device].profile}:1x1").device
        ex = device.kernels
        base = ex.vector_gemm_efficiency if dtype == "fp32" else ex.gemm_efficiency
        engine = Engine(dtype, dict(parts[s.device].peak_flops_per_s)[dtype], min(1.0, base * ratio))
        m, n, k = s.gemm()
        p, q = s.out_hw
        activations = DTYPE_BYTES[dtype] * s.n * (s.c * s.h * s.w + s.k * p * q)
        weights = DTYPE_BYTES[dtype] * s.k * s.c * s.r * s.s
        kernel = Kernel(s.phase, "convolution", "conv", flops=(0.0, 2.0 * m * n * k),
                        bytes=(weights, activations), gemm=((0, m), (0, n), (0, k), (0, 1)))
        pred.append(kernel_time_s(kernel, 1, device, {"conv": engine}) - ex.launch_s)
    return pred


def conv_ratios(samples: list[ConvSample], parts: dict[str, Part]) -> dict[str, float]:
    """The convolution efficiency as a ratio of the GEMM's that fits DeepBench's convolution
    passes best (least squares on log(predicted / measured), one number per dtype: fp16 on the
    tensor cores, fp32 on the CUDA cores): the prior of results/published/fit.yaml's conv and
    vector-conv parameters, from kernels, before any end-to-end figure."""
    out = {}
    for dtype in DTYPE_BYTES:
        rows = [s for s in samples if s.dtype == dtype]
        if not rows:
            continue
        measured = np.array([s.time_s for s in rows])

        def residuals(x):
            return np.log(np.array(_conv_predictions(rows, parts, dtype, float(np.exp(x[0])))) / measured)
        fit_ = least_squares(residuals, [0.0], bounds=([np.log(0.1)], [np.log(1.5)]))
        out[dtype] = float(f"{np.exp(fit_.x[0]):.3g}")
    return out


def conv_errors(samples: list[ConvSample], parts: dict[str, Part], ratio: float = 1.0) -> dict[str, tuple[int, float, float]]:
    """Convolutions priced as implicit GEMMs by parsim.cost.kernels.kernel_time_s with the shipped
    profile's numbers (fitted on GEMMs only; ``ratio`` x their efficiency), the launch gap left
    out.  DeepBench lays fp16 tensors out NHWC for the tensor cores and fp32 ones NCHW (its
    code/nvidia/conv_bench.cu), so no pass pays layout transposes (as torch.channels_last).
    dtype -> (passes, median, p90 relative error)."""
    out = {}
    for dtype in DTYPE_BYTES:
        rows = [s for s in samples if s.dtype == dtype]
        if not rows:
            continue
        pred = _conv_predictions(rows, parts, dtype, ratio)
        e = relative_errors(pred, [s.time_s for s in rows])
        out[dtype] = (len(rows), float(np.median(e)), float(np.percentile(e, 90)))
    return out


def square_gemm_efficiency(profile: str, work_flops: float, dtype: str = "fp16") -> float:
    """The fraction of ``dtype``'s peak a square GEMM of ``work_flops`` (M = N = K, 2 M N K FLOPs)
    reaches under the profile's fitted kernel numbers (tiles, waves, K and M fill, its fixed
    latency): the points of a profile's ``device.efficiency`` table, the roofline that prices
    layers without kernels (a ``layers:`` model), derived from the per-kernel fit, not guessed."""
    from parsim.cost.kernels import gemm_shape_efficiency

    device = load_cluster(f"{profile}:1x1").device
    ex = device.kernels
    side = (work_flops / 2) ** (1 / 3)
    peak = device.peak(dtype)
    t = work_flops / (peak * ex.gemm_efficiency * gemm_shape_efficiency(side, side, side, 1, ex)) + ex.gemm_latency_s
    return work_flops / t / peak
