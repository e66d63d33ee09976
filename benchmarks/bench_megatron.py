"""The planner on the published large-model configurations (analytical cost model, the dgx-a100
profile as shipped).  The published rows themselves, Narayanan et al. 2021 (arXiv 2104.04473)
Table 1 and Table 2's PTD-P rows, are priced by benchmarks/bench_published.py from
results/published/figures.yaml; this script asks what the planner picks for two of them.

    python benchmarks/bench_megatron.py

- 39.1B (Table 1): the paper's configuration as the figures file gives it, and the planner's pick.
- GPT-3 175B on 1024 A100s: the planner's pick and why.
"""

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search.planner import Constraints, plan
from parsim.profile.published import figure_flops, load_figures, narayanan_eq3_flops, price


def describe(cfg) -> str:
    return (f"dp={cfg.dp} tp={cfg.tp} ({cfg.tp_layout or '-'}) pp={cfg.pp} m={cfg.microbatches} {cfg.schedule}"
            f"{f' v={cfg.chunks}' if cfg.chunks > 1 else ''}{' recompute' if cfg.recompute else ''}"
            f"{f' ZeRO-{cfg.zero}' if cfg.zero else ''}")


if __name__ == "__main__":
    figure = load_figures("results/published/figures.yaml").by_id("narayanan-t1-39.1b")
    paper = price(figure)
    spec = load_model("examples/megatron_39b.yaml")
    cluster = load_cluster("dgx-a100:64x8")
    compute = AnalyticalCompute(cluster.device, "fp16")
    flops = figure_flops(figure)
    print(f"39.1B, paper's configuration ({paper.config}): step {paper.step_time_s:.2f} s, {paper.predicted:.1f} "
          f"TFLOP/s per GPU predicted vs {figure.measured:g} measured ({paper.error:+.1%})")
    r = plan(spec, cluster, compute, Constraints(top=1), progress=False)
    best = r.chosen
    print(f"39.1B, planner's pick ({describe(best.config)}): step {best.estimate.step_time_s:.2f} s, "
          f"{flops / best.estimate.step_time_s / 512 / 1e12:.1f} TFLOP/s per GPU, peak "
          f"{best.peak_memory_bytes / 2**30:.1f} GiB; searched {r.considered}, simulated {r.simulated} "
          f"in {r.search_time_s:.1f} s")
    gpt3 = load_model("examples/gpt3_175b.yaml")
    cluster = load_cluster("dgx-a100:128x8")
    r = plan(gpt3, cluster, AnalyticalCompute(cluster.device, "fp16"), Constraints(top=1), progress=False)
    best = r.chosen
    flops = narayanan_eq3_flops(1536, 2048, 96, 12288, 50257) * (1 if best.config.recompute else 3 / 4)
    print(f"GPT-3 175B on 1024 A100, planner's pick ({describe(best.config)}): step "
          f"{best.estimate.step_time_s:.2f} s, {flops / best.estimate.step_time_s / 1024 / 1e12:.1f} TFLOP/s per "
          f"GPU (model FLOPs), peak {best.peak_memory_bytes / 2**30:.1f} of {r.capacity_bytes / 2**30:.1f} GiB; "
          f"searched {r.considered}, simulated {r.simulated} in {r.search_time_s:.1f} s")
    for line in r.explanation:
        print("  " + line)
