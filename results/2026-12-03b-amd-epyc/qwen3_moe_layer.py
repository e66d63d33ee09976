"""Qwen3-30B-A3B's MoE layer as Megatron-Bridge's 16-GPU row runs it (results/published/moe_figures.yaml,
mbridge2606-qwen3-30b-a3b-h100-16gpu: ep 16 over 2 nodes, forced balance, FP8, HybridEP's flex dispatch),
priced on the shipped dgx-h100-superpod profile: one layer's kernels at one sample a micro-batch by kind,
the largest by operator, and one token all-to-all's time with the bytes it sends off the node and the
bandwidth that implies (DeepEP's README: 43 GB/s of RDMA bandwidth for its internode dispatch at 16 ranks
on H800s with a 400 Gb/s NIC each).

    python results/2026-12-03b-amd-epyc/qwen3_moe_layer.py
"""

import collections
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

from parsim.cost.compute import AnalyticalCompute  # noqa: E402
from parsim.cost.experts import a2a_time_s, expert_parallel_graph, local_tokens, off_node_share  # noqa: E402
from parsim.cost.kernels import kernel_time_s  # noqa: E402
from parsim.model.graph import DTYPE_BYTES  # noqa: E402
from parsim.profile.published import (figure_cluster, figure_imbalance, figure_spec, load_all_figures,  # noqa: E402
                                      shipped_profile)

ROW, EP = "mbridge2606-qwen3-30b-a3b-h100-16gpu", 16
figure = load_all_figures(os.path.join(ROOT, "results", "published")).by_id(ROW)
spec = figure_spec(figure)
cluster = figure_cluster(figure, shipped_profile(figure))
graph = expert_parallel_graph(spec.graph, EP, figure_imbalance(figure.routing) or 1.0)
compute = AnalyticalCompute.for_training(cluster.device, spec.training)
layer = graph.layers[1]
by_kind, by_op = collections.Counter(), collections.Counter()
for k in layer.kernels:
    t = kernel_time_s(k, 1, cluster.device, compute.engines)
    by_kind["memory-bound" if k.klass == "mem" else k.klass] += t
    by_op[(k.phase, k.op if k.klass == "mem" else k.klass)] += t
total = sum(by_kind.values())
print(f"{ROW}: layer {layer.name} at ep {EP}, one sample a micro-batch, on {cluster.profile.name}: {len(layer.kernels)} "
      f"kernels, {total * 1e3:.3f} ms: " + ", ".join(f"{kind} {t * 1e3:.3f} ms ({t / total:.0%})"
                                                      for kind, t in by_kind.most_common()))
for (phase, op), t in by_op.most_common(12):
    print(f"  {phase} {op:40s} {t * 1e3:7.3f} ms")
ranks = list(range(EP))
tokens = local_tokens(layer, graph.dtype, 1)
nbytes = layer.experts.all_to_all_bytes(tokens, DTYPE_BYTES[graph.dtype])
share = off_node_share(layer.experts, cluster, ranks, spec.training.moe_dispatcher)
forward = a2a_time_s(layer, "F", 1, graph.dtype, cluster, ranks, 1.0, spec.training.moe_dispatcher)
one = forward / 2          # the dispatch and the combine; the split-size exchange is negligible beside them
print(f"one token all-to-all ({spec.training.moe_dispatcher}): {nbytes / 1e6:.1f} MB a rank, {share:.3f} of it off the "
      f"node ({nbytes * share / 1e6:.1f} MB), {one * 1e3:.3f} ms: {nbytes * share / one / 1e9:.1f} GB/s off the node "
      f"(the forward's two with the split sizes: {forward * 1e3:.3f} ms)")
