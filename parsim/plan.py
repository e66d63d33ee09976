"""The parallel configuration of one training step: what the planner chooses, what the simulator
prices and what the executor runs.

    dp x pp x cp x tp devices; m micro-batches per replica; a schedule with v chunks per rank; a
    split of the layers into v*pp stages; a placement of (replica, pipeline rank) on global ranks,
    each holding cp context-parallel ranks of tp consecutive ranks each (Megatron-LM's default
    order "tp-cp-ep-dp-pp", megatron/core/parallel_state.py: tp innermost, so that a group shares
    a node's fastest links, then cp); the tensor-parallel group's operator strategies (a built-in
    layout or the model's ``shard:``); activation recomputation (none, selective or full:
    parsim.model.recompute).

    Context parallelism (cp; Megatron-LM's context_parallel, Liu et al. 2023 "Ring Attention"):
    each of a cp group's ranks holds s/cp tokens of every sequence and the same parameters, so
    gradients are averaged over the dp x cp ranks (``grad_group``).
"""

from __future__ import annotations

from dataclasses import dataclass

from parsim.errors import InfeasibleError
from parsim.model.graph import DTYPE_BYTES
from parsim.model.recompute import Recompute, read_recompute, recompute_mode
from parsim.model.spec import ZERO_STAGES
from parsim.refusals import config_refusal
from parsim.schedule.generators import SCHEDULES

PLACEMENTS = ("pp-inner", "dp-inner")
# How a cp group's attention sees the other ranks' keys and values (parsim.cost.context): "ring"
# passes K, V chunks around a ring, overlapped with the chunks' attention (Liu et al. 2023;
# Megatron's default); "allgather" all-gathers K, V before attention and reduce-scatters dK, dV
# after its backward, exposed (Dubey et al. 2024, "The Llama 3 Herd of Models", Sec. 3.3.2;
# TransformerEngine's AttnFuncWithCPAndKVAllGather, cp_comm_type "all_gather").
CP_MODES = ("ring", "allgather")


@dataclass(frozen=True)
class ParallelConfig:
    dp: int
    pp: int
    microbatches: int
    schedule: str = "1f1b"
    chunks: int = 1
    # stage boundaries: stage k holds layers [bounds[k], bounds[k+1]); len = stages + 1
    bounds: tuple[int, ...] = ()
    # pp-inner: a replica's pipeline ranks are consecutive (neighbours share a node);
    # dp-inner: a stage's replicas are consecutive (MindSpore: pipeline across nodes).
    placement: str = "pp-inner"
    tp: int = 1
    tp_layout: str = ""          # with tp > 1: "model" (model.yaml's shard:) or a parsim.shard.builtin layout
    recompute: Recompute = Recompute.NONE   # none | selective | full; True / False read as full / none
    # ZeRO stage over the dp ranks (Rajbhandari et al. 2020): 0 none; 1 optimizer state sharded;
    # 2 and gradients; 3 and parameters (parsim.cost.memory.zero_fractions)
    zero: int = 0
    cp: int = 1                  # context-parallel group size: each rank holds s/cp tokens of a sequence
    # tp > 1 under megatron-sp: tensor-parallel collectives overlapped with the adjacent GEMMs
    # (Megatron-Core's --tp-comm-overlap; parsim.sim.overlap)
    tp_comm_overlap: bool = False
    cp_mode: str = "ring"        # with cp > 1: CP_MODES
    # Expert parallelism (MoE models), as Megatron-Core's MoE Parallel Folding lays it out (Liu et
    # al. 2025, "MoE Parallel Folding", arXiv 2504.14960, Sec. 3; megatron/core/parallel_state.py's
    # expert RankGenerator, order "tp-cp-ep-dp-pp" with tp = the expert tp and cp = 1): the MoE
    # layers fold a pipeline rank's tp x cp x dp ranks into etp x ep x edp, etp innermost
    # (``fold``).  A group of ep ranks (``ep_group``) holds E/ep of every layer's routed experts,
    # tokens dispatched to their experts' ranks and combined back by all-to-alls (DeepSeek-V3 Sec.
    # 3.2); each expert's GEMMs are split over etp ranks (--expert-tensor-parallel-size); expert
    # gradients are averaged, and ZeRO-sharded, over the edp = tp x cp x dp / (ep x etp) ranks
    # holding the same expert shard (``expert_dp_group``).  With tp = 1 the ep group is carved from
    # the dp x cp ranks, as before folding.
    ep: int = 1
    # ep > 1: each MoE layer's all-to-alls hidden under the compute of the rank's adjacent action of
    # the other direction (a forward beside another micro-batch's backward, as DeepSeek-V3's DualPipe
    # and Megatron-Core's --overlap-moe-expert-parallel-comm pair them; parsim.sim.engine)
    ep_overlap: bool = False
    # the expert tensor-parallel size: 1 or tp (parsim prices those two).  Default 1: the experts
    # whole on each rank beside attention's tp, as NVIDIA's MoE recipes run them (Megatron-Bridge's
    # DeepSeek-V3 and Qwen3 pretraining configs set expert_tensor_parallel_size 1;
    # results/published/moe_figures.yaml's source_config etp), not Megatron's own default (etp = tp)
    etp: int = 1
    # Under full recomputation, how many layers of each stage recompute (Megatron-Core's
    # --recompute-method block --recompute-num-layers N: "the number of transformer layers to
    # recompute within each pipeline stage", per virtual stage under interleaving; megatron/core/
    # transformer/transformer_config.py, transformer_block.py), counted from the stage's first;
    # ``recomputed_layers``.  () every layer (Megatron's uniform method, one layer a unit); one
    # count, every stage's; one count per stage, MindFormers' ``recompute: [4, 0]`` form.
    recompute_layers: tuple[int, ...] = ()
    # Under full recomputation, every N-th of a pipeline rank's layers recomputes, counted from 1
    # over its stages in order (torchtitan's activation_checkpoint.selective_ac_option N, "every nth
    # layer": torchtitan/distributed/activation_checkpoint.py's _apply_layer_sac wraps the k-th
    # block where k % N == 0; its default is 2); ``recomputed_layers``.  0: not this rule.
    recompute_every: int = 0
    # ZeRO's shard group, hybrid sharded data parallelism (HSDP): each ZeRO shard spans dp_shard of
    # the dp ranks (x cp), and the dp / dp_shard such groups replicate one another.  Gradients are
    # reduce-scattered within a shard group, the shards all-reduced across the groups, parameters
    # gathered within one (torchtitan's data_parallel_shard_degree beside data_parallel_replicate_degree
    # = dp / dp_shard, FSDP2 on a 2-D device mesh: torch.distributed.fsdp.fully_shard, "If the mesh
    # is 2D, then parameters are sharded across the 1st dim and replicated across the 0th dim";
    # FSDP1's HYBRID_SHARD; Megatron-Core's --num-distributed-optimizer-instances = dp / dp_shard for
    # ZeRO-1).  ``shard_group``, ``replicate_group``.  0: the shards span every dp rank (plain ZeRO)
    dp_shard: int = 0
    # Data-parallel gradient buckets reduced as the backward makes them ready, overlapped with the
    # rest of it (True: torch DDP's reducer, which always overlaps; Megatron-Core's
    # --overlap-grad-reduce, which NeMo's and Megatron-Bridge's training recipes set, the production
    # default), or all after the pipeline rank's last backward of the step (False: Megatron-Core
    # without --overlap-grad-reduce, its own default, finalize_model_grads reducing every bucket
    # once the schedule is done; megatron/core/distributed/distributed_data_parallel_config.py,
    # overlap_grad_reduce: bool = False).  Under ZeRO-2, False is DeepSpeed's overlap_comm false (its
    # default below stage 3): each micro-batch's buckets are still reduce-scattered as its backward
    # makes them ready, but on the compute stream, which waits for each (DeepSpeed 0.19,
    # runtime/zero/stage_1_and_2.py: reduce_ipg_grads and average_tensor take
    # get_accelerator().current_stream() unless overlap_comm; reduce_ready_partitions_and_remove_grads
    # reduces every micro-step where partition_gradients, stage 2).  ZeRO-3 refuses it
    # (grad_reduce_refusal).
    overlap_grad_reduce: bool = True
    # ZeRO-2/3 (FSDP) gradient accumulation without communication: every micro-batch but the last
    # accumulates its gradients unsharded (FSDP2's set_requires_gradient_sync(False), FSDP1's
    # no_sync(), which Hugging Face Accelerate and Lightning enter under gradient accumulation), and
    # the last micro-batch's backward reduce-scatters the sum once; the parameters are still gathered
    # for every micro-batch.  Memory holds the unsharded gradients through the step.  False, torch's
    # own default and torchtitan's: every micro-batch reduce-scatters its gradients into the shards.
    # Beside a pipeline (ZeRO-2 with pp > 1) the gradients are reduced once a step whatever this says
    # (grads_reduced_once).
    no_sync: bool = False

    def __post_init__(self):
        object.__setattr__(self, "recompute", recompute_mode(self.recompute))
        if isinstance(self.recompute_layers, int):
            object.__setattr__(self, "recompute_layers", (self.recompute_layers,))
        else:
            object.__setattr__(self, "recompute_layers", tuple(self.recompute_layers))

    @property
    def stages(self) -> int:
        return self.pp * self.chunks

    @property
    def world_size(self) -> int:
        return self.dp * self.pp * self.cp * self.tp

    @property
    def grad_ranks(self) -> int:
        """Ranks holding the same parameters, over which gradients are averaged (and ZeRO shards):
        dp x cp (Megatron's data-parallel group "with cp")."""
        return self.dp * self.cp

    @property
    def shard_ranks(self) -> int:
        """Ranks one ZeRO shard spans: dp_shard x cp under HSDP (``dp_shard``), else ``grad_ranks``."""
        return self.dp_shard * self.cp if self.dp_shard else self.grad_ranks

    @property
    def shard_replicas(self) -> int:
        """Shard groups holding the same shards (HSDP's replicate degree): 1 without ``dp_shard``."""
        return self.grad_ranks // self.shard_ranks

    @property
    def fsdp_beside_pipeline(self) -> bool:
        """FSDP (ZeRO 2-3) with pp > 1, priced and run as torchtitan runs it: FSDP2 stages driven by
        torch.distributed.pipelining (parsim.sim.simulate.check_config allows ZeRO-2 there only)."""
        return self.zero >= 2 and self.pp > 1

    @property
    def grads_reduced_once(self) -> bool:
        """FSDP's gradients accumulated unsharded and reduced once a step: ``no_sync``, or FSDP
        beside a pipeline, as torch.distributed.pipelining runs FSDP2 stages: every backward without
        gradient sync or reshard, then one reduce-scatter per stage after its last backward (torch
        2.13, distributed/pipelining/stage.py: backward_maybe_with_nosync, perform_reduce_grad)."""
        return self.no_sync or self.fsdp_beside_pipeline

    @property
    def hybrid_sharded(self) -> bool:
        """Whether ZeRO shards in groups that replicate one another (a dp_shard of every dp rank is
        plain ZeRO: one group, nothing to all-reduce across)."""
        return self.shard_replicas > 1

    def global_rank(self, replica: int, pipe_rank: int, tp_rank: int = 0, cp_rank: int = 0) -> int:
        """The one place for the rank layout: tp innermost, then cp, then (replica, pipeline rank)
        by placement."""
        if self.placement == "pp-inner":
            base = replica * self.pp + pipe_rank
        else:
            base = pipe_rank * self.dp + replica
        return (base * self.cp + cp_rank) * self.tp + tp_rank

    def coordinates(self, rank: int) -> tuple[int, int, int, int]:
        """(replica, pipeline rank, tp rank, cp rank) of a global rank: global_rank's inverse."""
        base, cp_rank, tp_rank = rank // (self.cp * self.tp), rank // self.tp % self.cp, rank % self.tp
        if self.placement == "pp-inner":
            return base // self.pp, base % self.pp, tp_rank, cp_rank
        return base % self.dp, base // self.dp, tp_rank, cp_rank

    def dp_group(self, pipe_rank: int, tp_rank: int = 0, cp_rank: int = 0) -> list[int]:
        return [self.global_rank(d, pipe_rank, tp_rank, cp_rank) for d in range(self.dp)]

    def tp_group(self, replica: int, pipe_rank: int, cp_rank: int = 0) -> list[int]:
        return [self.global_rank(replica, pipe_rank, t, cp_rank) for t in range(self.tp)]

    def cp_group(self, replica: int, pipe_rank: int, tp_rank: int = 0) -> list[int]:
        """The ring of a context-parallel group, in ring order (cp rank 0, 1, ...)."""
        return [self.global_rank(replica, pipe_rank, tp_rank, c) for c in range(self.cp)]

    def grad_group(self, pipe_rank: int, tp_rank: int = 0) -> tuple[int, ...]:
        """The dp x cp ranks a stage's gradients are averaged over (``grad_ranks``).  They depend on
        the rank layout alone, not on the split or the micro-batches: a run's pricing context lists
        each once (parsim.sim.prices.Prices.group)."""
        return tuple(self.global_rank(d, pipe_rank, tp_rank, c) for d in range(self.dp) for c in range(self.cp))

    def shard_group(self, pipe_rank: int, tp_rank: int = 0, index: int = 0) -> tuple[int, ...]:
        """The ``index``-th group of ``grad_group`` one ZeRO shard spans (``shard_ranks``): under HSDP
        dp_shard consecutive replicas x cp, the inner dimension (torchtitan's mesh order dp_replicate,
        dp_shard, cp), so that a shard group shares a node's links; else the whole grad_group."""
        if not self.dp_shard:
            return self.grad_group(pipe_rank, tp_rank)
        first = index * self.dp_shard
        return tuple(self.global_rank(d, pipe_rank, tp_rank, c)
                     for d in range(first, first + self.dp_shard) for c in range(self.cp))

    def replicate_group(self, pipe_rank: int, tp_rank: int = 0, index: int = 0) -> tuple[int, ...]:
        """The ranks holding the same shard, one per shard group (``shard_replicas`` of them), which
        all-reduce it: the ``index``-th position of a shard group (``index`` < shard_ranks)."""
        if not self.dp_shard:
            return (self.grad_group(pipe_rank, tp_rank)[index],)
        d, c = divmod(index, self.cp)
        return tuple(self.global_rank(d + k * self.dp_shard, pipe_rank, tp_rank, c)
                     for k in range(self.shard_replicas))

    @property
    def fold_ranks(self) -> int:
        """Ranks a pipeline rank's MoE layers fold into etp x ep x edp: tp x cp x dp."""
        return self.tp * self.cp * self.dp

    @property
    def expert_shards(self) -> int:
        """Routed-expert shards a pipeline rank's MoE layers cut into, each with its own
        expert-data-parallel group: ep x etp."""
        return self.ep * self.etp

    @property
    def expert_dp(self) -> int:
        """Ranks holding the same routed-expert shard: tp x cp x dp / (ep x etp)."""
        return self.fold_ranks // self.expert_shards

    @property
    def experts_apart(self) -> bool:
        """Whether the routed experts' gradients go over groups of their own (``expert_dp_group``)
        rather than with the dense parameters' (``grad_group``): under expert parallelism, or where
        the expert tp differs from attention's."""
        return self.ep > 1 or self.etp != self.tp

    def fold(self, pipe_rank: int) -> tuple[int, ...]:
        """The one place for the folded expert mesh: a pipeline rank's tp x cp x dp ranks in
        Megatron's order (tp innermost, then cp, then the replicas), read as (edp, ep, etp) with
        etp innermost: rank j of the list has etp rank j % etp, ep rank j // etp % ep and edp rank
        j // (etp ep).  With tp = 1 an ep group is ep consecutive members of ``grad_group``."""
        return tuple(self.global_rank(d, pipe_rank, t, c)
                     for d in range(self.dp) for c in range(self.cp) for t in range(self.tp))

    def ep_group(self, pipe_rank: int, index: int = 0) -> tuple[int, ...]:
        """The ``index``-th expert-parallel group of a pipeline rank (index = edp rank x etp + etp
        rank): ep members of ``fold`` with the same edp and etp ranks, by ep rank."""
        f, step = self.fold(pipe_rank), self.etp
        base = index // step * step * self.ep + index % step
        return f[base:base + step * self.ep:step]

    def etp_group(self, pipe_rank: int, index: int = 0) -> tuple[int, ...]:
        """The ``index``-th expert tensor-parallel group: etp consecutive members of ``fold``."""
        return self.fold(pipe_rank)[index * self.etp:(index + 1) * self.etp]

    def expert_dp_group(self, pipe_rank: int, ep_rank: int = 0, etp_rank: int = 0) -> tuple[int, ...]:
        """The ranks holding (ep rank, etp rank)'s expert shard, over which its gradients are averaged."""
        return self.fold(pipe_rank)[ep_rank * self.etp + etp_rank::self.expert_shards]

    def microbatch_size(self, global_batch: int) -> int:
        if global_batch % (self.dp * self.microbatches):
            raise InfeasibleError(f"global batch {global_batch} does not divide into dp={self.dp} x "
                                  f"microbatches={self.microbatches}; pick microbatches dividing "
                                  f"{global_batch // self.dp if global_batch % self.dp == 0 else 'the batch'}")
        return global_batch // (self.dp * self.microbatches)

    def stage_layers(self, stage: int) -> range:
        return range(self.bounds[stage], self.bounds[stage + 1])

    def layer_stages(self) -> list[int]:
        """The stage of each layer."""
        return [s for s in range(self.stages) for _ in self.stage_layers(s)]

    def rank_layers(self, pipe_rank: int) -> set[int]:
        """The layers a pipeline rank holds: those of its stages (s % pp == pipe_rank)."""
        return {i for s in range(pipe_rank, self.stages, self.pp) for i in self.stage_layers(s)}

    def recomputed_layers(self, n_layers: int) -> frozenset[int] | None:
        """The one place for which layers a partial recomputation recomputes (``recompute_layers``;
        None: every layer, as ``recompute`` says): in each stage, the first N of its layers that
        are not the model's first or last, its embedding and output layer, which Megatron's
        TransformerBlock does not hold (a stage's checkpointed layers are its transformer layers:
        transformer_block.py's block method)."""
        if self.recompute_every:
            return self._every_nth(n_layers)
        if not self.recompute_layers:
            return None
        bounds = self.bounds or (0, n_layers)
        counts = self.recompute_layers * (len(bounds) - 1) if len(self.recompute_layers) == 1 else self.recompute_layers
        out: set[int] = set()
        for a, b, n in zip(bounds, bounds[1:], counts):
            out.update(recomputable(range(a, b), n_layers)[:n])
        return frozenset(out)

    def _every_nth(self, n_layers: int) -> frozenset[int]:
        """``recompute_every``'s layers: on each pipeline rank, the k-th of its layers other than
        the model's first and last (in order over its stages) where k % N == 0."""
        ranks = [self.rank_layers(r) for r in range(self.pp)] if self.bounds else [set(range(n_layers))]
        out: set[int] = set()
        for held in ranks:
            body = recomputable(held, n_layers)
            out.update(body[k - 1] for k in range(self.recompute_every, len(body) + 1, self.recompute_every))
        return frozenset(out)

    def describe_split(self, names: list[str]) -> str:
        return " | ".join(f"{names[a]}..{names[b - 1]}" if b - a > 1 else names[a]
                          for a, b in zip(self.bounds, self.bounds[1:]))


def recomputable(indices, n_layers: int) -> list[int]:
    """Of ``indices``, rising, the layers a partial recomputation counts (``recompute_layers``,
    ``recompute_every``): all but the model's first and last, its embedding and output layer,
    which Megatron's TransformerBlock and torchtitan's checkpointed blocks do not hold."""
    return sorted(i for i in indices if 0 < i < n_layers - 1)


def recompute_layers_text(counts=(), every: int = 0) -> str:
    """A partial recomputation (ParallelConfig.recompute_layers or recompute_every) as the reports
    write it: '2 layers per stage', '4,0 layers per stage', '1 layer in 2'; '' where neither is set."""
    if every:
        return "every layer" if every == 1 else f"1 layer in {every}"
    if counts:
        return f"{','.join(map(str, counts))} layer{'' if list(counts) == [1] else 's'} per stage"
    return ""


def grad_reduce_text(overlap: bool, zero: int, no_sync: bool = False) -> str:
    """Gradient reduction without overlap (ParallelConfig.overlap_grad_reduce false) as the reports
    write it: after the backward (DDP, ZeRO-1) or on the compute stream (ZeRO-2); FSDP's once a step
    (``no_sync``: ParallelConfig.grads_reduced_once); '' where it overlaps every micro-batch's, or ZeRO
    0-1's once."""
    if no_sync:
        return "grads-last-microbatch"
    if overlap:
        return ""
    return "grads-on-compute-stream" if zero >= 2 else "grads-after-backward"


def bounds_from_assignment(stages: tuple[int, ...]) -> tuple[int, ...]:
    """(0,0,1,1,1) -> (0, 2, 5)."""
    bounds = [0] + [i for i in range(1, len(stages)) if stages[i] != stages[i - 1]] + [len(stages)]
    return tuple(bounds)


# parsim's decoder cut units (parsim.model.zoo.gpt, parsim.model.hf): the embedding, one unit per
# transformer layer (layers.N), and the head (final norm and output projection); bounds_from_counts,
# parsim.search.resolve.uniform_bounds and parsim.export read them.
EMBED, HEAD = "embed", "head"


def bounds_from_counts(counts: list[int]) -> tuple[int, ...]:
    """Transformer layers per (virtual) stage -> the stage boundaries over a decoder's cut units (embed,
    layers.N, head: the embedding opens the first stage and the head closes the last);
    parsim.export.common.decoder_counts' inverse."""
    out, at = [0], 1
    for c in counts[:-1]:
        at += c
        out.append(at)
    out.append(at + counts[-1] + 1)
    return tuple(out)


# ----------------------------------------------------------------------------- plan.json

PLAN_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Plan:
    """What ``parsim plan -o plan.json`` writes and ``parsim simulate plan.json`` / ``parsim run`` read.

    ``model_path`` is the model.yaml as given on the command line; ``layers`` records the layer
    names so that a changed model is caught; ``estimate`` is the prediction at planning time."""

    model_path: str
    model_name: str
    layers: tuple[str, ...]
    global_batch_size: int
    dtype: str
    optimizer: str
    cluster: str
    world_size: int
    config: ParallelConfig
    estimate: dict
    fp8: bool = False              # Linear GEMMs in FP8 beside bf16 (training.fp8; parsim.model.fp8)
    model_sha256: str = ""       # model.yaml's content when planned (spec_sha256); "" in plans written before it

    def to_json(self) -> dict:
        c = self.config
        return {
            "schema_version": PLAN_SCHEMA_VERSION,
            "kind": "parsim-plan",
            "model": {"path": self.model_path, "name": self.model_name, "layers": list(self.layers),
                      "global_batch_size": self.global_batch_size, "dtype": self.dtype, "optimizer": self.optimizer,
                      **({"fp8": True} if self.fp8 else {}),
                      **({"sha256": self.model_sha256} if self.model_sha256 else {})},
            "cluster": {"spec": self.cluster, "world_size": self.world_size},
            "parallel": {"dp": c.dp, "pp": c.pp, "tp": c.tp, "cp": c.cp, "tp_layout": c.tp_layout,
                         "recompute": c.recompute.value,
                         "zero": c.zero, "tp_comm_overlap": c.tp_comm_overlap, "cp_mode": c.cp_mode,
                         **({"ep": c.ep} if c.ep > 1 else {}), **({"ep_overlap": True} if c.ep_overlap else {}),
                         **({"etp": c.etp} if c.etp != 1 else {}),
                         **({"recompute_layers": list(c.recompute_layers)} if c.recompute_layers else {}),
                         **({"recompute_every": c.recompute_every} if c.recompute_every else {}),
                         **({"dp_shard": c.dp_shard} if c.dp_shard else {}),
                         **({"overlap_grad_reduce": False} if not c.overlap_grad_reduce else {}),
                         **({"no_sync": True} if c.no_sync else {}),
                         "microbatches": c.microbatches, "schedule": c.schedule,
                         "chunks": c.chunks, "placement": c.placement, "bounds": list(c.bounds),
                         "stages": [[self.layers[a], self.layers[b - 1]] for a, b in zip(c.bounds, c.bounds[1:])]},
            "estimate": self.estimate,
        }

    @classmethod
    def from_json(cls, d: dict, source: str) -> "Plan":
        from parsim.errors import InputError
        from parsim.inputs import Fields

        r = Fields(d, source)
        r.schema_version(PLAN_SCHEMA_VERSION, required=True, hint="plan again with this parsim")
        r.choice("kind", ("parsim-plan",))
        m = r.sub("model")
        layers = tuple(m.get("layers", list))
        model = dict(path=m.get("path", str), name=m.get("name", str), batch=m.positive_int("global_batch_size"),
                     dtype=m.choice("dtype", tuple(DTYPE_BYTES)), optimizer=m.get("optimizer", str),
                     fp8=m.get("fp8", bool, False), sha256=m.get("sha256", str, ""))
        m.done()
        cl = r.sub("cluster")
        cluster, world = cl.get("spec", str), cl.positive_int("world_size")
        cl.done()
        p = r.sub("parallel")
        bounds = p.get("bounds", list)
        cfg = ParallelConfig(dp=p.positive_int("dp"), pp=p.positive_int("pp"), microbatches=p.positive_int("microbatches"),
                             schedule=p.choice("schedule", SCHEDULES), chunks=p.positive_int("chunks", 1),
                             bounds=tuple(bounds), placement=p.choice("placement", PLACEMENTS, "pp-inner"),
                             tp=p.positive_int("tp", 1), tp_layout=p.get("tp_layout", str, ""),
                             recompute=read_recompute(p, "recompute", Recompute.NONE),
                             zero=p.choice("zero", ZERO_STAGES, 0), cp=p.positive_int("cp", 1),
                             tp_comm_overlap=p.get("tp_comm_overlap", bool, False),
                             cp_mode=p.choice("cp_mode", CP_MODES, "ring"), ep=p.positive_int("ep", 1),
                             ep_overlap=p.get("ep_overlap", bool, False), etp=p.positive_int("etp", 1),
                             recompute_layers=p.get("recompute_layers", (int, list), ()),
                             recompute_every=p.get("recompute_every", int, 0),
                             dp_shard=p.get("dp_shard", int, 0),
                             overlap_grad_reduce=p.get("overlap_grad_reduce", bool, True),
                             no_sync=p.get("no_sync", bool, False))
        stages = p.get("stages", list, [])
        p.done()
        why = config_refusal(cfg)
        if why:
            raise InputError(f"{source}: parallel.{why[0]}: {why[1]}")
        if (len(bounds) != cfg.stages + 1 or bounds[0] != 0 or bounds[-1] != len(layers)
                or any(not isinstance(x, int) or x >= y for x, y in zip(bounds, bounds[1:]))):
            raise InputError(f"{source}: parallel.bounds: {bounds} is not {cfg.stages} stages over {len(layers)} layers")
        if stages and stages != [[layers[a], layers[b - 1]] for a, b in zip(bounds, bounds[1:])]:
            raise InputError(f"{source}: parallel.stages: does not match parallel.bounds; edit one to match the other")
        plan = cls(model["path"], model["name"], layers, model["batch"], model["dtype"], model["optimizer"],
                   cluster, world, cfg, r.get("estimate", dict, {}), model["fp8"], model["sha256"])
        r.done()
        return plan


def plan_from_candidate(spec, cluster, cfg: ParallelConfig, estimate_json: dict) -> Plan:
    import os

    from parsim.model.spec import spec_sha256

    return Plan(model_path=spec.path, model_name=spec.name, layers=tuple(spec.graph.names),
                global_batch_size=spec.training.global_batch_size, dtype=spec.training.dtype,
                optimizer=spec.training.optimizer, cluster=cluster.spec, world_size=cluster.world_size,
                config=cfg, estimate=estimate_json, fp8=spec.training.fp8,
                model_sha256=spec_sha256(spec.path) if spec.path and os.path.isfile(spec.path) else "")


def model_changed(plan: Plan, source: str) -> str | None:
    """Why the plan is stale, in a line naming the field, or None: the model.yaml's content differs
    from what the plan recorded (plans without a digest are not checked)."""
    from parsim.model.spec import spec_sha256

    if not plan.model_sha256 or spec_sha256(plan.model_path) == plan.model_sha256:
        return None
    return (f"{source}: model.sha256: {plan.model_path} changed since the plan was made (its content differs from "
            "the digest the plan recorded), so the plan's split and prediction may not hold; plan again")


def load_plan(path: str) -> Plan:
    from parsim.inputs import load_file

    return Plan.from_json(load_file(path, "a plan.json from parsim plan -o"), path)


def load_plan_and_model(path: str):
    """(Plan, ModelSpec): the plan and the model.yaml it names, checked to match."""
    import os

    from parsim.errors import InputError
    from parsim.model.spec import load_model

    plan = load_plan(path)
    if not os.path.isfile(plan.model_path):
        raise InputError(f"{path}: model.path: {plan.model_path} not found; run from the folder the plan was made "
                         "in, or correct model.path")
    spec = load_model(plan.model_path)
    check_plan_matches(plan, spec, path)
    return plan, spec


def check_plan_matches(plan: Plan, spec, source: str) -> None:
    """The model must still have the layers the plan split, and the batch, dtype and optimizer it
    was planned for."""
    from parsim.errors import InputError

    if tuple(spec.graph.names) != plan.layers:
        missing = [n for n in plan.layers if n not in spec.graph.names]
        what = f"names layers the model lacks ({', '.join(missing[:3])})" if missing else "has a different layer list"
        raise InputError(f"{source}: model.layers: the plan {what} than {spec.path}; plan again")
    if plan.config.cp > 1:
        from parsim.errors import InfeasibleError
        from parsim.model.attention import check_cp

        try:
            check_cp(spec.graph, plan.config.cp, f"{source}: parallel.cp: {plan.config.cp}")
        except InfeasibleError as e:
            raise InputError(str(e)) from None
    t = spec.training
    for key, planned, now in (("global_batch_size", plan.global_batch_size, t.global_batch_size),
                              ("dtype", plan.dtype, t.dtype), ("optimizer", plan.optimizer, t.optimizer),
                              ("fp8", plan.fp8, t.fp8)):
        if planned != now:
            raise InputError(f"{source}: model.{key}: the plan was made for {planned}, but {spec.path} has "
                             f"training.{key}: {now}; plan again")
