"""A digest of plan() results for 15 searches (model, cluster, constraints): every ranked plan (config,
step, peak), the Pareto set, considered, simulated and the explanation lines, hashed; run it on two
trees and compare.

    PYTHONPATH=TREE python results/2026-12-03c-amd-epyc/plan_digest.py
"""
import hashlib
from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search.planner import plan
from parsim.search.enumerate import Constraints
CASES = [("examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8", {}),
         ("examples/deepseek_v3.yaml", "dgx-h100-superpod:32x8", {}),
         ("examples/gpt3_175b.yaml", "dgx-a100:128x8", {}),
         ("examples/llama3_405b.yaml", "dgx-h100-superpod:2048x8", {}),
         ("examples/resnet50_imagenet.yaml", "ascend910:128x8", {}),
         ("examples/resnet50_imagenet.yaml", "dgx-a100:64x8", {}),
         ("examples/llama3_70b.yaml", "dgx-h100:8x8", {}),
         ("examples/llama3_70b.yaml", "dgx-h100:8x8", {"tp_comm_overlap": True}),
         ("examples/llama2_70b.yaml", "atlas-900-a2:4x8", {}),
         ("examples/mixtral_8x7b.yaml", "dgx-h100:4x8", {}),
         ("examples/qwen3_30b_a3b.yaml", "dgx-h100:2x8", {}),
         ("examples/qwen3_235b_a22b.yaml", "dgx-h100-superpod:16x8", {}),
         ("examples/gpt3_175b.yaml", "dgx-a100:16x8", {"top": 5, "prune": True}),
         ("examples/megatron_39b.yaml", "dgx-a100:64x8", {}),
         ("examples/llama3_8b.yaml", "dgx-a100:2x8", {"schedule": "zbh1"}),
        ]
for path, cl, kw in CASES:
    try:
        spec = load_model(path); cluster = load_cluster(cl)
        compute = AnalyticalCompute.for_training(cluster.device, spec.training)
        r = plan(spec, cluster, compute, Constraints(**kw), progress=False)
        out = [repr((c.config, c.estimate.step_time_s, c.peak_memory_bytes)) for c in r.ranked]
        out += [repr((c.config, c.estimate.step_time_s)) for c in r.pareto]
        out += [str(r.considered), str(r.simulated)] + list(r.explanation)
        h = hashlib.sha256("\n".join(out).encode()).hexdigest()[:16]
        print(path, cl, kw, h, r.simulated, r.considered, f"{r.search_time_s:.2f}s", r.chosen.config.dp, r.chosen.config.tp, r.chosen.config.pp, flush=True)
    except Exception as e:
        print(path, cl, kw, "ERROR", type(e).__name__, str(e)[:150], flush=True)
