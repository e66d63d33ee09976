"""Simulator: closed forms (bubble, activations in flight), Megatron's activation memory,
the seeds' split, communication overlap, idle time by its cause and memory accounting."""

from dataclasses import dataclass, replace

import pytest

from parsim.cost.memory import bytes_per_param
from parsim.hardware import load_cluster
from parsim.model.graph import Layer, LayerGraph
from parsim.model.spec import Training, load_model
from parsim.plan import ParallelConfig, bounds_from_assignment
from parsim.schedule.actions import Kind
from parsim.search.partition import balanced_bounds
from parsim.search.resolve import resolve_config
from parsim.sim import simulate


@dataclass(frozen=True)
class UnitCost:
    """F = 1, B = 2 (I = W = 1) per layer, optimizer_s per stage (free by default): uniform stages for closed forms."""

    optimizer_s: float = 0.0

    def layer_time_s(self, layer, kind, microbatch):
        return {"F": 1.0, "B": 2.0, "I": 1.0, "W": 1.0}[kind]

    def optimizer_time_s(self, param_count, bytes_per_param_moved):
        return self.optimizer_s


IDEAL = load_cluster("tests/data/ideal.yaml")


def uniform_graph(n_layers=8, saved=100.0, params=10):
    return LayerGraph("uniform", tuple(Layer(f"l{i}", 1.0, 2.0, params, params * 4, 8.0, saved)
                                       for i in range(n_layers)))


def run(p, m, schedule="1f1b", v=1, dp=1, layers_per_stage=1, optimizer_s=0.0, runtime="megatron", saved=100.0):
    g = uniform_graph(p * v * layers_per_stage, saved)
    cfg = ParallelConfig(dp=dp, pp=p, microbatches=m, schedule=schedule, chunks=v,
                         bounds=tuple(range(0, len(g) + 1, layers_per_stage)))
    return simulate(g, Training(global_batch_size=m * dp, pipeline_runtime=runtime), IDEAL, cfg, UnitCost(optimizer_s))


def assert_step_adds_up(e):
    """Every rank's step is busy + input + exposed communication + bubble + waiting on others."""
    for r in e.ranks:
        parts = (r.busy_s, r.input_s, r.exposed_comm_s, r.bubble_s, r.sync_wait_s)
        assert min(parts) >= -1e-12 * e.step_time_s, r
        assert sum(parts) == pytest.approx(e.step_time_s, rel=1e-9), r
    # the rank the step waits for waits on no one; the engine's busy time is its compute records
    assert min(r.sync_wait_s for r in e.ranks) == pytest.approx(0.0, abs=1e-12 * e.step_time_s)
    for r in e.ranks:
        compute = sum(end - start for rank, a, stream, start, end in e.timeline.records
                      if rank == r.rank and stream == "compute")
        assert r.busy_s == pytest.approx(compute, rel=1e-9)


@pytest.mark.parametrize("schedule,p,m", [(s, p, m) for s in ("gpipe", "1f1b")
                                          for p, m in [(1, 1), (2, 4), (4, 4), (4, 8), (4, 16), (8, 32), (3, 7), (4, 2)]
                                          if s == "gpipe" or m >= p])           # torch's Schedule1F1B needs m >= p
@pytest.mark.parametrize("dp", [1, 2])
def test_gpipe_and_1f1b_bubble_closed_form(schedule, p, m, dp):
    e = run(p, m, schedule, dp=dp)          # dp=2: the gradient all-reduce is free on the ideal cluster
    assert e.bubble_fraction == pytest.approx((p - 1) / (m + p - 1))
    assert e.step_time_s == pytest.approx(3 * (m + p - 1))
    # every rank idles (p-1)(F+B): warm-up before its first forward, cool-down after its last
    # backward; with free communication and optimizer, none of it is waiting on others
    assert [r.bubble_s for r in e.ranks] == pytest.approx([3.0 * (p - 1)] * p)
    assert e.sync_wait_fraction == pytest.approx(0.0, abs=1e-9)
    assert_step_adds_up(e)


@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (3, 7)])
def test_optimizer_of_the_last_rank_is_waited_on_not_bubble(p, m):
    # 1F1B, F=1, B=2, optimizer 0.5 per stage: rank 0 ends the pipeline (its last B) at
    # D = 3(m+p-1) and the step at D + 0.5.  Rank r > 0 ends its last B at D - 2r, steps its
    # optimizer within the cool-down, and then waits 0.5 for rank 0's optimizer: its idle
    # (p-1)(F+B) splits into 3(p-1) - 0.5 of bubble and 0.5 of waiting on others.
    e = run(p, m, optimizer_s=0.5)
    assert e.step_time_s == pytest.approx(3 * (m + p - 1) + 0.5)
    assert [r.bubble_s for r in e.ranks] == pytest.approx([3.0 * (p - 1)] + [3.0 * (p - 1) - 0.5] * (p - 1))
    assert [r.sync_wait_s for r in e.ranks] == pytest.approx([0.0] + [0.5] * (p - 1))
    assert_step_adds_up(e)


@pytest.mark.parametrize("p,m,v", [(2, 4, 2), (4, 8, 2), (4, 8, 4), (4, 16, 2), (2, 8, 3)])
def test_interleaved_bubble_closed_form(p, m, v):
    # each chunk is 1/v of a rank's work: (p-1)/(v m + p - 1)  (Narayanan et al. 2021, Sec. 2.2)
    e = run(p, m, "interleaved", v)
    assert e.bubble_fraction == pytest.approx((p - 1) / (v * m + p - 1))
    assert e.sync_wait_fraction == pytest.approx(0.0, abs=1e-9)
    assert_step_adds_up(e)


@pytest.mark.parametrize("p,m", [(2, 4), (4, 4), (4, 8), (8, 16), (4, 2)])
def test_activations_in_flight(p, m):
    if m >= p:   # torch's Schedule1F1B needs m >= p; the min(m, p - s) form is exercised by m = p
        one = run(p, m, "1f1b")
        assert [r.max_inflight_microbatches for r in one.ranks] == [min(m, p - s) for s in range(p)]
        # 100 saved bytes per layer; the last stage's also holds the loss's, its 8-byte output in fp32,
        # one micro-batch's at a time (its outputs do not outlive their backward: return_outputs=False)
        assert one.stage_saved_bytes == (100.0,) * (p - 1) + (108.0,)
        assert [r.memory.activations_bytes for r in one.ranks] == [min(m, p - s) * one.stage_saved_bytes[s]
                                                                   for s in range(p)]
    gp = run(p, m, "gpipe")
    assert [r.max_inflight_microbatches for r in gp.ranks] == [m] * p
    assert [r.memory.activations_bytes for r in gp.ranks] == [100.0 * m] * (p - 1) + [108.0 * m]
    # torch's PipelineStage (Training.pipeline_runtime) also keeps each stage's 8-byte output until the
    # micro-batch's backward (parsim.cost.memory.pipeline_held_bytes); the layers save none of their input
    torch_gp = run(p, m, "gpipe", runtime="torch")
    assert [r.memory.activations_bytes for r in torch_gp.ranks] == [108.0 * m] * (p - 1) + [116.0 * m]
    if m >= p:
        assert run(p, m, "1f1b", runtime="torch").stage_saved_bytes == (108.0,) * (p - 1) + (116.0,)


@pytest.mark.parametrize("schedule,v", [("interleaved", 2), ("zbh1", 1)])
def test_torchs_runtime_schedules_keep_every_send_until_the_step_ends(schedule, v):
    # torch runs these through _PipelineScheduleRuntime, which keeps each send's work, and its tensor, until
    # the step ends (parsim.cost.memory.runtime_sent_bytes).  Layers that save nothing and output 8 bytes: a
    # stage's F keeps its output until its backward, which leaves it (sent) and adds the input gradient it
    # sends (all stages but the first); so each rank ends the step holding m of each of its stages' sends
    p, m = 2, 4
    S = p * v
    e = run(p, m, schedule, v, runtime="torch", saved=0.0)
    sends = [m * sum((8.0 if s > 0 else 0.0) + (8.0 if s < S - 1 else 0.0) for s in range(r, S, p)) for r in range(p)]
    assert [sum(c for _, c in e.timeline.activation_changes(r)) for r in range(p)] == sends
    # the first rank frees nothing it holds: its peak is the step's end
    assert e.ranks[0].memory.activations_bytes == sends[0]
    # the last rank: its last stage's F holds the loss's 8 bytes and its logits' 8 until its backward frees
    # them.  Interleaved, its last actions are stage 1's backwards, each adding its sends: it peaks at the end.
    # ZB-H1's last stage frees them at its I, not its W (torch pops the logits and detaches the loss there:
    # last_stage_freed_at_i_bytes), so it peaks after its fourth F: that micro-batch's 16 beside the three
    # gradients sent before it (before the rule, its two deferred Ws held 2 x 16 beside all four).
    assert e.ranks[1].memory.activations_bytes == (3 * 8.0 + 16.0 if schedule == "zbh1" else sends[1])
    # Megatron's schedules, and torch's Schedule1F1B (whose one held gradient is a buffer), keep none
    for other in (run(p, m, schedule, v, saved=0.0), run(p, m, "1f1b", runtime="torch", saved=0.0)):
        assert all(abs(sum(c for _, c in other.timeline.activation_changes(r))) < 1e-9 for r in range(p))


def test_zero_bubble_beats_1f1b():
    assert run(4, 8, "zbh1").bubble_fraction < run(4, 8, "1f1b").bubble_fraction


def test_megatron_activation_memory_from_extracted_gpt():
    spec = load_model("examples/gpt3_175b.yaml")
    s, h, a = 2048, 12288, 96
    per_layer = spec.graph.layers[1].saved_bytes                     # b = 1
    # fused attention (the zoo GPT's default since issue 37; eager's was 34 + 5 a s / h): Korthikanti et
    # al.'s 34 s b h without the a s^2 tensors, plus the fp32 logsumexp (4 a s)
    assert per_layer == pytest.approx(34 * s * h + 4 * a * s, rel=0.05)


def test_static_memory_matches_zero_table():
    g = uniform_graph(2, params=1000)
    cfg = ParallelConfig(dp=2, pp=1, microbatches=1, bounds=(0, 2))
    e = simulate(g, Training(2, "fp16", "adam"), IDEAL, cfg, UnitCost())
    mem = e.ranks[0].memory
    assert (mem.params_bytes + mem.grads_bytes + mem.optimizer_bytes) == 16 * 2000    # ZeRO's 16 bytes/param
    assert bytes_per_param("fp32", "momentum") == {"params": 4, "grads": 4, "optimizer": 4}


def test_seeds_split_has_a_larger_bubble_than_a_balanced_split():
    spec = load_model("examples/resnet50_cifar10_seeds_split.yaml")
    cluster = load_cluster("ascend910:1x8")
    g = spec.graph
    seeds = ParallelConfig(dp=4, pp=2, microbatches=4, schedule="1f1b", bounds=bounds_from_assignment(spec.manual_stages))
    cost = [l.fwd_flops + l.bwd_flops for l in g.layers]
    balanced = ParallelConfig(dp=4, pp=2, microbatches=4, schedule="1f1b", bounds=balanced_bounds(cost, 2))
    e_seeds = simulate(g, spec.training, cluster, seeds)
    e_bal = simulate(g, spec.training, cluster, balanced)
    busy = [r.busy_s for r in e_seeds.ranks]
    assert busy[0] != pytest.approx(busy[1], rel=0.2)       # the seeds' stages are imbalanced
    assert e_seeds.bubble_fraction > e_bal.bubble_fraction
    assert e_seeds.step_time_s > e_bal.step_time_s


def test_gradient_allreduce_overlaps_the_last_backward():
    g = LayerGraph("big", tuple(Layer(f"l{i}", 1e12, 2e12, 50_000_000, 200_000_000, 1e6, 1e6) for i in range(4)))
    cluster = load_cluster("dgx-a100:1x8")
    cfg = ParallelConfig(dp=8, pp=1, microbatches=1, bounds=(0, 4))
    e = simulate(g, Training(8), cluster, cfg)
    tl = e.timeline
    last_b = next(r for r in tl.records if r[1].kind is Kind.B)
    reduces = [r for r in tl.records if r[1].kind is Kind.REDUCE_GRAD]
    assert len(reduces) > 1
    assert reduces[0][3] < last_b[4]                       # the first bucket starts before backward ends
    assert e.ranks[0].exposed_comm_s < sum(r[4] - r[3] for r in reduces)   # only the tail is exposed


def test_transfers_share_a_link():
    # 1 s of compute per action, 2 s per transfer on local-cpu's 3.5 GB/s link: the link is the
    # bottleneck, so sends from rank 0 must queue behind each other rather than overlap.
    g = LayerGraph("wide", tuple(Layer(f"l{i}", 1.0, 2.0, 0, 0, 7e9, 1.0) for i in range(2)))
    cfg = ParallelConfig(dp=1, pp=2, microbatches=4, schedule="gpipe", bounds=(0, 1, 2))
    e = simulate(g, Training(4), load_cluster("local-cpu"), cfg, UnitCost())
    recs = e.timeline.records
    f_end = {r[1].microbatch: r[4] for r in recs if r[0] == 0 and r[1].kind is Kind.F}
    sends = sorted((r[3], r[4], r[1].microbatch) for r in recs if r[1].kind is Kind.SEND_F)
    assert all(b[0] >= a[1] - 1e-9 for a, b in zip(sends, sends[1:]))       # never two at once
    assert any(start > f_end[mb] + 0.5 for start, _, mb in sends)           # some waited for the link
    assert e.step_time_s > 4 * 2.0                                           # link-bound


def test_gpt_pipeline_holds_and_reduces_a_copy_of_the_tied_embedding():
    """pp=2 puts the GPT's head, which computes its logits with the word embedding's weight, on
    the last stage: that rank holds a copy (weights, gradient and optimizer state), and the two
    copies' gradients are all-reduced between the first and last stage after the backward, both
    ranks starting it together (Megatron's embedding group).  pp=1 holds the weight once."""
    spec = load_model("examples/gpt_tiny_local.yaml")
    g, cluster = spec.graph, load_cluster("local-cpu:1x2")
    vocab, hidden = 512, 64
    per = sum(bytes_per_param("fp32", "momentum").values())
    one = simulate(g, spec.training, cluster, ParallelConfig(dp=1, pp=1, microbatches=4, bounds=(0, 6)))
    assert one.tied_grad_bytes == {} and one.ranks[0].memory.params_bytes == 4 * g.param_count
    e = simulate(g, spec.training, cluster, ParallelConfig(dp=1, pp=2, microbatches=4, bounds=(0, 3, 6)))
    first = sum(layer.param_count for layer in g.layers[:3])
    last = sum(layer.param_count for layer in g.layers[3:]) + vocab * hidden
    assert [r.memory.params_bytes + r.memory.grads_bytes + r.memory.optimizer_bytes for r in e.ranks] == \
        [first * per, last * per]
    assert e.tied_grad_bytes == {0: vocab * hidden * 4, 1: vocab * hidden * 4}
    tied = [r for r in e.timeline.records if r[1].kind is Kind.REDUCE_TIED]
    assert sorted(r[0] for r in tied) == [0, 1] and tied[0][3] == tied[1][3] > 0
    opt = {r[0]: r[3] for r in e.timeline.records if r[1].kind is Kind.OPTIMIZER}
    assert all(opt[r[0]] >= r[4] for r in tied)            # the optimizer steps the summed gradient
    assert_step_adds_up(e)


RESNET = load_model("examples/resnet50_cifar10.yaml")
ASCEND = load_cluster("ascend910:1x8")


def _resnet(**plan):
    from parsim.cost.compute import AnalyticalCompute
    compute = AnalyticalCompute.for_training(ASCEND.device, RESNET.training)
    cfg = resolve_config(RESNET, ASCEND, compute, split="balanced", **plan)
    return simulate(RESNET.graph, RESNET.training, ASCEND, cfg, compute)


@pytest.mark.parametrize("plan", [
    dict(dp=4, pp=2, microbatches=4, schedule="1f1b"),          # dp x pp, gradient all-reduces
    dict(dp=4, pp=2, microbatches=4, schedule="gpipe"),
    dict(dp=2, pp=2, microbatches=4, schedule="interleaved", chunks=2),
    dict(dp=2, pp=4, microbatches=8, schedule="zbh1"),
    dict(dp=8, pp=1, microbatches=2),                          # pp = 1: no pipeline, all-reduce only
], ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_step_adds_up_by_cause(plan):
    e = _resnet(**plan)
    assert_step_adds_up(e)
    if plan["pp"] == 1:     # one rank, nothing to wait for: busy or its own exposed all-reduce
        assert e.ranks[0].bubble_s == 0 and e.ranks[0].sync_wait_s == 0
        assert e.ranks[0].exposed_comm_s > 0


def test_link_bound_step_adds_up():
    # transfers queue on the link: the wait for a SEND's peer is bubble, the queue and transfer exposed
    g = LayerGraph("wide", tuple(Layer(f"l{i}", 1.0, 2.0, 0, 0, 7e9, 1.0) for i in range(2)))
    cfg = ParallelConfig(dp=1, pp=2, microbatches=4, schedule="gpipe", bounds=(0, 1, 2))
    assert_step_adds_up(simulate(g, Training(4), load_cluster("local-cpu"), cfg, UnitCost()))


def test_resnet_dp4_pp2_bubble_falls_with_m_while_rank0_waits_on_rank1s_allreduce():
    # Stage 1 (layer3.1..fc) holds most of the parameters: rank 0 finishes its optimizer, then
    # idles while rank 1's gradient all-reduce runs.  That idle is waiting on others, not bubble.
    runs = {m: _resnet(dp=4, pp=2, microbatches=m, schedule="1f1b") for m in (2, 4, 8)}
    bubbles = [runs[m].bubble_fraction for m in (2, 4, 8)]
    assert bubbles[0] > bubbles[1] > bubbles[2]
    for m, e in runs.items():
        assert_step_adds_up(e)
        r0, r1 = e.ranks
        # rank 0 waits from its optimizer's end to the end of rank 1's, which ends the step
        opt_end = {r: end for r, a, _, _, end in e.timeline.records if a.kind is Kind.OPTIMIZER}
        assert e.step_time_s == pytest.approx(opt_end[1])
        assert r0.sync_wait_s == pytest.approx(opt_end[1] - opt_end[0])
        assert r0.sync_wait_s > 3 * r0.bubble_s and r1.sync_wait_s == 0
        assert e.sync_wait_fraction > e.bubble_fraction


@pytest.mark.parametrize("runtime", ["megatron", "torch"])
def test_split_backward_holds_output_gradients_from_i_to_w(runtime):
    """Under ZB-H1 a micro-batch's I keeps, for its W, the gradient its stage received (under torch's
    PipelineStage, in its receive buffer, counted with the static buffers) and (past the first
    stage, whose I is empty in torch) its weight operators' output gradients; under torch's runtime
    its I leaves the input gradient it sends, and its W the output it sent, until the step ends
    (parsim.cost.memory.runtime_sent_bytes), and the last stage's I frees the logits and the loss's
    saved bytes (last_stage_freed_at_i_bytes).  Replaying the simulated order gives the engine's
    activation peak exactly, and the held gradients raise the last stage's peak."""
    spec = load_model("examples/gpt_tiny_local.yaml")
    spec = replace(spec, training=replace(spec.training, pipeline_runtime=runtime))
    g, cluster = spec.graph, load_cluster("local-cpu:1x2")
    assert all(layer.w_held_bytes > 0 for layer in g.layers[1:]) and g.layers[0].w_held_bytes == 0   # embedding
    cfg = ParallelConfig(dp=1, pp=2, microbatches=4, schedule="zbh1", bounds=(0, 3, 6))
    e = simulate(g, spec.training, cluster, cfg)
    b = 2
    gradient = g.layers[2].output_bytes * b                  # of stage 0's output, a micro-batch
    held = [gradient if runtime == "megatron" else 0.0, sum(layer.w_held_bytes for layer in g.layers[3:]) * b]
    if runtime == "torch":
        held[1] -= (g.layers[-1].output_bytes + g.loss_saved_bytes) * b      # the logits, log_softmax's result
    # (input gradient, output) each stage's backward leaves sent: stage 0's output and stage 1's input gradient
    sent = [(0.0, gradient), (gradient, 0.0)] if runtime == "torch" else [(0.0, 0.0)] * 2
    if runtime == "torch":
        assert e.ranks[0].memory.comm_buffers_bytes == 4 * gradient          # the m gradients' receive buffers
    for r in range(2):
        act = peak = 0.0
        for rank, a, stream, *_ in e.timeline.records:
            if rank != r or stream != "compute":
                continue
            act += {Kind.F: e.stage_saved_bytes[r], Kind.I: held[r] + sent[r][0],
                    Kind.W: sent[r][1] - e.stage_saved_bytes[r] - held[r]}.get(a.kind, 0.0)
            peak = max(peak, act)
        assert e.ranks[r].memory.activations_bytes == pytest.approx(peak, rel=1e-12)
    flat = replace(g, layers=tuple(replace(layer, w_held_bytes=0.0) for layer in g.layers))
    base = simulate(flat, spec.training, cluster, cfg)
    assert e.ranks[1].memory.activations_bytes > base.ranks[1].memory.activations_bytes


def test_the_first_stage_runs_no_i_and_its_whole_backward_as_its_w():
    """Under ZB-H1 torch's first stage runs no I (its input needs no gradient) and its whole
    backward as its W (PipelineStage.backward_one_chunk, backward_weight_one_chunk: "full"); the
    other stages split theirs, two autograd passes that cost a little more than one (priced so:
    the first stage's W is its 1F1B backward, the second stage's I + W within 5% above its)."""
    spec = load_model("examples/gpt_tiny_local.yaml")
    g, cluster = spec.graph, load_cluster("local-cpu:1x2")
    split = simulate(g, spec.training, cluster, ParallelConfig(dp=1, pp=2, microbatches=4, schedule="zbh1",
                                                               bounds=(0, 3, 6)))
    whole = simulate(g, spec.training, cluster, ParallelConfig(dp=1, pp=2, microbatches=4, schedule="1f1b",
                                                               bounds=(0, 3, 6)))

    def durations(e, rank, kind):
        return [end - start for r, a, stream, start, end in e.timeline.records
                if r == rank and stream == "compute" and a.kind == kind]

    b = durations(whole, 0, Kind.B)
    assert len(b) == 4 and durations(split, 0, Kind.I) == [0.0] * 4
    assert durations(split, 0, Kind.W) == pytest.approx(b, rel=1e-12)
    i, w = durations(split, 1, Kind.I), durations(split, 1, Kind.W)
    assert min(i) > 0 and min(w) > 0
    for x, y, full in zip(i, w, durations(whole, 1, Kind.B)):
        assert full <= x + y <= 1.05 * full


def _toy_run(rank0, rank1, delay_s, f_s=(10.0, 1.0), b_s=(2.0, 2.0), transfer_s=0.5):
    """Two ranks, stage r on rank r, the given per-rank action lists (parsed), run by the engine."""
    from parsim.schedule.actions import Action, Schedule
    from parsim.sim import engine
    order = tuple(tuple(Action.parse(a) for a in acts.split()) for acts in (rank0, rank1))
    schedule = Schedule("toy", 2, 2, 2, order)
    costs = engine.Costs({(s, k): d for s in range(2) for k, d in ((Kind.F, f_s[s]), (Kind.B, b_s[s]))},
                         {(0, Kind.SEND_F): transfer_s, (1, Kind.SEND_B): transfer_s}, busy_sender_delay_s=delay_s)
    tl = engine.run(schedule, costs)
    return {str(a): (start, end) for r, a, stream, start, end in tl.records if stream in ("compute", "p2p")}, tl


def test_a_busy_senders_transfer_arrives_post_plus_the_delay():
    """Closed form: rank 0 posts 0SEND_F0 at 10 (its F0: 10 s) and goes straight on to 0F1, so
    the transfer (0.5 s) arrives at post + delay = 13, not 10.5; 0SEND_F1, posted at 20 with
    nothing left to compute, arrives as priced, at 20.5."""
    recs, tl = _toy_run("0F0 0SEND_F0 0F1 0SEND_F1", "1RECV_F0 1F0 1RECV_F1 1F1", delay_s=3.0)
    assert recs["0SEND_F0"] == (10.0, 13.0) and recs["1F0"] == (13.0, 14.0)
    assert recs["0SEND_F1"] == (20.0, 20.5) and recs["1F1"] == (20.5, 21.5)
    assert tl.end_s == [20.0, 21.5]
    recs0, tl0 = _toy_run("0F0 0SEND_F0 0F1 0SEND_F1", "1RECV_F0 1F0 1RECV_F1 1F1", delay_s=0.0)
    assert recs0["0SEND_F0"] == (10.0, 10.5) and recs0["1F0"] == (10.5, 11.5)     # absent: as before
    short, _ = _toy_run("0F0 0SEND_F0 0F1 0SEND_F1", "1RECV_F0 1F0 1RECV_F1 1F1", delay_s=0.2)
    assert short["0SEND_F0"] == (10.0, 10.5)                 # a delay under the transfer changes nothing


def test_a_sender_that_waits_gets_its_transfer_as_priced():
    """Rank 0 posts 0SEND_F0 at 10 and then waits on 0RECV_B0 (rank 1's F0 + B0 come first):
    it computes again only at 13.5 (10.5 + 1 + 2), after the transfer arrived, so the transfer
    is as priced, 10.5, whatever the delay; rank 1's 1SEND_B0 is its last action (waited on)."""
    for delay in (0.0, 3.0):
        recs, tl = _toy_run("0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0", delay_s=delay)
        assert recs["0SEND_F0"] == (10.0, 10.5) and recs["1F0"] == (10.5, 11.5)
        assert recs["1SEND_B0"] == (13.5, 14.0) and recs["0B0"] == (14.0, 16.0)
        assert tl.end_s == [16.0, 13.5]


def test_a_busy_sender_decides_after_waiting_on_a_receive():
    """The sender's next compute decides, after any RECV wait.  F: 10 s on stage 0, 1 s on stage 1;
    B 2 s; transfers 0.5 s; delay 3 s.  Rank 0: 0SEND_F0 posted at 10, 0F1 at once: arrives 13.
    Rank 1: F0 13-14, B0 14-16, 1SEND_B0 posted at 16, then waits on 1RECV_F1, whose data is posted
    at 20: it computes again after 16.5, so 1SEND_B0 arrives as priced.  Rank 0 posts 0SEND_F1 at
    20 and computes 0B0 at once (its data arrived at 16.5): 0SEND_F1 arrives 23, 1F1 runs 23-24.
    With F of 1 s on stage 0: 0SEND_F0 (1, 4); rank 0 posts 0SEND_F1 at 2 and waits on 0RECV_B0
    until rank 1's 1SEND_B0, posted at 7: as priced, behind 0SEND_F0 on the link (held until 4):
    4.5; rank 1 computes 1F1 at 7, before its
    1SEND_B0 would arrive (7.5): that one arrives at 7 + 3 = 10, and 0B0 runs 10-12."""
    r0, r1 = "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1"
    recs, _ = _toy_run(r0, r1, delay_s=3.0)
    assert recs["0SEND_F0"] == (10.0, 13.0) and recs["1SEND_B0"] == (16.0, 16.5)
    assert recs["0B0"] == (20.0, 22.0) and recs["0SEND_F1"] == (20.0, 23.0) and recs["1F1"] == (23.0, 24.0)
    recs, tl = _toy_run(r0, r1, delay_s=3.0, f_s=(1.0, 1.0))
    assert recs["0SEND_F0"] == (1.0, 4.0) and recs["0SEND_F1"] == (4.0, 4.5)
    assert recs["1F0"] == (4.0, 5.0) and recs["1SEND_B0"] == (7.0, 10.0) and recs["1F1"] == (7.0, 8.0)
    assert recs["0B0"] == (10.0, 12.0) and tl.end_s == [12.0, 8.0]
