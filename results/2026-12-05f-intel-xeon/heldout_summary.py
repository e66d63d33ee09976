"""The expectations committed before this sitting's two held-out families were priced
(results/2026-12-05f-intel-xeon/preregistered.md and its addendum, before the second draw), checked on the residual table as the benchmark wrote it
(results/published/residuals.yaml) and on the figures' measured throughputs: H3 (the two-level band covers
at least 8 of the 9 rows; over all five draws since the rule was committed, at least 80% per family), H6 (a
stack of its own slower than priced), H7 (an FSDP source within 0.90-1.15x), H9 (FP8's speed-up over BF16 on
H100 within 15%), H10 (H100's speed-up over A100 within 15%), and the 175B diagnostic; on the second, MaxText's: H3 (at least
4 of 5 inside; over all six draws, at least 80% per family), H6, H7 and H11 (the step's growth from 1 to 16
VMs within 15%).  Reads committed
files; prices nothing.  A row's predicted throughput is its measured one x exp(log ratio), the log ratio
being log(measured step / predicted step).

    python results/2026-12-05f-intel-xeon/heldout_summary.py
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

from parsim.profile.loso import load_fit_spec
from parsim.profile.published import load_figures
from parsim.sim.band import load_residuals, step_band

sys.path.insert(0, str(Path(__file__).parent.parent / "2026-12-05e-intel-xeon"))
from heldout_summary import NEW as EARLIER, one_level_band  # noqa: E402  (the fifty-eighth sitting's four draws)

FAMILY = "jax-toolbox-pax-2404"
FIGURES = "results/published/jax_toolbox_pax_figures.yaml"
SECOND = "maxtext-a3-llama2-7b"


def main() -> None:
    residuals = load_residuals()
    rows = [r for r in residuals if r.family == FAMILY]
    assert rows and all(r.held_out for r in rows), "the new family is not in the table, held out"
    ratio = {r.id: math.exp(r.log_ratio) for r in rows}
    measured = {f.id: f.measured for f in load_figures(FIGURES).figures if not f.excluded}
    predicted = {i: measured[i] * ratio[i] for i in ratio}          # throughput, samples/s
    for i in ratio:
        print(f"  {i:44s} measured {measured[i]:8.2f} samples/s, predicted {predicted[i]:8.2f}; "
              f"measured / predicted step {ratio[i]:.3f}")
    ratios = sorted(ratio.values())
    med = statistics.median(ratios)
    print(f"{FAMILY}: {len(ratios)} rows, measured / predicted step {ratios[0]:.3f}-{ratios[-1]:.3f}, median {med:.3f}")
    print(f"\nH6, a stack of its own slower than priced: median {med:.3f}: {'holds' if med > 1 else 'fails'}")
    gpt = statistics.median(v for i, v in ratio.items() if "gpt" in i)
    print(f"H7, an FSDP source within 0.90-1.15x: all {len(ratio)} rows are ZeRO-3 (preregistered.md said 7, the GPT "
          f"rows' count): median of the {len(ratio)} {med:.3f}: {'holds' if 0.90 <= med <= 1.15 else 'fails'}; of "
          f"the 7 GPT rows {gpt:.3f}: {'holds' if 0.90 <= gpt <= 1.15 else 'fails'}")
    for name, fast, slow in (
            ("H9, TE FP8 over TE BF16 on H100, 5B", "jaxpax-gpt5b-h100-256gpu-tefp8", "jaxpax-gpt5b-h100-256gpu-tebf16"),
            ("H9, TE FP8 over TE BF16 on H100, 175B", "jaxpax-gpt175b-h100-256gpu-tefp8",
             "jaxpax-gpt175b-h100-256gpu-tebf16"),
            ("H10, H100 over A100 in TE BF16, 5B", "jaxpax-gpt5b-h100-256gpu-tebf16", "jaxpax-gpt5b-a100-256gpu-tebf16"),
            ("H10, H100 over A100 in TE BF16, 175B", "jaxpax-gpt175b-h100-256gpu-tebf16",
             "jaxpax-gpt175b-a100-256gpu-tebf16")):
        m, p = measured[fast] / measured[slow], predicted[fast] / predicted[slow]
        print(f"{name}: measured {m:.3f}x, predicted {p:.3f}x ({p / m - 1:+.1%}): "
              f"{'holds' if abs(p / m - 1) <= 0.15 else 'fails'} (within 15% asked)")
    big = {i: v for i, v in ratio.items() if "175b" in i}
    print("The 175B diagnostic (a lighter remat than assumed suspected below 0.83): "
          + ", ".join(f"{i} {v:.3f}" for i, v in big.items())
          + (": none below 0.83" if min(big.values()) >= 0.83 else ": below 0.83"))

    print("\nH3, the band on the new family's rows (bands drawn from the development residuals):")
    hits, old_hits = [], []
    for r in rows:
        band = step_band(1.0, r.kind, residuals, leave_out=FAMILY)
        old = one_level_band(r.kind, residuals, FAMILY)
        hits.append(band.low <= ratio[r.id] <= band.high)
        old_hits.append(old is not None and old[0] <= r.log_ratio <= old[1])
        print(f"  {r.id:44s} {ratio[r.id]:.3f}x  two-level [{band.low:.3f}, {band.high:.3f}] "
              f"{'in ' if hits[-1] else 'OUT'}  one-level "
              + (f"[{math.exp(old[0]):.3f}, {math.exp(old[1]):.3f}] {'in' if old_hits[-1] else 'OUT'}" if old else "none"))
    print(f"H3, this draw: {'holds' if sum(hits) >= 8 else 'fails'}: {sum(hits)} of {len(hits)} inside (at least 8 "
          f"asked); the one-level rule's {sum(old_hits)} of {len(old_hits)}")
    draws_coverage(residuals, EARLIER + (FAMILY,), "five")

    second(residuals)

    spec = load_fit_spec("results/published/fit.yaml")
    held = [r for r in residuals if r.family in spec.held_out]
    print("\nHeld-out sources' out-of-sample MAPE (rows pooled):")
    errs = [abs(math.exp(r.log_ratio) - 1) for r in held if r.family in (FAMILY, SECOND)]
    print(f"  this sitting's two families alone: {len(errs)} rows, MAPE {statistics.mean(errs):.1%}, median absolute "
          f"error {statistics.median(errs):.1%}, {sum(x > 0.25 for x in errs)} beyond 25%")
    for label, leave in (("all", ()), ("without the Playbook", ("ultrascale-playbook",)),
                         ("without this sitting's draws", (FAMILY, SECOND)),
                         ("without this sitting's draws and the Playbook", (FAMILY, SECOND, "ultrascale-playbook"))):
        errs = [abs(math.exp(r.log_ratio) - 1) for r in held if r.family not in leave]
        print(f"  {label}: {len(errs)} rows, MAPE {statistics.mean(errs):.1%}, median absolute error "
              f"{statistics.median(errs):.1%}, {sum(x > 0.25 for x in errs)} beyond 25%")


def draws_coverage(residuals, families, count: str) -> None:
    """H3 over every draw since the rule was committed: the share of each family's rows inside its band, averaged."""
    per = {}
    for f in families:
        for r in (x for x in residuals if x.family == f):
            band = step_band(1.0, r.kind, residuals, leave_out=f)
            if band is not None:
                per.setdefault(f, []).append(band.low <= math.exp(r.log_ratio) <= band.high)
    flat = [x for v in per.values() for x in v]
    share = statistics.mean(sum(v) / len(v) for v in per.values())
    print(f"H3, all {count} draws since the rule was committed: {'holds' if share >= 0.8 else 'fails'}: {sum(flat)} of "
          f"{len(flat)} rows inside, {share:.1%} averaged per family over {len(per)} (at least 80% asked)")


def second(residuals) -> None:
    """The addendum's expectations, on MaxText's five rows."""
    rows = [r for r in residuals if r.family == SECOND]
    assert rows and all(r.held_out for r in rows), "the second family is not in the table, held out"
    ratio = {r.id: math.exp(r.log_ratio) for r in rows}
    med = statistics.median(ratio.values())
    print(f"\n{SECOND}: {len(ratio)} rows, measured / predicted step " + ", ".join(f"{i} {v:.3f}" for i, v in ratio.items())
          + f"; median {med:.3f}")
    print(f"H6 (second draw), a stack of its own slower than priced: median {med:.3f}: {'holds' if med > 1 else 'fails'}")
    print(f"H7 (second draw), an FSDP source within 0.90-1.15x: median {med:.3f}: "
          f"{'holds' if 0.90 <= med <= 1.15 else 'fails'}")
    one, sixteen = "maxtext-a3-llama2-7b-8gpu", "maxtext-a3-llama2-7b-128gpu"
    measured = {f.id: f.measured for f in load_figures("results/published/maxtext_a3_figures.yaml").figures}
    grown = measured[sixteen] / measured[one]
    priced = (measured[sixteen] / ratio[sixteen]) / (measured[one] / ratio[one])
    print(f"H11, the step's growth from 1 to 16 VMs: measured {grown:.3f}x, predicted {priced:.3f}x "
          f"({priced / grown - 1:+.1%}): {'holds' if abs(priced / grown - 1) <= 0.15 else 'fails'} (within 15% asked)")
    hits = []
    for r in rows:
        band = step_band(1.0, r.kind, residuals, leave_out=SECOND)
        hits.append(band.low <= ratio[r.id] <= band.high)
        print(f"  {r.id:44s} {ratio[r.id]:.3f}x  two-level [{band.low:.3f}, {band.high:.3f}] {'in ' if hits[-1] else 'OUT'}")
    print(f"H3 (second draw): {'holds' if sum(hits) >= 4 else 'fails'}: {sum(hits)} of {len(hits)} inside (at least 4 asked)")
    draws_coverage(residuals, EARLIER + (FAMILY, SECOND), "six")


if __name__ == "__main__":
    main()
