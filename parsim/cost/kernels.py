"""Kernel-level compute time: a layer's time is the sum over the kernels it runs.

Each kernel (``parsim.model.graph.Kernel``, recorded by extraction with its shape affine in the
micro-batch) is priced on its own:

- a GEMM-shaped kernel (a matmul, or a convolution as implicit GEMM) by its own shape: its
  M x N output is cut into tiles, the tiles run in waves over the device's compute units, and the
  last wave's idle units and the tiles' padding are paid for (tile and wave quantization: NVIDIA,
  "Matrix Multiplication Background User's Guide", 2023); a short reduction K cannot fill the
  unit's pipeline, taken as efficiency K / (K + k_half), and few rows M cannot fill its register
  tile's rows, M / (M + m_half) (each phase's own M and K: a weight gradient's K is the
  batch-grown dimension, a forward's and a data gradient's M is); a small output with a long K is split
  over K (split-K); the best of the device's tile shapes is taken, as a library's heuristic
  would.  The rest is the device's fraction of peak for large GEMMs.  Roofline (Williams et al.
  2009): never faster than its bytes over the memory bandwidth.

      t = max(FLOPs / (rate * efficiency * shape_efficiency(M, N, K, g)), bytes / BW)
          + 2 * activation_bytes / BW     NCHW layout transposes, on an NHWC-only matrix engine
          + gemm_latency                  a GEMM kernel's fixed time (prologue, pipeline fill, epilogue)

  The device's numbers (efficiency, k_half, m_half, gemm_latency) are fitted to public per-kernel
  measurements (hardware_profiles/kernels/, ``parsim.profile.kernel_fit``);

- a memory-bound kernel (norms, activations, adds, copies) by its bytes read plus written:
  t = bytes / (BW * memory_efficiency), at its family's own fraction of the bandwidth where the
  device has one (``memory_family``: a batch norm's statistics and a max-pool's window compares
  run below the bandwidth a copy reaches, torch.profiler on this CPU: max_pool2d_with_indices
  12 ms and native_batch_norm 3.6 ms against clamp_min's 1.1 ms on the same 64 x 64 x 16 x 16
  tensor);
- every kernel adds ``launch_s`` on the device.  The framework's host time per kernel,
  ``host_dispatch_s``, overlaps the device's work on asynchronous devices (a layer takes the
  longer of the two) and adds to it on a synchronous one (CPU eager mode);
- every call of a layer (its forward, its backward, or each pass of a split backward) adds
  ``layer_call_s`` of host time the same way: a layer in a step runs cold, after the layers
  before it evicted its code and metadata from the caches.  Measured on this machine (AMD EPYC,
  torch 2.13, one thread, 2026-11-24, ``benchmarks/bench_layer_call.py``, 3 runs, forward at 2
  samples): ResNet-50's fc (2 kernels) takes 24 us in a hot loop and 100-106 us right after
  layer4.2's forward; the bottleneck layer1.1 (13 kernels) 471-473 us hot and 559-577 us after
  layer4.2.  Both pay 77-104 us more cold, so the cost is per layer call, not per kernel.
  ``parsim calibrate`` fits it (about 200 us on this machine's layer profiles, whose timed
  forward also runs a Python hook per saved tensor).

FP8 Linear GEMMs (kernel class ``fp8_matmul``, parsim.model.fp8) run on the numeric mode's FP8
engine: the same efficiency and shape model at the device's fp8 peak.

The engine of a GEMM comes from the numeric mode (``parsim.hardware.numerics.Engine``): its rate
(TF32 for fp32 convolutions on Ampere and later, Ascend's fp16 Cube, and so on), its large-GEMM
efficiency (matrix engine or vector units), and whether a convolution there pays the transposes of
NCHW activations into the NHWC its tensor cores take and back: every activation operand (the part
of its bytes that grows with the batch) is read and written once more.

A tensor-parallel layer (``Layer.tp_share`` < 1) runs the same kernels, each on its share of the
work: its compute and bytes are scaled by the share, its launch and dispatch costs are not.
(Quantization is taken at the unsharded shape: an approximation.)  A context-parallel layer
(``Layer.seq_share`` = 1/cp, parsim.cost.context) is scaled the same way: s/cp tokens of each
sequence.
"""

from __future__ import annotations

import math

from parsim.cost.conv_backend import SLOW2D, cpu_conv_backend, per_sample_dims, per_sample_rows, valid_tap_fraction
from parsim.hardware.device import Device, KernelExecution, log_interp
from parsim.hardware.numerics import Engine
from parsim.model.graph import Kernel, Layer

PHASES = {"F": ("F",), "B": ("I", "W"), "I": ("I",), "W": ("W",)}


def gemm_candidates(m: float, n: float, k: float, groups: float, ex: KernelExecution) -> list[tuple[float, float]]:
    """The (quant, split-K factor s) of each of the device's tile shapes and split-K factors (a small
    M x N output with a long K is split into s partial products summed after, as cuBLAS and CUTLASS
    do; CUTLASS docs, "Efficient GEMM": "Parallelized Reductions"):

        quant = M*N*g*s / (waves * units * tile_m * tile_n),  waves = ceil(tiles * s / units)

    Empty for an empty GEMM.  They do not depend on k_half or m_half, so a fit computes them once
    (parsim.profile.kernel_fit)."""
    out = []
    for tm, tn in ex.tiles:
        tiles = math.ceil(m / tm) * math.ceil(n / tn) * math.ceil(groups)
        if tiles == 0:
            return []
        s = 1
        while True:
            waves = math.ceil(tiles * s / ex.compute_units)
            out.append(((m * n * groups * s) / (waves * ex.compute_units * tm * tn), s))
            if tiles * s >= ex.compute_units or k / s < 2:
                break
            s *= 2
    return out


def k_fill(k: float, k_half: float) -> float:
    """The share of the matrix unit's pipeline a reduction of length k fills, k / (k + k_half)
    (1 on a device without a fitted k_half)."""
    return k / (k + k_half) if k_half else 1.0


def gemm_shape_efficiency(m: float, n: float, k: float, groups: float, ex: KernelExecution,
                          k_half: float | None = None) -> float:
    """Fraction of the device's large-GEMM rate a GEMM of this shape reaches: the best over the
    device's tile shapes and split-K factors s (``gemm_candidates``) of

        quant * fill,  fill = (K/s) / (K/s + k_half) * M / (M + m_half)

    ``k_half``: the reduction length at half efficiency, where not the device's (a CPU's oneDNN
    convolutions, ``KernelExecution.conv_k_half``)."""
    candidates = gemm_candidates(m, n, k, groups, ex)
    if not candidates:
        return 1.0
    m_fill = m / (m + ex.m_half) if ex.m_half else 1.0
    k_half = ex.k_half if k_half is None else k_half
    return max(q * k_fill(k / s, k_half) for q, s in candidates) * m_fill


# The head dimension at which a device's fused-attention efficiency is stated: its fitted
# attention_efficiency (GPU profiles, fitted on public rows whose models all have heads of 128) or,
# without one, its GEMM efficiency (Ascend profiles, calibrated on Llama rows, heads of 128).
REFERENCE_HEAD_DIM = 128


def attention_head_efficiency(head_dim: int, ex: KernelExecution) -> float:
    """Fused attention's rate at head dimension d against its rate at ``REFERENCE_HEAD_DIM``.

    Inside the kernel QK^T reduces over d: a short d cannot fill the matrix unit's pipeline, the
    GEMM shape model's ``k_fill`` (above) with the device's k_half; at d = 128 the rate is
    the device's attention efficiency, so

        f(d) = min(1, fill(d) / fill(128)),   fill(d) = d / (d + k_half)

    Heads of 128 or more are taken at the reference rate.  Checked against the FlashAttention-3
    paper's forward benchmark on H100 SXM5, BF16, at 16K tokens (Shah et al. 2024, arXiv
    2407.08608, Fig. 5, as transcribed from the figure): head dim 64 against 128 runs at 497/648 =
    0.77 (no mask) and 473/616 = 0.77 (causal) for FlashAttention-3, 413/595 = 0.69 and 388/539 =
    0.72 for cuDNN, 324/370 = 0.88 and 299/335 = 0.89 for FlashAttention-2; f(64) is 0.73 at
    dgx-h100's k_half (72.5) and 0.84 at dgx-a100's (29.5).  Head dim 256 runs 642/616 = 1.04 of
    128 for FlashAttention-3 (causal), not the 1.22 fill(256)/fill(128) would give, hence the cap.
    CPU profiles (torch's flash attention for CPU: blocked GEMMs in its own loops, whose cost the
    profile's measured tables hold) take 1.

    A kernel whose per-score work beside the matrix unit does not shrink with d (the softmax on
    Ascend's Vector cores: FlashAttention there runs QK^T on the Cube, softmax on the Vector, PV
    on the Cube, the rescale on the Vector, a four-stage cross-core pipeline, pto-isa's
    kernels/manual/common/flash_atten for A2/A3) has its own half-rate length: a time per score
    of d + k', not d + k_half.  The profile states it as ``attention_head_fill`` u = fill(128) =
    128 / (128 + k'), which the step time is linear in (what the public fit needs of a parameter,
    parsim.profile.loso): with fill(d) = d / (d + k'),

        f(d) = d / (d u + 128 (1 - u))

    u = 1 prices every head at the reference rate; u -> 0 a kernel whose time per score does not
    depend on d (f(64) -> 1/2).  No public benchmark of the NPU's FlashAttentionScore by head
    dimension exists; the 910B's u is fitted on the public rows whose heads are 64, from a prior
    of 0.58 (f(64) = 0.71) that pto-isa's cost model of its own FlashAttention kernel for A2/A3
    gives (results/published/fit.yaml, attention-head-910b)."""
    if not head_dim or head_dim >= REFERENCE_HEAD_DIM or ex.cpu_threads:
        return 1.0
    u = ex.attention_head_fill
    if u is not None:
        return head_dim / (head_dim * u + REFERENCE_HEAD_DIM * (1 - u))
    return k_fill(head_dim, ex.k_half) / k_fill(REFERENCE_HEAD_DIM, ex.k_half)


def memory_family(op: str) -> str:
    """A memory-bound aten operator's family: "norm" (batch, layer, group norms), "pool" (max and
    average pooling), each with "_backward" for its gradient kernel, else "elementwise"."""
    family = "norm" if "norm" in op else "pool" if "pool" in op else "elementwise"
    if family != "elementwise" and op.endswith("_backward"):
        family += "_backward"
    return family


def kernel_time_s(kernel: Kernel, b: int, device: Device, engines: dict[str, Engine], share: float = 1.0,
                  shapes: dict | None = None) -> float:
    """Device time of one kernel at micro-batch b, its launch included.  ``shapes``: a caller's
    memo of gemm_shape_efficiency on ``device``, by the GEMM's (M, N, K, groups) (DeepSeek-V3's
    search prices 62,179 GEMMs of 2,844 shapes)."""
    ex = device.kernels
    flops, nbytes = kernel.at(b)
    if kernel.klass == "mem" or flops <= 0:
        return share * nbytes / _bandwidth_bytes_per_s(kernel, device, True) + ex.launch_s
    bw = device.achieved_bandwidth_bytes_per_s()
    t_mem = share * nbytes / bw
    engine = engines[kernel.klass]
    rate = _rate_flops_per_s(kernel, engine, ex)
    dims = kernel.gemm_at(b)
    if ex.cpu_threads and kernel.conv is not None and dims is not None:
        return _cpu_conv_time_s(kernel, b, dims, device, engine, share, t_mem) + ex.launch_s
    if dims is not None:
        t_mem = share * nbytes / _bandwidth_bytes_per_s(kernel, device, False)
        eff = None if shapes is None else shapes.get(dims)
        if eff is None:
            eff = gemm_shape_efficiency(*dims, ex)
            if shapes is not None:
                shapes[dims] = eff
        rate *= eff
    t = max(share * flops / rate, t_mem)
    if engine.nchw_transposes:
        t += 2 * share * kernel.bytes[1] * b / bw
    if dims is not None:
        t += ex.gemm_latency_s
    return t + ex.launch_s


def _bandwidth_bytes_per_s(kernel: Kernel, device: Device, memory_bound: bool) -> float:
    """The bandwidth a kernel's bytes are priced at (kernel_time_s, kernel_floor_terms): a
    memory-bound kernel's family's share of the peak where the device has one (memory_family), a
    GEMM's tables' own floor where the device has one (KernelExecution.gemm_memory_efficiency),
    else the achieved bandwidth."""
    ex = device.kernels
    if memory_bound:
        family = dict(ex.memory_family_efficiency).get(memory_family(kernel.op))
        if family is not None:
            return device.memory_bandwidth_bytes_per_s * family
    elif kernel.gemm and ex.gemm_memory_efficiency:
        return device.memory_bandwidth_bytes_per_s * ex.gemm_memory_efficiency
    return device.achieved_bandwidth_bytes_per_s()


def _rate_flops_per_s(kernel: Kernel, engine: Engine, ex: KernelExecution) -> float:
    """A compute kernel's rate before its GEMM shape (kernel_time_s, kernel_floor_terms): its
    engine's large-GEMM rate, at fused attention's head-dimension factor."""
    rate = engine.rate_flops_per_s * engine.efficiency
    if kernel.head_dim:
        rate *= attention_head_efficiency(kernel.head_dim, ex)
    return rate


def kernel_floor_terms(kernel: Kernel, device: Device, engines: dict[str, Engine],
                       share: float = 1.0) -> tuple[float, float, float, float, float]:
    """(a0, a1, m0, m1, c) such that kernel_time_s(kernel, b, device, engines, share) is at least

        max(a0 + a1 b, m0 + m1 b) + c

    at every micro-batch b >= 1: its compute at the engine's large-GEMM rate (the shape
    efficiency at its ceiling: gemm_shape_efficiency and attention_head_efficiency are at most
    1), its bytes over the bandwidth it is priced at, and its fixed times; the NCHW transposes,
    which only add, left out, and a CPU convolution (parsim.cost.conv_backend's paths, whose
    rates are measured tables) floored by its bytes alone, as each of its paths is.  Affine in b,
    so the planner bounds a candidate at any size before pricing it (parsim.sim.prices.Prices.
    layer_floors)."""
    ex = device.kernels
    (f0, f1), (n0, n1) = kernel.flops, kernel.bytes
    if kernel.klass == "mem" or (f0 <= 0 and f1 <= 0):
        bw = _bandwidth_bytes_per_s(kernel, device, True)
        return 0.0, 0.0, share * n0 / bw, share * n1 / bw, ex.launch_s
    if f0 < 0 or f1 < 0:                     # FLOPs of either sign: priced either way; floored by launch
        return 0.0, 0.0, 0.0, 0.0, ex.launch_s
    if ex.cpu_threads and kernel.conv is not None and kernel.gemm:
        bw = device.achieved_bandwidth_bytes_per_s()
        return 0.0, 0.0, share * n0 / bw, share * n1 / bw, ex.launch_s
    rate = _rate_flops_per_s(kernel, engines[kernel.klass], ex)
    bw = _bandwidth_bytes_per_s(kernel, device, False)
    c = ex.launch_s + (ex.gemm_latency_s if kernel.gemm else 0.0)
    return share * f0 / rate, share * f1 / rate, share * n0 / bw, share * n1 / bw, c


def layer_floor_terms(layer: Layer, kind: str, device: Device, engines: dict[str, Engine],
                      memo: dict | None = None) -> tuple[float, float, tuple, float]:
    """What layer_kernels_time_s of ``layer``'s phase ``kind`` is at least, at any b, as (p0, p1,
    crossing, host_s): its kernels' floors (kernel_floor_terms) summed, p0 + p1 b + the sum over
    ``crossing`` ((a0, a1, m0, m1) of each kernel whose compute and bytes terms cross at some
    b >= 1) of max(a0 + a1 b, m0 + m1 b), each other kernel's larger term (the one at least the
    other at every b >= 1) and every fixed time folded into p0 and p1; taken with the host's
    time ``host_s`` as max(kernels, host) on an asynchronous device and added on a synchronous
    one.  Where the layer recomputes (a backward phase of Layer.recompute_bytes), its recomputed
    forward's kernels (its recompute_part's, else its own) count too, their host time left out
    (max(a + a', h) <= max(a, h) + max(a', h')).  A layer without kernels: nothing (the roofline's
    times are not floored).  ``memo``: a caller's table of kernel_floor_terms by (kernel id,
    share), whose kernels the caller keeps alive."""
    phases = PHASES[kind]
    share = layer.tp_share * layer.seq_share
    kernels = [(k, share) for k in layer.kernels if k.phase in phases]
    host_s = len(kernels) * device.kernels.host_dispatch_s + (device.kernels.layer_call_s if kernels else 0.0)
    if layer.recompute_bytes and kind in ("B", "I"):
        part = layer.recompute_part if layer.recompute_part is not None else layer
        kernels += [(k, part.tp_share * part.seq_share) for k in part.kernels if k.phase == "F"]
    p0 = p1 = 0.0
    crossing = []
    for k, sh in kernels:
        terms = None if memo is None else memo.get((id(k), sh))
        if terms is None:
            terms = kernel_floor_terms(k, device, engines, sh)
            if memo is not None:
                memo[(id(k), sh)] = terms
        a0, a1, m0, m1, c = terms
        p0 += c
        if a1 >= m1 and a0 + a1 >= m0 + m1:         # compute at least bytes from b = 1 on
            p0, p1 = p0 + a0, p1 + a1
        elif m1 >= a1 and m0 + m1 >= a0 + a1:
            p0, p1 = p0 + m0, p1 + m1
        else:
            crossing.append((a0, a1, m0, m1))
    return p0, p1, tuple(crossing), host_s


def _cpu_conv_time_s(kernel: Kernel, b: int, dims, device: Device, engine: Engine, share: float,
                     t_mem: float) -> float:
    """A convolution in torch eager on a CPU, where torch sends it (parsim.cost.conv_backend):

    - slow_conv2d: b GEMMs of one sample each, at the device's per-sample GEMM efficiency for
      their rows (MKL's sgemm runs a 4-column product at a few percent of peak, a 64-column one
      near it), or as any GEMM of that shape when the device has no such table;
    - oneDNN: one call over the batch whose kernels block the rows of one image at a time (a
      direct convolution walks each image's output positions; oneDNN's ``jit`` and ``jit_1x1``
      implementations), so the shape efficiency is taken at one sample's GEMM (with oneDNN's own
      ``conv_k_half`` where the device has one: a weight gradient's K is one image's Ho*Wo, and
      its kernels are not the matmul library's), and only the
      window taps inside the input are computed (``valid_tap_fraction``); the call also
      reorders the weights between torch's layout and oneDNN's blocked one into a freshly
      allocated buffer, ``weight_touch_bytes_per_s`` (ONEDNN_VERBOSE lists a weight reorder beside
      every convolution of an NCHW model), and a backward call reorders them into the
      backward-data layout and their gradient back into torch's, at
      ``backward_weight_touch_bytes_per_s`` (ONEDNN_VERBOSE on this machine, layer4's block at 64
      samples: 11.9 ms of gradient reorders and 4.0 ms of weight reorders for 17.8 MB of weights,
      against 5.0 ms of reorders in the forward).  Its weight bytes are split evenly between
      the data-gradient (I) and weight-gradient (W) kernels, as extraction splits them.
    """
    ex = device.kernels
    flops = share * kernel.at(b)[0]
    groups = max(1, round(dims[3]))
    one = per_sample_dims(kernel)
    if cpu_conv_backend(kernel.conv, groups, b, ex.cpu_threads) == SLOW2D:
        eff = (log_interp(ex.per_sample_gemm_efficiency, per_sample_rows(kernel)) if ex.per_sample_gemm_efficiency
               else engine.efficiency * gemm_shape_efficiency(*one, ex))
        return max(flops / (engine.rate_flops_per_s * eff), t_mem)
    flops *= valid_tap_fraction(kernel.conv)
    shape = gemm_shape_efficiency(*one, ex, ex.conv_k_half or ex.k_half)
    t = max(flops / (engine.rate_flops_per_s * engine.efficiency * shape), t_mem)
    rate = ex.weight_touch_bytes_per_s
    if kernel.phase != "F" and ex.backward_weight_touch_bytes_per_s:
        rate = ex.backward_weight_touch_bytes_per_s
    if rate:
        t += share * kernel.bytes[0] / rate
    return t


def layer_kernels_time_s(layer: Layer, kind: str, b: int, device: Device, engines: dict[str, Engine],
                         times=None) -> float:
    """The layer's kind (F, B, I or W) at micro-batch b: the sum over its kernels of that phase,
    with the host's dispatch and the layer's call overlapped (asynchronous devices) or added
    (synchronous ones).  A kind with no kernels (W of a layer without parameters) costs nothing.
    ``times(kernels, share)``: each kernel's kernel_time_s at b on ``device``, in order (a caller's
    memo of them), else kernel_time_s itself."""
    phases = PHASES[kind]
    kernels = [k for k in layer.kernels if k.phase in phases]
    share = layer.tp_share * layer.seq_share
    if times is None:
        def times(ks, s):
            return [kernel_time_s(k, b, device, engines, s) for k in ks]
    device_s = sum(times(kernels, share))
    host_s = len(kernels) * device.kernels.host_dispatch_s + (device.kernels.layer_call_s if kernels else 0.0)
    return max(device_s, host_s) if device.kernels.asynchronous else device_s + host_s


def kernel_counts(layer: Layer) -> dict[str, int]:
    """Kernels per phase (F, I, W): what a deep pipeline or a small micro-batch pays launches for."""
    counts = {"F": 0, "I": 0, "W": 0}
    for k in layer.kernels:
        counts[k.phase] += 1
    return counts
