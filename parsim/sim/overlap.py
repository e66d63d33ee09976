"""Tensor-parallel communication overlapped with the adjacent GEMMs: the one rule of the compute
stream and the tensor-parallel collectives' stream (ParallelConfig.tp_comm_overlap).

As Megatron-Core runs it with ``--tp-comm-overlap`` (Transformer Engine's userbuffers; torchtitan's
async TP does the same with symmetric memory): under sequence parallelism every tensor-parallel
all-gather precedes a column-parallel GEMM and every reduce-scatter follows a row-parallel one
(Korthikanti et al. 2022, Sec. 4.2.2); each collective and its GEMM are cut into chunks and
pipelined, chunk k's GEMM beside chunk k+1's communication.  The collective's kernels take some of
the device's compute units (SMs) while they run, so the GEMM runs on the rest (TE's
``set_sm_margin``).  Megatron allows it only with sequence parallelism (megatron/training/
arguments.py: "Tensor parallel communication/GEMM overlap can happen only when sequence
parallelism is enabled"), so parsim prices it for the megatron-sp layout only.

For one layer and phase, with G its GEMMs' time on all U compute units, C its tensor-parallel
collectives' time (parsim.cost.layer.tp_comm_time_s), u the units the collectives take and n the
chunks (the profile's ``collective.tp_overlap_comm_units`` and ``tp_overlap_chunks``):

    G' = G x U / (U - u)                      the GEMMs on the units left
    overlapped = max(G', C) + min(G', C) / n  a two-stage pipeline of n equal chunks: the longer
                                              stream's n chunks, plus one chunk of the shorter
                                              that nothing covers (its first or its last)

against G + C without the overlap.  Where the collectives take no units (u = 0: HCCL's MC2, moved
by the DMA engines), the GEMMs' stream is charged c = 1 - ``collective.overlap`` of the collective's
time beside it, as every collective hidden beside compute is (``overlap_units``):

    overlapped = max(G + c x min(G, C) x (1 - 1/n), C) + min(G, C) / n

The layer's other work (attention's batched matmuls, norms,
activations) is unchanged.  A layer under full recomputation re-runs its forward in the backward,
its collectives included (``Layer.recomputes_forward``), overlapped the same way; under selective
recomputation it re-runs only its core attention, which communicates nothing, so there is no
second pass to overlap (parsim.cost.layer prices the same rule without the overlap).  The loss's collectives (vocabulary-parallel cross-entropy) and the gradient mirrors
(once per step) stay exposed.

Approximations: a layer's collectives are pipelined with all its GEMMs as one pair, rather than
each with its own neighbour (the closed form is exact for a layer of one GEMM and one collective,
and for a block whose GEMM-to-collective ratios are equal); G is the layer's time for the phase
times the adjacent GEMMs' share of its FLOPs (``gemm_share``: the matmul kernels of one product,
QKV, projection, MLP, not attention's batched matmuls; in backward the input-gradient GEMMs that
TE pipelines with the reduce-scatters and all-gathers, not the weight gradients, which its
"bulk" overlaps pair with copies of a few SMs and which run here on all units), so the
memory-bound kernels' time is not told apart; TE's
all-gather overlaps (``ring_exchange`` on the copy engines, num_sm 1, no SM margin) take fewer
units than its reduce-scatter ones, which the one ``tp_overlap_comm_units`` prices for both, the
dearer way.  A profile of the shards that already holds their collectives (a tensor-parallel
profile) is left as measured.
"""

from __future__ import annotations

from parsim.cost.compute import ComputeModel
from parsim.cost.kernels import PHASES
from parsim.cost.layer import includes_tp_comm, layer_time_s as plain_layer_time_s, tp_comm_phases, tp_comm_time_s
from parsim.errors import InfeasibleError
from parsim.model.fp8 import FP8_KLASS
from parsim.model.graph import Layer

TP_OVERLAP_LAYOUTS = ("megatron-sp",)


def overlapped_s(gemm_s: float, comm_s: float, units: int, comm_units: int, chunks: int,
                 charge: float = 0.0) -> float:
    """The GEMMs and their collectives pipelined in ``chunks`` (module docstring): the GEMMs on
    ``units - comm_units`` of ``units`` compute units while the collectives run, and ``charge``
    of the collectives' time beside them added to the GEMMs' stream (a library that takes no
    units: 1 - its ``collective.overlap``, as every collective hidden beside compute is charged)."""
    if comm_s <= 0.0:
        return gemm_s
    stretched = gemm_s * units / (units - comm_units)
    shorter = min(stretched, comm_s)
    return max(stretched + charge * shorter * (1 - 1 / chunks), comm_s) + shorter / chunks


def overlap_units(cluster) -> tuple[int, int, int, float]:
    """(compute units, units the collectives take, chunks, the charge of overlapped_s) from the
    cluster's profile; raises InfeasibleError where the device's units are unknown or no more than
    the collectives'.  The charge: where the collectives take no units (HCCL's MC2 on Atlas A2:
    the AI CPU schedules the collective and the DMA engines move it while the AI Cores run the
    matmul, CANN's MC2 operator guide), what they cost the GEMMs beside them is the library's
    ``collective.overlap`` charge, as for every other collective hidden beside compute
    (parsim.sim.engine); where they take units (Transformer Engine's SM margin), those units are
    the cost, and nothing more is charged."""
    colls = cluster.profile.collectives
    kernels = cluster.device.kernels
    units = kernels.compute_units if kernels is not None else 0
    if units <= colls.tp_overlap_comm_units:
        raise InfeasibleError(f"tp_comm_overlap on {cluster.profile.name}: the device's kernels.compute_units "
                              f"({units or 'not given'}) must exceed collective.tp_overlap_comm_units "
                              f"({colls.tp_overlap_comm_units}) in {cluster.profile.source}; add them or drop "
                              "--tp-comm-overlap")
    charge = 1.0 - colls.overlap if colls.tp_overlap_comm_units == 0 else 0.0
    return units, colls.tp_overlap_comm_units, colls.tp_overlap_chunks, charge


def supports_overlap(cluster) -> bool:
    try:
        overlap_units(cluster)
    except InfeasibleError:
        return False
    return True


def check_tp_overlap(cfg, cluster) -> None:
    """Raise InfeasibleError, saying what to change, where ``cfg.tp_comm_overlap`` cannot apply."""
    if not cfg.tp_comm_overlap:
        return
    if cfg.tp < 2 or cfg.tp_layout not in TP_OVERLAP_LAYOUTS:
        raise InfeasibleError(f"tp_comm_overlap needs tp > 1 with the megatron-sp layout, as Megatron allows it only "
                              f"with sequence parallelism (got tp={cfg.tp}"
                              f"{f' {cfg.tp_layout}' if cfg.tp_layout else ''}); use --tp-layout megatron-sp or "
                              "drop --tp-comm-overlap")
    overlap_units(cluster)


# the linear GEMMs TE's overlap pipelines with: bf16/fp16/fp32 ones, and FP8 ones (parsim.model.fp8;
# until 2026-11-27 the FP8 GEMMs were left out, and an FP8 plan's tp overlap hid nothing)
GEMM_KLASSES = ("matmul", FP8_KLASS)


def gemm_share(layer: Layer, kind: str, microbatch: int) -> float:
    """The share of the layer's FLOPs in phase ``kind`` that its tensor-parallel collectives
    pipeline with: its linear GEMMs (matmul kernels of one product; a batched matmul's groups grow
    with the batch), forward's, and backward's input-gradient ones (dgrad: phase I), not the
    weight gradients, which TE overlaps only with bulk copies; 1 for a layer without kernels, 0
    for W."""
    phases = PHASES[kind]
    # Kernel.at's FLOPs, inline, both sums in one pass in the kernels' order (the planner asks for
    # thousands of layers): each the left-to-right sum sum() gives
    total = gemm = 0
    found = False
    for k in layer.kernels:
        if k.phase in phases:
            found = True
            flops = k.flops[0] + k.flops[1] * microbatch
            total += flops
            if k.phase in ("F", "I") and k.klass in GEMM_KLASSES and k.gemm and k.gemm[3] == (1.0, 0.0):
                gemm += flops
    if not found:
        return 0.0 if kind == "W" else 1.0
    return gemm / total if total else 0.0


def layer_time_s(compute: ComputeModel, layer: Layer, kind: str, microbatch: int, cluster=None,
                 first_rank: int = 0, tp_overlap: bool = False, prices=None) -> float:
    """parsim.cost.layer.layer_time_s, with the layer's tensor-parallel collectives of each
    forward and backward pass overlapped with its GEMMs where ``tp_overlap`` (module docstring);
    ``prices``: the run's pricing context (parsim.sim.prices), which keeps the collectives' prices
    (Prices.tp_comm_s) and the GEMM shares (_kept_gemm_share)."""
    tp_comm_s = prices.tp_comm_s if prices is not None else None
    t = plain_layer_time_s(compute, layer, kind, microbatch, cluster, first_rank, tp_comm_s)
    if not tp_overlap or cluster is None or not layer.tp_comm or includes_tp_comm(compute, microbatch) \
            or kind == "W":
        return t
    units, comm_units, chunks, charge = overlap_units(cluster)
    for k, ph in overlap_passes(layer, kind):
        comm = tp_comm_s(layer, ph, microbatch, first_rank) if tp_comm_s is not None else \
            tp_comm_time_s(layer, ph, microbatch, cluster, first_rank)
        gemm = compute.layer_time_s(layer, k, microbatch) * _kept_gemm_share(prices, layer, k, microbatch)
        t += overlapped_s(gemm, comm, units, comm_units, chunks, charge) - gemm - comm
    return t


def overlap_passes(layer: Layer, kind: str) -> tuple[tuple[str, str], ...]:
    """(compute phase, its collectives' phase) of each pass the overlap pipelines in phase ``kind``
    (F, B or I): the phase's own, and in a backward a fully recomputed layer's forward again."""
    passes = ((kind, "F" if kind == "F" else "B"),)
    if layer.recomputes_forward and kind in ("B", "I"):
        passes += (("F", "F"),)
    return passes


def layer_floor_s(compute_floor_s: float, compute: ComputeModel, layer: Layer, kind: str, microbatch: int,
                  cluster, tp_overlap: bool, tp_comm_s) -> float:
    """A floor of layer_time_s (first rank 0) from ``compute_floor_s``, a floor of the layer's
    compute X in phase ``kind`` (its recomputed forward's included: parsim.sim.prices.Prices.
    layer_floors), and its tensor-parallel collectives' prices (``tp_comm_s(layer, phase, b,
    rank)``, Prices.tp_comm_s).  With no overlap, the two added, as parsim.cost.layer prices
    them.  Under the overlap, each pass p with collectives C_p > 0 and GEMMs G_p (X = R + sum
    G_p, R >= 0) takes overlapped_s >= max(S_p, C_p) + min(S_p, C_p) / n, S_p = G_p U / (U - u),
    and the collectives no pass hides (the loss's) are added.  That is non-decreasing in R and
    each G_p, so at X = compute_floor_s its least is where the cheapest time goes first: a pass's
    GEMMs up to C_p (U - u) / U (those the collectives cover) cost a = U / ((U - u) n) per unit of
    X, the rest (R, or GEMMs past that) at least 1, so with H = sum_p C_p and
    Gmax = H (U - u) / U,

        H + min(a, 1) min(X, Gmax) + max(X - Gmax, 0).

    Where a pass would hide a collective the phase does not run (none of the layouts here), the
    compute floor alone."""
    if cluster is None or not layer.tp_comm or includes_tp_comm(compute, microbatch):
        return compute_floor_s
    phases = tp_comm_phases(layer, kind)
    if not tp_overlap or kind == "W":
        return compute_floor_s + sum(tp_comm_s(layer, phase, microbatch, 0) for phase in phases)
    passes = tuple(phase for _, phase in overlap_passes(layer, kind))
    if any(phase not in phases for phase in passes):
        return compute_floor_s
    units, comm_units, chunks, _ = overlap_units(cluster)
    hidden = rest = 0.0
    for phase in phases:
        c = tp_comm_s(layer, phase, microbatch, 0)
        if phase not in passes:
            rest += c
        elif c > 0:                     # a pass without collectives: overlapped_s is its GEMMs
            hidden += c
    covered = hidden * (units - comm_units) / units
    per_unit = min(1.0, units / ((units - comm_units) * chunks))
    return rest + hidden + per_unit * min(compute_floor_s, covered) + max(compute_floor_s - covered, 0.0)


def _kept_gemm_share(prices, layer: Layer, kind: str, microbatch: int) -> float:
    """gemm_share, kept in the run's pricing context where there is one, by the layer's kernels
    (their id; the entry holds them), kind and size: layers of different classes share kernels (a
    recomputed layer's, its plain twin's), and a fully recomputed layer's B and I each ask for its
    F's (DeepSeek-V3's search on 2,048 H100: 11,441 asks, 4,971 different, 2026-11-30)."""
    if prices is None:
        return gemm_share(layer, kind, microbatch)
    table = prices.table("gemm shares")
    key = (id(layer.kernels), kind, microbatch)
    hit = table.get(key)
    if hit is None:
        hit = table[key] = (layer.kernels, gemm_share(layer, kind, microbatch))
    return hit[1]
