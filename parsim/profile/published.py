"""Published end-to-end figures, and what parsim predicts for them.

A figures file (``results/published/figures.yaml``) lists measurements others published, each
with its citation and everything needed to price it again::

    schema_version: 1
    sources:                                   # citation key -> full reference
      narayanan2021: "Narayanan et al. 2021, arXiv 2104.04473"
    figures:
      - id: narayanan-t1-39.1b                 # unique; tests and the calibration name rows by it
        source: narayanan2021                  # a key of sources
        row: "Table 1, 39.1B row"              # where in the source
        model: {model: gpt, args: {...}, training: {...}}   # a model.yaml's mapping, inline
        cluster: {profile: dgx-a100, nodes: 64}             # devices_per_node: optional (a 1-GPU row: 1)
        parallel: {dp: 32, tp: 8, pp: 2, microbatches: 12, schedule: 1f1b, recompute: true}
                                               # also cp, zero (0..3), ep (expert parallel,
                                               #   carved from dp x cp as parsim.plan does),
                                               #   tp_layout (megatron | megatron-sp; default
                                               #   megatron), tp_comm_overlap (megatron-sp only),
                                               #   overlap_grad_reduce (default true; false: the
                                               #   buckets after the backward, Megatron-Core
                                               #   without --overlap-grad-reduce),
                                               #   cp_mode (ring | allgather; default ring), etp
                                               #   (expert tp: 1 or tp, MoE Parallel Folding) and
                                               #   ep_overlap (the all-to-alls hidden, as
                                               #   --overlap-moe-expert-parallel-comm) and
                                               #   placement (pp-inner | dp-inner; default
                                               #   pp-inner; Megatron's order is dp-inner) and
                                               #   split (the stage boundaries, "0,3,5,...", or a
                                               #   named split, as parsim simulate --split; default
                                               #   row_split: uniform, the framework's, where the
                                               #   layers divide, else balanced) and dp_shard
                                               #   (ZeRO 1-3 over shard groups of that many dp
                                               #   ranks, replicated across them: HSDP, as
                                               #   parsim simulate --dp-shard; default every dp rank)
        measured: {tflops_per_gpu: 138}        # or {samples_per_s: 2470}, {tokens_per_s_per_gpu: 1297},
                                               #   {step_time_s: 1.42} (an iteration's seconds)
        routing: {balance: forced}             # optional, mixture-of-experts rows: how the source
                                               #   routed tokens (below)
        source_config: {...}                   # optional: the source's own settings, verbatim, for
                                               #   provenance; parsim reads none of them
        tolerance: 0.05                        # the error the project holds the prediction to
        note: "..."                            # optional: assumptions behind the row
        excluded: "..."                        # optional: why the row is printed but not held to it
        miss_within: 0.07                      # optional: a row missing its tolerance, held to this
                                               #   meanwhile (note: says why it misses)
    calibration:                               # optional: per profile, what `parsim calibrate
      dgx-a100:                                #   --published` fits, and on which rows
        fit: [device.kernels.conv_efficiency]
        rows: [dle-rn50-a100-amp-1gpu]

``routing`` says what the source did to the expert load, which decides the expert GEMMs' sizes and
the all-to-all's: ``balance: forced`` (every expert gets the same tokens: Megatron-Core's
``--moe-router-force-load-balancing``, which NVIDIA's MoE benchmarks set), ``balance: capacity``
with ``capacity_factor`` and ``padded`` (tokens over an expert's capacity dropped, and with
``padded`` every expert's input padded up to it: uniform at the capacity), or ``balance: learned``
(the router's own load, as trained: DeepSeek-V3's auxiliary-loss-free balancing).

``tokens_per_s_per_gpu`` is global batch x ``args.seq_len`` / step time / GPUs.
``tflops_per_gpu`` counts FLOPs as Narayanan et al. 2021 do (their Equation 3, which includes
the recomputed forward), so a GPT row is compared in the paper's own unit:

    F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h))

A figure is priced with a cluster's profile exactly as given (``price``): the shipped one unless
a calibration passes a candidate.  Nothing here fits anything; ``parsim.profile.fit_published``
does, and writes what it fitted into the profile file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import lru_cache

from parsim.errors import InfeasibleError, InputError
from parsim.hardware.cluster import Cluster, Profile, load_profile, profile_path
from parsim.inputs import Fields, load_file
from parsim.plan import CP_MODES, PLACEMENTS, grad_reduce_text, recompute_layers_text

SCHEMA_VERSION = 1
FOLDER = "results/published"      # every *figures*.yaml here is read (load_all_figures)
METRICS = ("samples_per_s", "tflops_per_gpu", "tokens_per_s_per_gpu", "step_time_s")
BALANCE = ("forced", "capacity", "learned")


class UnpricedFigure(InputError):
    """A figure whose configuration the simulator cannot price yet (e.g. expert parallelism):
    the benchmark prints it as not priced, with this message, instead of stopping."""


@dataclass(frozen=True)
class Figure:
    """One published measurement and the configuration it was taken on."""

    id: str
    citation: str                 # the source's full reference
    row: str                      # where in the source
    model: tuple                  # the inline model.yaml mapping, frozen (see _freeze)
    profile: str                  # a hardware profile name (hardware_profiles/<name>.yaml)
    nodes: int
    devices_per_node: int | None  # None: the profile's
    parallel: tuple               # (key, value) pairs: dp, tp, pp, cp, ep, zero, microbatches, schedule, chunks,
                                  #   recompute, recompute_layers, recompute_every, tp_layout, tp_comm_overlap,
                                  #   cp_mode, split
    metric: str                   # samples_per_s | tflops_per_gpu | tokens_per_s_per_gpu
    measured: float
    tolerance: float
    path: str                     # the figures file
    index: int                    # its place in figures:
    excluded: str = ""            # why the row is printed but not held to its tolerance; "" : held
    # a row that misses its tolerance (the project's goal) for a reason its note gives: the error
    # tests hold it to meanwhile, so that it cannot drift further unseen; None: the tolerance
    miss_within: float | None = None
    note: str = ""
    routing: tuple = ()           # (key, value) pairs: balance, capacity_factor, padded; () : not a MoE row
    source_config: tuple = ()     # the source's own settings, frozen (see _freeze); read by nothing
    source: str = ""              # the source's key in its file's sources:

    @property
    def held_within(self) -> float:
        """The error tests/test_published.py holds the prediction to."""
        return self.miss_within if self.miss_within is not None else self.tolerance

    @property
    def where(self) -> str:
        return f"{self.path}: figures[{self.index}] ({self.id})"


@dataclass(frozen=True)
class Calibration:
    """A profile's end-to-end calibration: the fields fitted and the rows they are fitted on."""

    profile: str
    fit: tuple[str, ...]
    rows: tuple[str, ...]


@dataclass(frozen=True)
class Figures:
    path: str
    figures: tuple[Figure, ...]
    calibrations: tuple[Calibration, ...]

    def by_id(self, ident: str) -> Figure:
        for f in self.figures:
            if f.id == ident:
                return f
        raise KeyError(ident)

    def calibration(self, profile: str) -> Calibration | None:
        return next((c for c in self.calibrations if c.profile == profile), None)

    def used_for_calibration(self, figure: Figure) -> bool:
        c = self.calibration(figure.profile)
        return c is not None and figure.id in c.rows

    def scorable(self) -> tuple[Figure, ...]:
        """The figures as a score out of sample may hold them: a row some profile's end-to-end
        calibration was fitted on (a file's ``calibration:`` section, ``parsim calibrate
        --published``) is excluded, in-sample by construction, and says so."""
        return tuple(replace(f, excluded=f"a calibration row of {f.profile} (its calibration: section, "
                                         "parsim calibrate --published): in-sample by construction")
                     if self.used_for_calibration(f) and not f.excluded else f for f in self.figures)


@dataclass(frozen=True)
class Priced:
    figure: Figure
    predicted: float
    step_time_s: float
    config: str

    @property
    def error(self) -> float:
        """Predicted throughput over measured, less 1 (positive: predicted faster), whatever the
        figure's metric: a ``step_time_s`` figure's is measured time over predicted time, less 1."""
        if self.figure.metric == "step_time_s":
            return self.figure.measured / self.predicted - 1
        return self.predicted / self.figure.measured - 1


def _freeze(value):
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return ("__list__",) + tuple(_freeze(v) for v in value)
    return value


def _thaw(value):
    if isinstance(value, tuple):
        if value and value[0] == "__list__":
            return [_thaw(v) for v in value[1:]]
        return {k: _thaw(v) for k, v in value}
    return value


PARALLEL_KEYS = {"dp": int, "tp": int, "pp": int, "cp": int, "ep": int, "zero": int, "microbatches": int,
                 "chunks": int, "schedule": str, "recompute": bool, "recompute_layers": int, "recompute_every": int,
                 "tp_layout": str, "tp_comm_overlap": bool, "overlap_grad_reduce": bool,
                 "cp_mode": str, "etp": int, "ep_overlap": bool, "placement": str, "split": str,
                 "dp_shard": int,          # HSDP's shard group (ParallelConfig.dp_shard), as --dp-shard
                 "no_sync": bool}          # FSDP's gradient sync in the last micro-batch only (ParallelConfig.no_sync)


def _routing(f: Fields) -> tuple:
    """A row's ``routing:`` mapping, checked (() when absent)."""
    if not f.has("routing"):
        return ()
    r = f.sub("routing")
    balance = r.choice("balance", BALANCE)
    out = [("balance", balance)]
    if balance == "capacity":
        out += [("capacity_factor", r.positive_float("capacity_factor")), ("padded", r.get("padded", bool))]
    r.done()
    return tuple(out)


def load_figures(path: str | os.PathLike) -> Figures:
    """Read and check a figures file; every error names the file and the field."""
    path = os.fspath(path)
    r = Fields(load_file(path, "a published-figures YAML"), path)
    r.schema_version(SCHEMA_VERSION)
    src = r.sub("sources")
    sources = {k: src.get(k, str) for k in list(src.data)}
    src.done()
    rows = r.get("figures", list)
    if not rows:
        raise r.fail("figures", "empty; list at least one figure")
    figures, seen = [], set()
    for i, raw in enumerate(rows):
        f = Fields(raw, path, f"figures[{i}].")
        ident = f.get("id", str)
        if ident in seen:
            raise f.fail("id", f"{ident!r} appears twice; ids must be unique")
        seen.add(ident)
        key = f.get("source", str)
        if key not in sources:
            raise f.fail("source", f"{key!r} is not in sources: ({', '.join(sources) or 'none'}); add it there")
        f.get("model", dict)
        c = f.sub("cluster")
        profile = c.get("profile", str)
        nodes = c.positive_int("nodes", 1)
        per_node = c.positive_int("devices_per_node", None)
        c.done()
        p = f.sub("parallel")
        parallel = []
        for k, t in PARALLEL_KEYS.items():
            if p.has(k):
                if k == "zero":
                    v = p.choice(k, (0, 1, 2, 3))
                elif k == "cp_mode":
                    v = p.choice(k, CP_MODES)
                elif k == "placement":
                    v = p.choice(k, PLACEMENTS)
                elif k == "split":
                    from parsim.search.resolve import SPLIT_FORMS, SPLIT_NAMES, split_bounds

                    v = p.get(k, str)
                    if v not in SPLIT_NAMES:
                        try:
                            split_bounds(v)
                        except InfeasibleError:
                            raise p.fail(k, f"{SPLIT_FORMS}; got {v!r}") from None
                else:
                    v = p.positive_int(k) if t is int else p.get(k, t)
                parallel.append((k, v))
        p.done()
        m = f.sub("measured")
        given = [k for k in METRICS if m.has(k)]
        if len(given) != 1:
            raise m.fail(METRICS[0], f"give exactly one of {', '.join(METRICS)}")
        value = m.positive_float(given[0])
        m.done()
        tol = f.fraction("tolerance")
        note = f.get("note", str, "")
        miss = f.get("miss_within", float, None)
        if miss is not None and not tol < miss < 1:
            raise f.fail("miss_within", f"must lie between the tolerance ({tol}) and 1, got {miss}")
        if miss is not None and not note:
            raise f.fail("note", "missing; a row held to miss_within says why it misses its tolerance")
        routing = _routing(f)
        source_config = _freeze(f.get("source_config", dict, {}))
        figures.append(Figure(ident, sources[key], f.get("row", str), _freeze(raw["model"]), profile, nodes, per_node,
                              tuple(parallel), given[0], value, tol, path, i, f.get("excluded", str, ""), miss, note,
                              routing, source_config, key))
        f.done()
    calibrations = []
    if r.has("calibration"):
        cal = r.sub("calibration")
        for profile in list(cal.data):
            c = cal.sub(profile)
            fit, on = c.get("fit", list), c.get("rows", list)
            if not fit or not all(isinstance(x, str) for x in fit):
                raise c.fail("fit", "expected a list of profile fields, e.g. [device.kernels.conv_efficiency]")
            if not on or not all(isinstance(x, str) for x in on):
                raise c.fail("rows", "expected a list of figure ids")
            for x in on:
                if x not in seen:
                    raise c.fail("rows", f"{x!r} is no figure's id in this file")
                fig = next(g for g in figures if g.id == x)
                if fig.profile != profile:
                    raise c.fail("rows", f"{x!r} runs on {fig.profile}, not {profile}")
            c.done()
            calibrations.append(Calibration(profile, tuple(fit), tuple(on)))
        cal.done()
    r.done()
    return Figures(path, tuple(figures), tuple(calibrations))


def load_all_figures(folder: str | os.PathLike = FOLDER) -> Figures:
    """Every ``*figures*.yaml`` of ``folder`` (results/published/: figures.yaml, moe_figures.yaml,
    and each other file of public rows), as one Figures: ids unique over the files, a source key
    naming one citation wherever it appears, each figure keeping its own file (relative model
    paths resolve from it)."""
    folder = os.fspath(folder)
    paths = sorted(os.path.join(folder, n) for n in os.listdir(folder)
                   if n.endswith(".yaml") and "figures" in n)
    if not paths:
        raise InputError(f"{folder}: no *figures*.yaml file; add one (results/published/figures.yaml's schema)")
    figures, calibrations, seen, cited = [], [], {}, {}
    for path in paths:
        one = load_figures(path)
        for f in one.figures:
            if f.id in seen:
                raise InputError(f"{f.where}: id {f.id!r} is also in {seen[f.id]}; ids must be unique over the files")
            seen[f.id] = path
            if cited.setdefault(f.source, f.citation) != f.citation:
                raise InputError(f"{f.where}: source {f.source!r} cites another reference in another file; give it "
                                 "another key or the same citation")
            figures.append(f)
        calibrations += one.calibrations
    return Figures(folder, tuple(figures), tuple(calibrations))


# Kept, by value: a figure's model is extracted from torch once per process (seconds each), and
# pricing a row asks for it two or three times (price, tokens per step), tests/test_published.py again.
@lru_cache(maxsize=512)
def _spec(figure_model: tuple, path: str, index: int):
    from parsim.model.spec import model_from_mapping

    return model_from_mapping(_thaw(figure_model), path, f"figures[{index}].model.")


def figure_spec(figure: Figure):
    """The figure's model, built and extracted once per process."""
    return _spec(figure.model, figure.path, figure.index)


def shipped_profile(figure: Figure) -> Profile:
    """The figure's profile as shipped (hardware_profiles/<name>.yaml, or $PARSIM_PROFILES)."""
    return load_profile(profile_path(figure.profile))


def figure_cluster(figure: Figure, profile: Profile) -> Cluster:
    per_node = figure.devices_per_node or profile.devices_per_node
    if per_node > profile.devices_per_node:
        raise InputError(f"{figure.where}: cluster.devices_per_node: {per_node}, but a {profile.name} node has "
                         f"{profile.devices_per_node}")
    return Cluster(profile, figure.nodes, per_node, spec=f"{profile.name}:{figure.nodes}x{per_node}")


def narayanan_eq3_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """FLOPs of one step of a GPT with full recomputation: Narayanan et al. 2021, Equation 3."""
    return 96 * batch * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def figure_flops(figure: Figure) -> float:
    """The FLOPs a ``tflops_per_gpu`` figure counts per step (Equation 3, from the model's args)."""
    model = _thaw(figure.model)
    args = model.get("args", {}) or {}
    need = ("layers", "hidden", "seq_len", "vocab")
    if model.get("model") != "gpt" or not all(k in args for k in need):
        raise InputError(f"{figure.where}: measured.tflops_per_gpu: counted by Narayanan et al.'s Equation 3, which "
                         f"needs model: gpt with args {', '.join(need)}; give samples_per_s instead")
    spec = figure_spec(figure)
    return narayanan_eq3_flops(spec.training.global_batch_size, args["seq_len"], args["layers"], args["hidden"],
                               args["vocab"])


def figure_tokens(figure: Figure) -> int:
    """Tokens per step of a ``tokens_per_s_per_gpu`` figure: global batch x ``args.seq_len``."""
    args = _thaw(figure.model).get("args", {}) or {}
    if "seq_len" not in args:
        raise InputError(f"{figure.where}: measured.tokens_per_s_per_gpu: needs the model's args.seq_len (tokens "
                         f"per sequence); add it")
    return figure_spec(figure).training.global_batch_size * args["seq_len"]


def describe(cfg) -> str:
    tp = f"tp={cfg.tp}" + (" sp" if cfg.tp_layout == "megatron-sp" else "") + (" overlap" if cfg.tp_comm_overlap else "")
    cp = f" cp={cfg.cp}" + (f" {cfg.cp_mode}" if cfg.cp_mode != "ring" else "") if cfg.cp > 1 else ""
    grads = grad_reduce_text(cfg.overlap_grad_reduce, cfg.zero, cfg.grads_reduced_once)
    return (f"dp={cfg.dp} {tp} pp={cfg.pp}{cp}"
            f"{f' ep={cfg.ep}' if cfg.ep > 1 else ''}{f' etp={cfg.etp}' if cfg.etp > 1 else ''}"
            f"{' ep-overlap' if cfg.ep_overlap else ''}{f' zero={cfg.zero}' if cfg.zero else ''}"
            f"{f' dp_shard={cfg.dp_shard}' if cfg.hybrid_sharded else ''}"
            f" m={cfg.microbatches} {cfg.schedule}"
            f"{f' v={cfg.chunks}' if cfg.chunks > 1 else ''}{' recompute' if cfg.recompute else ''}"
            f"{f' ({part})' if (part := recompute_layers_text(cfg.recompute_layers, cfg.recompute_every)) else ''}"
            f"{f' {grads}' if grads else ''}")


def figure_imbalance(routing: tuple) -> float | None:
    """The expert load a MoE row's ``routing`` prices, set as training.moe_imbalance (which
    parsim.cost.experts.routing_imbalance reads): forced balance 1.0; capacity padded to capacity_factor, every expert computing cf x the mean
    (unpadded: at most cf); learned routing, the default (None); not a MoE row, None."""
    r = dict(routing)
    if r.get("balance") == "forced":
        return 1.0
    if r.get("balance") == "capacity":
        return r["capacity_factor"]
    return None


def row_split(graph, parallel: dict) -> str:
    """The split a row that gives none is priced with: the one its framework runs unless told,
    Megatron-Core's uniform split (parsim.search.resolve.uniform_bounds; MindSpeed-LLM's without
    --num-layer-list, MindFormers' without offsets), where the model is a decoder whose layers
    divide over the stages; else parsim's balanced split (a run whose layers do not divide was
    given an uneven split its row does not state).  A row with its own split states it (split:)."""
    from parsim.search.resolve import default_chunks, uniform_bounds

    stages = parallel.get("pp", 1) * (parallel.get("chunks") or default_chunks(parallel.get("schedule", "1f1b")))
    if stages == 1:
        return "balanced"
    try:
        uniform_bounds(graph, stages)
    except InfeasibleError:
        return "balanced"
    return "uniform"


def figure_setup(figure: Figure, profile: Profile | None = None):
    """What ``figure`` is priced with on ``profile`` (default: the shipped one): (its spec, with the
    routing's expert load; its cluster; the compute model; the resolved plan).  A row whose sizes do
    not make its cluster, or that the plan cannot express, raises its one-line error."""
    from parsim.cost.compute import AnalyticalCompute
    from parsim.search.resolve import resolve_config

    par = dict(figure.parallel)
    profile = profile or shipped_profile(figure)
    spec = figure_spec(figure)
    imbalance = figure_imbalance(figure.routing)
    if imbalance is not None:
        spec = replace(spec, training=replace(spec.training, moe_imbalance=imbalance))
    cluster = figure_cluster(figure, profile)
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    if par.get("tp", 1) > 1:
        par.setdefault("tp_layout", "megatron")
    world = par.get("dp", 1) * par.get("tp", 1) * par.get("pp", 1) * par.get("cp", 1)
    if world != cluster.world_size:
        raise InputError(f"{figure.where}: parallel: dp x tp x pp x cp = {world}, but the cluster has "
                         f"{cluster.world_size} devices; make them equal")
    par.setdefault("split", row_split(spec.graph, par))
    try:
        cfg = resolve_config(spec, cluster, compute, **par)
    except InfeasibleError as e:
        if par.get("ep", 1) > 1:          # a layout parsim's expert parallelism does not express
            raise UnpricedFigure(f"{figure.where}: parallel.ep: {par['ep']}: {e}; so this row is not priced") from None
        raise InfeasibleError(f"{figure.where}: parallel: {e}") from None     # the row that says it
    return spec, cluster, compute, cfg


def price(figure: Figure, profile: Profile | None = None) -> Priced:
    """What parsim predicts for ``figure`` on ``profile`` (default: the shipped one), in the
    figure's own metric."""
    from parsim.sim import simulate

    spec, cluster, compute, cfg = figure_setup(figure, profile)
    try:
        est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
    except InfeasibleError as e:
        raise InfeasibleError(f"{figure.where}: parallel: {e}") from None
    step = est.step_time_s
    if figure.metric == "samples_per_s":
        predicted = spec.training.global_batch_size / step
    elif figure.metric == "tokens_per_s_per_gpu":
        predicted = figure_tokens(figure) / step / cluster.world_size
    elif figure.metric == "step_time_s":
        predicted = step
    else:
        predicted = figure_flops(figure) / step / cluster.world_size / 1e12
    return Priced(figure, predicted, step, describe(cfg))


def row_kind(figure):
    """A published row's kind (parsim.sim.band.PlanKind): its profile's device, its parallel
    sizes, its model."""
    from parsim.sim.band import PlanKind, model_kind, parallel_mix

    par = dict(figure.parallel)
    mix = parallel_mix(par.get("tp", 1), par.get("pp", 1), par.get("cp", 1), par.get("ep", 1), par.get("zero", 0))
    return PlanKind(shipped_profile(figure).device.name, mix, model_kind(figure_spec(figure).graph))
