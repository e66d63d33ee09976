"""Published large-model measurements against parsim's predictions (analytical cost model,
the dgx-a100 profile as shipped, nothing fitted to these rows).

    python benchmarks/bench_megatron.py

- Narayanan et al. 2021 (arXiv 2104.04473), Table 1, 39.1B row: t=8, p=2, 512 A100s, batch
  1536, recomputation, 138 TFLOP/s per GPU measured; FLOPs by the paper's Equation 3.  Micro-
  batch size 1 and 1F1B (not in Table 1).  Also the planner's own pick for that model and cluster.
- GPT-3 175B on 1024 A100s: the planner's pick and why.
"""

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search.planner import Constraints, plan
from parsim.search.resolve import resolve_config
from parsim.sim import simulate


def eq3_flops(B, s, l, h, V):
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def describe(cfg) -> str:
    return (f"dp={cfg.dp} tp={cfg.tp} ({cfg.tp_layout or '-'}) pp={cfg.pp} m={cfg.microbatches} {cfg.schedule}"
            f"{f' v={cfg.chunks}' if cfg.chunks > 1 else ''}{' recompute' if cfg.recompute else ''}"
            f"{f' ZeRO-{cfg.zero}' if cfg.zero else ''}")


if __name__ == "__main__":
    spec = load_model("examples/megatron_39b.yaml")
    cluster = load_cluster("dgx-a100:64x8")
    compute = AnalyticalCompute(cluster.device, "fp16")
    flops = eq3_flops(1536, 2048, 48, 8192, 51200)
    cfg = resolve_config(spec, cluster, compute, dp=32, pp=2, tp=8, tp_layout="megatron", microbatches=48,
                         schedule="1f1b", recompute=True)
    est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
    tflops = flops / est.step_time_s / 512 / 1e12
    print(f"39.1B, paper's configuration ({describe(cfg)}): step {est.step_time_s:.2f} s, {tflops:.1f} TFLOP/s per "
          f"GPU predicted vs 138 measured ({tflops / 138 - 1:+.1%}); peak memory "
          f"{max(est.peak_memory_bytes) / 2**30:.1f} GiB")
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
    flops = eq3_flops(1536, 2048, 96, 12288, 50257) * (1 if best.config.recompute else 3 / 4)
    print(f"GPT-3 175B on 1024 A100, planner's pick ({describe(best.config)}): step "
          f"{best.estimate.step_time_s:.2f} s, {flops / best.estimate.step_time_s / 1024 / 1e12:.1f} TFLOP/s per "
          f"GPU (model FLOPs), peak {best.peak_memory_bytes / 2**30:.1f} of {r.capacity_bytes / 2**30:.1f} GiB; "
          f"searched {r.considered}, simulated {r.simulated} in {r.search_time_s:.1f} s")
    for line in r.explanation:
        print("  " + line)
