"""A diagnosis, not a model: how much of the held-out narayanan2021-zero3 rows' measured step would
one collective per parameter tensor explain?  DeepSpeed's ZeRO-3 of 2021 (the rows' implementation,
Sec. 5.2 of Narayanan et al.) fetched partitioned parameters tensor by tensor; parsim prices one
gather per FSDP unit (a layer).  For each row: the measured step (the paper's Equation-3 FLOPs over
its TFLOP/s), parsim's priced step, and what NCCL's ring latency alone (parsim.cost.comm's price of
a 1-byte collective on the row's ranks, parsim.cost.nccl's model) adds if every one of the GPT
block's 12 parameter tensors (two LayerNorms, QKV, projection, FC1, FC2, weights and biases; plus 4
for the embeddings and the final norm) is gathered three times a step (forward, the recomputed
forward, backward) and reduce-scattered once.  Nothing here changes a price; the rows stay a
held-out source until a change is made in their light.

    python results/2026-12-04g-intel-xeon/zero3_granularity.py
"""
from parsim.cost.comm import collective_time_s
from parsim.profile.published import figure_flops, figure_setup, load_figures, price

TENSORS_PER_LAYER, OTHER_TENSORS, COLLECTIVES_PER_TENSOR = 12, 4, 4

for f in load_figures("results/published/narayanan_zero3_figures.yaml").figures:
    spec, cluster, _, _ = figure_setup(f)
    ranks = list(range(cluster.world_size))
    flops = figure_flops(f) / cluster.world_size            # per GPU, the paper's Equation 3
    measured_s = flops / (f.measured * 1e12)             # f.measured: TFLOP/s per GPU
    priced_s = price(f).step_time_s
    layers = sum(1 for layer in spec.graph.layers if layer.name.startswith("layers."))
    latency_s = collective_time_s(cluster, ranks, 1.0, "all_gather")
    n = COLLECTIVES_PER_TENSOR * (TENSORS_PER_LAYER * layers + OTHER_TENSORS)
    print(f"{f.id:32s} ranks {len(ranks):5d}  measured {measured_s:6.1f} s  priced {priced_s:6.1f} s  "
          f"gap {measured_s - priced_s:6.1f} s  ring latency {latency_s * 1e3:5.2f} ms x {n} collectives "
          f"= {n * latency_s:5.1f} s ({n * latency_s / (measured_s - priced_s):.2f} of the gap)")
