"""The tensor-parallel collectives parsim charges one decoder layer of Qwen1.5-32B
(results/published/ascend8_figures.yaml's mlr-qwen1_5-32b-910b-32npu: eager RMSNorm as transformers
writes it, bf16) under Megatron's megatron-sp layout at tp 8: the embedding layer, the first two
blocks and the head, (phase, collective, group, bytes a device for the extraction's samples).
Run at the commit before and after the eager norm's layout was fixed (eager-norm-layout.txt).

    python results/2026-12-03-amd-epyc/eager_norm_layout.py
"""

import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

from parsim.profile.published import figure_spec, load_all_figures  # noqa: E402
from parsim.shard.prepare import per_device_graph  # noqa: E402

figure = next(f for f in load_all_figures(os.path.join(ROOT, "results", "published")).figures
              if f.id == "mlr-qwen1_5-32b-910b-32npu")
graph = per_device_graph(figure_spec(figure).graph, 8, "megatron-sp")
for layer in (graph.layers[0], graph.layers[1], graph.layers[2], graph.layers[-1]):
    print(layer.name, [(ph, st.kind, st.group_size, round(st.bytes_per_device)) for ph, st, _ in layer.tp_comm])
