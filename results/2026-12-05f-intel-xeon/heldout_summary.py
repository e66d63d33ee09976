"""The expectations committed before this sitting's four held-out families were priced
(results/2026-12-05f-intel-xeon/preregistered.md and its three addenda, before the second to fourth draws),
checked on the residual table as the benchmark wrote it (results/published/residuals.yaml) and on the
figures' measured values.
- Pax's: H3 (the two-level band covers at least 8 of its 9 rows; over all five draws since the rule was
  committed, at least 80% per family), H6 (a stack of its own slower than priced), H7 (an FSDP source within
  0.90-1.15x), H9 (FP8's speed-up over BF16 on H100 within 15%), H10 (H100's over A100 within 15%), and the
  175B diagnostic.
- MaxText's: H3 (at least 4 of 5; six draws), H6, H7 and H11 (the step's growth from 1 to 16 VMs within 15%).
- AWS's: H3 (at least 5 of 6; seven draws), H8 (median absolute error above 10%), H12 (median measured /
  predicted above 1.10), H13 (micro-batches of 1 against 4 within 15%), H14 (the overlap arm within 15%), and
  the recompute diagnostic.
- ATorch's: H3 (at least 8 of 10; eight draws), H1 (DeepSpeed's pipeline-engine rows slower than priced),
  H7 (its FSDP rows within 0.90-1.15x), H15 (the steps' growth from 8 to 64 GPUs within 15%) and H16 (two
  layouts' ratio within 15%, and the same pick).
Reads committed files; prices nothing.  A row's predicted value is its measured one divided by (a step) or
times (a throughput) exp(log ratio), the log ratio being log(measured step / predicted step).

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
SECOND = "maxtext-a3-llama2-7b"
THIRD = "aws-p5-qwen3-30b"
FOURTH = "atorch-llama2-perf"
MINE = (FAMILY, SECOND, THIRD, FOURTH)
FILES = {FAMILY: "jax_toolbox_pax_figures.yaml", SECOND: "maxtext_a3_figures.yaml",
         THIRD: "aws_qwen3_30b_p5_figures.yaml", FOURTH: "atorch_llama2_figures.yaml"}


def family_rows(residuals, family):
    """The family's residual rows (all held out) and each row's measured / predicted step."""
    rows = [r for r in residuals if r.family == family]
    assert rows and all(r.held_out for r in rows), f"{family} is not in the table, held out"
    return rows, {r.id: math.exp(r.log_ratio) for r in rows}


def measured_values(family):
    return {f.id: f.measured for f in load_figures(f"results/published/{FILES[family]}").figures}


def ratio_check(name, measured, ratio, a, b, throughput):
    """A ratio within one source, a over b, measured and predicted: within 15% asked."""
    def predicted(i):
        return measured[i] * ratio[i] if throughput else measured[i] / ratio[i]
    m, p = measured[a] / measured[b], predicted(a) / predicted(b)
    print(f"{name}: measured {m:.3f}x, predicted {p:.3f}x ({p / m - 1:+.1%}): "
          f"{'holds' if abs(p / m - 1) <= 0.15 else 'fails'} (within 15% asked)")


def in_band(residuals, rows, family, ratio, at_least, draw):
    """H3 on one draw: each row against the band drawn without its family, printed; at least ``at_least``."""
    hits = []
    for r in rows:
        band = step_band(1.0, r.kind, residuals, leave_out=family)
        hits.append(band.low <= ratio[r.id] <= band.high)
        print(f"  {r.id:52s} {ratio[r.id]:.3f}x  two-level [{band.low:.3f}, {band.high:.3f}] "
              f"{'in ' if hits[-1] else 'OUT'}")
    print(f"H3 ({draw}): {'holds' if sum(hits) >= at_least else 'fails'}: {sum(hits)} of {len(hits)} inside "
          f"(at least {at_least} asked)")
    return hits


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
    print(f"H3, all {count} draws since the rule was committed: {'holds' if share >= 0.8 else 'fails'}: {sum(flat)} "
          f"of {len(flat)} rows inside, {share:.1%} averaged per family over {len(per)} (at least 80% asked)")


def first(residuals) -> None:
    """The expectations, on Pax's nine rows."""
    rows, ratio = family_rows(residuals, FAMILY)
    measured = measured_values(FAMILY)
    for i in ratio:
        print(f"  {i:44s} measured {measured[i]:8.2f} samples/s, predicted {measured[i] * ratio[i]:8.2f}; "
              f"measured / predicted step {ratio[i]:.3f}")
    ratios = sorted(ratio.values())
    med = statistics.median(ratios)
    print(f"{FAMILY}: {len(ratios)} rows, measured / predicted step {ratios[0]:.3f}-{ratios[-1]:.3f}, median {med:.3f}")
    print(f"\nH6, a stack of its own slower than priced: median {med:.3f}: {'holds' if med > 1 else 'fails'}")
    gpt = statistics.median(v for i, v in ratio.items() if "gpt" in i)
    print(f"H7, an FSDP source within 0.90-1.15x: all {len(ratio)} rows are ZeRO-3 (preregistered.md said 7, the GPT "
          f"rows' count): median of the {len(ratio)} {med:.3f}: {'holds' if 0.90 <= med <= 1.15 else 'fails'}; of "
          f"the 7 GPT rows {gpt:.3f}: {'holds' if 0.90 <= gpt <= 1.15 else 'fails'}")
    for size in ("5b", "175b"):
        ratio_check(f"H9, TE FP8 over TE BF16 on H100, {size.upper()}", measured, ratio,
                    f"jaxpax-gpt{size}-h100-256gpu-tefp8", f"jaxpax-gpt{size}-h100-256gpu-tebf16", throughput=True)
    for size in ("5b", "175b"):
        ratio_check(f"H10, H100 over A100 in TE BF16, {size.upper()}", measured, ratio,
                    f"jaxpax-gpt{size}-h100-256gpu-tebf16", f"jaxpax-gpt{size}-a100-256gpu-tebf16", throughput=True)
    big = {i: v for i, v in ratio.items() if "175b" in i}
    print("The 175B diagnostic (a lighter remat than assumed suspected below 0.83): "
          + ", ".join(f"{i} {v:.3f}" for i, v in big.items())
          + (": none below 0.83" if min(big.values()) >= 0.83 else ": below 0.83"))

    print("\nH3, the band on the new family's rows (bands drawn from the development residuals):")
    hits = in_band(residuals, rows, FAMILY, ratio, 8, "first draw")
    old_hits = []
    for r in rows:
        old = one_level_band(r.kind, residuals, FAMILY)
        old_hits.append(old is not None and old[0] <= r.log_ratio <= old[1])
    print(f"  the one-level rule's {sum(old_hits)} of {len(old_hits)} (the two-level's {sum(hits)})")
    draws_coverage(residuals, EARLIER + (FAMILY,), "five")


def second(residuals) -> None:
    """The addendum's expectations, on MaxText's five rows."""
    rows, ratio = family_rows(residuals, SECOND)
    med = statistics.median(ratio.values())
    print(f"\n{SECOND}: {len(ratio)} rows, measured / predicted step "
          + ", ".join(f"{i} {v:.3f}" for i, v in ratio.items()) + f"; median {med:.3f}")
    print(f"H6 (second draw), a stack of its own slower than priced: median {med:.3f}: "
          f"{'holds' if med > 1 else 'fails'}")
    print(f"H7 (second draw), an FSDP source within 0.90-1.15x: median {med:.3f}: "
          f"{'holds' if 0.90 <= med <= 1.15 else 'fails'}")
    ratio_check("H11, the step's growth from 1 to 16 VMs", measured_values(SECOND), ratio,
                "maxtext-a3-llama2-7b-128gpu", "maxtext-a3-llama2-7b-8gpu", throughput=False)
    in_band(residuals, rows, SECOND, ratio, 4, "second draw")
    draws_coverage(residuals, EARLIER + (FAMILY, SECOND), "six")


def third(residuals) -> None:
    """The second addendum's expectations, on AWS's six rows."""
    rows, ratio = family_rows(residuals, THIRD)
    med = statistics.median(ratio.values())
    mae = statistics.median(abs(v - 1) for v in ratio.values())
    print(f"\n{THIRD}: {len(ratio)} rows, measured / predicted step "
          + ", ".join(f"{i} {v:.3f}" for i, v in ratio.items()) + f"; median {med:.3f}")
    print(f"H8, an MoE source from a new publisher misses by more than a dense one: median absolute error {mae:.1%}: "
          f"{'holds' if mae > 0.10 else 'fails'} (above 10% asked)")
    print(f"H12, slower than priced as the development Qwen3-30B-A3B rows: median {med:.3f}: "
          f"{'holds' if med > 1.10 else 'fails'} (above 1.10 asked)")
    measured = measured_values(THIRD)
    for ep, layout in (("16", "ep16-tp8pp4dp2"), ("32", "ep32-tp8pp2dp4")):
        row = f"aws-p5-qwen3-30b-a3b-{layout}-mb{{}}-ovl{{}}-nccl"
        ratio_check(f"H13, micro-batches of 1 against 4, ep {ep}", measured, ratio, row.format(1, "off"),
                    row.format(4, "off"), throughput=False)
        ratio_check(f"H14, overlap off against on, ep {ep}", measured, ratio, row.format(4, "off"),
                    row.format(4, "on"), throughput=False)
    off = [v for i, v in ratio.items() if "ovloff" in i]
    on = [v for i, v in ratio.items() if "ovlon" in i]
    print(f"The recompute diagnostic (the overlap=off rows below 0.83x while the overlap=on rows are not): off "
          f"{min(off):.3f}-{max(off):.3f}, on {min(on):.3f}-{max(on):.3f}: "
          + ("triggered" if max(off) < 0.83 <= min(on) else "not triggered"))
    in_band(residuals, rows, THIRD, ratio, 5, "third draw")
    draws_coverage(residuals, EARLIER + (FAMILY, SECOND, THIRD), "seven")


def fourth(residuals) -> None:
    """The third addendum's expectations, on ATorch's ten rows."""
    rows, ratio = family_rows(residuals, FOURTH)
    print(f"\n{FOURTH}: {len(ratio)} rows, measured / predicted step "
          + ", ".join(f"{i} {v:.3f}" for i, v in ratio.items()))
    pipe = statistics.median(v for i, v in ratio.items() if "ds3d" in i)
    fsdp = statistics.median(v for i, v in ratio.items() if "fsdp" in i)
    print(f"H1 (again), DeepSpeed's pipeline-engine rows slower than priced: median of the six {pipe:.3f}: "
          f"{'holds' if pipe > 1 else 'fails'}")
    print(f"H7 (again), the FSDP rows within 0.90-1.15x: median of the four {fsdp:.3f}: "
          f"{'holds' if 0.90 <= fsdp <= 1.15 else 'fails'}")
    measured = measured_values(FOURTH)
    row = "atorch-llama2-7b-{}"
    ratio_check("H15, the FSDP step's growth from 8 to 64 GPUs", measured, ratio,
                row.format("fsdp-64gpu-mbs4-gbs256"), row.format("fsdp-8gpu-mbs4-gbs32"), throughput=False)
    ratio_check("H15, the DS 3D step's growth from 8 to 64 GPUs (tp 2, pp 2)", measured, ratio,
                row.format("ds3d-tp2pp2dp16-64gpu-mbs8-gbs8192"), row.format("ds3d-tp2pp2dp2-8gpu-mbs8-gbs1024"),
                throughput=False)
    tp2, pp2 = row.format("ds3d-tp2pp1dp4-8gpu-mbs8-gbs2048"), row.format("ds3d-tp1pp2dp4-8gpu-mbs8-gbs2048")
    ratio_check("H16, tp 2 x pp 1 against tp 1 x pp 2 at 8 GPUs", measured, ratio, tp2, pp2, throughput=False)
    same = (measured[tp2] / ratio[tp2] > measured[pp2] / ratio[pp2]) == (measured[tp2] > measured[pp2])
    print(f"H16, the pick between them: {'the same as measured' if same else 'not the measured one'}")
    in_band(residuals, rows, FOURTH, ratio, 8, "fourth draw")
    draws_coverage(residuals, EARLIER + MINE, "eight")


def main() -> None:
    residuals = load_residuals()
    first(residuals)
    second(residuals)
    third(residuals)
    fourth(residuals)

    spec = load_fit_spec("results/published/fit.yaml")
    held = [r for r in residuals if r.family in spec.held_out]
    print("\nHeld-out sources' out-of-sample MAPE (rows pooled):")
    errs = [abs(math.exp(r.log_ratio) - 1) for r in held if r.family in MINE]
    print(f"  this sitting's four families alone: {len(errs)} rows, MAPE {statistics.mean(errs):.1%}, median "
          f"absolute error {statistics.median(errs):.1%}, {sum(x > 0.25 for x in errs)} beyond 25%")
    for label, leave in (("all", ()), ("without the Playbook", ("ultrascale-playbook",)),
                         ("without this sitting's draws", MINE),
                         ("without this sitting's draws and the Playbook", MINE + ("ultrascale-playbook",))):
        errs = [abs(math.exp(r.log_ratio) - 1) for r in held if r.family not in leave]
        print(f"  {label}: {len(errs)} rows, MAPE {statistics.mean(errs):.1%}, median absolute error "
              f"{statistics.median(errs):.1%}, {sum(x > 0.25 for x in errs)} beyond 25%")


if __name__ == "__main__":
    main()
