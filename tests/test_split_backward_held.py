"""What a split backward holds from I to W (Layer.w_held_bytes, parsim.model.split_backward.weight_output_bytes),
against torch itself: stage_backward_input, run on each unit of a model as torch's PipelineStage runs a ZB-H1 stage's
I, keeps the gradients entering the autograd nodes where a weight meets the data until stage_backward_weight uses them
(torch 2.13, torch/distributed/pipelining/_backward.py).  Their bytes equal the unit's w_held_bytes times the
micro-batch, where the weights meet the data in matrix products (Llama), after a transform of the weight (Gemma 2's
RMSNorm scale 1 + w; DiffLlama's lambda), in LayerNorms (parsim's GPT) and in BatchNorms (a ResNet-18), and where two
weights' products are summed, so that one gradient enters both (Cohere's parallel block, the ResNet's shortcut)."""

import pytest
import torch
from torch.distributed.pipelining._backward import stage_backward_input

from parsim.model.extract import cut_units
from parsim.model.spec import build_module, model_from_mapping

HF = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 16, "tie_word_embeddings": False}
MODELS = {
    "llama": {"hf": {**HF, "model_type": "llama"}, "args": {"seq_len": 16}},
    "gemma2": {"hf": {**HF, "model_type": "gemma2", "head_dim": 16, "query_pre_attn_scalar": 16},
               "args": {"seq_len": 16, "attn_implementation": "eager"}},
    "diffllama": {"hf": {**HF, "model_type": "diffllama"}, "args": {"seq_len": 16}},
    # attention and MLP in parallel, their outputs summed with the residual: one gradient enters both
    "cohere": {"hf": {**HF, "model_type": "cohere"}, "args": {"seq_len": 16}},
    "gpt": {"model": "gpt", "args": {"preset": "gpt-tiny", "dropout": 0.0, "attention": "eager"}},
    "resnet18": {"module": "parsim.model.zoo.heldout_cnn:resnet18_sequential", "args": {"width": 8, "classes": 10},
                 "input": {"shape": [3, 16, 16], "dtype": "float32"}},
}
MICROBATCH = 3          # not extraction's batch (2): w_held_bytes is per sample


def _spec(name: str):
    raw = {"schema_version": 1, "name": name, **MODELS[name],
           "training": {"global_batch_size": 8, "dtype": "fp32", "optimizer": "adam"}}
    return model_from_mapping(raw, f"{name}.yaml")


def held_by_torch(unit: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes of the distinct storages stage_backward_input keeps for the weights' backward of ``unit`` at ``x``."""
    x = x.detach().requires_grad_(True)
    y = unit(x)
    _, groups = stage_backward_input([y], [torch.ones_like(y)], [x], unit.parameters())
    storages = {}
    for group in groups:
        for grads in group.get("grads") or ():
            for g in grads or ():
                if g is not None:
                    storages[g.untyped_storage()._cdata] = g.untyped_storage().nbytes()
    return sum(storages.values())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_w_held_is_what_torchs_split_backward_holds(name):
    spec = _spec(name)
    torch.manual_seed(0)
    module = build_module(spec.source, spec.path).train()
    units = cut_units(module)
    layers = spec.graph.layers
    assert [n for n, _ in units] == [layer.name for layer in layers]
    if "hf" in MODELS[name] or name == "gpt":
        x = torch.randint(0, 256, (MICROBATCH, 16 if "hf" in MODELS[name] else 32))
    else:
        x = torch.randn(MICROBATCH, 3, 16, 16)
    checked = 0
    for i, ((unit_name, unit), layer) in enumerate(zip(units, layers)):
        if i > 0 and any(p.requires_grad for p in unit.parameters()):
            assert held_by_torch(unit, x) == pytest.approx(layer.w_held_bytes * MICROBATCH, rel=1e-9), unit_name
            checked += 1
        with torch.no_grad():
            x = unit(x)
    assert checked >= 3
