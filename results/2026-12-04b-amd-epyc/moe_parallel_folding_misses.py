"""The held-out MoE Parallel Folding rows at 128 GPUs, one of each model and layout (docs/moe.md): each
row's measured and priced step, its exposed communication share and predicted peak, and the expert GEMMs'
shape efficiency parsim prices for Mixtral-8x22B-G8T8's expert GEMMs (64 experts of 2,048, hidden 6,144,
top-8; gate and up fused) as expert tp 1, 2 and 8 split them.  Analysis of a held-out source's first pricing: nothing here
changes the model.  From the repository root:

    python results/2026-12-04b-amd-epyc/moe_parallel_folding_misses.py
"""
from parsim.cost.kernels import gemm_shape_efficiency
from parsim.profile.published import figure_setup, figure_tokens, load_figures
from parsim.sim import simulate

figures = load_figures("results/published/moe_parallel_folding_figures.yaml").figures
for figure in figures:
    if figure.excluded or not figure.id.startswith("mpf-t3-") or "fp8" in figure.id:
        continue
    spec, cluster, compute, cfg = figure_setup(figure)
    est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
    measured_s = figure_tokens(figure) / (figure.measured * cfg.dp * cfg.tp * cfg.pp * cfg.cp)
    print(f"{figure.id:<48} ep {cfg.ep} etp {cfg.etp}: ran {measured_s:6.2f} s, priced {est.step_time_s:6.2f} s "
          f"(ran / priced - 1: {measured_s / est.step_time_s - 1:+.1%}); exposed comm {est.exposed_comm_fraction:.1%}; "
          f"peak {max(est.peak_memory_bytes) / 2**30:5.1f} of {cluster.device.usable_memory_bytes / 2**30:.1f} GiB")
ex = figure_setup(next(f for f in figures if not f.excluded))[1].device.kernels
# each local expert's GEMMs as the expert tp splits them (gate and up fused: N 2 x 2,048 / etp; down: K 2,048 /
# etp), at a few row counts: how many rows a local expert sees is not derived here
for etp in (1, 2, 8):
    for rows in (512, 2048, 8192):
        cells = [f"{name} {gemm_shape_efficiency(rows, n, k, 8, ex):.3f}"
                 for name, n, k in (("gate+up", 2 * 2048 // etp, 6144), ("down", 6144, 2048 // etp))]
        print(f"G8T8 expert GEMMs at etp {etp}, {rows:>5} rows x 8 local experts: " + ", ".join(cells)
              + " of the large-GEMM rate")
