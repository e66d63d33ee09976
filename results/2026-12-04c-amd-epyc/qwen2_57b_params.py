"""Qwen2-57B-A14B as parsim reads it (the Parallel Folding rows' inline config): parameters and active
parameters from the traced graph, from transformers' own model on meta, and from the closed form
(parsim.model.moe.param_count); and a MoE layer's Experts record.  The figures docs/accuracy.md quotes.

    python results/2026-12-04c-amd-epyc/qwen2_57b_params.py
"""
import os
import tempfile

import torch
import yaml

from parsim.model.hf import causal_lm
from parsim.model.moe import param_count
from parsim.model.spec import load_model

rows = yaml.safe_load(open("results/published/moe_parallel_folding_figures.yaml"))["figures"]
cfg = next(r for r in rows if "qwen2" in r["id"])["model"]["hf"]
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "qwen2.yaml")
    with open(path, "w") as f:
        yaml.safe_dump({"schema_version": 1, "name": "qwen2-57b-a14b", "hf": cfg, "args": {"seq_len": 4096},
                        "training": {"global_batch_size": 256, "dtype": "bf16", "optimizer": "adam"}}, f)
    g = load_model(path).graph
with torch.device("meta"):
    hf = sum(p.numel() for p in causal_lm(cfg, 16).hf.parameters())
print(f"traced graph: {g.param_count:,} parameters, {g.active_param_count:,} active")
print(f"transformers on meta: {hf:,} parameters")
print(f"closed form: {param_count(cfg)[0]:,} parameters, {param_count(cfg)[1]:,} active")
print(f"a MoE layer: {next(l.experts for l in g.layers if l.experts is not None)}")
