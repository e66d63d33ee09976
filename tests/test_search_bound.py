"""The planner's branch and bound (parsim.search.bound, planner.plan): the memory floor is below
every split's closed-form peak, the strategy search without a cap gives the frontier search's
answer, and the pruned search ranks exactly what the exhaustive one ranks.  (floor <=
lower_bound_s <= simulated: tests/test_planner.py's lower-bound checks.)"""

import itertools
import math
import os

import numpy as np
import pytest

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search import bound, split
from parsim.search.split import inflight_terms, memory_floor_bytes
from parsim.search.planner import Constraints, plan
from parsim.shard.auto import cost_graph
from parsim.shard.search import search
from parsim.shard.search_np import capped, fastest


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _compute(cluster, spec):
    return AnalyticalCompute.for_training(cluster.device, spec.training)


def _links(bnd, schedule, m, pp, v, dp, zero) -> tuple[str, ...]:
    """The link class of each stage boundary of that candidate, placed pp-inner (the run's prices)."""
    from parsim.plan import ParallelConfig
    from parsim.search.resolve import boundary_links

    return bnd.prices.boundary_links(ParallelConfig(dp, pp, m, schedule, v, (), "pp-inner", zero=zero), boundary_links)


@pytest.fixture(scope="module")
def seeds_split():
    return load_model("examples/resnet50_cifar10_seeds_split.yaml")


def test_memory_floor_never_exceeds_the_closed_form_peak_of_any_split(seeds_split):
    spec = seeds_split
    cluster = load_cluster("ascend910:1x8")
    bnd = split.Bounds(spec, spec.graph, cluster, _compute(cluster, spec))
    L = len(spec.graph)
    checked = 0
    for schedule, m, pp, v, b, dp, zero in [("1f1b", 8, 4, 1, 4, 2, 0), ("gpipe", 4, 2, 1, 16, 1, 0),
                                             ("interleaved", 8, 2, 2, 2, 4, 1), ("zbh1", 4, 3, 1, 8, 2, 2),
                                             ("1f1b", 1, 2, 1, 64, 8, 3)]:
        mem = bnd.memory_fn(schedule, m, pp, v, b, dp, zero)
        floor = memory_floor_bytes(bnd.param_prefix[-1], mem.static_per_param, bnd.saved_prefix[-1] + bnd.shared[0],
                                   inflight_terms(mem.inflight), b, v)
        least = np.inf
        for cuts in itertools.combinations(range(1, L), pp * v - 1):
            bounds = (0, *cuts, L)
            peak = max(float(mem(j, bounds[j], bounds[j + 1])) for j in range(pp * v))
            least = min(least, peak)
            checked += 1
        assert floor <= least
        assert floor > 0.3 * least         # and not vacuous: within about 3x of the tightest split
    assert checked > 1000


def test_fill_floor_is_below_every_split_and_tight_on_even_layers():
    """floor.floor_s's fill term for one chunk per rank and an unsplit backward: below the least,
    over every contiguous split of random layers, of max over stages r of (w of stages < r) + m
    w_r (the lower bound's "upstream" term without transfers), and at least m T / pp; on equal
    layers the fill raises it above every other term of the floor."""
    from parsim.search.floor import floor_s
    rng = np.random.default_rng(3)
    for _ in range(300):
        L, pp, m = int(rng.integers(2, 9)), int(rng.integers(1, 5)), int(rng.integers(1, 9))
        if pp > L:
            continue
        f, b = rng.uniform(0.1, 1, L), rng.uniform(0.1, 2, L)
        w = f + b
        phases = [np.concatenate([[0.0], np.cumsum(x)]) for x in (f, b, b / 2, b / 2)]
        best = min(max(sum(w[:a]) + m * sum(w[a:z]) for a, z in zip((0,) + cut, cut + (L,)))
                   for cut in itertools.combinations(range(1, L), pp - 1))
        floor = floor_s(*phases, m, pp, 1, False)
        assert m * w.sum() / pp * (1 - 2e-9) <= floor <= best * (1 + 1e-12)
    w = np.ones(8)                        # 8 equal layers on 2 stages: the least is 4 + 4 m
    even = [np.concatenate([[0.0], np.cumsum(x)]) for x in (w / 2, w / 2, w / 4, w / 4)]
    for m in (2, 8, 64):
        floor = floor_s(*even, m, 2, 1, False)
        assert floor <= 4 + 4 * m
        assert floor >= 8 / (1 - (1 - 1 / m) ** 2) * (1 - 2e-9) > max(4 * m, 7 + m)   # above the other terms


def test_split_backward_fill_floor_is_below_every_split_and_binds_on_even_layers():
    """floor.floor_s's fill term under a split backward (upstream: the forward alone): below the
    least, over every contiguous split of random layers, of max over stages r of (f of stages < r)
    + m w_r, w = F + min(B, I + W) (the lower bound's "upstream" term without transfers), or its
    chain; on equal layers it binds, above every other term."""
    from parsim.search.floor import floor_s, floor_terms
    rng = np.random.default_rng(4)
    for _ in range(300):
        L, pp, m = int(rng.integers(2, 9)), int(rng.integers(1, 5)), int(rng.integers(1, 9))
        if pp > L:
            continue
        f, b, i, w_ = (rng.uniform(0.1, 1, L) for _ in range(4))
        f[0] *= rng.uniform(0.01, 1)           # a first layer light in its forward (an embedding)
        w = f + np.minimum(b, i + w_)
        phases = [np.concatenate([[0.0], np.cumsum(x)]) for x in (f, b, i, w_)]
        best = min(max(sum(f[:a]) + m * sum(w[a:z]) for a, z in zip((0,) + cut, cut + (L,)))
                   for cut in itertools.combinations(range(1, L), pp - 1))
        chain = f.sum() + i.sum()              # the lower bound's chain (I alone on its path)
        assert floor_s(*phases, m, pp, 1, True) <= max(best, chain) * (1 + 1e-12)
    ones = np.ones(8)                     # 8 layers, f = 1, w = 3: stages of two take 2 r + 6 m at best
    even = [np.concatenate([[0.0], np.cumsum(x)]) for x in (ones, 2 * ones, ones, ones)]
    lead = floor_terms(*even, True).lead
    assert lead == pytest.approx(1 / 3)
    floor = floor_s(*even, 4, 4, 1, True)
    assert floor <= 6 + 24
    assert floor == pytest.approx(lead * 24 / (1 - (1 - lead / 4) ** 4) * split.SLACK) and floor > 24  # m T / pp = 24


def _least_makespan(work, machines: int) -> float:
    """The least that the busiest of ``machines`` carries over every assignment of the layers'
    ``work`` to them (contiguous or not), by brute force."""
    return min(max(sum(x for x, k in zip(work, ks) if k == j) for j in range(machines))
               for ks in itertools.product(range(machines), repeat=len(work)))


def test_busiest_share_is_below_every_assignment_and_exact_on_equal_layers():
    """floor.busiest_share, the work floor of a family's busiest rank: at most the least makespan of
    the layers on pp machines over every assignment (what any split, contiguous or interleaved,
    gives its busiest rank), at least the average and the heaviest layer, and on L equal layers
    ceil(L / pp) of them where the average counts L / pp (98 layers on 64 ranks: 2, not 1.53)."""
    from parsim.search.floor import busiest_share
    rng = np.random.default_rng(11)
    tighter = 0
    for _ in range(200):
        L, pp = int(rng.integers(1, 8)), int(rng.integers(1, 4))
        work = rng.choice([rng.uniform(0.1, 1, L), np.round(rng.uniform(1, 4, L))])
        heaviest = np.concatenate([[0.0], np.cumsum(np.sort(work)[::-1])]).tolist()
        share = busiest_share(float(work.sum()), heaviest, pp)
        assert max(work.sum() / pp, work.max()) * (1 - 1e-12) <= share <= _least_makespan(work, pp) * (1 + 1e-12)
        tighter += share > max(work.sum() / pp, work.max()) * (1 + 1e-9)
    assert tighter > 20
    for L, pp in ((98, 64), (96, 16), (61, 8), (7, 3), (5, 5)):
        heaviest = [float(k) for k in range(L + 1)]
        assert busiest_share(float(L), heaviest, pp) == math.ceil(L / pp)


def test_chain_floor_is_one_microbatch_through_every_layer_and_below_every_split():
    """floor.floor_s's chain term, with any number of chunks: at least one micro-batch's forward
    and backward through every layer (F + B; F + I under a split backward, whose W may wait),
    and with fewer micro-batches than ranks the term that binds (m T / pp is below one
    micro-batch's T, and an interleaved floor has no fill term), never above the lower bound's
    own chain over any contiguous split (its transfers left out: >= 0)."""
    from parsim.search.floor import busiest_share, floor_s
    from parsim.search.split import SLACK
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(300):
        L, pp = int(rng.integers(4, 13)), int(rng.integers(2, 5))
        v, m = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        if pp * v > L:
            continue
        f, i, w = rng.uniform(0.1, 1, L), rng.uniform(0.1, 1, L), rng.uniform(0.1, 1, L)
        phases = [np.concatenate([[0.0], np.cumsum(x)]) for x in (f, i + w, i, w)]
        for split_backward in (False, True):
            chain = f.sum() + (i.sum() if split_backward else (i + w).sum())
            floor = floor_s(*phases, m, pp, v, split_backward)
            assert floor >= chain * SLACK * (1 - 1e-12)
            work = f + i + w               # B = I + W here: a split backward's min(B, I + W) too
            heaviest = np.concatenate([[0.0], np.cumsum(np.sort(work)[::-1])]).tolist()
            busiest = busiest_share(work.sum(), heaviest, pp)      # (below the least makespan: test above)
            if v > 1:                      # an interleaved floor: the work terms and the chain
                assert floor == pytest.approx(max(m * busiest, chain) * SLACK, rel=1e-12)
            if v > 1 and chain > m * busiest:     # the chain binds
                # and the lower bound's chain over any split is the same sum, stage by stage
                for cut in itertools.islice(itertools.combinations(range(1, L), pp * v - 1), 20):
                    bounds = (0,) + cut + (L,)
                    own = sum(phases[0][z] - phases[0][a] + (phases[2][z] - phases[2][a] if split_backward
                                                             else phases[1][z] - phases[1][a])
                              for a, z in zip(bounds, bounds[1:]))
                    assert floor <= own * (1 + 1e-12)
                checked += 1
    assert checked > 20


@pytest.mark.parametrize("path", ["examples/gpt_tiny_local.yaml", "examples/resnet50_cifar10.yaml"])
def test_uncapped_strategy_search_in_numpy_equals_the_frontier_search(path):
    spec = load_model(path)
    cluster = load_cluster("dgx-a100:1x8")
    t = spec.training
    for tp in (2, 4, 8):
        for b in (1, 3, 32):
            g, _, _ = cost_graph(spec.graph, tp, cluster, t.dtype, t.optimizer, b)
            fast = fastest(g)
            assert fast is not None            # the zoo's graphs reduce completely
            frontier = search(g, cap=float("inf"))          # a cap that drops nothing: the frontier path
            assert fast.eliminations == frontier.eliminations and fast.time_s == frontier.time_s
            # the same strategies, but where two are exactly as fast (ResNet-50 at tp=4, 32 samples
            # under dgx-a100's fitted numbers) the frontier keeps the one holding less memory
            assert fast.strategies == frontier.strategies or frontier.mem_bytes < fast.mem_bytes
            assert search(g) == fast


def test_capped_strategy_search_in_numpy_equals_the_list_search_on_the_zoo(monkeypatch):
    """Caps between the least memory an assignment can take and the uncapped answer's, where the
    frontiers matter: the numpy search (search_np.capped) gives the list search's answer."""
    from parsim.shard import search as module
    spec = load_model("examples/gpt_tiny_local.yaml")
    cluster = load_cluster("dgx-a100:1x8")
    t = spec.training
    cases = []
    for tp in (2, 4, 8):
        for b in (1, 8):
            g, _, _ = cost_graph(spec.graph, tp, cluster, t.dtype, t.optimizer, b)
            floor = sum(min(m for _, m in c) for c in g.node_costs)
            free = search(g).mem_bytes
            cases += [(g, floor + f * (free - floor)) for f in (0.0, 0.3, 0.7, 0.99)]
    fast = [capped(g, cap, 16) for g, cap in cases]
    monkeypatch.setattr(module, "capped", lambda *args: None)
    differs = 0
    for (g, cap), got in zip(cases, fast):
        ref = search(g, cap)
        assert got == ref and ref is not None and ref.mem_bytes <= cap
        differs += ref.strategies != search(g).strategies
    assert differs >= len(cases) // 2       # the cap binds: the answers are not the uncapped one


@pytest.mark.parametrize("path, cluster_spec, only", [
    ("examples/resnet50_cifar10.yaml", "dgx-a100:8x8", {}),                 # 64 A100s
    ("examples/resnet50_cifar10.yaml", "ascend910:8x8", {"tp": 1}),         # 64 Ascend 910s
    ("examples/resnet50_cifar10.yaml", "ascend910:1x8", {"tp": 2}),         # the searched layout per size
    ("examples/gpt_tiny_local.yaml", "dgx-a100:1x8", {}),
    ("examples/gpt_small_local.yaml", "dgx-a100:2x8", {}),
    ("examples/gpt_small_local.yaml", "dgx-a100:2x8", {"max_memory_bytes": 30 * 2**20}),   # peak floors drop plans
])
def test_pruned_search_ranks_what_the_exhaustive_search_ranks(path, cluster_spec, only):
    spec = load_model(path)
    cluster = load_cluster(cluster_spec)
    c = Constraints(top=8, **only)
    pruned = plan(spec, cluster, _compute(cluster, spec), c, progress=False)
    full = plan(spec, cluster, _compute(cluster, spec), Constraints(top=8, prune=False, **only), progress=False)
    assert pruned.simulated < full.simulated / 2
    assert pruned.considered == full.considered
    assert [x.key() for x in pruned.ranked] == [x.key() for x in full.ranked]
    assert [x.estimate.step_time_s for x in pruned.ranked] == [x.estimate.step_time_s for x in full.ranked]
    assert pruned.chosen.key() == full.chosen.key()


def test_every_ranks_last_compute_is_the_backward_of_its_first_stage():
    """What lower_bound_s's head-and-tail term rests on: with an unsplit backward, each rank ends
    on the backward of its chunk-0 stage, so that micro-batch's backward through the stages before
    it still follows."""
    from parsim.errors import InfeasibleError
    from parsim.schedule.actions import Kind
    from parsim.schedule.generators import build_schedule

    checked = 0
    for name in ("gpipe", "1f1b", "interleaved"):
        for p, m, v in itertools.product((1, 2, 3, 4, 8), (1, 2, 3, 4, 8, 16, 24), (1, 2, 3, 4)):
            if (v > 1) != (name == "interleaved"):
                continue
            try:
                schedule = build_schedule(name, p, m, v)
            except InfeasibleError:
                continue
            for r in range(p):
                last = [a for a in schedule.actions(r) if a.kind in (Kind.F, Kind.B)][-1]
                assert (last.kind, last.stage) == (Kind.B, r), (name, p, m, v, r)
                checked += 1
    assert checked > 300


@pytest.mark.parametrize("path, cluster_spec", [("examples/gpt_tiny_local.yaml", "dgx-a100:1x8"),
                                                ("examples/resnet50_cifar10.yaml", "ascend910:1x8")])
def test_searched_floor_is_below_the_searched_layouts_phases_and_every_simulated_step(path, cluster_spec):
    """floor.searched_floor_s, from the unsharded graph over tp, never exceeds what the searched
    layout's graph gives: each layer's F, B, I and W on one device (the claim it rests on,
    cost.compute.share_bounds_time) and the simulated step of every searched-layout candidate."""
    from parsim.cost.compute import share_bounds_time
    from parsim.search.floor import floor_s, floor_terms, searched_floor_s
    from parsim.shard.prepare import auto_memory_bytes, per_device_graph

    spec = load_model(path)
    cluster = load_cluster(cluster_spec)
    compute = _compute(cluster, spec)
    assert share_bounds_time(compute)
    t = spec.training
    layers = 0
    for tp, b, recompute in itertools.product((2, 4), (1, 4, 16), (False, True)):
        whole = split.Bounds(spec, per_device_graph(spec.graph, 1, "", recompute), cluster, compute).phase_times(b)
        graph = per_device_graph(spec.graph, tp, "auto", recompute, None, cluster, t, b, auto_memory_bytes(cluster, 1))
        sharded = split.Bounds(spec, graph, cluster, compute).phase_times(b)
        for w, s in zip(whole, sharded):
            assert np.all(np.diff(s) >= np.diff(w) / tp * (1 - 1e-12))
            layers += len(s) - 1
    assert layers > 100
    full = plan(spec, cluster, compute, Constraints(tp_layout="auto", top=10**6, prune=False), progress=False)
    checked = 0
    phases: dict[tuple, tuple] = {}         # (tp, recompute, b, pp) -> phase_times, which many candidates share
    for cand in full.ranked:
        c = cand.config
        # a searched family's candidate: tp > 1, or tp = 1 on fewer devices where its layout split
        # nothing (the planner's canonical form); its family's tp fills the cluster
        tp = cluster.world_size // (c.dp * c.pp * c.cp)
        if tp == 1:
            continue
        b = t.global_batch_size // (c.dp * c.microbatches)
        if (1, c.recompute, b, 0) not in phases:
            phases[(1, c.recompute, b, 0)] = split.Bounds(spec, per_device_graph(spec.graph, 1, "", c.recompute),
                                                          cluster, compute).phase_times(b)
        whole = phases[(1, c.recompute, b, 0)]
        floor = searched_floor_s(lambda split_bwd: floor_terms(*whole, split_bwd), tp,
                                 [(c.microbatches, c.pp, c.chunks, c.schedule == "zbh1")])
        assert floor <= cand.estimate.step_time_s, c
        key = (tp, c.recompute, b, c.pp)
        if key not in phases:
            graph = per_device_graph(spec.graph, tp, "auto", c.recompute, None, cluster, t, b,
                                     auto_memory_bytes(cluster, c.pp))
            phases[key] = split.Bounds(spec, graph, cluster, compute).phase_times(b)
        own = floor_s(*phases[key], c.microbatches, c.pp, c.chunks, c.schedule == "zbh1")
        assert floor <= own * (1 + 1e-9), c
        checked += 1
    assert checked > 50


def test_a_tensor_parallel_profile_or_a_falling_efficiency_gives_no_searched_floor():
    """Where a share of a layer may run faster than its share of the whole layer's time, the
    planner bounds the searched layout by 0 (builds its graph as it comes up)."""
    from dataclasses import replace

    from parsim.cost.compute import ProfiledCompute, ProfileTable, share_bounds_time

    cluster = load_cluster("dgx-a100:1x8")
    spec = load_model("examples/gpt_tiny_local.yaml")
    compute = _compute(cluster, spec)
    falling = AnalyticalCompute(replace(cluster.device, efficiency=((1e6, 0.6), (1e9, 0.3))), "fp16")
    assert share_bounds_time(compute) and not share_bounds_time(falling)
    table = ProfileTable((1, 2), (), "fp16")
    assert share_bounds_time(ProfiledCompute(table, compute))
    assert not share_bounds_time(ProfiledCompute(replace(table, tp=2, tp_layout="auto"), compute))
    assert not share_bounds_time(ProfiledCompute(table, falling))


@pytest.mark.parametrize("path, cluster_spec, only", [
    ("examples/gpt_small_local.yaml", "dgx-a100:2x8", {}),         # tp layouts, ZeRO 0-3, a tied head, 2 nodes
    ("examples/resnet50_cifar10.yaml", "ascend910:2x8", {"tp": 1}),  # activations sent between HCCS groups
])
def test_lower_bound_never_exceeds_the_simulated_step_of_any_candidate(path, cluster_spec, only, monkeypatch):
    """lower_bound_s (with its optimizer steps, ZeRO-1's gathers, the transfers of the pipeline's
    head and tail, and the buckets after each stage's last backward) is at most the simulated step
    of every candidate the exhaustive search simulates: every ZeRO stage, placement, schedule and
    layout; and floor_s is at most it, as is the placed floor (floor.Placed: its sends and optimizer
    steps), which is above floor_s for many.  The buckets' term (parsim.search.buckets, as split reads it)
    raises the bound of some, as does ZeRO-3's gathers' (parsim.search.gathers)."""
    from parsim.search.floor import floor_from_terms, floor_s, floor_terms, placed
    from parsim.shard.prepare import auto_memory_bytes, per_device_graph

    spec = load_model(path)
    cluster = load_cluster(cluster_spec)
    compute = _compute(cluster, spec)
    full = plan(spec, cluster, compute, Constraints(top=10**6, prune=False, **only), progress=False)
    cluster = cluster.for_dtype(spec.training.dtype)
    t = spec.training
    bounds_of = {}
    seen = set()
    tighter = 0                     # candidates whose placed floor (sends, optimizer steps) adds to floor_s
    buckets_bind = 0                # candidates whose bound the buckets' term raises
    gathers_bind = 0                # and ZeRO-3's gathers'
    with_buckets, with_gathers = split.final_backward_reductions, split.least_gathers_s
    for cand in full.ranked:
        c = cand.config
        b = t.global_batch_size // (c.dp * c.microbatches)
        graph = per_device_graph(spec.graph, c.tp, c.tp_layout, c.recompute, spec.shard, cluster, t, b,
                                 auto_memory_bytes(cluster, c.pp), cp=c.cp)
        bnd = bounds_of.setdefault((id(graph), c.tp_comm_overlap),          # its layers' times with the overlap
                                   split.Bounds(spec, graph, cluster, compute, c.tp_comm_overlap))
        lb = bnd.lower_bound_s(c, b)
        assert lb <= cand.estimate.step_time_s * (1 + 1e-9), c
        monkeypatch.setattr(split, "final_backward_reductions", lambda *_: 0.0)
        buckets_bind += lb > bnd.lower_bound_s(c, b) * (1 + 1e-9)
        monkeypatch.setattr(split, "final_backward_reductions", with_buckets)
        monkeypatch.setattr(split, "least_gathers_s", lambda *_: 0.0)
        gathers_bind += lb > bnd.lower_bound_s(c, b) * (1 + 1e-9)
        monkeypatch.setattr(split, "least_gathers_s", with_gathers)
        assert floor_s(*bnd.phase_times(b), c.microbatches, c.pp, c.chunks, c.schedule == "zbh1") <= lb, c
        split_bwd = c.schedule == "zbh1"
        own = floor_from_terms(floor_terms(*bnd.phase_times(b), split_bwd), c.microbatches, c.pp, c.chunks, split_bwd,
                               placed(bnd, c, b))
        assert own <= lb, c
        tighter += own > floor_s(*bnd.phase_times(b), c.microbatches, c.pp, c.chunks, split_bwd) * (1 + 1e-9)
        seen.add((c.zero, c.placement, c.schedule, c.pp > 1))
    assert len(full.ranked) > 100 and tighter > len(full.ranked) // 10 and buckets_bind > 0
    assert {z for z, _, _, _ in seen} >= ({0, 1, 2, 3} if not only else {0, 1})
    assert {(p, s) for _, p, s, deep in seen if deep} >= {(p, s) for p in ("pp-inner", "dp-inner")
                                                          for s in ("1f1b", "gpipe", "interleaved", "zbh1")}


def test_lower_bound_prices_each_stages_all_to_alls_over_its_ranks_ep_group(monkeypatch):
    """lower_bound_s charges a stage's exposed MoE all-to-alls over the ep group its rank runs them
    on (ParallelConfig.ep_group, as the simulator does), not the most compact group's: at most the
    simulated step of every expert-parallel candidate of an exhaustive search over both
    placements, and above the compact group's bound wherever the placement spreads the group over
    more nodes (pp-inner: pp ranks between its members); and so is the placed floor with the ranks'
    own all-to-alls (floor.lower_phase_terms), above the compact group's placed floor for many."""
    from parsim.search.floor import floor_from_terms, floor_terms, lower_phase_terms, placed
    from parsim.shard.prepare import expert_graph, per_device_graph

    spec = load_model("examples/moe_tiny_local.yaml")
    cluster = load_cluster("dgx-h100:2x8")
    compute = _compute(cluster, spec)
    full = plan(spec, cluster, compute, Constraints(top=10**6, prune=False, tp=1, cp=1), progress=False)
    cluster = cluster.for_dtype(spec.training.dtype)
    t = spec.training
    checked, tighter, own_tighter = 0, 0, 0
    for cand in full.ranked:
        c = cand.config
        if c.ep == 1:
            continue
        b = t.global_batch_size // (c.dp * c.microbatches)
        graph = expert_graph(per_device_graph(spec.graph, 1, "", c.recompute, spec.shard, cluster, t), c.ep, t)
        bnd = split.Bounds(spec, graph, cluster, compute, exposed_a2a=not c.ep_overlap)
        lb = bnd.lower_bound_s(c, b)
        assert lb <= cand.estimate.step_time_s * (1 + 1e-9), c
        with monkeypatch.context() as m:
            m.setattr(split.Bounds, "ep_phase_lists", lambda *args: None)     # the compact group's phases
            compact = split.Bounds(spec, graph, cluster, compute, exposed_a2a=not c.ep_overlap).lower_bound_s(c, b)
        assert compact <= lb * (1 + 1e-12), c
        spread = len({cluster.node_of(r) for r in c.ep_group(0)}) > 1
        tighter += spread and lb > compact * (1 + 1e-6)
        checked += 1
        # the placed floor with its ranks' own all-to-alls (before any split) is at most it too
        least = bnd.ranks_least_phases(c, b)
        split_bwd = c.schedule == "zbh1"
        if least is not None:
            own = floor_from_terms(lower_phase_terms(least, split_bwd), c.microbatches, c.pp, c.chunks,
                                   split_bwd, placed(bnd, c, b))
            assert own <= lb, c
            plain = floor_from_terms(floor_terms(*bnd.phase_times(b), split_bwd), c.microbatches, c.pp,
                                     c.chunks, split_bwd, placed(bnd, c, b))
            own_tighter += own > plain * (1 + 1e-6)
    assert checked > 20 and tighter > 5 and own_tighter > 5
    placements = {x.config.placement for x in full.ranked if x.config.ep > 1}
    assert placements == {"pp-inner", "dp-inner"}


@pytest.mark.parametrize("ep", [8, 2, 1])
def test_zero_3s_gathers_bound_each_action_below_the_simulated_step(tmp_path, monkeypatch, ep):
    """ZeRO-3 of Mixtral-8x7B at 512 tokens a sequence, one a micro-batch, on two nodes of 8 H100s,
    with and without ep (the experts gathered over their own ranks): its forwards are shorter than
    their gathers, so the gathers' term (parsim.search.gathers: each forward and backward lasts at
    least one all-gather of its stage's parameters) raises the bound, by 40% or more, and the bound
    stays at most the simulated step."""
    from parsim.plan import ParallelConfig
    from parsim.shard.prepare import expert_graph, per_device_graph
    from parsim.sim import simulate

    model = tmp_path / "mixtral.yaml"
    model.write_text("schema_version: 1\nname: mixtral-8x7b-512\n"
                     f"hf: {os.path.join(ROOT, 'examples', 'mixtral_8x7b', 'config.json')}\nargs: {{seq_len: 512}}\n"
                     "training: {global_batch_size: 32, dtype: bf16, optimizer: adam}\n")
    spec = load_model(str(model))
    cluster = load_cluster("dgx-h100:2x8")
    compute = _compute(cluster, spec)
    cfg = ParallelConfig(dp=16, pp=1, microbatches=2, ep=ep, zero=3, bounds=(0, len(spec.graph)))
    step = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False).step_time_s
    cluster = cluster.for_dtype(spec.training.dtype)
    graph = per_device_graph(spec.graph, 1, "", cfg.recompute, spec.shard, cluster, spec.training)
    bnd = split.Bounds(spec, expert_graph(graph, ep, spec.training) if ep > 1 else graph, cluster, compute)
    lb = bnd.lower_bound_s(cfg, 1)
    # the term: one all-gather of the rank's dense parameters over its 16 shard ranks and one of its
    # routed experts' over their 16 / ep (bf16, 2 bytes a parameter)
    experts = bnd.expert_prefix[-1]
    least = bnd.prices.collective_s(cfg.grad_group(0), (bnd.param_prefix[-1] - experts) * 2, "all_gather") + \
        (bnd.prices.collective_s(cfg.expert_dp_group(0), experts * 2, "all_gather") if ep > 1 else 0.0)
    assert split.least_gathers_s(bnd.prices, cfg, 0, bnd.param_prefix[-1] - experts, experts, 2) == least
    assert 2 * cfg.microbatches * least <= lb <= step                    # every forward and backward waits
    monkeypatch.setattr(split, "least_gathers_s", lambda *_: 0.0)
    assert bnd.lower_bound_s(cfg, 1) * 1.4 < lb


def test_partition_is_the_min_max_split_under_per_stage_links_and_memory():
    """search.partition against every split of small random cases: the least bottleneck (stage
    time plus its boundary's transfer on that stage's link), within a memory cap per stage."""
    from parsim.errors import InfeasibleError
    from parsim.search.partition import partition

    rng = np.random.default_rng(7)
    checked = infeasible = 0
    for _ in range(200):
        L, stages = int(rng.integers(2, 9)), int(rng.integers(1, 5))
        if stages > L:
            continue
        cost = rng.uniform(0.1, 2.0, L)
        edges = rng.uniform(0.0, 1.0, (stages, L)) * rng.integers(0, 2)
        weight = rng.uniform(1.0, 3.0, L)
        prefix = np.concatenate([[0.0], np.cumsum(weight)])
        factor = rng.uniform(1.0, 2.0, stages)

        def memory(j, A, B):
            return factor[j] * (prefix[B] - prefix[A])

        cap = rng.uniform(0.3, 1.0) * prefix[-1]
        best = np.inf
        for cuts in itertools.combinations(range(1, L), stages - 1):
            b = (0, *cuts, L)
            if all(memory(j, b[j], b[j + 1]) <= cap for j in range(stages)):
                best = min(best, max(cost[b[j]:b[j + 1]].sum() + (edges[j, b[j + 1] - 1] if j < stages - 1 else 0)
                                     for j in range(stages)))
        try:
            bounds, bottleneck = partition(cost, stages, edges, memory, cap)
        except InfeasibleError:
            assert best == np.inf
            infeasible += 1
            continue
        assert bottleneck == pytest.approx(best, rel=1e-12)
        assert all(memory(j, bounds[j], bounds[j + 1]) <= cap for j in range(stages))
        checked += 1
    assert checked > 50 and infeasible > 5


def test_stage_memory_stacked_over_the_partitioners_bands_equals_it_stage_by_stage(seeds_split):
    """partition() asks the stage memory for blocks of stages over their bands of the (start, stop)
    grid (StageMemory.stacked, views of the once-per-grid parts, partition.band_stack): bit for bit
    what the closed form gives stage by stage over each band, for several schedules and ZeRO
    stages, and for a block that starts past stage 0."""
    from parsim.search.partition import stage_grid

    spec = seeds_split
    cluster = load_cluster("ascend910:1x8")
    bnd = split.Bounds(spec, spec.graph, cluster, _compute(cluster, spec))
    L = len(spec.graph)
    A, B, _ = stage_grid(L)
    checked = 0
    for schedule, m, pp, v, b, dp, zero in [("1f1b", 8, 4, 1, 4, 2, 0), ("gpipe", 4, 2, 1, 16, 1, 0),
                                             ("interleaved", 8, 2, 2, 2, 4, 1), ("1f1b", 1, 1, 1, 64, 8, 3)]:
        stages = pp * v
        span = L - stages + 1
        mem = bnd.memory_fn(schedule, m, pp, v, b, dp, zero)
        for j0 in range(stages):
            stacked = mem.stacked(j0, stages, span)
            assert stacked.shape == (stages - j0, span, span)
            for j in range(j0, stages):
                rows, cols = slice(j, j + span), slice(j + 1, j + 1 + span)
                own = bnd.memory_fn(schedule, m, pp, v, b, dp, zero)(j, A[rows, cols].copy(), B[rows, cols].copy())
                assert np.array_equal(stacked[j - j0], own)
                checked += 1
    assert checked == (4 + 3 + 2 + 1) + (2 + 1) + (4 + 3 + 2 + 1) + 1


def test_partition_in_blocks_of_stages_is_the_split_in_one(monkeypatch):
    """partition() stacks at most _STACK_ELEMENTS (start, stop) pairs at once: with blocks of one
    stage it finds the same split and bottleneck, memory-capped or not."""
    from parsim.search import partition as part

    rng = np.random.default_rng(3)
    for _ in range(40):
        L, stages = int(rng.integers(4, 20)), int(rng.integers(1, 6))
        cost, edges = rng.uniform(0.1, 2.0, L), rng.uniform(0.0, 1.0, (stages, L))
        weight = np.concatenate([[0.0], np.cumsum(rng.uniform(1.0, 3.0, L))])

        def memory(j, A, B):
            return (1 + j) * (weight[B] - weight[A])

        cap = rng.uniform(0.5, 2.0) * weight[-1] / stages
        with monkeypatch.context() as m:
            m.setattr(part, "_STACK_ELEMENTS", 1)
            try:
                small = part.partition(cost, stages, edges, memory, cap)
            except part.InfeasibleError:
                small = None
        try:
            whole = part.partition(cost, stages, edges, memory, cap)
        except part.InfeasibleError:
            whole = None
        assert small == whole

def _recorded_simulations(monkeypatch) -> list:
    """(graph, config, estimate) of each candidate plan() simulates from now on."""
    seen, real = [], bound.simulate

    def record(graph, training, cluster, cfg, compute=None, **kw):
        est = real(graph, training, cluster, cfg, compute, **kw)
        seen.append((graph, cfg, est))
        return est
    monkeypatch.setattr(bound, "simulate", record)
    return seen


_CAP_BYTES = 30 * 2**20      # examples/gpt_small_local.yaml on dgx-a100:2x8: about half its candidates miss it


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_peak_floor_is_the_simulated_peak_less_zeros_collective_buffers(monkeypatch, recompute):
    """sim.memory.peak_floor_bytes, the planner's check before it simulates, against the simulated
    peak of every candidate an exhaustive search simulates (every schedule, v, placement, ZeRO
    stage and layout; each recomputation mode), under and over the cap: bit for bit the same
    without ZeRO's collective buffers (ZeRO 0-1 under NCCL), never above it with them."""
    from parsim.model.recompute import recompute_mode
    from parsim.sim.memory import peak_floor_bytes
    from parsim.schedule import build_schedule

    spec = load_model("examples/gpt_small_local.yaml")
    cluster = load_cluster("dgx-a100:2x8")
    seen = _recorded_simulations(monkeypatch)
    plan(spec, cluster, _compute(cluster, spec),
         Constraints(top=10**6, prune=False, recompute=recompute, max_memory_bytes=_CAP_BYTES), progress=False)
    kinds, over, below = set(), 0, 0
    for graph, cfg, est in seen:
        floor = peak_floor_bytes(graph, spec.training, cfg,
                                 build_schedule(cfg.schedule, cfg.pp, cfg.microbatches, cfg.chunks))
        peak = max(est.peak_memory_bytes)
        if cfg.zero <= 1:
            assert floor == peak, cfg
        else:                  # pp = 1: ZeRO-2's comm buffers are its units' gradients alone
            assert floor <= peak, cfg
            below += floor < peak
            if cfg.zero == 2:
                assert floor == pytest.approx(peak - est.ranks[0].memory.comm_buffers_bytes, rel=1e-12)
        over += peak > _CAP_BYTES
        kinds.add((cfg.schedule, cfg.chunks, cfg.zero, cfg.recompute))
    assert len(seen) > 100 and over > 10 and below > 5     # over: 17 with recomputation (2026-11-24)
    # interleaved at every depth its 6 cut units allow: v = 2, 3 on pp = 2
    assert {(s, v) for s, v, _, _ in kinds} == {("1f1b", 1), ("gpipe", 1), ("zbh1", 1), ("interleaved", 2),
                                                ("interleaved", 3)}
    assert {z for _, _, z, _ in kinds} == {0, 1, 2, 3} and {r for *_, r in kinds} == {recompute_mode(recompute)}


def test_pruned_search_simulates_no_candidate_over_the_cap(monkeypatch):
    """ZB-H1 candidates whose split the partitioner's closed form lets through (it has neither the
    gradients I holds for W nor the backward's workspace) but whose simulated peak exceeds the
    cap: the exhaustive search simulates them, the pruned search drops them by their peak floor
    (before it, it simulated 51 candidates over the cap here, ZB-H1's among them), and ranks the same."""
    spec = load_model("examples/gpt_small_local.yaml")
    cluster = load_cluster("dgx-a100:2x8")
    compute = _compute(cluster, spec)
    seen = _recorded_simulations(monkeypatch)
    full = plan(spec, cluster, compute, Constraints(top=8, prune=False, max_memory_bytes=_CAP_BYTES), progress=False)
    zbh1_over = {cfg for _, cfg, est in seen if cfg.schedule == "zbh1" and max(est.peak_memory_bytes) > _CAP_BYTES}
    assert len(zbh1_over) > 10
    seen.clear()
    pruned = plan(spec, cluster, compute, Constraints(top=8, max_memory_bytes=_CAP_BYTES), progress=False)
    # only ZeRO-2/3 candidates may still be simulated over the cap: their floor leaves out ZeRO's
    # collective buffers, whose peak depends on the timing (with the calibrated dgx-a100 profile
    # two ZeRO-3 candidates peak at 30.2 and 30.4 MiB against the 30 MiB cap; with the profile
    # before, none did)
    assert all(max(est.peak_memory_bytes) <= _CAP_BYTES or cfg.zero >= 2 for _, cfg, est in seen)
    assert not any(max(est.peak_memory_bytes) > _CAP_BYTES and cfg.schedule == "zbh1" for _, cfg, est in seen)
    assert pruned.simulated == len(seen) < full.simulated / 2
    assert [(x.key(), x.estimate.step_time_s, x.peak_memory_bytes) for x in pruned.ranked] == \
        [(x.key(), x.estimate.step_time_s, x.peak_memory_bytes) for x in full.ranked]


def test_few_micro_batches_over_many_chunks_are_bounded_by_one_micro_batchs_chain():
    """Interleaved 1F1B with 2 micro-batches over pp=2 x v=8 stages (ResNet-50 on 1,024 Ascend
    910s, dp=512): each micro-batch's forward and backward pass every stage and the 2 (v pp - 1)
    transfers between them in turn, so the step is at least that chain, which here exceeds the
    busiest rank's work after its head; the simulated step is above it."""
    from dataclasses import replace

    from parsim.plan import ParallelConfig
    from parsim.search.resolve import boundary_links
    from parsim.shard.prepare import per_device_graph
    from parsim.sim import simulate

    spec = load_model("examples/resnet50_imagenet.yaml")
    cluster = load_cluster("ascend910:128x8").for_dtype(spec.training.dtype)
    compute = _compute(cluster, spec)
    graph = per_device_graph(spec.graph, 1, "", False, spec.shard, cluster, spec.training)
    bnd = split.Bounds(spec, graph, cluster, compute)
    cfg = ParallelConfig(512, 2, 2, "interleaved", 8, (), "pp-inner")
    b = cfg.microbatch_size(spec.training.global_batch_size)
    links = bnd.prices.boundary_links(cfg, boundary_links)
    cfg = replace(cfg, bounds=bnd.free_split(16, b, links))
    F, B, _, _ = bnd.phase_times(b)
    x = bnd.edges(b, links) / 2
    stages = list(zip(cfg.bounds, cfg.bounds[1:]))
    chain = F[-1] + B[-1] + 2 * sum(float(x[s, z - 1]) for s, (_, z) in enumerate(stages[:-1]))
    work = [cfg.microbatches * sum(F[z] - F[a] + B[z] - B[a] for s, (a, z) in enumerate(stages) if s % 2 == r)
            for r in range(2)]
    head_1 = F[cfg.bounds[1]] + float(x[0, cfg.bounds[1] - 1])
    assert chain > 1.2 * max(work[0], head_1 + work[1])
    lb = bnd.lower_bound_s(cfg, b)
    assert chain <= lb <= simulate(graph, spec.training, cluster, cfg, compute, keep_timeline=False).step_time_s


@pytest.mark.parametrize("path, cluster_spec", [
    ("examples/gpt_small_local.yaml", "dgx-a100:2x8"),             # a tied head
    ("examples/resnet50_cifar10.yaml", "ascend910:2x8"),
    ("examples/moe_tiny_local.yaml", "dgx-h100:2x8"),               # experts sharded over ep
])
def test_no_split_fits_only_where_the_partitioner_finds_none(path, cluster_spec):
    """Bounds.no_split_fits (a greedy check of a monotone relaxation of StageMemory) says no
    split fits only where the memory-constrained partitioner finds none, over every schedule,
    ZeRO stage and micro-batch size and caps from below the memory floor to above the balanced
    split's peak; and it says so for a share of the caps the partitioner refuses (it spares it)."""
    from parsim.errors import InfeasibleError
    from parsim.plan import ParallelConfig
    from parsim.search.resolve import boundary_links
    from parsim.shard.prepare import expert_graph, per_device_graph

    spec = load_model(path)
    cluster = load_cluster(cluster_spec).for_dtype(spec.training.dtype)
    graph = per_device_graph(spec.graph, 1, "", False, spec.shard, cluster, spec.training)
    if any(layer.experts is not None for layer in graph.layers):
        graph = expert_graph(graph, 2, spec.training)
    bnd = split.Bounds(spec, graph, cluster, _compute(cluster, spec))
    L = len(graph)
    said = refused = 0
    for schedule, pp, v in [("1f1b", 2, 1), ("gpipe", 4, 1), ("zbh1", 2, 1), ("interleaved", 2, 2), ("1f1b", 1, 1)]:
        if pp * v > L:
            continue
        for m, b, dp, zero in [(4, 2, 4, 0), (8, 1, 2, 1), (2, 8, 8, 1), (1, 4, 4, 2 if pp == 1 else 0)]:
            mem = bnd.memory_fn(schedule, m, pp, v, b, dp, zero)
            cfg = ParallelConfig(dp, pp, m, schedule, v, (), "pp-inner", zero=zero)
            top = bnd.balanced_memory(schedule, m, pp, v, b, dp, bnd.prices.boundary_links(cfg, boundary_links), zero)
            for share in np.linspace(0.05, 1.2, 24):
                cap = share * top
                try:
                    split.partition(bnd.costs(b)[0], pp * v, None, mem, cap)
                    fits = True
                except InfeasibleError:
                    fits, refused = False, refused + 1
                if bnd.no_split_fits(mem, cap):
                    said += 1
                    assert not fits, (schedule, pp, v, m, b, dp, zero, share)
    assert refused and said >= refused / 2


@pytest.mark.parametrize("path, cluster_spec", [
    ("examples/gpt_small_local.yaml", "dgx-a100:2x8"),             # a tied head
    ("examples/resnet50_cifar10.yaml", "ascend910:2x8"),
])
def test_a_split_shared_by_equal_in_flight_counts_is_each_candidates_own(path, cluster_spec):
    """Bounds.split keeps a memory-constrained split by what the stage memory reads (the stages'
    in-flight counts, not the schedule and m that give them), so candidates of one run share it:
    over a grid of schedules, micro-batch counts and sizes, dp and ZeRO under caps that bind, each
    answer of one Bounds is the answer of a Bounds asked that candidate alone (the same pricing
    context), and some were shared."""
    from parsim.shard.prepare import per_device_graph

    spec = load_model(path)
    cluster = load_cluster(cluster_spec).for_dtype(spec.training.dtype)
    graph = per_device_graph(spec.graph, 1, "", False, spec.shard, cluster, spec.training)
    compute = _compute(cluster, spec)
    grid = [(schedule, m, pp, v, b, dp, zero)
            for schedule, v in [("1f1b", 1), ("gpipe", 1), ("zbh1", 1), ("interleaved", 2)] for pp in (2, 4)
            for m in (2, 4, 8) for b in (1, 4) for dp, zero in [(2, 0), (4, 0), (4, 1)] if pp * v <= len(graph)]
    shared = split.Bounds(spec, graph, cluster, compute)
    links = {(s, m, pp, v, dp, zero): _links(shared, s, m, pp, v, dp, zero) for s, m, pp, v, _, dp, zero in grid}
    top = max(shared.balanced_memory(s, m, pp, v, b, dp, links[(s, m, pp, v, dp, zero)], zero)
              for s, m, pp, v, b, dp, zero in grid)
    constrained = 0
    for share in np.linspace(0.1, 0.7, 7):
        cap = share * top
        shared = split.Bounds(spec, graph, cluster, compute, prices=shared.prices)
        for s, m, pp, v, b, dp, zero in grid:
            got = shared.split(s, m, pp, v, b, dp, links[(s, m, pp, v, dp, zero)], cap, zero)
            alone = split.Bounds(spec, graph, cluster, compute, prices=shared.prices).split(
                s, m, pp, v, b, dp, links[(s, m, pp, v, dp, zero)], cap, zero)
            assert got == alone, (share, s, m, pp, v, b, dp, zero)
        constrained += sum(1 for k in shared._splits if k[0] != "free")
    keys = {(shared._inflight(s, m, pp, v)[2], v) for s, m, pp, v, _, _, _ in grid}
    assert constrained > 0 and len(keys) < len({(s, m, pp, v) for s, m, pp, v, _, _, _ in grid})


def test_whether_any_split_fits_does_not_depend_on_the_tp_overlap():
    """BranchAndBound.bound_family sorts a family's members by Bounds.cannot_fit once for both tp
    overlap settings: over a grid of schedules, micro-batches, sizes, dp, ZeRO and caps, the Bounds
    of a tensor-parallel graph with its collectives overlapped answers as the one without, and the
    grid holds both answers."""
    from parsim.shard.prepare import per_device_graph

    spec = load_model("examples/gpt_small_local.yaml")
    cluster = load_cluster("dgx-h100:1x8").for_dtype(spec.training.dtype)
    graph = per_device_graph(spec.graph, 2, "megatron-sp", False, spec.shard, cluster, spec.training)
    compute = _compute(cluster, spec)
    plain = split.Bounds(spec, graph, cluster, compute, False)
    overlapped = split.Bounds(spec, graph, cluster, compute, True, prices=plain.prices)
    grid = [(schedule, m, pp, v, b, dp, zero) for schedule, v in [("1f1b", 1), ("zbh1", 1), ("interleaved", 2)]
            for pp in (1, 2) for m in (1, 4) for b in (1, 8) for dp, zero in [(1, 0), (4, 1), (4, 3)]
            if (zero < 2 or pp == 1) and (v == 1 or pp > 1)]
    top = max(plain.balanced_memory(s, m, pp, v, b, dp, _links(plain, s, m, pp, v, dp, zero), zero)
              for s, m, pp, v, b, dp, zero in grid)
    answers = set()
    for share in np.linspace(0.05, 1.0, 12):
        for s, m, pp, v, b, dp, zero in grid:
            got = overlapped.cannot_fit(s, m, pp, v, b, dp, share * top, zero)
            assert got == plain.cannot_fit(s, m, pp, v, b, dp, share * top, zero), (share, s, m, pp, v, b, dp, zero)
            answers.add(got)
    assert answers == {True, False}


def test_the_phases_are_each_layers_price_and_its_exposed_all_to_alls_summed_in_order():
    """Bounds.phase_times: each phase's prefix sums are, layer by layer in order, its price
    (Prices.layer_times) plus, where the all-to-alls are exposed (no ep_overlap), that layer's
    least all-to-alls (least_a2a_s), and the price alone where they may hide; bit for bit."""
    from parsim.shard.prepare import expert_graph, per_device_graph
    from parsim.sim.overlap import layer_time_s

    spec = load_model("examples/moe_tiny_local.yaml")
    cluster = load_cluster("dgx-h100:2x8").for_dtype(spec.training.dtype)
    compute = _compute(cluster, spec)
    graph = expert_graph(per_device_graph(spec.graph, 1, "", False, spec.shard, cluster, spec.training), 4,
                         spec.training)
    exposed = 0
    for overlap in (False, True):
        bnd = split.Bounds(spec, graph, cluster, compute, exposed_a2a=not overlap)
        for b in (1, 2):
            for k, phase in zip("FBIW", bnd.phase_times(b)):
                prices = bnd.prices.layer_times(compute, graph, k, b, 0, False, layer_time_s)
                want = [0.0]
                for i, t in enumerate(prices):
                    a2a = bnd.least_a2a_s(i, k, b)
                    assert a2a == 0.0 or not overlap
                    exposed += a2a > 0
                    want.append(want[-1] + (t + a2a))
                assert phase.tolist() == want, (overlap, b, k)
    assert exposed             # the MoE layers' all-to-alls were in the exposed phases
