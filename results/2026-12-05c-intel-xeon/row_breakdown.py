"""Where a public row's predicted step goes, at the shipped profiles: the step, the busiest pipeline
rank's compute, exposed communication, bubble and wait (parsim.sim.estimate.RankEstimate), and for
each distinct layer its forward and backward compute and its tensor-parallel collectives per
micro-batch, as parsim prices them.  Deterministic: prices, times nothing.

    python results/2026-12-05c-intel-xeon/row_breakdown.py ROW_ID [ROW_ID ...]
"""

from __future__ import annotations

import sys

from parsim.cost.layer import tp_comm_time_s
from parsim.profile.published import figure_setup, figure_tokens, load_all_figures
from parsim.shard.prepare import auto_memory_bytes, per_device_graph
from parsim.sim import simulate
from parsim.sim.prices import Prices


def main(ids: list[str]) -> None:
    if not ids:
        raise SystemExit("row_breakdown.py: error: give one or more row ids (the first column of "
                         "results/published/bench_published.txt)")
    figures = load_all_figures()
    for ident in ids:
        try:
            f = figures.by_id(ident)
        except KeyError:
            raise SystemExit(f"row_breakdown.py: error: {ident}: no row of results/published/*figures*.yaml has "
                             "this id; give one as the first column of results/published/bench_published.txt "
                             "prints it") from None
        spec, cluster, compute, cfg = figure_setup(f)
        est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
        r = max(est.ranks, key=lambda x: x.busy_s)
        if f.metric == "tokens_per_s_per_gpu":
            measured = f"measured step {figure_tokens(f) / f.measured / cluster.world_size:.3f} s"
        else:
            measured = f"measured {f.measured:g} ({f.metric})"
        print(f"{ident}: {measured}; predicted step {est.step_time_s:.3f} s: compute "
              f"{r.busy_s:.3f}, exposed communication {r.exposed_comm_s:.3f} (all-to-alls {r.ep_comm_s:.3f}), "
              f"bubble {r.bubble_s:.3f}, waiting {r.sync_wait_s:.3f}")
        prices = Prices(cluster.for_dtype(spec.training.dtype))
        b = cfg.microbatch_size(spec.training.global_batch_size)
        graph = per_device_graph(spec.graph, cfg.tp, cfg.tp_layout, cfg.recompute, None, prices.cluster,
                                 spec.training, b, auto_memory_bytes(prices.cluster, cfg.pp), cp=cfg.cp, ep=cfg.ep,
                                 etp=cfg.etp, memo=prices.shard, recompute_only=cfg.recomputed_layers(len(spec.graph)))
        seen = set()
        for layer in graph.layers:
            times = tuple(round(compute.layer_time_s(layer, k, b), 7) for k in ("F", "B"))
            comm = tuple(tp_comm_time_s(layer, k, b, prices.cluster, 0) for k in ("F", "B"))
            if (times, comm) in seen:
                continue
            seen.add((times, comm))
            print(f"    {layer.name:<12} micro-batch {b}: forward {times[0] * 1e3:.2f} ms, backward {times[1] * 1e3:.2f} ms; "
                  f"its tp collectives forward {comm[0] * 1e3:.2f} ms, backward {comm[1] * 1e3:.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
