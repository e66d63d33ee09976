"""Context parallelism (cp): the rank layout, the per-device graph, the ring's price in the
simulator, the planner's search, and (single process) the executor's pieces against plain
attention.  The two-rank run against the single-process reference is in tests/test_exec.py."""

import json
import math
from dataclasses import replace

import pytest
import torch

from parsim.cli import main
from parsim.cost.compute import AnalyticalCompute, ProfiledCompute, ProfileTable, LayerTimes
from parsim.cost.context import ring_buffer_bytes, ring_exposed_s, ring_sent_bytes
from parsim.cost.memory import backward_workspace_bytes
from parsim.cost.layer import loss_time_s
from parsim.errors import InfeasibleError
from parsim.hardware import load_cluster
from parsim.hardware.links import Link
from parsim.model.attention import attention_of, check_cp, cp_options, sequence_length
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig, Plan
from parsim.schedule.actions import Kind
from parsim.search.planner import Constraints, plan
from parsim.shard.prepare import ShardMemo, per_device_graph
from parsim.sim import simulate

GPT = "examples/gpt_small_local.yaml"        # 4 blocks, h 256, 8 heads of 32, s 128, vocabulary 2048


@pytest.fixture(scope="module")
def resnet():
    return load_model("examples/resnet50_cifar10_local.yaml")


# ----------------------------------------------------------------------------- the rank layout

@pytest.mark.parametrize("placement", ["pp-inner", "dp-inner"])
def test_rank_layout_puts_cp_right_outside_tp(placement):
    c = ParallelConfig(dp=2, pp=3, microbatches=1, tp=2, cp=2, placement=placement)
    assert c.world_size == 24
    ranks = {}
    for d in range(2):
        for p in range(3):
            for t in range(2):
                for k in range(2):
                    r = c.global_rank(d, p, t, k)
                    assert c.coordinates(r) == (d, p, t, k)
                    ranks[r] = (d, p, t, k)
    assert sorted(ranks) == list(range(24))
    # tp innermost, then cp (Megatron's "tp-cp-ep-dp-pp"): a cp ring steps over whole tp groups
    assert c.tp_group(0, 0) == [0, 1] and c.cp_group(0, 0) == [0, 2] and c.cp_group(0, 0, 1) == [1, 3]
    base = (lambda d, p: d * 3 + p) if placement == "pp-inner" else (lambda d, p: p * 2 + d)
    assert c.global_rank(1, 2, 1, 1) == (base(1, 2) * 2 + 1) * 2 + 1
    # gradients over dp x cp: every rank of the stage with this tp rank
    assert sorted(c.grad_group(1)) == sorted(r for r, (d, p, t, k) in ranks.items() if p == 1 and t == 0)
    assert len(c.grad_group(0)) == c.grad_ranks == 4
    # cp = 1 leaves the layout as it was
    old = ParallelConfig(dp=2, pp=3, microbatches=1, tp=2, placement=placement)
    assert [old.global_rank(d, p, t) for d in range(2) for p in range(3) for t in range(2)] == \
        [(base(d, p)) * 2 + t for d in range(2) for p in range(3) for t in range(2)]


def test_plan_json_keeps_cp(gpt):
    cfg = ParallelConfig(dp=1, pp=1, microbatches=2, bounds=(0, len(gpt.graph)), cp=2)
    d = Plan(GPT, "g", tuple(gpt.graph.names), 8, "fp32", "momentum", "local-cpu", 2, cfg, {}).to_json()
    assert d["parallel"]["cp"] == 2
    assert Plan.from_json(json.loads(json.dumps(d)), "p.json").config == cfg
    del d["parallel"]["cp"]                           # plans written before cp: cp 1
    assert Plan.from_json(d, "p.json").config.cp == 1


# ----------------------------------------------------------------------------- the graph

def test_attention_found_from_the_operators(gpt, resnet):
    g = gpt.graph
    att = attention_of(g.layers[1], g.extraction_batch)
    # QK^T and AV: 2 x (2 s s d) per head, 8 heads
    assert (att.seq_len, att.heads, att.kv_heads, att.head_dim) == (128, 8, 8, 32)
    assert att.fwd_flops == 2 * 8 * (2 * 128 * 128 * 32)
    # what eager attention keeps of its s x s tensors: the softmax's fp32 probabilities, 8 heads
    assert att.scores_saved_bytes == 8 * 128 * 128 * 4
    assert attention_of(g.layers[0], g.extraction_batch) is None          # the embedding
    assert sequence_length(g) == 128 and sequence_length(resnet.graph) is None
    assert cp_options(128) == [1, 2, 4, 8, 16, 32, 64] and cp_options(128, 16)[-1] == 16 and cp_options(None) == [1]
    with pytest.raises(InfeasibleError, match="no attention over a sequence"):
        check_cp(resnet.graph, 2)
    with pytest.raises(InfeasibleError, match="2 x cp = 6 equal chunks.*use cp in 1, 2, 4"):
        check_cp(g, 3)


def test_grouped_query_attention_ring_carries_the_kv_heads():
    spec = load_model("tests/data/hf_tiny_llama.yaml")
    g = spec.graph
    att = next(a for a in (attention_of(layer, g.extraction_batch) for layer in g.layers) if a)
    assert (att.seq_len, att.heads, att.kv_heads) == (16, 4, 2)
    d = att.head_dim
    one = per_device_graph(g, cp=2)
    layer = next(layer for layer in one.layers if layer.cp_kv_bytes)
    assert layer.cp_kv_bytes == 2 * 8 * 2 * d * 4                       # K and V of 2 KV heads, s/cp tokens
    four = per_device_graph(g, 4, "megatron", cp=2)                       # tp 4 > 2 KV heads: one per device
    assert next(x.cp_kv_bytes for x in four.layers if x.cp_kv_bytes) == 2 * 8 * 1 * d * 4


@pytest.mark.parametrize("cp", [2, 4])
def test_a_cp_rank_holds_s_over_cp_tokens_of_every_layer(gpt, cp):
    g = gpt.graph
    memo = ShardMemo()
    c = per_device_graph(g, cp=cp, memo=memo)
    assert c.cp == cp and per_device_graph(g, cp=cp, memo=memo) is c        # kept in the run's memo
    assert c.input_bytes == g.input_bytes / cp
    for whole, part in zip(g.layers, c.layers):
        for f in ("fwd_flops", "bwd_flops", "fwd_mem_bytes", "bwd_mem_bytes", "output_bytes",
                  "input_saved_bytes", "input_shared_bytes", "w_held_bytes"):
            assert getattr(part, f) == getattr(whole, f) / cp, f
        assert (part.param_count, part.param_bytes, part.seq_share) == (whole.param_count, whole.param_bytes, 1 / cp)
        # the flash-style ring keeps each query row's output (32 fp32) and log-sum-exp (fp32), not
        # the eager layer's probabilities (s x s per head)
        ring = 8 * 128 * (32 * 4 + 4) - 8 * 128 * 128 * 4 if part.cp_kv_bytes else 0
        assert part.saved_bytes == (whole.saved_bytes + ring) / cp
    block = c.layers[1]
    assert block.cp_kv_bytes == 2 * (128 / cp) * 8 * 32 * 4                # fp32 K and V of a chunk, per sample
    assert block.attention_flops == 2 * 8 * (2 * 128 * 128 * 32) / cp
    assert c.layers[0].cp_kv_bytes == 0 == c.layers[-1].cp_kv_bytes
    # recomputed, then cut: its saved input is the previous layer's output over cp
    r = per_device_graph(g, recompute=True, cp=cp)
    assert r.layers[2].saved_bytes == g.layers[1].output_bytes / cp
    # ... and what its backward re-creates is the ring's, not the scores
    whole_r = per_device_graph(g, recompute=True).layers[2]
    assert r.layers[2].recompute_bytes == (whole_r.recompute_bytes + 8 * 128 * (32 * 4 + 4) - 8 * 128 * 128 * 4) / cp
    # tensor parallelism first (heads / tp), then cp
    tc = per_device_graph(g, 2, "megatron", cp=cp)
    assert tc.layers[1].cp_kv_bytes == block.cp_kv_bytes / 2
    t2 = per_device_graph(g, 2, "megatron").layers[1]                     # 4 heads a device
    assert tc.layers[1].saved_bytes == pytest.approx((t2.saved_bytes + 4 * 128 * (32 * 4 + 4) - 4 * 128 * 128 * 4) / cp,
                                                     rel=1e-12)
    assert tc.layers[1].tp_comm and all(
        s.bytes_per_device == w.bytes_per_device / (1 if ph == "grad" else cp)
        for (ph, s, _), (_, w, _) in zip(tc.layers[1].tp_comm, per_device_graph(g, 2, "megatron").layers[1].tp_comm))


def test_profiled_and_kernel_level_times_scale_by_the_sequence_share(gpt):
    g = gpt.graph
    table = ProfileTable((1, 2), tuple((n, LayerTimes((1e-3, 2e-3), (2e-3, 4e-3))) for n in g.names))
    prof = ProfiledCompute(table, AnalyticalCompute(load_cluster("local-cpu").device))
    c = per_device_graph(g, cp=2)
    assert prof.layer_time_s(c.layers[1], "F", 2) == pytest.approx(1e-3)
    assert prof.layer_time_s(c.layers[1], "B", 1) == pytest.approx(1e-3)
    kernel = AnalyticalCompute(load_cluster("dgx-a100:1x8").device)
    assert kernel.kernel_level
    whole, half = kernel.layer_time_s(g.layers[1], "F", 8), kernel.layer_time_s(c.layers[1], "F", 8)
    assert half < whole and half == kernel.layer_time_s(replace(g.layers[1], tp_share=0.5), "F", 8)


# ----------------------------------------------------------------------------- the ring's price

class _Fixed:
    """A compute model that times every layer phase at ``t`` seconds."""

    def __init__(self, t):
        self.t = t

    def layer_time_s(self, layer, kind, microbatch):
        return self.t


@pytest.mark.parametrize("kind", ["F", "B", "I", "W"])
@pytest.mark.parametrize("overlap", [1.0, 0.25])
@pytest.mark.parametrize("delay", [0.0, 4e-3])
def test_ring_messages_hide_behind_chunks_and_the_last_dkv_hop_does_not(gpt, kind, overlap, delay):
    """Forward: cp - 1 K,V messages, each behind a chunk.  Backward: K,V behind the first chunk,
    K,V with a dK,dV behind the next cp - 2, the last dK,dV after the last chunk, exposed whole.
    A message arrives after the link's time, and no earlier than the busy-sender delay after its
    post; a chunk hides max(0, arrival - chunk) of it, less (1 - overlap) of the part hidden."""
    cp, b = 4, 3
    layer = per_device_graph(gpt.graph, cp=cp).layers[1]
    kv = 2 * (128 / cp) * 8 * 32 * 4 * b
    assert ring_sent_bytes(layer, kind, b, cp) == (cp - 1) * {"F": 1, "B": 2, "I": 2, "W": 0}[kind] * kv
    share = {"F": layer.attention_flops / layer.fwd_flops,
             "B": 2 * layer.attention_flops / layer.bwd_flops,
             "I": 2 * layer.attention_flops / (layer.bwd_flops - layer.fwd_flops), "W": 0}[kind]
    for t, bandwidth in ((1e-3, 1e9), (1e-3, 1e12), (0.5, 1e9)):     # transfer longer, shorter, and a long chunk
        link = Link(bandwidth, 5e-6)
        chunk, one, two = t * share / cp, 5e-6 + kv / bandwidth, 5e-6 + 2 * kv / bandwidth

        def behind(transfer):
            return max(0.0, max(transfer, delay) - chunk) + (1 - overlap) * min(chunk, transfer)
        want = {"F": (cp - 1) * behind(one), "W": 0.0}.get(kind)
        if want is None:
            want = behind(one) + (cp - 2) * behind(two) + max(one, delay)
        assert ring_exposed_s(_Fixed(t), layer, kind, b, cp, link, overlap, delay) == pytest.approx(want, rel=1e-12)
    assert ring_buffer_bytes(layer, b) == 4 * kv
    # a recomputed layer's backward runs the forward's ring again
    rc = per_device_graph(gpt.graph, recompute=True, cp=cp).layers[1]
    assert ring_sent_bytes(rc, "B", b, cp) == (cp - 1) * 3 * kv
    link = Link(1e9, 5e-6)
    assert ring_exposed_s(_Fixed(1e-3), rc, "B", b, cp, link, overlap, delay) == pytest.approx(
        ring_exposed_s(_Fixed(1e-3), layer, "B", b, cp, link, overlap, delay)
        + ring_exposed_s(_Fixed(1e-3), layer, "F", b, cp, link, overlap, delay), rel=1e-12)


def test_ring_at_cp2_on_the_local_cpu_in_closed_form():
    """The validation set's cp=2 plan on local-cpu: a 1 MiB K,V message per block forward, and
    backward a K,V message behind the first chunk and the dK,dV hop after the second: with the
    profile's 4 ms busy-sender delay, each message costs about that delay."""
    cluster = load_cluster("local-cpu")
    col = cluster.profile.collectives
    assert col.busy_sender_delay_s == 4e-3
    layer = per_device_graph(load_model(GPT).graph, cp=2).layers[1]
    link = cluster.link_for("group")
    one = link.time_s(layer.cp_kv_bytes * 8)
    assert layer.cp_kv_bytes * 8 == 1 << 20 and one < 1e-3
    t = 12e-3
    chunk_f = t * layer.attention_flops / layer.fwd_flops / 2
    chunk_b = t * 2 * layer.attention_flops / layer.bwd_flops / 2
    ov = col.overlap
    assert ring_exposed_s(_Fixed(t), layer, "F", 8, 2, link, ov, 4e-3) == pytest.approx(
        4e-3 - chunk_f + (1 - ov) * min(chunk_f, one), rel=1e-12)
    assert ring_exposed_s(_Fixed(t), layer, "B", 8, 2, link, ov, 4e-3) == pytest.approx(
        4e-3 - chunk_b + (1 - ov) * min(chunk_b, one) + 4e-3, rel=1e-12)


def test_simulator_prices_the_ring_and_the_larger_gradient_group(gpt):
    cluster = load_cluster("local-cpu")
    compute = AnalyticalCompute.for_training(cluster.device, gpt.training)
    L = len(gpt.graph)
    cfg = ParallelConfig(1, 1, 2, bounds=(0, L), cp=2)
    est = simulate(gpt.graph, gpt.training, cluster, cfg, compute)
    g = per_device_graph(gpt.graph, cp=2)
    b = 4
    link = cluster.link_for("group")
    overlap, delay = cluster.profile.collectives.overlap, cluster.profile.collectives.busy_sender_delay_s
    for kind in (Kind.F, Kind.B):
        want = sum(compute.layer_time_s(layer, kind.value, b)
                   + ring_exposed_s(compute, layer, kind.value, b, 2, link, overlap, delay) for layer in g.layers)
        want += loss_time_s(compute, g, kind.value, b)                       # the last layer runs the loss
        got = [e - s for r, a, _, s, e in est.timeline.records if a.kind == kind and a.microbatch == 0]
        assert got == [pytest.approx(want, rel=1e-9)]
    # per step: 4 blocks x 2 micro-batches x (one K,V step forward + K,V and dK,dV backward)
    kv = 2 * 64 * 8 * 32 * 4 * b
    assert est.cp_ring_bytes == (4 * 2 * 3 * kv,)
    assert est.to_json()["cp_ring_bytes"] == [4 * 2 * 3 * kv] and est.config["cp"] == 2
    # the cp ranks average gradients as dp=2 replicas would: the same buckets, over ranks 0 and 1
    dp2 = simulate(gpt.graph, gpt.training, cluster, ParallelConfig(2, 1, 1, bounds=(0, L)), compute)
    assert est.grad_buckets_bytes == dp2.grad_buckets_bytes and est.grad_buckets_bytes[0]
    grads = sum(est.grad_buckets_bytes[0])
    assert est.comm_bytes["group"] == 2 * grads + 2 * est.cp_ring_bytes[0]     # ring all-reduce and both rings
    # memory: half of each micro-batch's activations, less each block's probabilities (s x s per
    # head, fp32) for the ring's output and log-sum-exp per query row
    one = simulate(gpt.graph, gpt.training, cluster, ParallelConfig(1, 1, 2, bounds=(0, L)), compute)
    ring = 4 * (8 * 128 * (32 * 4 + 4) - 8 * 128 * 128 * 4)
    assert est.stage_saved_bytes[0] == pytest.approx((one.stage_saved_bytes[0] + ring * b) / 2, rel=1e-12)
    # the boundary buffers (half the tokens' logits); the ring's four K, V chunks are a working set of
    # a block's backward, not held beside every activation (here the head's working set is larger)
    assert est.ranks[0].memory.comm_buffers_bytes == one.ranks[0].memory.comm_buffers_bytes / 2
    no_ring = replace(g, layers=tuple(replace(x, cp_kv_bytes=0.0) for x in g.layers))
    assert est.ranks[0].memory.workspace_bytes == backward_workspace_bytes(no_ring, [range(L)], b)
    block = g.layers[1]
    for mb in (1, 4, 64):       # a stage of one block: its weight ops' working sets or its ring's, the larger
        chunks = (4 * block.cp_kv_bytes + block.output_bytes) * mb        # K,V, dK,dV and the gradient in
        assert backward_workspace_bytes(g, [range(1, 2)], mb) == max(
            chunks, backward_workspace_bytes(no_ring, [range(1, 2)], mb))
    assert est.ranks[0].memory.params_bytes == one.ranks[0].memory.params_bytes
    # ZeRO shards over dp x cp: dp=1 cp=2 shards the optimizer state in two
    z = simulate(gpt.graph, gpt.training, cluster, replace(cfg, zero=1), compute)
    assert z.ranks[0].memory.optimizer_bytes == pytest.approx(est.ranks[0].memory.optimizer_bytes / 2)


def test_world_and_bad_cp_are_refused(gpt, resnet):
    cluster = load_cluster("local-cpu")
    L = len(gpt.graph)
    with pytest.raises(InfeasibleError, match="cp=2 x tp=1 = 4 ranks"):
        simulate(gpt.graph, gpt.training, cluster, ParallelConfig(2, 1, 1, bounds=(0, L), cp=2))
    with pytest.raises(InfeasibleError, match="no attention"):
        simulate(resnet.graph, resnet.training, cluster,
                 ParallelConfig(1, 1, 1, bounds=(0, len(resnet.graph)), cp=2))


# ----------------------------------------------------------------------------- the planner

def test_planner_searches_cp_for_long_sequences_with_attention_only(gpt, resnet, tmp_path):
    from parsim.search.enumerate import CP_SEARCH_MIN_TOKENS

    long = tmp_path / "long.yaml"          # a small GPT over 16,384 tokens: the shortest the search splits
    long.write_text(f"schema_version: 1\nmodel: gpt\nargs: {{layers: 2, hidden: 64, heads: 4, "
                    f"seq_len: {CP_SEARCH_MIN_TOKENS}, vocab: 512, dropout: 0.0}}\n"
                    "training: {global_batch_size: 8, dtype: fp16, optimizer: adam}\n")
    spec = load_model(long)
    cluster = load_cluster("dgx-a100:1x8")
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    r = plan(spec, cluster, compute, Constraints(top=200, tp=1, pp=1, microbatches=1, zero=0, recompute=False),
             progress=False)
    assert {c.config.cp for c in r.ranked} == {1, 2, 4, 8}                 # dp x cp = 8 devices
    assert all(c.config.dp * c.config.cp == 8 for c in r.ranked)
    # shorter sequences are not split unless asked (gpt_small_local: 128 tokens)
    short = plan(gpt, cluster, compute, Constraints(top=50, tp=1), progress=False)
    assert {c.config.cp for c in short.ranked} == {1}
    fixed = plan(gpt, cluster, compute, Constraints(top=50, cp=2, tp=1), progress=False)
    assert {c.config.cp for c in fixed.ranked} == {2}
    rn = plan(resnet, load_cluster("local-cpu"), AnalyticalCompute.for_training(cluster.device, resnet.training),
              Constraints(top=50), progress=False)
    assert {c.config.cp for c in rn.ranked} == {1}


def test_cli_takes_cp_and_refuses_bad_values_in_one_line(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["simulate", GPT, "--cluster", "local-cpu", "--dp", "1", "--cp", "2", "-o", str(out), "--json"]) == 0
    saved = json.loads(out.read_text())
    assert saved["parallel"]["cp"] == 2 and saved["estimate"]["config"]["cp"] == 2
    capsys.readouterr()
    assert main(["simulate", GPT, "--cluster", "local-cpu", "--cp", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--cp 3" in err and "use cp in 1, 2, 4" in err
    assert math.isclose(saved["estimate"]["cp_ring_bytes"][0], 4 * 3 * 2 * 64 * 8 * 32 * 4 * 8)


# ----------------------------------------------------------------------------- the executor's pieces

from parsim.exec import context_parallel as cpx          # noqa: E402


def _plain_attention(q, k, v):
    """The zoo GPT's causal attention (Block.attend without dropout)."""
    s = q.shape[2]
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    att = att.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(att, -1) @ v


def test_zigzag_split_and_merge():
    assert cpx.zigzag_positions(16, 2, 0).tolist() == [0, 1, 2, 3, 12, 13, 14, 15]
    assert cpx.zigzag_positions(16, 2, 1).tolist() == [4, 5, 6, 7, 8, 9, 10, 11]
    for cp in (1, 2, 4):
        held = torch.cat([cpx.zigzag_positions(32, cp, r) for r in range(cp)])
        assert sorted(held.tolist()) == list(range(32))                   # every token once
        x = torch.randn(3, 32, 5)
        parts = [cpx.split_sequence(x, cp, r) for r in range(cp)]
        assert all(p.shape == (3, 32 // cp, 5) for p in parts)
        assert torch.equal(cpx.merge_sequence(parts), x)
    with pytest.raises(ValueError):
        cpx.zigzag_positions(12, 4, 0)


def test_online_softmax_merge_equals_softmax_over_all_keys():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 6, 4, dtype=torch.float64) for _ in range(3))
    whole = torch.softmax(q @ k.transpose(-2, -1) * 0.5, -1) @ v
    a, la = cpx.block_attention(q, k[:, :, :2], v[:, :, :2], False, 0.5)
    b, lb = cpx.block_attention(q, k[:, :, 2:], v[:, :, 2:], False, 0.5)
    out, lse = cpx.merge(a, la, b, lb)
    torch.testing.assert_close(out, whole)
    torch.testing.assert_close(lse, torch.logsumexp(q @ k.transpose(-2, -1) * 0.5, -1))
    # the first merge starts from nothing: lse -inf, output 0
    start, l0 = cpx.merge(torch.zeros_like(a), torch.full_like(la, float("-inf")), a, la)
    torch.testing.assert_close(start, a)
    torch.testing.assert_close(l0, la)


@pytest.mark.parametrize("cp", [2, 4])
def test_ring_steps_forward_and_backward_equal_plain_causal_attention(cp):
    """Every rank's steps, in ring order, run in one process: the blocks of step_blocks merged by
    the online softmax give plain attention's output at the rank's positions, and the blocks'
    gradients, each K, V chunk's summed over the ranks that held it, give plain attention's."""
    torch.manual_seed(1)
    s, d = 32, 8
    q, k, v = (torch.randn(2, 3, s, d, dtype=torch.float64, requires_grad=True) for _ in range(3))
    dout = torch.randn(2, 3, s, d, dtype=torch.float64)
    ref = _plain_attention(q, k, v)
    ref.backward(dout)
    scale, T, n = 1 / math.sqrt(d), s // cp, s // (2 * cp)
    local = [[cpx.split_sequence(t.detach(), cp, r, dim=2) for t in (q, k, v, dout)] for r in range(cp)]
    outs, dqs, dks, dvs = [], [], [torch.zeros(2, 3, T, d, dtype=torch.float64) for _ in range(cp)], []
    dvs = [torch.zeros_like(x) for x in dks]
    for r in range(cp):
        qr, _, _, dr = local[r]
        out, lse = torch.zeros_like(qr), torch.full(qr.shape[:-1], float("-inf"), dtype=torch.float64)
        pos_q = cpx.zigzag_positions(s, cp, r)
        for step in range(cp):
            j = (r - step) % cp
            qs, ks, causal = cpx.step_blocks(r, j, T)
            if not causal:      # no mask needed: every key of the block precedes every query
                pos_k = cpx.zigzag_positions(s, cp, j)
                assert (pos_k[ks].unsqueeze(0) < pos_q[qs].unsqueeze(1)).all()
                assert len(pos_q[qs]) * len(pos_k[ks]) == 2 * n * n          # two blocks: balanced
            o, l = cpx.block_attention(qr[:, :, qs], local[j][1][:, :, ks], local[j][2][:, :, ks], causal, scale)
            out[:, :, qs], lse[:, :, qs] = cpx.merge(out[:, :, qs], lse[:, :, qs], o, l)
        outs.append(out)
        delta = (dr * out).sum(-1)
        dq = torch.zeros_like(qr)
        for step in range(cp):
            j = (r - step) % cp
            qs, ks, causal = cpx.step_blocks(r, j, T)
            a, b, c = cpx._block_backward(qr[:, :, qs], local[j][1][:, :, ks], local[j][2][:, :, ks], dr[:, :, qs],
                                          lse[:, :, qs], delta[:, :, qs], causal, scale)
            dq[:, :, qs] += a
            dks[j][:, :, ks] += b
            dvs[j][:, :, ks] += c
        dqs.append(dq)
    torch.testing.assert_close(cpx.merge_sequence(outs, dim=2), ref.detach())
    torch.testing.assert_close(cpx.merge_sequence(dqs, dim=2), q.grad)
    torch.testing.assert_close(cpx.merge_sequence(dks, dim=2), k.grad)
    torch.testing.assert_close(cpx.merge_sequence(dvs, dim=2), v.grad)


def test_executor_refuses_what_it_does_not_run(gpt, resnet):
    from parsim.errors import InputError

    L = len(gpt.graph)
    cpx.check_supported(ParallelConfig(1, 1, 1, bounds=(0, L), cp=2), gpt, "p.json")      # runs
    for cfg, words in ((ParallelConfig(1, 2, 2, bounds=(0, 2, L), cp=2), "pp=2"),
                       (ParallelConfig(1, 1, 1, bounds=(0, L), tp=2, tp_layout="megatron", cp=2), "tp=2"),
                       (ParallelConfig(1, 1, 1, bounds=(0, L), zero=1, cp=2), "zero=1")):
        with pytest.raises(InputError, match=f"p.json: parallel.cp: .*{words}"):
            cpx.check_supported(cfg, gpt, "p.json")
    with pytest.raises(InputError, match="built-in gpt"):
        cpx.check_supported(ParallelConfig(1, 1, 1, bounds=(0, len(resnet.graph)), cp=2), resnet, "p.json")
    dropout = replace(gpt, source=replace(gpt.source, args=(("preset", "gpt-tiny"),)))    # the preset's 0.1
    with pytest.raises(InputError, match="args.dropout.*0.1.*set args.dropout: 0.0"):
        cpx.check_supported(ParallelConfig(1, 1, 1, bounds=(0, L), cp=2), dropout, "p.json")


def test_the_gpt_validation_set_measures_cp2(gpt):
    from parsim.validation import default_cases

    cluster = load_cluster("local-cpu")
    cases = {c.label: c.config for c in default_cases(gpt, cluster, AnalyticalCompute.for_training(
        cluster.device, gpt.training))}
    assert (cases["cp2"].cp, cases["cp2"].dp, cases["cp2"].pp, cases["cp2"].world_size) == (2, 1, 1, 2)
    assert cases["planner"].cp == 1                      # the pick among what the executor runs with others
    cpx.check_supported(cases["cp2"], gpt, "cp2.plan.json")   # the executor runs it
