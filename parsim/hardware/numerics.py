"""Numeric modes: which engine, at which peak rate, runs a kernel of a given class.

Facts about a device (its peak table: whether it has TF32 or bf16 units; whether its matrix
engine is an fp16 Cube) meet the training's settings (the dtype, torch's TF32 switches, CANN's
precision mode).  Resolved once per cost model, never tested in ``if`` chains elsewhere.

- Mixed precision (fp16, bf16): GEMMs run at that dtype's rate.  bf16 on a device with 16-bit
  units but no bf16 ones (V100: Volta has fp16 tensor cores only, V100 datasheet; Ascend 910: fp16
  Cube, Huawei Ascend 910 product page) is an error that says to use fp16.  A profile that lists
  no 16-bit rate at all (a CPU's, which lists the fp32 rate profile-comm measured) prices 16-bit
  GEMMs at its fp32 rate: a stated fallback, until a 16-bit rate is measured.
- fp32 on NVIDIA Ampere and later: convolutions run on TF32 tensor cores when
  ``torch.backends.cudnn.allow_tf32`` (default True), matmuls when
  ``torch.backends.cuda.matmul.allow_tf32`` (default False since torch 1.12); torch docs, "CUDA
  semantics: TensorFloat-32 (TF32) on Ampere (and later) devices".  Devices whose profile lists
  no ``tf32`` rate run fp32.
- fp32 on Ascend: under CANN's ``allow_fp32_to_fp16`` precision mode, convolutions and matmuls
  run on the fp16 Cube (CANN docs, "precision_mode"); ``must_keep_origin_dtype`` keeps fp32.
- Memory-bound kernels move the bytes the graph was extracted with; no engine choice.
- FP8 (``training.fp8``, beside bf16; parsim.model.fp8): the Linear layers' GEMMs (kernel class
  ``fp8_matmul``) run at the device's ``fp8`` peak with the same large-GEMM efficiency and shape
  model as any tensor-core GEMM, so such a GEMM's compute time is its bf16 time x bf16 peak /
  fp8 peak.  A device whose profile lists no ``fp8`` rate (A100, V100, Ascend 910: no FP8 units)
  is an error naming the device and the field.

An ``Engine`` also carries what the kernel model needs beyond the peak:

- its large-GEMM efficiency (a convolution's: ``kernels.conv_efficiency`` on the matrix engine,
  ``kernels.vector_conv_efficiency`` on the vector units, where the profile has them).  A device
  with a matrix engine (tensor cores, the Cube) runs fp32 GEMMs on its vector units when no TF32
  or fp16 path is taken; those reach a different fraction of their own peak
  (``kernels.vector_gemm_efficiency``) than the matrix engine does
  (``kernels.gemm_efficiency``).  A device with one engine (a CPU profile) has one efficiency.
- whether a convolution pays layout transposes.  NVIDIA's tensor cores take NHWC; torch's default
  memory format is NCHW (contiguous), and cuDNN then transposes the activations into NHWC and
  back around each tensor-core convolution (NVIDIA, "Convolutional Layers User's Guide",
  "Tensor Layouts In Memory: NCHW vs NHWC", 2023).  ``training.memory_format: channels_last``
  avoids them.  CUDA-core (vector) convolutions run NCHW natively.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from parsim.errors import InputError
from parsim.hardware.device import ATTENTION_KERNEL_FIELDS, Device

GEMM_CLASSES = ("conv", "matmul", "attention")
FP8_KLASS = "fp8_matmul"                 # parsim.model.fp8's Linear GEMMs


@dataclass(frozen=True)
class MathMode:
    dtype: str = "fp32"                  # the training dtype: fp32, or fp16/bf16 mixed precision
    tf32_conv: bool = True
    tf32_matmul: bool = False
    ascend_precision_mode: str = "allow_fp32_to_fp16"
    channels_last: bool = False          # torch.channels_last activations (NHWC); torch's default is NCHW
    fp8: bool = False                    # Linear GEMMs in FP8 (Transformer Engine), the rest in ``dtype`` (bf16)
    attention_kernel: str = ""           # "fa2", "triton": that kernel (training.attention_kernel); "": the device's


@dataclass(frozen=True)
class Engine:
    """The engine that runs one kernel class's GEMMs under a numeric mode."""

    dtype: str                           # the peak-table key (fp16, bf16, tf32, fp32)
    rate_flops_per_s: float              # its peak
    efficiency: float                    # fraction of that peak a large, well-shaped GEMM reaches
    nchw_transposes: bool = False        # a convolution here transposes NCHW activations to NHWC and back


def engine_dtype(device: Device, mode: MathMode, klass: str) -> str:
    """The peak-table key whose rate runs a ``klass`` kernel ("conv", "matmul", "attention")."""
    if mode.dtype in ("fp16", "bf16"):
        if not any(device.has_rate(d) for d in ("fp16", "bf16")):
            return "fp32"          # a profile with no 16-bit engine (CPU): the stated fallback
        if not device.has_rate(mode.dtype):
            hint = "use dtype: fp16" if mode.dtype == "bf16" and device.has_rate("fp16") else "use dtype: fp32"
            raise InputError(f"training.dtype: {mode.dtype}: {device.name} has no {mode.dtype} units "
                             f"(its peak_tflops list {', '.join(k for k, _ in device.peak_flops_per_s)}); {hint}")
        return mode.dtype
    if device.has_rate("tf32") and (mode.tf32_conv if klass == "conv" else mode.tf32_matmul):
        return "tf32"
    if device.fp16_cube and mode.ascend_precision_mode == "allow_fp32_to_fp16" and device.has_rate("fp16"):
        return "fp16"
    return "fp32"


def engines(device: Device, mode: MathMode) -> dict[str, Engine]:
    """The engine of each GEMM kernel class ("conv", "matmul", "attention"), resolved once."""
    if mode.fp8:          # first: on a device without FP8 that is the thing to change
        if mode.dtype != "bf16":
            raise InputError(f"training.fp8: FP8 GEMMs run beside bf16 (Transformer Engine), not {mode.dtype}; "
                             "set training.dtype: bf16")
        if not device.has_rate("fp8"):
            raise InputError(f"training.fp8: {device.name} has no FP8 units (its profile's device.peak_tflops has no "
                             f"fp8, only {', '.join(k for k, _ in device.peak_flops_per_s)}); set training.fp8: false "
                             "or use a device with FP8 (dgx-h100)")
    ex = device.kernels
    matrix_engine = any(device.has_rate(d) for d in ("fp16", "bf16", "tf32"))
    out = {}
    for klass in GEMM_CLASSES:
        dtype = engine_dtype(device, mode, klass)
        vector = dtype == "fp32" and matrix_engine          # fp32 on CUDA cores / the Vector unit
        eff = 1.0
        if ex is not None:
            eff = ex.vector_gemm_efficiency if vector and ex.vector_gemm_efficiency is not None else ex.gemm_efficiency
            conv = ex.vector_conv_efficiency if vector else ex.conv_efficiency
            if klass == "conv" and conv is not None:
                eff = conv
            if klass == "attention" and not vector:
                field = ATTENTION_KERNEL_FIELDS.get(mode.attention_kernel)
                eff = (getattr(ex, field) if field else None) or ex.attention_efficiency or eff
        transposes = (ex is not None and ex.nhwc_matrix_engine and not vector and klass == "conv"
                      and not mode.channels_last)
        out[klass] = Engine(dtype, device.peak(dtype), eff, transposes)
    if mode.fp8:
        out[FP8_KLASS] = replace(out["matmul"], dtype="fp8", rate_flops_per_s=device.peak("fp8"),
                                 efficiency=(ex.fp8_gemm_efficiency if ex is not None and ex.fp8_gemm_efficiency
                                             else out["matmul"].efficiency))
    return out
