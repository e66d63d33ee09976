"""Every public end-to-end figure the project relies on, against parsim's prediction with the
hardware profiles AS SHIPPED (hardware_profiles/*.yaml; nothing is fitted here).

    python benchmarks/bench_published.py [--figures results/published/figures.yaml] [--only SUBSTRING]

The rows, their citations and their assumptions live in results/published/figures.yaml (read by
parsim.profile.published, which tests/test_published.py reads too):

- NVIDIA DeepLearningExamples ResNet-50 v1.5 (PyTorch 21.03): 1 and 8 GPUs of a DGX A100 and a
  DGX-1 V100.  The 8-GPU AMP rows are printed but excluded: the node's input pipeline (PIL
  decode and augmentation in DataLoader workers) has no public measurement, and the profiles
  carry no input_pipeline; given one, the loader bounds those rows at min(compute-bound,
  host_samples_per_s) (tests/test_published.py checks that closed form).
- Narayanan et al. 2021 (arXiv 2104.04473), Table 1, all ten rows (1.7B ... 1008B on up to 3072
  A100s), with the micro-batch sizes and interleaving of the paper's own scripts, and the three
  PTD-P rows of Table 2 (174.6B on 384, 768 and 1536 A100s).
- NVIDIA Megatron-Bridge 26.04.01 (commit 21d102f5e), the dense DGX-H100 rows: Llama 3 70B on 64
  and Llama 3.1 405B on 1,024 H100s, FP8, in tokens/s per GPU; held out (added after the
  2026-11-27 calibration, nothing fitted on them), with the recipes' settings (sequence parallel
  with tp-communication overlap, the distributed optimizer, no recomputation).

results/published/moe_figures.yaml holds the public mixture-of-experts rows (NVIDIA's Megatron-Bridge
performance summaries on DGX H100, DeepSeek-V3 on 2,048 H800s), in tokens/s per GPU:

    python benchmarks/bench_published.py --figures results/published/moe_figures.yaml

A row the simulator cannot price yet (expert parallelism, until it lands) prints as "not priced"
with the reason, and the others are priced as usual.

A row used by `parsim calibrate --published` to fit its profile (the figures file's calibration
section, whose values are in the shipped profile with their citation) is labelled
"calibration"; every other row is held out.  Each prints its configuration, the measured and
predicted values, the error, and whether it meets its tolerance.
"""

from __future__ import annotations

import argparse
import statistics

from parsim.profile.published import UnpricedFigure, load_figures, price

FIGURES = "results/published/figures.yaml"


def rows(path: str = FIGURES, only: str = ""):
    """Each figure of ``path`` priced with its profile as shipped: (figure, Priced, use); a figure
    the simulator cannot price yet has its UnpricedFigure (the reason) in place of the Priced."""
    figures = load_figures(path)
    out = []
    for f in figures.figures:
        if only and only not in f.id:
            continue
        use = "calibration" if figures.used_for_calibration(f) else "held out"
        try:
            priced = price(f)
        except UnpricedFigure as e:
            priced = e
        out.append((f, priced, use))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--figures", default=FIGURES)
    ap.add_argument("--only", default="", help="rows whose id contains this")
    args = ap.parse_args()
    priced = rows(args.figures, args.only)
    w = max([27] + [len(f.id) for f, _, _ in priced])
    print(f"{'row':<{w}} {'configuration':<58} {'measured':>9} {'predicted':>9} {'error':>7} {'tol':>4}  use")
    errors = {}
    for f, p, use in priced:
        unit = {"samples_per_s": "img/s", "tflops_per_gpu": "TF/GPU", "tokens_per_s_per_gpu": "tok/s/GPU",
                "step_time_s": "s/step"}[f.metric]
        if isinstance(p, UnpricedFigure):
            config = " ".join(f"{k}={v}" for k, v in f.parallel)
            print(f"{f.id:<{w}} {f.profile + ' ' + config:<58} {f.measured:>9.1f} {'-':>9} {'-':>7} "
                  f"{f.tolerance:>4.0%}  not priced: {str(p)[len(f.where) + 2:]} ({unit})")
            continue
        if f.excluded:
            mark = "excluded: " + f.excluded
        elif abs(p.error) <= f.tolerance:
            mark = "ok"
        else:
            mark = "MISS" + (f" (held within {f.miss_within:.0%}: {f.note})" if f.miss_within is not None else "")
        print(f"{f.id:<{w}} {f.profile + ' ' + p.config:<58} {f.measured:>9.1f} {p.predicted:>9.1f} {p.error:>+7.1%} "
              f"{f.tolerance:>4.0%}  {use}, {mark} ({unit})")
        if not f.excluded:
            parts = f.id.split("-")
            group = "-".join(parts[:2]) if parts[0] == "narayanan" else parts[0]     # dle, narayanan-t1, -t2
            errors.setdefault(group, []).append((p.error, use))
    for group, errs in errors.items():
        held = [abs(e) for e, use in errs if use == "held out"]
        if held:
            print(f"{group}: held-out rows {len(held)}, MAPE {statistics.mean(held):.1%}, max {max(held):.1%}")


if __name__ == "__main__":
    main()
