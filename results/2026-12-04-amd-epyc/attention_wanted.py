"""Which 910B rows ask for slower fused attention, and does it follow the sequence length?

For each scored 910B row of a committed results/published/bench_published.txt: its out-of-sample
error e (throughput, predicted / measured - 1), fused attention's share a of the row's priced kernels
(one micro-batch through the whole model, forward and backward, as results/2026-12-03g-amd-epyc/
kernel_shares.py takes them), and x = 1 + e / a: how many times slower attention alone would have to
be priced for the row to come out exact if nothing else moved (x < 0: attention alone cannot explain
the miss).  The rows are sorted by a; L is the query length one attention call sees (seq / cp).
From the repository root, with the profiles the bench output was priced with:

    python results/2026-12-04-amd-epyc/attention_wanted.py results/published/bench_published.txt
"""
import collections
import re
import statistics
import sys

from parsim.cost.kernels import PHASES
from parsim.profile.published import figure_setup, load_all_figures
from parsim.shard.prepare import per_device_graph

ROW = re.compile(r"^(\S+)\s+(\S+)\s+(atlas-\S+)\s+\S+\s+\S+\s+\S+%\s+\S+\s+([-+]\S+)%\s+.*scored")
errors = {m.group(1): float(m.group(4)) / 100 for m in map(ROW.match, open(sys.argv[1])) if m}
figures = {f.id: f for f in load_all_figures("results/published").figures}
out = []
for fid, e in errors.items():
    spec, cluster, compute, cfg = figure_setup(figures[fid])    # as parsim.profile.published.price sets a row up
    microbatch = max(1, spec.training.global_batch_size // (cfg.dp * cfg.microbatches))
    graph = per_device_graph(spec.graph, cfg.tp, cfg.tp_layout or "", cfg.recompute, cp=cfg.cp)
    times = compute._kernel_times(microbatch)
    by_class, head_dim = collections.Counter(), 0
    for layer in graph.layers:
        for kind in "FB":
            kernels = [k for k in layer.kernels if k.phase in PHASES[kind]]
            for k, t in zip(kernels, times(kernels, layer.tp_share * layer.seq_share)):
                by_class[k.klass] += t
                head_dim = k.head_dim if k.klass == "attention" else head_dim
    a = by_class["attention"] / sum(by_class.values())
    seq = spec.input.shape[0]
    out.append((a, fid, e, cfg.tp, cfg.cp, seq, head_dim))
print(f"{'row':<40} {'e':>7} {'a':>6} {'x':>6}  tp cp  {'L':>6} head")
for a, fid, e, tp, cp, seq, hd in sorted(out, reverse=True):
    x = f"{1 + e / a:6.2f}" if a >= 0.02 else "     -"
    print(f"{fid:<40} {e:+7.3f} {a:6.3f} {x}  {tp:>2} {cp:>2}  {seq // cp:>6} {hd}")
print("\nrows whose attention is at least 13% of the priced kernels, x by head and length:")
for head in (64, 128):
    for length in sorted({seq // cp for a, _, _, _, cp, seq, hd in out if a >= 0.13 and hd == head}):
        xs = [1 + e / a for a, _, e, _, cp, seq, hd in out if a >= 0.13 and hd == head and seq // cp == length]
        print(f"  heads of {head}, L {length}: {len(xs)} rows, x median {statistics.median(xs):.2f}, "
              f"range {min(xs):.2f}-{max(xs):.2f}")
