"""Mixture-of-experts layers: routed experts as a layer kind, and their closed forms.

A MoE decoder layer replaces the dense feed-forward with a router (a linear h -> E scoring every
token for E routed experts), E routed SwiGLU experts of which each token uses its top k, and
optionally shared experts every token uses (Shazeer et al. 2017; GShard, Lepikhin et al. 2020;
Switch, Fedus et al. 2022; Mixtral, Jiang et al. 2024; DeepSeekMoE, Dai et al. 2024, Sec. 3:
fine-grained and shared experts; DeepSeek-V3, DeepSeek-AI 2024, Sec. 2.1.2).

Conventions: h the hidden size, I one routed expert's intermediate size, I_s the shared experts'
intermediate size summed (DeepSeek-V3: n_shared_experts x moe_intermediate_size), E routed
experts, k experts per token (top-k), T tokens.  A SwiGLU expert holds gate, up (h x I each) and
down (I x h): 3 h I parameters (Shazeer 2020, "GLU Variants Improve Transformer").

- routed expert parameters: 3 h I E; of them a token uses 3 h I k (the active ones);
- routed GEMMs, grouped over the E experts, each expert multiplying the tokens routed to it:
  gate+up (M = c, N = 2I, K = h) and down (M = c, N = h, K = I), c = T k / E x imbalance tokens
  per expert (balanced routing: imbalance 1; parsim.cost.comm prices the imbalance);
- forward FLOPs of a layer's GEMMs per token = 2 x its active matmul parameters (FLOPs = 2 x MACs):
  the router's E h, the active experts' 3 h I k, the shared experts' 3 h I_s, attention's projections.

``config_experts`` reads a Hugging Face config (Mixtral, Qwen3-MoE, DeepSeek-V2 and -V3 spellings);
``parsim.model.hf`` records the same from the built module (``Experts`` per layer, on
``parsim.model.graph.Layer.experts``) and a test keeps the two equal.  ``mtp_param_count`` counts
DeepSeek-V3's multi-token-prediction module, which transformers does not build.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Experts:
    """One decoder layer's mixture of experts, unsharded."""

    experts: int                    # routed experts E
    top_k: int                      # routed experts per token k
    hidden: int                     # h
    intermediate: int               # I, one routed expert's
    shared_intermediate: int = 0    # I_s, all shared experts' together (0: none)
    router_params: int = 0          # the router's weight E h (a bias or correction term, if trained, too)
    # Group-limited routing (DeepSeek-V2 Sec. 2.1.3 "device-limited routing", DeepSeek-V3 Sec. 2.1.2
    # "node-limited routing"; transformers' n_group, topk_group): the E experts in ``groups`` equal
    # groups, a token's k experts drawn from the ``group_limit`` groups it scores highest; 0: none
    groups: int = 1
    group_limit: int = 0

    @property
    def routed_params(self) -> int:
        """3 h I E: every routed expert's gate, up and down."""
        return 3 * self.hidden * self.intermediate * self.experts

    @property
    def active_routed_params(self) -> int:
        """3 h I k: the routed experts one token passes through."""
        return 3 * self.hidden * self.intermediate * self.top_k

    @property
    def shared_params(self) -> int:
        return 3 * self.hidden * self.shared_intermediate

    @property
    def inactive_params(self) -> int:
        """Parameters of the layer a token does not use: the routed experts it is not sent to."""
        return self.routed_params - self.active_routed_params

    def tokens_per_expert(self, tokens: float, imbalance: float = 1.0) -> float:
        """c = T k / E x imbalance: the tokens one expert multiplies (imbalance 1: the mean; the
        most loaded expert's share for a larger one, parsim.cost.comm.ROUTING_IMBALANCE)."""
        return tokens * self.top_k / self.experts * imbalance

    def routed_gemms(self, tokens: float, imbalance: float = 1.0) -> tuple[tuple[float, float, float, int], ...]:
        """(M, N, K, groups) of the routed experts' forward grouped GEMMs at T tokens: gate and up
        fused (c, 2I, h) and down (c, h, I), over the E experts."""
        c = self.tokens_per_expert(tokens, imbalance)
        return ((c, 2 * self.intermediate, self.hidden, self.experts),
                (c, self.hidden, self.intermediate, self.experts))

    def shared_gemms(self, tokens: float) -> tuple[tuple[float, float, float, int], ...]:
        """(M, N, K, groups) of the shared experts' forward GEMMs: every token, gate and up
        (T, 2 I_s, h; transformers runs them as two of N = I_s), down (T, h, I_s)."""
        if not self.shared_intermediate:
            return ()
        return ((tokens, 2 * self.shared_intermediate, self.hidden, 1),
                (tokens, self.hidden, self.shared_intermediate, 1))

    def router_gemm(self, tokens: float) -> tuple[float, float, float, int]:
        """(T, E, h): the router's scores."""
        return (tokens, self.experts, self.hidden, 1)

    def all_to_all_bytes(self, tokens: float, dtype_bytes: int) -> float:
        """One token all-to-all's message per rank (the dispatch or the combine, forward or
        backward): each of the rank's T tokens once per routed expert it chose, h values each,
        T k h x dtype bytes.  This is the buffer ``all_to_all_single`` scatters (Megatron-Core's
        alltoall token dispatcher, dropless: tokens permuted by expert, then exchanged), the same
        whatever the routing; the share for the rank's own experts stays local, and the routing
        decides how the rest divides over the peers (parsim.cost.comm.all_to_all_time_s prices
        both).  A MoE layer issues four per micro-batch: dispatch and combine in the forward,
        their transposes in the backward."""
        return tokens * self.top_k * self.hidden * dtype_bytes

    def remote_nodes_per_token(self, nodes: int) -> float:
        """The remote nodes a token's k experts lie on, in expectation, with the E experts spread
        evenly over ``nodes`` nodes (an ep group's, E / nodes each) and the token on one of them: what
        a dispatcher sending a token once per destination node sends off its node
        (parsim.cost.comm.all_to_all_time_s' off_node_share, over k).  Routing taken as uniform over
        the experts it may choose (forced balance; a learned router is no less spread on average
        under its balancing): the k experts drawn without replacement from the E M / N experts on the
        M nodes its groups allow (group-limited routing: ``group_limit`` groups of E / ``groups``
        experts cover at most M = min(N, group_limit x max(1, N / groups)) nodes; DeepSeek-V3's M
        = 4 of 8, Sec. 2.1.2, "each token will be sent to at most M nodes"), a node of them left
        out with probability C(E M/N - E/N, k) / C(E M/N, k); the token's own node is one of the
        M with probability M / N:

            remote = M (1 - C(E M/N - E/N, k) / C(E M/N, k)) (N - 1) / N

        DeepSeek-V3 on 8 nodes: 3.17 (against k (N-1)/N = 7 rows for a dispatcher sending every
        row; its report's "3.2 experts per node", Sec. 3.2.2, at 4 nodes), bounded by M."""
        n = max(1, int(nodes))
        if n == 1:
            return 0.0
        limit = n
        if self.group_limit and self.groups > 1:
            limit = min(n, int(math.ceil(self.group_limit * max(1.0, n / self.groups))))
        per_node, pool = self.experts / n, self.experts * limit / n
        missed = math.comb(int(round(pool - per_node)), self.top_k) / math.comb(int(round(pool)), self.top_k)
        return limit * (1 - missed) * (n - 1) / n

    def fwd_flops_per_token(self) -> float:
        """Forward FLOPs per token of the router, the active routed experts and the shared ones
        (2 x MACs)."""
        return 2.0 * (self.experts * self.hidden + self.active_routed_params + self.shared_params)

    def to_dict(self) -> dict:
        return {"experts": self.experts, "top_k": self.top_k, "hidden": self.hidden,
                "intermediate": self.intermediate, "shared_intermediate": self.shared_intermediate,
                "router_params": self.router_params, **({"groups": self.groups, "group_limit": self.group_limit}
                                                        if self.group_limit else {}),
                "routed_params": self.routed_params,
                "active_routed_params": self.active_routed_params, "shared_params": self.shared_params}


def _get(cfg: dict, *names, default=None):
    for n in names:
        if cfg.get(n) is not None:
            return cfg[n]
    return default


def config_experts(cfg: dict, layer: int) -> Experts | None:
    """The experts of decoder layer ``layer`` as a Hugging Face config lays them out, or None for
    a dense layer.  Which layers are MoE, as transformers 5 builds them:
    - ``mixtral``: every layer; num_local_experts, num_experts_per_tok, intermediate_size;
    - ``qwen3_moe`` and ``qwen2_moe``: layers not in mlp_only_layers with (layer + 1) %
      decoder_sparse_step == 0; num_experts, moe_intermediate_size; qwen2_moe adds one shared
      expert of shared_expert_intermediate_size whose output a sigmoid gate (h -> 1,
      ``shared_expert_gate``, counted with the router) scales (transformers' Qwen2MoeSparseMoeBlock);
    - ``deepseek_v3`` and ``deepseek_v2``: layers from first_k_dense_replace on; n_routed_experts,
      moe_intermediate_size, n_shared_experts shared experts of that size each; a token's experts
      from topk_group of n_group groups (DeepSeek-V3 always in transformers' router; DeepSeek-V2's
      device-limited routing, Sec. 2.2.2, under its topk_method group_limited_greedy only)."""
    kind = cfg.get("model_type")
    h = cfg["hidden_size"]
    k = cfg.get("num_experts_per_tok")
    if kind == "mixtral":
        e = _get(cfg, "num_local_experts", default=8)
        return Experts(e, k, h, cfg["intermediate_size"], 0, e * h)
    if kind in ("qwen3_moe", "qwen2_moe"):
        e = _get(cfg, "num_experts", default=0)
        step = _get(cfg, "decoder_sparse_step", default=1)
        if not e or layer in (cfg.get("mlp_only_layers") or []) or (layer + 1) % step:
            return None
        shared = _get(cfg, "shared_expert_intermediate_size", default=0) if kind == "qwen2_moe" else 0
        return Experts(e, k, h, cfg["moe_intermediate_size"], shared, e * h + (h if shared else 0))
    if kind in ("deepseek_v3", "deepseek_v2"):
        if layer < _get(cfg, "first_k_dense_replace", default=0):
            return None
        e, inter = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
        # e_score_correction_bias (E) is a buffer in transformers: DeepSeek-V3 moves it by a rule,
        # not by gradients (aux-loss-free balancing, Sec. 2.1.2), so it is no trained parameter.
        # transformers' DeepseekV3TopkRouter always limits a token to topk_group of n_group groups;
        # DeepseekV2TopkRouter only under topk_method group_limited_greedy (greedy: any expert)
        groups, limit = _get(cfg, "n_group", default=1), _get(cfg, "topk_group", default=0)
        if kind == "deepseek_v2" and cfg.get("topk_method") != "group_limited_greedy":
            groups, limit = 1, 0
        return Experts(e, k, h, inter, inter * _get(cfg, "n_shared_experts", default=0), e * h,
                       groups if limit and groups > 1 else 1, limit if limit and groups > 1 else 0)
    return None


def is_moe_config(cfg: dict) -> bool:
    return any(config_experts(cfg, i) is not None for i in range(cfg.get("num_hidden_layers", 0)))


def mla_attention_params(cfg: dict) -> int:
    """Parameters of DeepSeek-V2/V3's multi-head latent attention (DeepSeek-V2, Sec. 2.1.2-2.1.3;
    DeepSeek-V3 Sec. 2.1.1): the query's down projection h -> q_lora_rank with an RMSNorm and its
    up projection to a heads of (nope + rope) dims; the joint KV down projection h ->
    kv_lora_rank + rope (the decoupled RoPE key shared by the heads) with an RMSNorm over the
    latent, its up projection to a heads of (nope + v) dims; the output a v -> h."""
    h, a = cfg["hidden_size"], cfg["num_attention_heads"]
    q_r, kv_r = cfg["q_lora_rank"], cfg["kv_lora_rank"]
    nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    q = h * q_r + q_r + q_r * a * (nope + rope)
    kv = h * (kv_r + rope) + kv_r + kv_r * a * (nope + v)
    return q + kv + a * v * h


def attention_params(cfg: dict) -> int:
    """One layer's attention: MLA (``kv_lora_rank`` given) or grouped-query attention without
    biases, q and o h x a d, k and v h x g d (Qwen3 adds an RMSNorm of d over each head's q and k,
    Qwen3 Technical Report Sec. 2; Qwen2 biases its q, k and v projections, transformers'
    Qwen2MoeAttention, bias=True on q_proj, k_proj, v_proj)."""
    if cfg.get("kv_lora_rank"):
        return mla_attention_params(cfg)
    h, a = cfg["hidden_size"], cfg["num_attention_heads"]
    g = cfg.get("num_key_value_heads") or a
    d = cfg.get("head_dim") or h // a
    qk_norm = 2 * d if cfg.get("model_type") == "qwen3_moe" else 0
    bias = a * d + 2 * g * d if cfg.get("model_type") == "qwen2_moe" else 0
    return 2 * h * a * d + 2 * h * g * d + qk_norm + bias


def param_count(cfg: dict) -> tuple[int, int]:
    """(total, active per token) parameters of a MoE decoder from its config: embedding V h, per
    layer attention, two RMSNorms 2h and the feed-forward (dense SwiGLU 3 h I, or the router E h,
    routed 3 h I E of which 3 h I k active, shared 3 h I_s), final RMSNorm h, an untied head V h."""
    h, V, L = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    total = V * h + h + (0 if cfg.get("tie_word_embeddings", False) else V * h)
    active = total
    for i in range(L):
        ex = config_experts(cfg, i)
        base = attention_params(cfg) + 2 * h
        if ex is None:
            layer = base + 3 * h * cfg["intermediate_size"]
            total, active = total + layer, active + layer
        else:
            layer = base + ex.router_params + ex.routed_params + ex.shared_params
            total, active = total + layer, active + layer - ex.inactive_params
    return total, active


def mtp_param_count(cfg: dict) -> dict:
    """DeepSeek-V3's multi-token-prediction modules, which transformers' DeepseekV3ForCausalLM does
    not build (its config's num_nextn_predict_layers counts them).  DeepSeek-V3, Sec. 2.2 and
    Fig. 3: each depth shares the embedding and the output head with the main model and adds a
    projection M (d x 2d) of the concatenated, RMS-normalised hidden state and embedding, and one
    Transformer block (as the model's MoE layers: MLA and the MoE).  The published checkpoint
    (model.layers.61.*) stores those plus the final RMSNorm of the module (shared_head.norm) and
    copies of the embedding and head (embed_tokens, shared_head.head): ``checkpoint`` counts them.
    {"depths", "own" (what training adds), "checkpoint" (own + the embedding and head copies)}."""
    n = cfg.get("num_nextn_predict_layers") or 0
    if not n or cfg.get("model_type") != "deepseek_v3":
        return {"depths": 0, "own": 0, "checkpoint": 0}
    h, V = cfg["hidden_size"], cfg["vocab_size"]
    ex = config_experts(cfg, cfg["num_hidden_layers"])
    block = mla_attention_params(cfg) + 2 * h + ex.router_params + ex.routed_params + ex.shared_params
    own = block + 2 * h * h + 2 * h + h      # the block, M (d x 2d), the two input RMSNorms, the final norm
    return {"depths": n, "own": n * own, "checkpoint": n * (own + 2 * V * h)}
