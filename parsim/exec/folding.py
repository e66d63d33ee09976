"""MoE Parallel Folding in the executor: Megatron's sequence-parallel tensor parallelism (the
megatron-sp layout) on transformers' Llama-style mixtures of experts, their MoE blocks on each
rank's share of the sequence, so that the expert-parallel groups fold across the tensor-parallel
ranks (Liu et al. 2025, "MoE Parallel Folding", arXiv 2504.14960; parsim.plan.ParallelConfig.fold).

What runs is what parsim.shard.builtin's llama and moe patterns price at expert tp 1
(``ParallelConfig.etp``), on the tensor-parallel dimension of the (dp, pp, tp) mesh, with DTensor's
parallelize_module (torchtitan's Llama plan, written for transformers' module names):

- between the blocks every rank holds s/t of the sequence: the norms and residual adds run on it,
  their weights' gradients partial sums over the group (summed once per step, as the sequence-
  parallel norms of parsim.exec.tensor_parallel);
- attention: its input gathered over the sequence (all-gather forward, reduce-scatter backward),
  q, k, v column-split (a/t query heads, g/t KV heads), o row-split and reduce-scattered to the
  sequence; the rotary table and causal mask for the whole sequence;
- the MoE block on the rank's s/t tokens: the router whole (its gradient partial, summed over the
  group), the routed experts as parsim.exec.expert_parallel splits them over the folded ep group
  (their gradients over the expert-data-parallel group), a dense MLP or shared experts gathered,
  column- and row-split as a SwiGLU;
- the word embedding split by vocabulary and reduce-scattered to the sequence (or whole, each rank
  taking its part of the sequence, where the vocabulary does not divide); the head's norm on the
  sequence, the LM head gathering it and computing its vocabulary slice, which the loss takes
  vocabulary-parallel (parsim.exec.vocab_parallel).

Dropout is off in these models; the result equals one process's (tests/test_moe_folding_exec.py).
"""

from __future__ import annotations

import json

from torch import nn

from parsim.errors import InputError
from parsim.exec.vocab_parallel import mark_vocab_parallel


def check_supported(cfg, spec, source: str) -> None:
    """tp > 1 on an ``hf:`` mixture of experts: the megatron-sp layout with expert tp 1 and heads
    that divide; one line naming the field otherwise."""
    if cfg.tp_layout != "megatron-sp":
        raise InputError(f"{source}: parallel.tp_layout: the executor runs tp > 1 beside experts in the megatron-sp "
                         f"layout (Megatron's MoE Parallel Folding); got {cfg.tp_layout!r}")
    if cfg.etp != 1:
        raise InputError(f"{source}: parallel.etp: the executor keeps each expert whole beside tp (etp 1); "
                         f"got {cfg.etp}: plan with --etp 1")
    hf = json.loads(spec.source.target)                    # the config's fields (parsim.model.spec.ModelSource)
    heads, kv = hf["num_attention_heads"], hf.get("num_key_value_heads") or hf["num_attention_heads"]
    if heads % cfg.tp or kv % cfg.tp or hf.get("kv_lora_rank"):
        raise InputError(f"{source}: parallel.tp: the executor splits {heads} query and {kv} KV heads of Llama-style "
                         f"attention over tp={cfg.tp}; choose a tp dividing both (multi-head latent attention: tp 1)")
    if hf.get("tie_word_embeddings"):
        raise InputError(f"{source}: parallel.tp: the executor's folded layout takes untied embeddings; plan tp 1")


def parallelize(stage: nn.Module, tp_mesh) -> list[nn.Parameter]:
    """Lay out one stage's units (parsim.model.hf's Embed, Decoder, Head) in place; returns the
    parameters whose gradients are partial sums over the group."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   parallelize_module)

    from parsim.model.hf import Decoder, Embed, Head

    t = tp_mesh.size()
    gather = dict(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
    swiglu = {"gate_proj": ColwiseParallel(), "up_proj": ColwiseParallel(),
              "down_proj": RowwiseParallel(output_layouts=Shard(1))}
    partial: list[nn.Parameter] = []
    for unit in stage.children():
        if isinstance(unit, Embed):
            if unit.embed_tokens.num_embeddings % t == 0:
                parallelize_module(unit, tp_mesh, {"embed_tokens": RowwiseParallel(input_layouts=Replicate(),
                                                                                   output_layouts=Shard(1))})
            else:
                unit.forward = _own_part(unit.forward, tp_mesh)
        elif isinstance(unit, Decoder):
            plan = {"self_attn": PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)},
                                                    desired_input_kwarg_layouts={"hidden_states": Replicate()}),
                    "self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
                    "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(output_layouts=Shard(1))}
            mlp = unit.mlp
            if unit.moe is None:                                    # a dense SwiGLU
                plan["mlp"] = PrepareModuleInput(**gather)
                plan.update({f"mlp.{k}": v for k, v in swiglu.items()})
            else:
                for name in ("shared_experts", "shared_expert"):
                    if getattr(mlp, name, None) is not None:
                        plan[f"mlp.{name}"] = PrepareModuleInput(**gather)
                        plan.update({f"mlp.{name}.{k}": v for k, v in swiglu.items()})
            parallelize_module(unit, tp_mesh, plan)
            unit.forward = _whole_positions(unit, t)
            split = {id(p) for p in unit.parameters() if hasattr(p, "placements")}
            experts = {id(p) for p in getattr(mlp, "experts", nn.Module()).parameters()}
            # the norms, the router (and a shared expert's gate, q/k norms): whole, on s/t tokens or a/t heads
            partial += [p for p in unit.parameters() if id(p) not in split and id(p) not in experts]
        elif isinstance(unit, Head):
            if unit.lm_head.out_features % t:
                raise InputError(f"parallel.tp: the vocabulary ({unit.lm_head.out_features}) does not divide by "
                                 f"tp={t}; the folded layout splits the LM head by it")
            parallelize_module(unit, tp_mesh, {"lm_head": ColwiseParallel(input_layouts=Shard(1),
                                                                          output_layouts=Shard(-1))})
            mark_vocab_parallel(unit, tp_mesh.get_group())
            partial += list(unit.norm.parameters())
    return partial


def _whole_positions(unit, t: int):
    """A decoder layer's forward on s/t tokens, given the rotary table and mask of the whole
    sequence, which its attention sees after the gather."""
    def forward(x):
        pos, mask = unit._positions.take(x.shape[1] * t, x.dtype)
        return unit._layer(x, attention_mask=mask, position_embeddings=pos)
    return forward


def _own_part(forward, tp_mesh):
    """The embedding whole on every rank, each keeping its s/t of the sequence (no communication)."""
    rank, t = tp_mesh.get_local_rank(), tp_mesh.size()

    def part(ids):
        x = forward(ids)
        n = x.shape[1] // t
        return x[:, rank * n:(rank + 1) * n]
    return part
