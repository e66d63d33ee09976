"""GEMM kernel times by shape: the kernel-level model's per-device numbers fitted to public
per-kernel measurements (hardware_profiles/kernels/, PROVENANCE.md there), its in-sample error
per device, and its error on a GPU left out of the fit (parsim.profile.kernel_fit).

    python benchmarks/bench_kernels.py [--write-profiles]

Prints, per shipped profile, the numbers fitted on its own architecture's rows (what the profile
holds: tests/test_kernel_fit.py checks they agree) with the median and p90 relative error of the
kernel time per dtype; then one set of numbers fitted on V100 and A100 together and priced on H100
with H100's datasheet SMs, peaks and bandwidth (held out, as NeuSight reports); last, DeepBench's
V100 convolutions priced as implicit GEMMs with the V100 numbers (a transfer: none fitted on them).
"""

from __future__ import annotations

import argparse

from parsim.hardware import load_cluster
from parsim.profile import kernel_fit as kf


def _errors(summary) -> str:
    return "; ".join(f"{dtype} {n} kernels: median {med:.1%}, p90 {p90:.1%}" for dtype, (n, med, p90) in summary.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-profiles", action="store_true",
                    help="write each profile's fitted numbers into hardware_profiles/ (one round of the fixed point "
                         "with bench_published.py --write-profiles: docs/hardware.md, Calibration)")
    args = ap.parse_args()
    parts = kf.load_parts()
    rows = kf.by_profile(kf.load_gemms(), parts)
    print("Per-device fit (each profile's own rows; what hardware_profiles/<name>.yaml ships):")
    for name, f in kf.fit_profiles().items():
        ex = load_cluster(f"{name}:1x1").device.kernels
        shipped = {"gemm_efficiency": ex.gemm_efficiency, "k_half": ex.k_half, "m_half": ex.m_half,
                   "gemm_latency_us": ex.gemm_latency_s * 1e6, "vector_gemm_efficiency": ex.vector_gemm_efficiency}
        fitted = kf.shipped_values(f)
        same = all(abs(shipped[k] - v) < 1e-9 for k, v in fitted.items())
        print(f"  {name:10s} " + ", ".join(f"{k} {v:g}" for k, v in fitted.items())
              + ("   (= shipped)" if same else f"   (shipped differs: {shipped})"))
        print(f"  {'':10s} in-sample: {_errors(kf.error_summary(rows[name], parts, f))}")
    f, summary = kf.held_out()
    print("Held out: fitted on dgx1-v100 + dgx-a100 rows, priced on dgx-h100 (datasheet SMs, peaks, bandwidth):")
    print("  " + ", ".join(f"{k} {v:g}" for k, v in kf.shipped_values(f).items()))
    print(f"  H100: {_errors(summary)}")
    print("Other splits (each GPU left out in turn; one GPU alone fitted):")
    for fit_on, test in ((("dgx-a100",), "dgx-h100"), (("dgx1-v100",), "dgx-h100"),
                         (("dgx-a100", "dgx-h100"), "dgx1-v100"), (("dgx1-v100", "dgx-h100"), "dgx-a100")):
        print(f"  {' + '.join(fit_on)} -> {test}: {_errors(kf.held_out(fit_on, test)[1])}")
    print("Transfer to convolutions (DeepBench V100, forward / data / filter gradients as implicit GEMMs,")
    print("dgx1-v100's shipped numbers, nothing fitted on convolutions):")
    print(f"  V100: {_errors(kf.conv_errors(kf.load_convs(), parts))}")
    ratios = kf.conv_ratios(kf.load_convs(), parts)
    print("Convolution efficiency as a ratio of the GEMM's, fitted on the same passes (the priors of "
          "results/published/fit.yaml's conv and vector-conv parameters):")
    print("  " + ", ".join(f"{dtype} {r:g}" for dtype, r in ratios.items()) + "; with them: V100: "
          + "; ".join(f"{d} {n} kernels: median {m:.1%}, p90 {p:.1%}"
                      for d, (n, m, p) in {d: kf.conv_errors(kf.load_convs(), parts, r)[d] for d, r in ratios.items()}.items()))
    if args.write_profiles:
        for path in kf.write_profiles(kf.fit_profiles()):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
