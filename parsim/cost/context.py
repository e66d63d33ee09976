"""Context parallelism (cp) priced: the sequence split over a ring of cp ranks.

As Megatron-LM runs it (docs: "context_parallel" in the Megatron Core developer guide;
megatron/core/transformer/dot_product_attention / TransformerEngine's
``AttnFuncWithCPAndKVP2P``), after Liu et al. 2023, "Ring Attention with Blockwise Transformers
for Near-Infinite Context", and torch.distributed.tensor.experimental.context_parallel:

- **Tokens.** Each rank of a cp group holds s/cp tokens of every sequence, through every layer:
  its linear layers, norms and activations work on s/cp tokens, so every per-sample FLOP, byte
  and saved activation of every layer is divided by cp (``context_parallel_graph``).  Attention's
  score work too: a rank's s/cp queries meet all s keys, 1/cp of the s x s scores.  Under causal
  masking Megatron cuts the sequence into 2 x cp chunks and gives rank r chunks r and 2cp-1-r
  (zigzag), so every rank and every ring step does the same share of the masked work: the
  attention's time on a rank is 1/cp of the whole, in cp equal chunks.
- **The ring.** K and V of each attention layer travel around the ring as messages between
  neighbours (2 x b x s/cp x kv_heads x head_dim elements each).  Forward: cp - 1 steps, each
  posting the K, V chunk the rank holds to the next rank, then computing attention against it
  (Megatron overlaps each step's send and receive with the chunk's attention).  Backward
  (TransformerEngine's and parsim.exec.context_parallel's): K, V go around again and each chunk's
  dK, dV accumulator follows one hop behind, so the first step carries K, V, the next cp - 2
  carry K, V and a dK, dV, and the last dK, dV hop, to the chunk's owner, comes after the last
  chunk with nothing left to hide it.  A message posted before a chunk exposes
  max(0, arrival - chunk), and a library that shares the compute engine (gloo on CPU cores)
  also takes (1 - overlap) of the part hidden (the cluster profile's collectives ``overlap``, as
  parsim.cost.comm.prefetched_gather_s).  Its arrival is the link's time, and no earlier than
  the busy-sender delay after its post (Collectives.busy_sender_delay_s, measured by
  profile-comm; 0 on GPUs and Ascend): the rule parsim.sim.engine applies to a pipeline send
  whose sender computes next, since gloo moves the data on an I/O thread that waits for a core.
  The last dK, dV hop is priced the same way: on the 2-core local-cpu, posting it and waiting on
  it took 4.7-6.3 ms a layer at 1 MiB (benchmarks/bench_ring_attention.py, "dK,dV post" +
  "dK,dV wait", 2026-11-24), where the link alone prices 0.48 ms and the delay 4 ms
  (``ring_exposed_s``).  A recomputed layer's backward runs the forward's ring again.
- **Parameters** are replicated over cp, so gradients are averaged over the dp x cp ranks
  (parsim.plan.ParallelConfig.grad_group): the same buckets over a larger group.
- **Memory.** Activations / cp (above), except that the ring computes each step's attention
  flash-style (Dao et al. 2022; TransformerEngine's ring runs the fused kernels): it keeps the
  output and its log-sum-exp per query row and recomputes the scores in backward, so an eager
  layer's saved s x s tensors (the softmax's probabilities, ``Attention.scores_saved_bytes``)
  are not held.  The chunks in flight during a layer's backward ring, the K, V chunk being
  received beside the one being used and the dK, dV being received and sent: 4 chunks
  (``ring_buffer_bytes``), a working set of that layer's backward (parsim.cost.memory.
  backward_workspace_bytes), not held beside every activation.

**All-gather cp** (``cp_mode: allgather``; Dubey et al. 2024, "The Llama 3 Herd of Models",
Sec. 3.3.2; TransformerEngine's ``AttnFuncWithCPAndKVAllGather``, "KV all-gather between CP
ranks is exposed"): the same tokens per rank (2 x cp load-balanced chunks, rank r holding r and
2cp-1-r), the same parameters and the same attention work, but K and V are all-gathered over the
cp group before the layer's attention, then each rank attends its local queries against all
keys.  The backward all-gathers K, V again (TE saves the local K, V, not the gathered ones) and
reduce-scatters the full-length dK, dV to their owners.  Each collective moves
(cp - 1) x (one rank's K, V chunk) per rank, as the ring does (``ring_sent_bytes`` prices both),
but none is overlapped (``allgather_exposed_s``): what it buys is fewer, larger messages, and
with grouped-query attention's few KV heads they are small beside the queries' (why Llama 3 chose
it).  Memory: the gathered K, V and the full dK, dV (2 x cp chunks) are the working set of the
layer's backward (``cp_buffer_bytes``) in place of the ring's 4 chunks.

The attention is found from the model's operators (parsim.model.attention): a pair of
parameter-free batched matmuls QK^T (..., T, d) x (..., d, T) and AV.  A model without one (a
ResNet, a ``layers:`` table) has no sequence to split, and refuses cp > 1.

Approximations: a ring step's compute is the layer's time for its kind times the attention's
share of the layer's FLOPs, over cp; kernels keep their unsplit shapes at 1/cp of the work (as
tensor parallelism's share does, parsim.cost.kernels), so a chunk's GEMM efficiency is not
priced apart.  The flash-style ring's own compute (the online-softmax merge forward, the
recomputed scores backward, the masked blocks it skips) is priced as the eager layer's / cp:
on the small GPT the two measured within run-to-run noise of each other
(benchmarks/bench_ring_attention.py, "ring, no comm" against "eager T=s / cp").
"""

from __future__ import annotations

from dataclasses import replace

from parsim.cost.comm import collective_time_s
from parsim.cost.compute import split_flops
from parsim.model.attention import attention_of, check_cp
from parsim.model.graph import DTYPE_BYTES, Layer, LayerGraph

KINDS_WITH_RING = ("F", "B", "I")          # W (weight gradients) has no attention
# a query row's log-sum-exp: fp32 (FlashAttention's softmax_lse); the executor keeps it in the model dtype
LSE_BYTES = 4


def context_parallel_graph(graph: LayerGraph, cp: int) -> LayerGraph:
    """The per-device graph of one rank of a cp group: every per-sample quantity / cp (the module
    docstring), and each attention layer's ring: its K and V chunk bytes per sample on this
    device (KV heads split by tensor parallelism up to their count, replicated beyond, as
    parsim.shard.builtin splits them) and its forward attention FLOPs on this device."""
    if cp == 1:
        return graph
    if graph.cp != 1:
        raise ValueError("context_parallel_graph takes a graph without context parallelism")
    check_cp(graph, cp)
    width = DTYPE_BYTES[graph.dtype]
    layers = []
    for layer in graph.layers:
        att = attention_of(layer, graph.extraction_batch)
        kv_bytes = flops = ring_saved = 0.0
        if att is not None:
            kv_heads = att.kv_heads * max(layer.tp_share, 1 / att.kv_heads)
            kv_bytes = 2 * (att.seq_len / cp) * kv_heads * att.head_dim * width
            flops = att.fwd_flops * layer.tp_share / cp
            if att.scores_saved_bytes:       # eager: the ring keeps its output and log-sum-exp, not the scores
                rows = att.heads * layer.tp_share * att.seq_len
                ring_saved = (rows * (att.head_dim * width + LSE_BYTES) - att.scores_saved_bytes * layer.tp_share)
        # a recomputed layer saves its input; the activations its backward re-creates are the ring's
        saved, again = ((layer.saved_bytes, layer.recompute_bytes + ring_saved) if layer.recompute_bytes
                        else (layer.saved_bytes + ring_saved, 0.0))
        tp_comm = tuple((ph, replace(step, bytes_per_device=step.bytes_per_device / (1 if ph == "grad" else cp)), dm)
                        for ph, step, dm in layer.tp_comm)
        layers.append(replace(
            layer, fwd_flops=layer.fwd_flops / cp, bwd_flops=layer.bwd_flops / cp,
            fwd_mem_bytes=layer.fwd_mem_bytes / cp, bwd_mem_bytes=layer.bwd_mem_bytes / cp,
            output_bytes=layer.output_bytes / cp, saved_bytes=saved / cp, routed_bytes=layer.routed_bytes / cp,
            input_saved_bytes=layer.input_saved_bytes / cp, input_shared_bytes=layer.input_shared_bytes / cp,
            recompute_bytes=again / cp, w_held_bytes=layer.w_held_bytes / cp, tp_comm=tp_comm,
            seq_share=layer.seq_share / cp, cp_kv_bytes=kv_bytes, attention_flops=flops))
    return replace(graph, layers=tuple(layers), input_bytes=graph.input_bytes / cp, cp=cp)


def _attention_share(layer: Layer, kind: str) -> float:
    """The attention's share of the layer's FLOPs in phase ``kind`` (its backward is twice its
    forward, all of it input gradients: I)."""
    flops, _ = split_flops(layer, kind)
    attention = layer.attention_flops * (1 if kind == "F" else 0 if kind == "W" else 2)
    return min(1.0, attention / flops) if flops else 0.0


def ring_steps_bytes(layer: Layer, kind: str, microbatch: int) -> float:
    """Bytes one ring step of ``kind`` sends from one device: the K and V chunk forward; K, V and
    their gradients backward."""
    return layer.cp_kv_bytes * microbatch * (1 if kind == "F" else 2)


def ring_sent_bytes(layer: Layer, kind: str, microbatch: int, cp: int) -> float:
    """Bytes one device sends around the ring in the layer's ``kind`` for one micro-batch (cp - 1
    steps; a recomputed layer's backward runs the forward's ring again)."""
    if cp == 1 or not layer.cp_kv_bytes or kind not in KINDS_WITH_RING:
        return 0.0
    sent = (cp - 1) * ring_steps_bytes(layer, kind, microbatch)
    if layer.recompute_bytes and kind != "F":
        sent += (cp - 1) * ring_steps_bytes(layer, "F", microbatch)
    return sent


def ring_exposed_s(compute, layer: Layer, kind: str, microbatch: int, cp: int, link, overlap: float = 1.0,
                   busy_sender_delay_s: float = 0.0) -> float:
    """What the ring adds to the layer's ``kind`` on one micro-batch beyond its compute (module
    docstring, "The ring"): each message posted before a chunk exposes what of its arrival the
    chunk does not cover, plus (1 - overlap) of the part it hides; the backward's last dK, dV hop
    is exposed whole.  ``compute``: the ComputeModel whose layer time the chunks divide; ``link``
    (parsim.hardware.links.Link): between ring neighbours; ``busy_sender_delay_s``: the cluster's
    Collectives.busy_sender_delay_s.  A recomputed layer's backward adds the forward's ring."""
    if cp == 1 or not layer.cp_kv_bytes or kind not in KINDS_WITH_RING:
        return 0.0
    one = link.time_s(ring_steps_bytes(layer, "F", microbatch))          # a K,V (or dK,dV) message

    def behind(chunk: float, transfer: float) -> float:
        arrival = max(transfer, busy_sender_delay_s)       # its sender computes the chunk next
        return max(0.0, arrival - chunk) + (1.0 - overlap) * min(chunk, transfer)

    def exposed(k: str) -> float:
        chunk = compute.layer_time_s(layer, k, microbatch) * _attention_share(layer, k) / cp
        if k == "F":
            return (cp - 1) * behind(chunk, one)
        both = link.time_s(ring_steps_bytes(layer, k, microbatch))      # K,V and the previous dK,dV
        return behind(chunk, one) + (cp - 2) * behind(chunk, both) + max(one, busy_sender_delay_s)

    return exposed(kind) + (exposed("F") if layer.recompute_bytes and kind != "F" else 0.0)


def ring_buffer_bytes(layer: Layer, microbatch: int) -> float:
    """The chunks in flight during the layer's backward ring (module docstring): 4 K, V chunks."""
    return 4 * layer.cp_kv_bytes * microbatch


def cp_buffer_bytes(layer: Layer, microbatch: int, cp: int, mode: str = "ring") -> float:
    """The K, V working set of the layer's backward under ``mode`` (module docstring): the ring's 4
    chunks in flight, or all-gather cp's gathered K, V and full dK, dV, 2 x cp chunks."""
    if mode == "allgather":
        return 2 * cp * layer.cp_kv_bytes * microbatch
    return ring_buffer_bytes(layer, microbatch)


def allgather_exposed_s(layer: Layer, kind: str, microbatch: int, cp: int, cluster, ranks) -> float:
    """What all-gather cp adds to the layer's ``kind`` on one micro-batch (module docstring), over
    the cp group ``ranks``: forward, the all-gather of K, V (cp chunks gathered); backward, that
    all-gather again and the reduce-scatter of dK, dV; a recomputed layer's backward adds the
    forward's.  All exposed."""
    if cp == 1 or not layer.cp_kv_bytes or kind not in KINDS_WITH_RING:
        return 0.0
    gathered = cp * layer.cp_kv_bytes * microbatch          # K and V of the whole sequence, this device's heads
    gather = collective_time_s(cluster, ranks, gathered, "all_gather")
    if kind == "F":
        return gather
    backward = gather + collective_time_s(cluster, ranks, gathered, "reduce_scatter")
    return backward + (gather if layer.recompute_bytes else 0.0)
