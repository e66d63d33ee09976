"""The expectations committed before this sitting's three held-out families were priced
(results/2026-12-05g-intel-xeon/preregistered.md and its two addenda), checked on the residual table as the
benchmark wrote it (results/published/residuals.yaml) and on the figures' measured values.
- Megatron-LLaMA's: H3 (the two-level band covers at least 4 of its 5 rows), H17 (median measured / predicted
  step within 0.90-1.10), H18 (ODO's gain over DO within 10%), H19 (256 -> 512 GPUs per GPU within 0.05),
  H20 (32 -> 256 GPUs under DO within 0.07).
- KempnerForge's: H3 (at least 20 of 24; under the rule committed before its pricing no H200 plan had a band),
  H7 (its FSDP rows within 0.90-1.15x), H23 (its rows on 2 nodes or more slower than priced, median above
  1.05), H24 (weak scaling within 10%), H25 (a layout ratio within 20%), and the memory diagnostic.
- NeMo's long-sequence page: H3 (at least 12 of 14), H26 (the H100 rows within 0.90-1.10), H27 (TFLOPS/GPU
  from 16K to 1024K within 10%), H28 (the B200 rows slower than priced).
- H3 over every draw since the rule was committed (the fifty-eighth sitting's four, the fifty-ninth's four,
  these three).
Reads committed files; prices nothing but the memory diagnostic's one row.  A row's predicted value is its
measured one divided by (a step) or times (a throughput) exp(log ratio), log ratio = log(measured step /
predicted step).

    python results/2026-12-05g-intel-xeon/heldout_summary.py
"""

from __future__ import annotations

import importlib.util
import math
import statistics
from pathlib import Path

from parsim.profile.loso import load_fit_spec
from parsim.profile.published import figure_setup, load_figures
from parsim.sim import simulate
from parsim.sim.band import load_residuals

# the fifty-ninth sitting's summary (which reads the fifty-eighth's), loaded under a name of its own
_spec = importlib.util.spec_from_file_location(
    "heldout_summary_59", Path(__file__).parent.parent / "2026-12-05f-intel-xeon" / "heldout_summary.py")
_earlier = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_earlier)
EARLIER, FIFTY_NINTH = _earlier.EARLIER, _earlier.MINE      # the fifty-eighth's four draws, the fifty-ninth's
draws_coverage, family_rows, in_band = _earlier.draws_coverage, _earlier.family_rows, _earlier.in_band

LLAMA, KFORGE, LONGSEQ = "alibaba-megatron-llama", "kempnerforge-bench", "nemo-longseq"
MINE = (LLAMA, KFORGE, LONGSEQ)
FILES = {LLAMA: "megatron_llama_figures.yaml", KFORGE: "kempnerforge_bench_figures.yaml",
         LONGSEQ: "nemo_longseq_figures.yaml"}


def figures(family):
    return {f.id: f for f in load_figures(f"results/published/{FILES[family]}").figures}


def predicted(f, ratio):
    """A row's predicted value in its own metric, from its measured one and its log ratio."""
    return f.measured / ratio if f.metric == "step_time_s" else f.measured * ratio


def ratio_check(name, rows, ratio, a, b, within, absolute=False):
    """A ratio within one source, a over b in the rows' own metric, measured and predicted, within ``within``
    (relative, or absolute where ``absolute``)."""
    m = rows[a].measured / rows[b].measured
    p = predicted(rows[a], ratio[a]) / predicted(rows[b], ratio[b])
    off = p - m if absolute else p / m - 1
    ok = abs(off) <= within
    print(f"{name}: measured {m:.3f}, predicted {p:.3f} ({off:+.3f}{'' if absolute else ' relative'}): "
          f"{'holds' if ok else 'fails'} (within {within:g}{'' if absolute else ' relative'} asked)")


def median_check(name, values, low=None, high=None):
    med = statistics.median(values)
    ok = (low is None or med >= low) and (high is None or med <= high)
    asked = f"{low}-{high}" if low is not None and high is not None else (f"above {low}" if low else f"below {high}")
    print(f"{name}: median {med:.3f} over {len(values)} rows: {'holds' if ok else 'fails'} ({asked} asked)")


def megatron_llama(residuals) -> None:
    rows, ratio = family_rows(residuals, LLAMA)
    figs = figures(LLAMA)
    print(f"{LLAMA}: measured / predicted step " + ", ".join(f"{i} {v:.3f}" for i, v in ratio.items()))
    median_check("H17, a Megatron fork priced as Megatron is", list(ratio.values()), 0.90, 1.10)
    row = "megatron-llama-13b-{}-tp2pp1dp{}-{}gpu-mbs4-gbs2048"
    for dp, gpus in ((128, 256), (256, 512)):
        ratio_check(f"H18, ODO's gain over DO at {gpus} GPUs", figs, ratio, row.format("odo", dp, gpus),
                    row.format("do", dp, gpus), 0.10)
    for opt in ("do", "odo"):
        ratio_check(f"H19, 256 -> 512 GPUs per GPU under {opt.upper()}", figs, ratio, row.format(opt, 256, 512),
                    row.format(opt, 128, 256), 0.05, absolute=True)
    ratio_check("H20, 32 -> 256 GPUs per GPU under DO", figs, ratio, row.format("do", 128, 256),
                row.format("do", 16, 32), 0.07, absolute=True)
    in_band(residuals, rows, LLAMA, ratio, 4, "first draw")
    draws_coverage(residuals, EARLIER + FIFTY_NINTH + (LLAMA,), "nine")


def kempnerforge(residuals) -> None:
    rows, ratio = family_rows(residuals, KFORGE)
    figs = figures(KFORGE)
    fsdp = [v for i, v in ratio.items() if dict(figs[i].parallel).get("zero") == 3]
    multi = [v for i, v in ratio.items() if figs[i].nodes >= 2]
    print(f"\n{KFORGE}: {len(ratio)} rows, measured / predicted step {min(ratio.values()):.3f}-"
          f"{max(ratio.values()):.3f}, median {statistics.median(ratio.values()):.3f}")
    median_check("H7 (again), an FSDP source within 0.90-1.15x", fsdp, 0.90, 1.15)
    median_check("H23, FSDP across nodes at 4K tokens slower than priced", multi, low=1.05)
    ratio_check("H24, the 13B step's growth from 8 to 160 GPUs", figs, ratio, "kforge-weak-13b-160gpu-tp4fsdp40",
                "kforge-weak-13b-8gpu-tp4fsdp2", 0.10)
    ratio_check("H24, the 70B step's growth from 32 to 160 GPUs", figs, ratio, "kforge-weak-70b-160gpu-tp4fsdp40",
                "kforge-weak-70b-32gpu-tp4fsdp8", 0.10)
    ratio_check("H25, FSDP 8 (compile off) over TP 4 x FSDP 2 at 13B on 8 GPUs", figs, ratio,
                "kforge-mfu08-13b-8gpu-fsdp8", "kforge-mfu09-13b-8gpu-tp4fsdp2", 0.20)
    f = figs["kforge-weak-70b-8gpu-tp4fsdp2"]
    spec, cluster, compute, cfg = figure_setup(f)
    est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
    peak = max(r.memory.total_bytes for r in est.ranks)
    print(f"The memory diagnostic: the 70B row on 8 GPUs, predicted peak {peak / 1e9:.1f} GB against the source's "
          f"128.5 GB (above asked, fp32 master weights counted): {'as said' if peak > 128.5e9 else 'not as said'}")
    print("H3 under the rule committed before pricing (7c19814): no H200 plan had a band (no development row ran on "
          "H200): untestable. Under the architecture rule adopted after this pricing (ced4b89), not a test:")
    in_band(residuals, rows, KFORGE, ratio, 20, "second draw, after the fact")


def nemo_longseq(residuals) -> None:
    rows, ratio = family_rows(residuals, LONGSEQ)
    figs = figures(LONGSEQ)
    h100 = [v for i, v in ratio.items() if "-h100-" in i]
    b200 = [v for i, v in ratio.items() if "-b200-" in i]
    print(f"\n{LONGSEQ}: measured / predicted step " + ", ".join(f"{i} {v:.3f}" for i, v in ratio.items()))
    median_check("H26, NVIDIA's stack on NVIDIA's clusters, the H100 rows", h100, 0.90, 1.10)
    a, b = "nemo-longseq-h100-llama2-7b-1024k-1024gpu-cp32", "nemo-longseq-h100-llama2-7b-16k-16gpu-cp1"
    tflops = {i: float(dict(figs[i].source_config)["tflops_per_gpu_with_cp"]) for i in (a, b)}
    # TFLOPS/GPU = the row's FLOPs / (step x GPUs): the predicted ratio is the measured one x the steps' ratio
    m = tflops[a] / tflops[b]
    p = m * ratio[a] / ratio[b]
    print(f"H27, TFLOPS/GPU from 16K to 1024K on H100: measured {m:.3f}, predicted {p:.3f} ({p / m - 1:+.1%}): "
          f"{'holds' if abs(p / m - 1) <= 0.10 else 'fails'} (within 10% asked)")
    median_check("H28, the B200 rows slower than priced", b200, low=1.0)
    in_band(residuals, rows, LONGSEQ, ratio, 12, "third draw")


def main() -> None:
    residuals = load_residuals()
    megatron_llama(residuals)
    kempnerforge(residuals)
    nemo_longseq(residuals)
    print()
    draws_coverage(residuals, EARLIER + FIFTY_NINTH + MINE, "eleven (every band under the rule as it stands)")
    held_out_mapes(residuals, MINE, "three")


def held_out_mapes(residuals, mine, count: str) -> None:
    """The held-out sources' out-of-sample MAPE, rows pooled: this sitting's ``count`` families ``mine``, all, and
    without the Playbook's rows (with and without ``mine``)."""
    spec = load_fit_spec("results/published/fit.yaml")
    held = [r for r in residuals if r.family in spec.held_out]
    print("\nHeld-out sources' out-of-sample MAPE (rows pooled):")
    for label, keep in ((f"this sitting's {count} families", lambda f: f in mine),
                        ("all", lambda f: True), ("without the Playbook", lambda f: f != "ultrascale-playbook"),
                        ("without this sitting's draws and the Playbook",
                         lambda f: f not in mine + ("ultrascale-playbook",))):
        errs = [abs(math.exp(r.log_ratio) - 1) for r in held if keep(r.family)]
        print(f"  {label}: {len(errs)} rows, MAPE {statistics.mean(errs):.1%}, median absolute error "
              f"{statistics.median(errs):.1%}, {sum(x > 0.25 for x in errs)} beyond 25%")


if __name__ == "__main__":
    main()
