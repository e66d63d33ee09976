"""Which library runs a convolution in torch eager mode on a CPU, and the GEMMs it then runs.

torch picks a backend per call (aten/src/ATen/native/Convolution.cpp, ``ConvParams::use_mkldnn``,
torch 2.x).  An fp32 convolution on CPU goes to oneDNN (mkldnn) when

    not transposed
    and (strided or dilated or batch >= 16 or the window is not 1x1 or threads > 1)
        -- "For 1x1 filters, MKLDNN is faster than THNN when multi-threaded, but THNN is faster
           when single-threaded"
    and (groups > 1 or (kh > 3 and kw > 3) or batch > 1 or batch * C_in*H*W > 20480)

else to ``slow_conv2d`` (aten/src/ATen/native/ConvolutionMM2d.cpp), which loops over the samples
and runs one BLAS GEMM each (MKL's sgemm on x86 builds).  ``tests/test_conv_backend.py`` checks
this rule against torch's own ``torch._C._select_conv_backend``.

So a 1x1 convolution at a micro-batch under 16, one thread per process, is b GEMMs of one
sample's rows each: on ResNet-50's 2x2 maps (layer3) four rows, which MKL runs at a few percent of
peak, while the same convolution at 16 samples runs in oneDNN near peak.  That is the step in a
CPU profile between micro-batch 8 and 16.

oneDNN's direct convolutions (``jit:avx512_core``, ``jit_1x1``) compute only the window taps that
fall inside the input: their JIT kernels clip each output position's filter rows and columns at
the input's borders (oneDNN src/cpu/x64/jit_avx512_common_conv_kernel.cpp, the top/bottom and
left/right overflow bounds of the window loops; read from the design, not confirmed line by line
here), whereas FlopCounterMode counts every tap, padding included.  On small maps that is most of
the work: a 3x3 convolution with padding 1 on a 1x1 map (ResNet-50's layer4 at 32x32) runs one tap
of nine.  Measured on this machine (torch 2.13, ``ONEDNN_VERBOSE=1``, one thread, layer4's 3x3 at
64 samples): 302 MFLOP as counted in 1.47 ms, 205 GFLOP/s, twice the core's 93 GFLOP/s peak, which
only the skipped taps explain.  ``valid_tap_fraction`` is the share of counted taps that are
computed.  slow_conv2d's im2col copies the zeros and multiplies them: all taps.
"""

from __future__ import annotations

from parsim.model.graph import ConvWindow, Kernel

ONEDNN = "onednn"
SLOW2D = "slow2d"


def cpu_conv_backend(window: ConvWindow, groups: int, batch: int, threads: int) -> str:
    """ONEDNN or SLOW2D for an fp32 convolution of ``batch`` samples (module docstring)."""
    if window.transposed:
        return SLOW2D
    strided = any(s != 1 for s in window.stride)
    dilated = any(d != 1 for d in window.dilation)
    kh, kw = window.kernel[-2], window.kernel[-1]
    not_thnn_1x1 = strided or dilated or batch >= 16 or kh != 1 or kw != 1 or threads > 1
    big_enough = groups > 1 or (kh > 3 and kw > 3) or batch > 1 or batch * window.input_elements > 20480
    return ONEDNN if not_thnn_1x1 and big_enough else SLOW2D


def valid_tap_fraction(window: ConvWindow) -> float:
    """Share of the window taps FlopCounterMode counts that fall inside the input (the rest lie
    in the zero padding, which a direct convolution skips; module docstring).  Per spatial
    dimension of input size H, window k, stride s, padding p, dilation d and Ho outputs:

        sum over outputs o of #{j < k : 0 <= o*s - p + j*d < H}  /  (Ho * k)

    and the product over the dimensions.  1 when the window's padding or input size is unknown."""
    if not window.padding or not window.input_hw:
        return 1.0
    frac = 1.0
    for h, k, s, p, d in zip(window.input_hw, window.kernel, window.stride, window.padding, window.dilation):
        ho = (h + 2 * p - d * (k - 1) - 1) // s + 1
        if ho <= 0:
            return 1.0
        inside = sum(1 for o in range(ho) for j in range(k) if 0 <= o * s - p + j * d < h)
        frac *= inside / (ho * k)
    return frac


def per_sample_dims(kernel: Kernel) -> tuple[float, float, float, float]:
    """(M, N, K, groups) of one sample's GEMM: the sizes that grow with the batch (M = b*Ho*Wo of a
    forward or data gradient, K = b*Ho*Wo of a weight gradient) at one sample."""
    (m0, m1), (n0, n1), (k0, k1), (g0, g1) = kernel.gemm
    return m0 + m1, n0 + n1, k0 + k1, g0 + g1


def per_sample_rows(kernel: Kernel) -> float:
    """One sample's share of the batch-grown GEMM dimension (Ho*Wo for a convolution)."""
    (_, m1), (_, n1), (_, k1), _ = kernel.gemm
    return m1 + n1 + k1
