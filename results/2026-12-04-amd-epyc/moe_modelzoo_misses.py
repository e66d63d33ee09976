"""The held-out MoE Model Zoo's two misses taken apart as far as the shipped model goes (docs/moe.md): each
row's priced step, its predicted peak against the device's usable memory (Device.usable_memory_bytes), and the expert GEMMs' shape
efficiency at the rows per expert group of EP 8 under TP 4 (512) and of EP 32 under TP 2 (4,096): Qwen3-235B-A22B's
experts, hidden 4,096, intermediate 1,536 (gate and up fused: N 3,072), on the H100.  From the repository root:

    python results/2026-12-04-amd-epyc/moe_modelzoo_misses.py
"""
from parsim.cost.kernels import gemm_shape_efficiency
from parsim.profile.published import figure_setup, load_figures
from parsim.sim import simulate

for figure in load_figures("results/published/moe_modelzoo_figures.yaml").figures:
    if figure.excluded:
        continue
    spec, cluster, compute, cfg = figure_setup(figure)
    est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
    print(f"{figure.id:<56} step {est.step_time_s:7.2f} s  peak {max(est.peak_memory_bytes) / 2**30:6.1f} GiB of "
          f"{cluster.device.usable_memory_bytes / 2**30:.1f} usable  exposed comm {est.exposed_comm_fraction:.1%}")
h100 = next(f for f in load_figures("results/published/moe_modelzoo_figures.yaml").figures if "h100" in f.id)
ex = figure_setup(h100)[1].device.kernels
for rows, experts in ((512, 16), (4096, 4)):
    for name, n, k in (("gate+up", 3072, 4096), ("down", 4096, 1536)):
        print(f"H100 expert GEMM {name:<7} {rows:>5} rows x {experts:>2} experts: "
              f"{gemm_shape_efficiency(rows, n, k, experts, ex):.3f} of the large-GEMM rate")
