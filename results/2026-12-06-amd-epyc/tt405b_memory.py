"""Table 6's four 405B rows: parsim's predicted peak memory a GPU against the table's Memory(GiB) (H36 of
preregistered.md), and the predicted step growths against the measured ones (H33).  Arithmetic on the shipped
profiles; nothing fitted.  python results/2026-12-06-amd-epyc/tt405b_memory.py"""

from parsim.profile.published import _thaw, figure_setup, figure_tokens, load_figures
from parsim.sim.simulate import simulate

GIB = 2 ** 30
rows = [f for f in load_figures("results/published/longctx_torchtitan_cp_figures.yaml").figures
        if "405b" in f.id]
steps = []
for f in rows:
    spec, cluster, compute, cfg = figure_setup(f)
    est = simulate(spec.graph, spec.training, cluster, cfg, compute, strategies=spec.shard, keep_timeline=False)
    stated = _thaw(f.source_config)["Memory(GiB)"]
    peak = max(est.peak_memory_bytes) / GIB
    measured_step = figure_tokens(f) / (f.measured * 512)
    steps.append((f.id, measured_step, est.step_time_s))
    print(f"{f.id:48s} stated {stated:5.1f} GiB  predicted peak {peak:6.1f} GiB  ({peak / stated - 1:+.1%})"
          f"  step measured {measured_step:7.2f} s predicted {est.step_time_s:7.2f} s"
          f"  measured / predicted {measured_step / est.step_time_s:.3f}")
for (a, ma, pa), (b, mb, pb) in zip(steps, steps[1:]):
    print(f"growth {a.split('-')[-2]}->{b.split('-')[-2]}: measured {mb / ma:.3f}x predicted {pb / pa:.3f}x "
          f"({pb / pa / (mb / ma) - 1:+.1%})")
