"""Where a parallel configuration does not apply, each rule once: every function returns (field,
why, in a line saying what to change) or None.  A plan.json (parsim.plan.Plan.from_json), a resolved
configuration (parsim.search.resolve) and the simulator (parsim.sim.simulate) are checked against
``config_refusal``; the search skips what ``shard_refusal`` refuses.  Each takes a
parsim.plan.ParallelConfig (not imported here: parsim.plan reads its plans through these)."""

from __future__ import annotations

from parsim.model.recompute import Recompute
from parsim.model.spec import shard_not_dividing, shard_without_zero


def recompute_layers_refusal(cfg) -> tuple[str, str] | None:
    """(field, why, in a line saying what to change) where ``recompute_layers`` does not apply to
    cfg; None where it does."""
    n = cfg.recompute_layers
    if cfg.recompute_every:
        if cfg.recompute is not Recompute.FULL:
            return "recompute_every", (f"{cfg.recompute_every}: every N-th layer recomputes fully (torchtitan's "
                                       f"selective_ac_option N); set recompute full or drop recompute_every")
        if n:
            return "recompute_every", "give recompute_every or recompute_layers, not both"
        if cfg.recompute_every < 0:
            return "recompute_every", f"{cfg.recompute_every}: expected a positive whole number"
        return None
    if not n:
        return None
    if cfg.recompute is not Recompute.FULL:
        return "recompute_layers", (f"{list(n)}: counts the layers of each stage that recompute fully (Megatron's "
                                    f"block method); set recompute full or drop recompute_layers")
    if any(not isinstance(x, int) or isinstance(x, bool) or x < 0 for x in n):
        return "recompute_layers", f"{list(n)}: expected whole numbers of layers, 0 or more"
    if len(n) not in (1, cfg.stages):
        return "recompute_layers", (f"{list(n)}: give one count for every stage or one per stage ({cfg.stages} "
                                    f"stages)")
    return None


def shard_refusal(cfg) -> tuple[str, str] | None:
    """(field, why, in a line saying what to change) where ``dp_shard`` (HSDP) does not apply to
    cfg; None where it does, or where it is not set."""
    n = cfg.dp_shard
    if not n:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        return "dp_shard", f"{n}: expected a whole number of data-parallel ranks, 1 or more (0: every dp rank)"
    if cfg.dp % n:
        return "dp_shard", shard_not_dividing(n, cfg.dp)
    if not cfg.zero:
        return "dp_shard", shard_without_zero(n)
    if n * cfg.cp == 1:
        return "dp_shard", "1 with cp = 1 leaves nothing to shard; use zero 0 (plain data parallelism) or dp_shard > 1"
    if cfg.ep > 1:
        return "dp_shard", (f"{n} with ep = {cfg.ep}: the routed experts shard over their own expert-data-parallel "
                            f"group, which parsim does not price beside hybrid sharding; drop dp_shard or use ep 1")
    return None


def config_refusal(cfg) -> tuple[str, str] | None:
    """The first of cfg's refusals, (field, why), that a plan.json or a resolved configuration is
    checked against: the expert fold, the recomputed layers, the shard group, the gradients'
    reduction and its sync; None where none applies."""
    return (fold_refusal(cfg) or recompute_layers_refusal(cfg) or shard_refusal(cfg) or grad_reduce_refusal(cfg)
            or no_sync_refusal(cfg))


def grad_reduce_refusal(cfg) -> tuple[str, str] | None:
    """(field, why, in a line saying what to change) where ``overlap_grad_reduce`` false does not
    apply to cfg (ZeRO-3: FSDP reduce-scatters each micro-batch's gradients during its backward on
    its own stream, the only way parsim prices them); None where it does, or where it is true."""
    if cfg.overlap_grad_reduce or cfg.zero < 3:
        return None
    return "overlap_grad_reduce", (f"false with zero {cfg.zero}: ZeRO-3 reduce-scatters each micro-batch's "
                                   "gradients as its backward runs (FSDP), which parsim prices overlapped; use zero "
                                   "0-2 (ZeRO-2: on the compute stream, DeepSpeed's overlap_comm false), or "
                                   "overlap_grad_reduce true")


def no_sync_refusal(cfg) -> tuple[str, str] | None:
    """(field, why, in a line saying what to change) where ``no_sync`` does not apply to cfg: below
    ZeRO-2 the gradients are reduced once a step already, and FSDP overlaps the one reduction it
    makes; None where it applies, or where it is not set."""
    if not cfg.no_sync:
        return None
    if cfg.zero < 2:
        return "no_sync", (f"true with zero {cfg.zero}: below ZeRO-2 the gradients are reduced once a step "
                           "already; use zero 2 or 3 (FSDP), or leave no_sync out")
    if not cfg.overlap_grad_reduce:
        return "no_sync", ("true with overlap_grad_reduce false: FSDP reduce-scatters the last micro-batch's "
                           "gradients as its backward runs; leave overlap_grad_reduce true")
    return None


def fold_refusal(cfg) -> tuple[str, str] | None:
    """(field, why, in a line saying what to change) where the expert sizes do not fold into the
    tp x cp x dp ranks (``ParallelConfig.fold``); None where they do.  The one check of the layout
    (the model's own constraints, its experts dividing by ep: parsim.cost.experts.check_ep)."""
    if cfg.etp not in (1, cfg.tp):
        if cfg.tp == 1:
            return "etp", f"{cfg.etp}: the expert tp splits experts beside attention's tp, and tp is 1; use etp 1"
        return "etp", (f"{cfg.etp}: parsim prices an expert tensor-parallel size of 1 (experts whole beside "
                       f"attention's tp) or tp = {cfg.tp} (experts split as attention is); choose etp 1 or {cfg.tp}")
    if cfg.fold_ranks % cfg.expert_shards:
        t = f"tp x cp x dp = {cfg.tp} x {cfg.cp} x {cfg.dp}" if cfg.tp > 1 else f"dp x cp = {cfg.dp} x {cfg.cp}"
        return "ep", (f"{cfg.ep}{f' x etp {cfg.etp}' if cfg.etp > 1 else ''} does not divide {t} = {cfg.fold_ranks} "
                      f"(the expert-parallel group is folded from those ranks); choose ep among the divisors of "
                      f"{cfg.fold_ranks // cfg.etp}")
    return None
