"""A tiny DeepSeek-V3 (examples/deepseek_v3/config.json cut down: hidden 64, 8 routed experts of
32, top-2, one shared expert, MLA, one dense layer then one MoE layer, 16 tokens, fp32) for the
tests of recomputation modes (tests/test_moe_routing.py, tests/test_recompute_moe.py)."""

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_deepseek_graph(folder: str, mtp_layers: int = 0):
    """The tiny model's LayerGraph, its config and model.yaml written to ``folder``; ``mtp_layers``:
    its multi-token-prediction blocks (num_nextn_predict_layers)."""
    from parsim.model.spec import load_model

    with open(os.path.join(ROOT, "examples", "deepseek_v3", "config.json")) as f:
        cfg = json.load(f)
    cfg.update(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, n_routed_experts=8,
               num_experts_per_tok=2, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16,
               qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, num_hidden_layers=2, first_k_dense_replace=1,
               vocab_size=128, n_group=4, topk_group=2, num_nextn_predict_layers=mtp_layers)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(folder, "m.yaml"), "w") as f:
        f.write("schema_version: 1\nname: ds\nhf: config.json\nargs: {seq_len: 16}\n"
                "training: {global_batch_size: 8, dtype: fp32, optimizer: adam}\n")
    return load_model(os.path.join(folder, "m.yaml")).graph
