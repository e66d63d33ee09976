"""Every scored public row with pp > 1 that gives no split, priced at the shipped profiles with
parsim's balanced split (what the rows are priced with) and with the framework's default split:
Megatron-Core's (and MindSpeed's, MindFormers') uniform one, the transformer layers divided evenly
over the pp x chunks virtual stages, the embedding with the first and the output layer with the
last (megatron/core/transformer/transformer_block.py get_num_layers_to_build without
--decoder-first/last-pipeline-num-layers).  In sample, a what-if:

    python results/2026-12-03b-amd-epyc/uniform_split.py
"""

import os
import sys
from dataclasses import replace

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

from parsim.profile.published import figure_spec, load_all_figures, price  # noqa: E402

figs = load_all_figures(os.path.join(ROOT, "results", "published")).figures
print(f"{'row':50s} {'stages':>6s} {'measured':>9s} {'balanced':>9s} {'err':>7s} {'uniform':>9s} {'err':>7s}  split")
for f in figs:
    par = dict(f.parallel)
    if par.get("pp", 1) == 1 or "split" in par or f.excluded:
        continue
    stages = par["pp"] * par.get("chunks", 1)
    graph = figure_spec(f).graph
    names = [layer.name for layer in graph.layers]
    blocks = [i for i, n in enumerate(names) if n.startswith("layers.")]
    if not blocks or names[0] != "embed" or blocks != list(range(1, 1 + len(blocks))):
        print(f"{f.id:50s} {stages:6d}  (no embed|layers|rest graph: {names[:2]} .. {names[-2:]})")
        continue
    per, extra = divmod(len(blocks), stages)
    if extra:
        print(f"{f.id:50s} {stages:6d}  ({len(blocks)} layers do not divide evenly)")
        continue
    bounds = [0] + [1 + per * s for s in range(1, stages)] + [len(names)]
    try:
        a = price(f)
        b = price(replace(f, parallel=tuple(sorted({**par, "split": ",".join(map(str, bounds))}.items()))))
    except Exception as e:                     # a row the bench excludes or cannot price
        print(f"{f.id:50s} {stages:6d}  ({type(e).__name__}: {str(e)[:80]})")
        continue
    err = lambda p: (p.predicted / f.measured - 1) * 100   # noqa: E731
    print(f"{f.id:50s} {stages:6d} {f.measured:9.4g} {a.predicted:9.4g} {err(a):+6.1f}% {b.predicted:9.4g} {err(b):+6.1f}%")
