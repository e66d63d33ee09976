"""``parsim profile-device``: time the device at hand, kernel by kernel, and keep the times as
tables in the form of hardware_profiles/kernels/ (parsim.profile.device_yaml builds the profile
from them).

    measure:  GEMMs over a grid of shapes (M x K times K x N, per dtype), convolutions (forward,
              data and filter gradients, the forms of DeepBench's table), a large copy (memory
              bandwidth: read + write bytes over the time), a one-element kernel back to back
              (launch gap on the device; host dispatch per call)
    tables:   DIR/gemm.csv   device,dtype,m,n,k,time_us
              DIR/conv.csv   device,dtype,w,h,c,n,k,s,r,pad_w,pad_h,stride_w,stride_h,fwd_us,bwd_data_us,bwd_filter_us,fwd_algo
              DIR/device.csv key,value (the device's properties, bandwidth, launch and dispatch times)

Before it measures, it times one GEMM and says how long the grid will take at that rate; a grid
that would run past the budget (30 minutes by default) is cut, largest shapes first, and says so.

A backend times an operation: on CPU the median wall time of the repeats; on CUDA the elapsed
time between two CUDA events around the repeats, divided by them (the kernels run back to back,
as a training step runs them).  A backend torch cannot reach is refused in one line: CUDA without
a CUDA build or device; Ascend (torch_npu), which this command does not time yet.
"""

from __future__ import annotations

import csv
import math
import os
import time
from dataclasses import dataclass, replace

import torch

from parsim.errors import InputError
from parsim.profile.comm import median_time_s, resident_bytes

BACKENDS = ("cpu", "cuda", "npu")
# GEMM grids (M rows, N columns, K reduction): the full grids span a transformer's linears, from a
# few tokens to a long micro-batch (M) and hidden sizes 1K-16K (N, K); the quick grid is the tests'.
GRIDS = {
    "cuda": ((16, 128, 1024, 4096, 16384), (1024, 4096, 16384), (1024, 4096, 16384)),
    "cpu": ((16, 64, 256, 1024), (256, 1024, 2048), (256, 1024, 2048)),
    "quick": ((16, 128), (128, 512), (128, 512)),
}
GEMM_DTYPES = {"cuda": ("fp16", "fp32"), "cpu": ("fp32",)}
# Convolutions (n, c, h, w, k, r, s, stride, pad): ResNet-50's 3x3 and 1x1 layers at three stages.
CONVS = {
    "cuda": tuple((32, c, hw, hw, k, r, r, 1, r // 2) for c, hw, k, r in
                  ((64, 56, 64, 3), (256, 56, 64, 1), (128, 28, 128, 3), (512, 28, 128, 1), (256, 14, 256, 3))),
    "cpu": tuple((4, c, hw, hw, k, r, r, 1, r // 2) for c, hw, k, r in ((64, 56, 64, 3), (256, 56, 64, 1),
                                                                          (128, 28, 128, 3))),
    "quick": ((2, 16, 16, 16, 16, 3, 3, 1, 1),),
}
TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
ELEMENT_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}
COPY_BYTES = {"cuda": 1 << 30, "cpu": 64 << 20, "quick": 16 << 20}
LAUNCHES = 200                 # one-element kernels per launch measurement
WARMUP = 2
BUDGET_S = 1800.0              # the goal: under 30 minutes on one node


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    backend: str
    memory_bytes: int
    compute_units: int         # SMs on CUDA, cores on CPU
    runtime_bytes: int = 0     # device memory taken before any tensor (CUDA context), or the process's resident set


@dataclass(frozen=True)
class GemmRow:
    dtype: str
    m: int
    n: int
    k: int
    time_s: float

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k            # FLOPs = 2 x MACs


@dataclass(frozen=True)
class ConvRow:
    dtype: str
    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: int
    pad: int
    fwd_s: float = 0.0
    bwd_data_s: float = 0.0
    bwd_filter_s: float = 0.0

    @property
    def flops(self) -> float:
        """One pass's FLOPs (each of the three has the same): 2 x N x K x P x Q x C x R x S."""
        p = (self.h + 2 * self.pad - self.r) // self.stride + 1
        q = (self.w + 2 * self.pad - self.s) // self.stride + 1
        return 2.0 * self.n * self.k * p * q * self.c * self.r * self.s


@dataclass(frozen=True)
class Measurement:
    info: DeviceInfo
    gemms: tuple[GemmRow, ...]
    convs: tuple[ConvRow, ...]
    copy_bytes_per_s: float
    launch_s: float            # device time per kernel, back to back
    host_dispatch_s: float     # host time per call


class Backend:
    """Times operations on one device; ``name`` is its torch device type.  On CPU, ``threads``
    intra-op threads, as a rank of a run has (parsim.exec.runtime.configure_process: one by default)."""

    name = "cpu"
    device = "cpu"

    def __init__(self, threads: int = 1):
        from parsim.exec.runtime import configure_process
        configure_process(threads)

    def info(self) -> DeviceInfo:
        import platform
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return DeviceInfo(f"{platform.machine()}-cpu", "cpu", memory, torch.get_num_threads(), resident_bytes())

    def sync(self) -> None:
        pass

    def time_s(self, fn, repeats: int) -> float:
        """Median wall time of ``repeats`` calls after WARMUP untimed ones."""
        return median_time_s(fn, repeats, WARMUP)

    def tensor(self, shape, dtype: str) -> torch.Tensor:
        return torch.randn(shape, dtype=TORCH_DTYPES[dtype], device=self.device)

    def gemm_fn(self, m: int, n: int, k: int, dtype: str):
        a, b = self.tensor((m, k), dtype), self.tensor((k, n), dtype)
        return lambda: torch.mm(a, b)

    def conv_fns(self, c: ConvRow):
        x = self.tensor((c.n, c.c, c.h, c.w), c.dtype)
        w = self.tensor((c.k, c.c, c.r, c.s), c.dtype)
        y = torch.nn.functional.conv2d(x, w, stride=c.stride, padding=c.pad)
        g = torch.randn_like(y)
        return (lambda: torch.nn.functional.conv2d(x, w, stride=c.stride, padding=c.pad),
                lambda: torch.nn.grad.conv2d_input(x.shape, w, g, stride=c.stride, padding=c.pad),
                lambda: torch.nn.grad.conv2d_weight(x, w.shape, g, stride=c.stride, padding=c.pad))

    def copy_fn(self, nbytes: int):
        src = torch.empty(nbytes // 4, dtype=torch.float32, device=self.device).fill_(1.0)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    def launch_fn(self):
        x = torch.zeros(1, device=self.device)

        def run():
            for _ in range(LAUNCHES):
                x.add_(1.0)
        return run

    def host_dispatch_s(self, repeats: int) -> float:
        """Host time per call of a one-element kernel, not waiting for the device."""
        run = self.launch_fn()
        run()
        self.sync()
        t = time.perf_counter()
        run()
        out = (time.perf_counter() - t) / LAUNCHES
        self.sync()
        return out


class CudaBackend(Backend):
    """CUDA: events around the repeats (torch.cuda.Event(enable_timing=True)); TF32 off, so fp32
    GEMMs run on the CUDA cores (torch's default for matmul since 1.12)."""

    name = "cuda"
    device = "cuda"

    def __init__(self):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    def info(self) -> DeviceInfo:
        props = torch.cuda.get_device_properties(0)
        free, total = torch.cuda.mem_get_info()
        return DeviceInfo(props.name, "cuda", int(props.total_memory), int(props.multi_processor_count),
                          int(total - free))

    def sync(self) -> None:
        torch.cuda.synchronize()

    def time_s(self, fn, repeats: int) -> float:
        for _ in range(WARMUP):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.sync()
        start.record()
        for _ in range(repeats):
            fn()
        end.record()
        self.sync()
        return start.elapsed_time(end) * 1e-3 / repeats           # elapsed_time is in milliseconds


def backend_for(name: str, threads: int = 1) -> Backend:
    """The backend of ``--device``, or an InputError saying what is missing."""
    if name == "cpu":
        return Backend(threads)
    if name == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"--device cuda: torch {torch.__version__} sees no CUDA device (torch.cuda.is_available() "
                             "is False); run on a GPU machine with a CUDA build of torch, or use --device cpu")
        return CudaBackend()
    if name == "npu":
        try:
            import torch_npu  # noqa: F401
        except ImportError:
            raise InputError("--device npu: torch_npu is not installed; Ascend NPUs are timed through torch_npu") from None
        raise InputError("--device npu: profile-device does not time Ascend NPUs yet (it has cpu and cuda); profile "
                         "the links with parsim profile-comm and start from hardware_profiles/atlas-900-a2.yaml")
    raise InputError(f"--device {name}: choose one of {', '.join(BACKENDS)}")


@dataclass(frozen=True)
class Plan:
    """What one run measures."""

    gemms: tuple[GemmRow, ...]          # time_s 0: to measure
    convs: tuple[ConvRow, ...]
    copy_bytes: int
    repeats: int
    cut: int = 0                        # shapes left out to keep within the budget

    def calls(self) -> int:
        return (WARMUP + self.repeats) * (len(self.gemms) + 3 * len(self.convs) + 1 + LAUNCHES)

    def estimate_s(self, rate_flops_per_s: float, call_s: float, copy_bytes_per_s: float) -> float:
        """The time of the whole plan at a probe's GEMM rate and per-call time: every timed and
        warm-up call, each its FLOPs at that rate plus the call's own time."""
        per = WARMUP + self.repeats
        work = sum(g.flops for g in self.gemms) + sum(3 * c.flops for c in self.convs)
        return per * (work / rate_flops_per_s + 2 * self.copy_bytes / copy_bytes_per_s) + self.calls() * call_s


def plan(backend: str, quick: bool = False, repeats: int = 5) -> Plan:
    """The grid of ``backend`` (the quick one for tests), every GEMM in every dtype the backend
    measures."""
    ms, ns, ks = GRIDS["quick" if quick else backend]
    gemms = tuple(GemmRow(d, m, n, k, 0.0) for d in GEMM_DTYPES[backend] for m in ms for n in ns for k in ks)
    convs = tuple(ConvRow(GEMM_DTYPES[backend][0], *shape) for shape in CONVS["quick" if quick else backend])
    return Plan(gemms, convs, COPY_BYTES["quick" if quick else backend], repeats)


def within_budget(p: Plan, estimate_s, budget_s: float) -> Plan:
    """``p`` with its largest GEMMs left out until ``estimate_s(plan)`` is under ``budget_s``."""
    gemms = sorted(p.gemms, key=lambda g: g.flops)
    cut = replace(p, gemms=tuple(gemms))
    while estimate_s(cut) > budget_s and len(cut.gemms) > 1:
        cut = replace(cut, gemms=cut.gemms[:-1], cut=cut.cut + 1)
    return cut


def probe(backend: Backend) -> tuple[float, float, float]:
    """(GEMM FLOP rate, seconds per call, copy bytes/s) from one mid-size GEMM, a burst of
    one-element kernels and a 16 MiB copy: what the estimate extrapolates from."""
    n = 1024 if backend.name == "cpu" else 4096
    rate = 2.0 * n ** 3 / backend.time_s(backend.gemm_fn(n, n, n, GEMM_DTYPES[backend.name][0]), 1)
    call_s = backend.time_s(backend.launch_fn(), 1) / LAUNCHES
    nbytes = 16 << 20
    copy = 2 * nbytes / backend.time_s(backend.copy_fn(nbytes), 1)
    return rate, call_s, copy


def measure(backend: Backend, p: Plan, log=lambda line: None) -> Measurement:
    """Time every operation of ``p`` on ``backend``."""
    gemms = []
    for i, g in enumerate(p.gemms):
        gemms.append(replace(g, time_s=backend.time_s(backend.gemm_fn(g.m, g.n, g.k, g.dtype), p.repeats)))
        if (i + 1) % 20 == 0:
            log(f"  {i + 1} of {len(p.gemms)} GEMMs")
    convs = []
    for c in p.convs:
        fwd, data, weight = backend.conv_fns(c)
        convs.append(replace(c, fwd_s=backend.time_s(fwd, p.repeats), bwd_data_s=backend.time_s(data, p.repeats),
                             bwd_filter_s=backend.time_s(weight, p.repeats)))
    copy = 2 * p.copy_bytes / backend.time_s(backend.copy_fn(p.copy_bytes), p.repeats)   # read + write
    launch = backend.time_s(backend.launch_fn(), p.repeats) / LAUNCHES
    return Measurement(backend.info(), tuple(gemms), tuple(convs), copy, launch, backend.host_dispatch_s(p.repeats))


# ----------------------------------------------------------------------------- tables

GEMM_FIELDS = ("device", "dtype", "m", "n", "k", "time_us")
CONV_FIELDS = ("device", "dtype", "w", "h", "c", "n", "k", "s", "r", "pad_w", "pad_h", "stride_w", "stride_h",
               "fwd_us", "bwd_data_us", "bwd_filter_us", "fwd_algo")


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.4g}"          # 4 significant digits, as hardware_profiles/kernels/


def write_tables(folder: str, m: Measurement) -> None:
    """The measurement as DIR/gemm.csv, DIR/conv.csv and DIR/device.csv (written atomically)."""
    from parsim.fileio import write_text
    os.makedirs(folder, exist_ok=True)
    name = m.info.name
    gemm = [",".join(GEMM_FIELDS)] + [f"{name},{g.dtype},{g.m},{g.n},{g.k},{_us(g.time_s)}" for g in m.gemms]
    conv = [",".join(CONV_FIELDS)] + [
        f"{name},{c.dtype},{c.w},{c.h},{c.c},{c.n},{c.k},{c.s},{c.r},{c.pad},{c.pad},{c.stride},{c.stride},"
        f"{_us(c.fwd_s)},{_us(c.bwd_data_s)},{_us(c.bwd_filter_s)},torch" for c in m.convs]
    i = m.info
    dev = ["key,value", f"name,{i.name}", f"backend,{i.backend}", f"memory_bytes,{i.memory_bytes}",
           f"compute_units,{i.compute_units}", f"runtime_bytes,{i.runtime_bytes}",
           f"copy_gb_per_s,{m.copy_bytes_per_s / 1e9:.6g}", f"launch_us,{_us(m.launch_s)}",
           f"host_dispatch_us,{_us(m.host_dispatch_s)}"]
    for fname, lines in (("gemm.csv", gemm), ("conv.csv", conv), ("device.csv", dev)):
        write_text(os.path.join(folder, fname), "\n".join(lines) + "\n")


def _read(path: str) -> list[dict]:
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        raise InputError(f"{path}: cannot read the table ({e.strerror}); measure with parsim profile-device") from None


def _number(path: str, row: dict, key: str, kind=float):
    try:
        value = kind(row[key])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{path}: {key}: expected a number, got {row.get(key)!r}") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{path}: {key}: must be a finite number >= 0, got {value}")
    return value


def read_tables(folder: str) -> Measurement:
    """What write_tables wrote, read back (the profile is built from the tables, not from memory)."""
    dev_path = os.path.join(folder, "device.csv")
    dev = {r.get("key"): r.get("value") for r in _read(dev_path)}
    info = DeviceInfo(dev.get("name") or "", dev.get("backend") or "", int(_number(dev_path, dev, "memory_bytes")),
                      int(_number(dev_path, dev, "compute_units")), int(_number(dev_path, dev, "runtime_bytes")))
    gp = os.path.join(folder, "gemm.csv")
    gemms = tuple(GemmRow(r["dtype"], int(_number(gp, r, "m")), int(_number(gp, r, "n")), int(_number(gp, r, "k")),
                          _number(gp, r, "time_us") * 1e-6) for r in _read(gp))
    cp = os.path.join(folder, "conv.csv")
    convs = tuple(ConvRow(r["dtype"], *(int(_number(cp, r, f)) for f in ("n", "c", "h", "w", "k", "r", "s",
                                                                         "stride_h", "pad_h")),
                          *(_number(cp, r, f) * 1e-6 for f in ("fwd_us", "bwd_data_us", "bwd_filter_us")))
                  for r in _read(cp))
    if not gemms:
        raise InputError(f"{gp}: no GEMM rows; measure with parsim profile-device")
    return Measurement(info, gemms, convs, _number(dev_path, dev, "copy_gb_per_s") * 1e9,
                       _number(dev_path, dev, "launch_us") * 1e-6, _number(dev_path, dev, "host_dispatch_us") * 1e-6)
