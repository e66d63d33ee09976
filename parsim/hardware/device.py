"""One accelerator: peak FLOP/s per dtype, memory, and achievable efficiency.

Efficiency follows Calculon's habit (calculon/processor.py): a table of (work size, fraction of
peak) points, interpolated linearly in log10(work size) and held flat outside the table.

Memory: of the device's raw capacity, a training process's tensors get only what the runtime
context and the collective library leave, less what its allocator loses to fragmentation
(``MemoryReserve``, ``Device.usable_memory_bytes``, the one place that rule lives).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass


def log_interp(points: tuple[tuple[float, float], ...], x: float) -> float:
    """The (size, value) table at size x: linear in log10(size), flat outside the table."""
    xs, ys = tuple(math.log10(max(w, 1.0)) for w, _ in points), tuple(e for _, e in points)
    lx = math.log10(max(x, 1.0))
    if lx <= xs[0]:
        return ys[0]
    if lx >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_right(xs, lx)
    t = (lx - xs[i - 1]) / (xs[i] - xs[i - 1])
    return ys[i - 1] + t * (ys[i] - ys[i - 1])


# training.attention_kernel (parsim.model.spec.ATTENTION_KERNELS) -> the KernelExecution field
# its efficiency is read from: one table for the pricing (parsim.hardware.numerics.engines) and
# the end-to-end fit's choice of the rows a field prices (parsim.profile.loso)
ATTENTION_KERNEL_FIELDS = {"fa2": "attention_efficiency_fa2", "triton": "attention_efficiency_triton"}


@dataclass(frozen=True)
class KernelExecution:
    """How a device runs one kernel, for the kernel-level cost model (parsim.cost.kernels).

    A GEMM of M x N output in tiles of one of ``tiles`` runs in waves of ``compute_units`` tiles at a time
    (tile and wave quantization: NVIDIA, "Matrix Multiplication Background User's Guide", 2023);
    a short reduction dimension K cannot fill the unit's pipeline (efficiency K / (K + k_half));
    every kernel costs ``launch_s`` on the device, and ``host_dispatch_s`` of framework time on the
    host, which an asynchronous device (CUDA streams, Ascend task queues) overlaps with its work.
    """

    compute_units: int = 1                # SMs, AI cores, or CPU cores per rank
    tiles: tuple[tuple[int, int], ...] = ((1, 1),)   # output tiles (rows, columns) a library chooses among
    gemm_efficiency: float = 1.0          # fraction of peak a large, well-shaped GEMM reaches
    # fraction of peak a large convolution reaches on the matrix engine (cuDNN's implicit-GEMM
    # kernels are not cuBLAS's: one number cannot price both a CNN and a transformer); None:
    # gemm_efficiency.  Fitted end to end by `parsim calibrate --published` (the profile says on what)
    conv_efficiency: float | None = None
    # ... and on the vector units (fp32 convolutions on CUDA cores, Volta's only fp32 path); None:
    # vector_gemm_efficiency
    vector_conv_efficiency: float | None = None
    # fraction of the dtype's peak the fused attention kernel (FlashAttention, cuDNN's fused
    # attention: parsim.model.attention) reaches over its forward and backward FLOPs, the device's
    # production kernel (FlashAttention-2 on Ampere; on Hopper cuDNN's, FlashAttention-3's
    # generation); ``attention_efficiency_fa2``: FlashAttention-2's where it differs (Hopper), for
    # training.attention_kernel: fa2; ``attention_efficiency_triton``: FlashAttention in Triton's,
    # for training.attention_kernel: triton.  None: gemm_efficiency (the kernel-specific ones: the
    # device's production kernel's).  Fitted end to end (results/published/fit.yaml)
    attention_efficiency: float | None = None
    attention_efficiency_fa2: float | None = None
    attention_efficiency_triton: float | None = None
    # fused attention's fill at heads of 128 (parsim.cost.kernels.REFERENCE_HEAD_DIM): the share of
    # its rate at long heads that heads of 128 reach, which sets how much slower shorter heads run
    # (parsim.cost.kernels.attention_head_efficiency).  None: the GEMM's, k_fill(128, k_half).
    # Fitted end to end where a device's kernel differs (results/published/fit.yaml)
    attention_head_fill: float | None = None
    # FP8 GEMMs' fraction of the fp8 peak (Transformer Engine's, scaling and casts included); None:
    # gemm_efficiency.  Fitted end to end (results/published/fit.yaml)
    fp8_gemm_efficiency: float | None = None
    k_half: float = 0.0                   # reduction length at which a GEMM runs at half that
    m_half: float = 0.0                   # rows (M) at which a GEMM runs at half that; 0: rows never limit
    launch_s: float = 0.0                 # device time per kernel (launch gap; eager dispatch on CPU)
    # a GEMM kernel's own fixed time beyond its work (prologue, pipeline fill, epilogue): the
    # intercept of measured GEMM kernel times (parsim.profile.kernel_fit)
    gemm_latency_s: float = 0.0
    host_dispatch_s: float = 0.0          # host time per kernel (framework and launch API)
    # host time per call of a layer (a forward, a backward, or each of a split backward's two
    # passes) beyond its kernels': the layer starts cold, its code and metadata evicted by the
    # layers before it (parsim.cost.kernels, layer_kernels_time_s); fitted by parsim calibrate
    layer_call_s: float = 0.0
    asynchronous: bool = False            # host enqueues ahead of the device
    # fp32 GEMMs on the vector units (CUDA cores) of a device that also has a matrix engine reach
    # their own fraction of the fp32 peak; None: gemm_efficiency (parsim.hardware.numerics)
    vector_gemm_efficiency: float | None = None
    nhwc_matrix_engine: bool = False      # matrix-engine convolutions take NHWC: NCHW is transposed around each
    # torch eager on a CPU with this many intra-op threads (0: not a CPU).  A convolution then runs
    # where torch sends it (parsim.cost.conv_backend): oneDNN, which reorders its weights into a
    # fresh buffer every call, or a loop of one GEMM per sample (slow_conv2d).
    cpu_threads: int = 0
    # slow_conv2d's per-sample GEMMs: (rows per sample, fraction of peak) points, interpolated in
    # log(rows) and flat outside; () prices them as any GEMM of their shape
    per_sample_gemm_efficiency: tuple[tuple[float, float], ...] = ()
    # oneDNN's convolution kernels' own k_half (a weight gradient's K there is one image's Ho*Wo;
    # matmuls go to another library's kernels); 0: k_half
    conv_k_half: float = 0.0
    weight_touch_bytes_per_s: float = 0.0     # oneDNN's weight reorders per forward call; 0: not priced
    # ... and per backward call (weights into the backward-data layout, their gradient back to
    # torch's); 0: at weight_touch_bytes_per_s
    backward_weight_touch_bytes_per_s: float = 0.0
    # Memory-bound kernels by family (parsim.cost.kernels.memory_family: "norm", "norm_backward",
    # "pool", "pool_backward"): (family, fraction of the memory bandwidth) pairs; a family not listed
    # runs at the device's memory_efficiency.  Above 1 where the tensors stay in cache.
    memory_family_efficiency: tuple[tuple[str, float], ...] = ()
    # The GEMMs' memory floor (operands and result streamed once: parsim.cost.kernels.kernel_time_s)
    # as a share of the memory bandwidth, where the GEMM tables' fit takes it apart from the device's
    # memory_efficiency, which the end-to-end fit sets for the memory-bound kernels; None: that one
    gemm_memory_efficiency: float | None = None


@dataclass(frozen=True)
class MemoryReserve:
    """Device memory a training process cannot give to its tensors (a profile's ``memory_reserved``).

    The runtime context (CUDA context, CANN runtime) and the collective library's communicator
    buffers (NCCL, HCCL) are allocated outside the framework's caching allocator, so they come off
    the top; what is left is the allocator's pool, of which ``fragmentation_fraction`` is lost at
    the peak: 1 - max allocated / max reserved, what ``parsim run`` measures on CUDA."""

    runtime_context_bytes: int = 0
    collective_buffers_bytes: int = 0
    fragmentation_fraction: float = 0.0

    def usable_bytes(self, capacity_bytes: float) -> float:
        """usable = (capacity - runtime context - collective buffers) x (1 - fragmentation)."""
        pool = capacity_bytes - self.runtime_context_bytes - self.collective_buffers_bytes
        return pool * (1.0 - self.fragmentation_fraction)


@dataclass(frozen=True)
class Device:
    name: str
    peak_flops_per_s: tuple[tuple[str, float], ...]       # (dtype, FLOP/s), e.g. ("fp16", 3.12e14)
    memory_bytes: int
    memory_bandwidth_bytes_per_s: float
    efficiency: tuple[tuple[float, float], ...] = ((1.0, 1.0),)  # (work_flops, fraction of peak)
    memory_efficiency: float = 1.0                         # fraction of memory bandwidth reached
    kernels: KernelExecution | None = None                 # None: layers priced whole (roofline)
    # Ascend's Cube computes in fp16: under CANN's allow_fp32_to_fp16, fp32 GEMMs run there
    # (parsim.hardware.numerics).
    fp16_cube: bool = False
    reserve: MemoryReserve = MemoryReserve()              # nothing reserved unless the profile says

    @property
    def usable_memory_bytes(self) -> float:
        """What the planner and the simulator's reports hold a plan's peak to (MemoryReserve)."""
        return self.reserve.usable_bytes(self.memory_bytes)

    def memory_cap_bytes(self, max_memory_bytes: int | None = None) -> float:
        """The bound a plan's peak memory must keep: an explicit cap (``--max-memory``) as given,
        up to the raw capacity; else the usable memory."""
        if max_memory_bytes:
            return float(min(self.memory_bytes, max_memory_bytes))
        return self.usable_memory_bytes

    def has_rate(self, dtype: str) -> bool:
        return dtype in dict(self.peak_flops_per_s)

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s of ``dtype``'s engine.  A dtype the profile does not list raises: bf16 on a
        device without bf16 units (V100, Ascend 910) is a user error (parsim.hardware.numerics
        says so with what to change), never a silent fallback."""
        table = dict(self.peak_flops_per_s)
        if dtype not in table:
            raise KeyError(f"{self.name} has no {dtype} rate (peak_tflops lists {', '.join(table)})")
        return table[dtype]

    def compute_efficiency(self, work_flops: float) -> float:
        return log_interp(self.efficiency, work_flops)

    def achieved_bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_bytes_per_s * self.memory_efficiency
