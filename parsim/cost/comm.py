"""Communication time, alpha-beta per link class (Hockney 1994): t = alpha + bytes / beta.

Collectives over n ranks on S bytes (Thakur, Rabenseifner & Gropp 2005, "Optimization of
Collective Communication Operations in MPICH"; bus-bandwidth factors as in nccl-tests'
PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n):

    ring all-reduce          2(n-1) * a + 2(n-1)/n * S / B
    halving-doubling         2 log2(n) * a + 2(n-1)/n * S / B     (n a power of two)
    tree (double binary)     2 log2(n) * a + 2 S / B
    hierarchical             reduce-scatter in the node, all-reduce of S/k across nodes,
                             all-gather in the node (k = ranks per node)
    HCCL's mesh, NHR and pipeline (parsim.cost.hccl, with their sources):
    mesh                     2 a + 2 S / (n B_link)   (a full-mesh group: one link per peer)
    nhr                      2 ceil(log2 n) * a + 2(n-1)/n * S / B
    pipeline                 2 ((N-1) max(step between nodes, step inside) + step inside)
    all-gather / reduce-scatter (ring)   (n-1) * a + (n-1)/n * S / B
    all-to-all (pairwise exchange)       (n-1) * a + (n-1)/n * S / B in one node or one scale-up
                             domain (a + S / (n B_link) in a full mesh); across nodes the
                             off-node (n-k)/n * S over the NICs (all_to_all_time_s: rails, PXN)

B is the slowest link the group crosses (Cluster.span_class: its farthest tier), times the
collective library's bandwidth efficiency; a = link latency + the library's per-step latency,
except where a profile gives NCCL's own latency model (collective.latency_model: nccl): there a
ring's or tree's latency is NCCL's (parsim.cost.nccl: a base, then each step at its hop's, inside
a node or between nodes) and only its bytes are priced as above.
Across nodes, NCCL's rings and trees leave each node on the NICs of all the group's k ranks there
at once (one ring per channel, each crossing on another NIC), so B there is k times a rank's share
of the NICs, up to what the node's own link carries beside it (_between_nodes).
Both as profile-comm fitted them in the run's dtype: the cluster a simulation gets is resolved
for it (Cluster.for_dtype; gloo's bf16 all-reduce is slower per byte than its fp32 one).
``auto`` takes the fastest of the algorithms the cluster's collective library implements
(LIBRARY_ALGORITHMS), as NCCL's tuner does.
"""

from __future__ import annotations

import math

from parsim.cost import hccl, nccl
from parsim.errors import InputError
from parsim.hardware.cluster import Cluster

ALGORITHMS = ("auto", "ring", "tree", "halving-doubling", "nhr", "mesh", "hierarchical", "pipeline")

# All-reduce algorithms each collective library implements (of those modelled here):
# - nccl: Ring and Tree (NCCL docs, environment variables, NCCL_ALGO; its other values CollNet,
#   NVLS and PAT need SHARP switches or NVLink SHARP and are not modelled).
# - hccl: ring, H-D_R (recursive halving-doubling), NHR and pipeline between servers, under a
#   server-level stage inside each server, i.e. hierarchical (Huawei CANN docs, environment
#   variable HCCL_ALGO, "level0" inside a server, "level1" between servers), and Mesh inside a
#   fully connected server (hicann/hccl docs/en/user_guide/coll_algo_intro/algo_intro.md: Mesh,
#   Ring, Double-Ring and Star inside a server, chosen by the topology; parsim.cost.hccl).  NB
#   (nonuniform Bruck) is not modelled: the same steps as NHR, its data in a different order.
# - gloo: ring (allreduce_ring.h, allreduce.cc) and halving-doubling (allreduce_halving_doubling.h)
#   in facebookincubator/gloo; it has no tree all-reduce.
LIBRARY_ALGORITHMS = {"nccl": ("ring", "tree"),
                      "hccl": ("ring", "halving-doubling", "hierarchical"),
                      "gloo": ("ring", "halving-doubling")}
# Libraries whose reduce-scatter is an all-reduce of the whole buffer, each rank then keeping its
# chunk: torch's ProcessGroupGloo::reduce_scatter_tensor_coalesced (behind _reduce_scatter_base,
# what reduce_scatter_tensor and FSDP2 call) all-reduces a copy of the input and copies out
# the rank's chunk, so it takes an all-reduce's time, not half of it.
REDUCE_SCATTER_BY_ALL_REDUCE = ("gloo",)
# Algorithms a library implements on some products only, priced where a profile names them in
# collective.algorithms (Collectives.algorithms): HCCL's NHR (any server count), Mesh (a fully
# connected server: Atlas A2's HCCS) and Pipeline ("currently only Atlas A2 training products",
# CANN 8.0.RC1 docs, HCCL_ALGO; Atlas A3 too in hicann/hccl's algo_intro.md), parsim.cost.hccl.
PRODUCT_ALGORITHMS = {"hccl": ("nhr", "mesh", "pipeline")}


def cluster_algorithms(cluster: Cluster) -> tuple[str, ...]:
    """The all-reduce algorithms the cluster's library runs on it: the profile's
    collective.algorithms where given, else the library's (LIBRARY_ALGORITHMS)."""
    coll = cluster.profile.collectives
    if not coll.algorithms:
        return LIBRARY_ALGORITHMS[coll.library]
    can = LIBRARY_ALGORITHMS[coll.library] + PRODUCT_ALGORITHMS.get(coll.library, ())
    bad = [a for a in coll.algorithms if a not in can]
    if bad:
        raise InputError(f"{cluster.profile.source or cluster.profile.name}: collective.algorithms: {coll.library} "
                         f"does not implement {', '.join(bad)}; list among {', '.join(can)}")
    return coll.algorithms


def library_algorithms(cluster: Cluster, algorithm: str = "auto") -> tuple[str, ...]:
    """The all-reduce algorithms ``algorithm`` stands for on ``cluster`` (``auto``: every one its
    library runs there, cluster_algorithms).  An explicit algorithm the library lacks is an InputError."""
    library = cluster.profile.collectives.library
    known = cluster_algorithms(cluster)
    if algorithm == "auto":
        return known
    if algorithm not in known:
        raise InputError(f"--algorithm {algorithm}: the cluster's collective library {library} does not "
                         f"implement it; use auto or one of {', '.join(known)}")
    return (algorithm,)

DDP_BUCKET_BYTES = 25 * 2**20   # torch DDP's default bucket_cap_mb = 25
# torch DDP's first bucket: torch.distributed._DEFAULT_FIRST_BUCKET_BYTES (c10d reducer.hpp,
# kDefaultFirstBucketBytes = 1024 * 1024), so that the first gradients of the backward start
# their all-reduce early; DistributedDataParallel uses it whenever bucket_cap_mb is left default
DDP_FIRST_BUCKET_BYTES = 2**20


def group_link_class(cluster: Cluster, ranks) -> str:
    """The farthest link class between any two members (what a ring over them must cross)."""
    return cluster.span_class(ranks)


def group_shape(cluster: Cluster, ranks) -> tuple[str, int, int, str, int, int, int]:
    """(farthest link class, nodes spanned, most ranks on one node, link class inside a node,
    fewest ranks on one node, NVLink domains spanned, pods spanned).  The NVLink domains count a
    scale-up domain across nodes (NVL72's 18 trays) as one, as NCCL's multi-node NVLink treats its
    ranks as one node's (assumed: NCCL_MNNVL_ENABLE's documentation says only that NVLink is used
    between them); without one they are the nodes.  Pods: the fabric's (``pod_nodes``), 1 without.
    The planner prices the same groups for every candidate and bucket: its pricing context keeps
    them (parsim.sim.prices.Prices.shape)."""
    nodes: dict[int, list[int]] = {}
    for r in ranks:
        nodes.setdefault(cluster.node_of(r), []).append(r)
    first = next(iter(nodes.values()))
    counts = [len(v) for v in nodes.values()]
    fabric = cluster.profile.fabric
    domains = len({n // fabric.domain_nodes for n in nodes}) if fabric.domain_nodes else len(nodes)
    pods = len({n // fabric.pod_nodes for n in nodes}) if fabric.pod_nodes else 1
    return (cluster.span_class(ranks), len(nodes), max(counts), cluster.span_class(first), min(counts), domains,
            pods)


def ring_spine_relief(cluster: Cluster, link_class: str, pods: int, n_nodes: int) -> float:
    """How many times the spine link's bandwidth (the NIC's / o: parsim.hardware.fabric) a ring's
    hops across pods get, 1 off the spine.  NCCL orders a ring by rank, so by node: a ring over N
    nodes in p pods crosses the spine on p of its N hops between nodes.  Its kind's other groups
    run at the same time (every data-parallel ring of a step; they are translates of one another
    and tile the cluster), so a pod sends p/N of its NICs' ring traffic over the spine, which
    carries 1/o of the NICs' bandwidth at full speed: the hops across pods run at the NIC's
    bandwidth while o p / N <= 1, and at the NIC's / (o p / N) beyond.  p = N (a node a pod) is
    every GPU sending across pods at once, the spine's own bandwidth.  The Llama 3 paper places
    only data parallelism across its 1:7 pods for this reason ("to minimize network communication
    across pods", Dubey et al. 2024, Sec. 3.3.1).  Rings only: a tree crosses a pod boundary once
    a level, and an all-to-all or a point-to-point send takes the spine as the fabric prices it."""
    if link_class != "spine":
        return 1.0
    over = cluster.profile.fabric.oversubscription
    return over / max(1.0, over * pods / n_nodes)


def p2p_time_s(cluster: Cluster, src: int, dst: int, nbytes: float) -> float:
    return cluster.link(src, dst).time_s(nbytes)


def _alpha_beta(cluster: Cluster, link_class: str, op: str = "all_reduce") -> tuple[float, float]:
    """(alpha, beta) of ``op`` on the link class: the link's, with the library's per-step latency
    and bandwidth efficiency, those profile-comm fitted for the op itself where it did
    (Collectives.op_fit), else the all-reduce's."""
    link = cluster.link_for(link_class)
    coll = cluster.profile.collectives
    latency_s, efficiency = coll.op_fit(op) or (coll.latency_s, coll.bandwidth_efficiency)
    return link.latency_s + latency_s, link.bandwidth_bytes_per_s * link.efficiency * efficiency


# Libraries whose rings and trees cross between nodes on several NICs at once: NCCL builds one
# ring (tree) per channel and the channels leave the node on different NICs (NCCL's environment
# variables, NCCL_CROSS_NIC: whether rings and trees may use different NICs on different nodes),
# so a group with k ranks on each node sends its traffic between nodes over those k ranks' NICs.  Measured: two HGX A100 nodes of 8 GPUs
# and 4 x 200 Gb/s NICs reach an all-reduce bus bandwidth of 91 GB/s (NVIDIA/nccl-tests#100), 86
# GB/s on another such pair (NVIDIA/nccl#1048), against 25 GB/s for one NIC; 4 nodes give 45 GB/s
# with 4 GPUs a node and 90 GB/s with 8 (NVIDIA/nccl#1168).  gloo and HCCL's flat ring run one
# ring, each rank on its own NIC (HCCL's server-level algorithms are _two_level's).
NIC_CHANNELS = ("nccl",)
# The tiers between nodes whose bandwidth is a rank's share of its node's NICs (Cluster links:
# network, and rail and spine derived from it); a scale-up ``domain`` gives every rank its own link.
NIC_TIERS = ("network", "rail", "spine")


def _between_nodes(cluster: Cluster, worst: str, inner_class: str, fewest: int, op: str,
                   relief: float = 1.0) -> tuple[float, float]:
    """(alpha, beta) of a ring or tree across nodes with at least ``fewest`` of the group's ranks
    on each: on a library with channels (NIC_CHANNELS) over a NIC tier, a rank's ring traffic
    leaves the node through one of the k = ``fewest`` ranks' NICs, 1/k of it through each, and the
    other (k - 1)/k stays on the node's link, both at once:

        t = (n-1)/n S x max(1 / (k B_out), (k-1) / (k B_in))  =  (n-1)/n S / min(k B_out, k/(k-1) B_in)

    (per rank, of the farthest tier's B_out, times ``relief`` (ring_spine_relief), and the
    in-node class's B_in); else the farthest tier's own (alpha, beta)."""
    alpha, beta = _alpha_beta(cluster, worst, op)
    beta *= relief
    if fewest > 1 and worst in NIC_TIERS and cluster.profile.collectives.library in NIC_CHANNELS:
        beta_in = _alpha_beta(cluster, inner_class, op)[1]
        beta = min(fewest * beta, fewest / (fewest - 1) * beta_in)
    return alpha, beta


def _flat(n: int, nbytes: float, alpha: float, beta: float, op: str, algorithm: str) -> float:
    if n <= 1 or nbytes <= 0:
        return 0.0
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) * alpha + (n - 1) / n * nbytes / beta
    steps = math.ceil(math.log2(n))
    if algorithm == "ring":
        return 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes / beta
    if algorithm == "halving-doubling":
        if n & (n - 1):
            return math.inf
        return 2 * steps * alpha + 2 * (n - 1) / n * nbytes / beta
    if algorithm == "tree":
        return 2 * steps * alpha + 2 * nbytes / beta
    if algorithm == "nhr":
        return hccl.nhr_time_s(n, nbytes, alpha, beta)
    raise ValueError(f"unknown algorithm {algorithm!r}")


def _full_mesh(cluster: Cluster, link_class: str) -> bool:
    """Whether a group priced at ``link_class`` runs inside one full-mesh group (one direct link
    per peer: Profile.group_topology) on a library with a mesh algorithm."""
    return (link_class == "group" and cluster.profile.group_topology == "full-mesh"
            and "mesh" in cluster_algorithms(cluster))


def _nccl_latency_s(cluster: Cluster, algorithm: str, op: str, n: int, domains: int) -> float | None:
    """A ring's or tree's latency by NCCL's own tuning model (parsim.cost.nccl) where the
    profile asks for it (Collectives.latency_model) and profile-comm measured no fit of ``op``'s
    own; None where the alpha-beta steps price it."""
    coll = cluster.profile.collectives
    if coll.latency_model != "nccl" or coll.op_fit(op) is not None:
        return None
    if algorithm == "ring":
        return nccl.ring_latency_s(op, n, domains, coll.net_overhead_s)
    if algorithm == "tree" and op == "all_reduce":
        return nccl.tree_latency_s(n, domains)
    return None


def _one_level(cluster: Cluster, n: int, domains: int, nbytes: float, alpha: float, beta: float, op: str,
               algorithm: str) -> float:
    """_flat over n ranks on ``domains`` NVLink domains (group_shape), its latency NCCL's model
    where the profile asks for it (_nccl_latency_s)."""
    latency_s = _nccl_latency_s(cluster, algorithm, op, n, domains)
    if latency_s is None or n <= 1 or nbytes <= 0:
        return _flat(n, nbytes, alpha, beta, op, algorithm)
    return latency_s + _flat(n, nbytes, 0.0, beta, op, algorithm)


def _sharded(cluster: Cluster, n: int, nbytes: float, link_class: str, op: str, inner_class: str,
             fewest: int, domains: int, relief: float = 1.0) -> float:
    """An all-gather or reduce-scatter over n ranks (on ``domains`` NVLink domains: group_shape)
    priced at ``link_class``: a ring (across nodes, _between_nodes, its hops across pods at
    ``relief``), or HCCL's mesh in a full-mesh group where that is faster."""
    alpha, beta = _between_nodes(cluster, link_class, inner_class, fewest, op, relief)
    ring = _one_level(cluster, n, domains, nbytes, alpha, beta, op, "ring")
    return min(ring, hccl.mesh_time_s(n, nbytes, alpha, beta, op)) if _full_mesh(cluster, link_class) else ring


def collective_time_s(cluster: Cluster, ranks: list[int], nbytes: float, op: str = "all_reduce",
                      algorithm: str = "auto", shape: tuple | None = None) -> float:
    """All-reduce under ``algorithm`` (``auto``: the fastest the cluster's library implements);
    all-gather and reduce-scatter as rings whatever the algorithm: at the alpha and efficiency
    profile-comm measured for the op (Collectives.op_fit) where it did, else at the all-reduce's,
    and a reduce-scatter on a library that runs it as an all-reduce (REDUCE_SCATTER_BY_ALL_REDUCE)
    as that all-reduce.  ``shape``: group_shape(cluster, ranks), where the caller keeps it."""
    n = len(ranks)
    algorithms = library_algorithms(cluster, algorithm)
    if n <= 1 or nbytes <= 0:
        return 0.0
    coll = cluster.profile.collectives
    if op == "reduce_scatter" and coll.op_fit(op) is None and coll.library in REDUCE_SCATTER_BY_ALL_REDUCE:
        op = "all_reduce"
    worst, n_nodes, k, inner_class, fewest, domains, pods = shape or group_shape(cluster, ranks)
    relief = ring_spine_relief(cluster, worst, pods, n_nodes)
    if op != "all_reduce":
        return _sharded(cluster, n, nbytes, worst, op, inner_class, fewest, domains, relief)
    best = math.inf
    flat_ab = _between_nodes(cluster, worst, inner_class, fewest, op)     # every one-level algorithm's
    ring_ab = _between_nodes(cluster, worst, inner_class, fewest, op, relief) if relief != 1.0 else flat_ab
    for a in algorithms:
        if a == "mesh":
            if _full_mesh(cluster, worst):
                best = min(best, hccl.mesh_time_s(n, nbytes, *_alpha_beta(cluster, worst)))
        elif a in ("hierarchical", "pipeline"):
            if n_nodes > 1 and k > 1:
                best = min(best, _two_level(cluster, a, n_nodes, k, nbytes, inner_class, worst, relief))
        else:
            best = min(best, _one_level(cluster, n, domains, nbytes, *(ring_ab if a == "ring" else flat_ab), op, a))
    return best


def _two_level(cluster: Cluster, algorithm: str, n_nodes: int, k: int, nbytes: float, inner_class: str,
               worst: str, relief: float = 1.0) -> float:
    """An all-reduce over n_nodes x k ranks in two levels: ``hierarchical`` (reduce-scatter in
    the node, all-reduce of S/k between nodes with the library's best one-level algorithm, a
    ring's hops across pods at ``relief``, all-gather in the node) or HCCL's ``pipeline``
    (parsim.cost.hccl.pipeline_time_s)."""
    outer_ab = _alpha_beta(cluster, worst)     # the tiers between nodes (domain, network, rail, spine)
    if algorithm == "pipeline":
        return hccl.pipeline_time_s(n_nodes, k, nbytes, outer_ab, _alpha_beta(cluster, inner_class),
                                    _full_mesh(cluster, inner_class))
    a_in, b_in = _alpha_beta(cluster, inner_class)      # the all-reduce's own fit, each stage of it
    inner = _flat(k, nbytes, a_in, b_in, "reduce_scatter", "ring")
    if _full_mesh(cluster, inner_class):
        inner = min(inner, hccl.mesh_time_s(k, nbytes, a_in, b_in, "reduce_scatter"))
    outer = min(_flat(n_nodes, nbytes / k, outer_ab[0], outer_ab[1] * (relief if f == "ring" else 1.0),
                      "all_reduce", f) for f in algorithms_flat(cluster))
    return 2 * inner + outer


def algorithms_flat(cluster: Cluster) -> tuple[str, ...]:
    """The library's one-level all-reduce algorithms between nodes (what hierarchical runs there)."""
    return tuple(a for a in cluster_algorithms(cluster) if a not in ("hierarchical", "pipeline", "mesh"))


def shard_padded_bytes(nbytes: float, element_bytes: int, n: int) -> float:
    """A flat buffer of ``nbytes`` padded so that ``n`` ranks hold equal shards (what a
    reduce-scatter or all-gather of it moves: torch's reduce_scatter_tensor and
    all_gather_into_tensor take equal shards)."""
    elements = round(nbytes / element_bytes)
    return -(-elements // n) * n * element_bytes


# Libraries whose collectives on one process group run one at a time: PyTorch's FSDP (and
# Megatron-FSDP) all-gather and reduce-scatter through the same process group, one NCCL
# communicator, "which processes one collective at a time and so serializes them on the wire"
# whatever CUDA streams they are issued on (pytorch/pytorch#186335, FSDP2's opt-in separate
# reduce-scatter group, off by default; #177015; Megatron-LM uses one group by default, #177098).
# gloo's process group runs its work on a pool of threads, so it is left out.
SERIAL_GROUP_LIBRARIES = ("nccl",)


def serial_group(cluster: Cluster) -> bool:
    """Whether one process group's collectives queue behind each other on ``cluster``'s library."""
    return cluster.profile.collectives.library in SERIAL_GROUP_LIBRARIES


def prefetched_gather_s(gathers_s: list[float], computes_s: list[float], overlap: float,
                        reduces_s: list[float] | None = None, prefetch: str = "pre") -> float:
    """Exposed time of per-layer parameter all-gathers prefetched one layer ahead (ZeRO-3; torch
    FSDP2's implicit prefetch: layer i+1's all-gather is issued as layer i's compute starts),
    layers in the order they run: the first layer's gather waits in full; each later one is
    hidden behind the previous layer's compute up to that compute's length, and of the hidden
    part (1 - overlap) still takes compute cycles (a library sharing the compute engine, gloo on
    CPU cores; ``overlap`` as profile-comm measures it).

    ``reduces_s`` (a backward's, on a library whose process group runs one collective at a time,
    serial_group): per layer, its gradients' reduce-scatter, issued as its compute ends on the
    gathers' group, so layer i+1's gather, issued as layer i starts, queues behind layer i-1's
    reduce-scatter.  Where a layer's gather and reduce-scatter together outlast the compute
    between them, the backward waits:

        issued(i+1) = max(start(i), stream free);  ready(i+1) = issued(i+1) + g(i+1)
        start(i+1)  = max(start(i) + c(i), ready(i+1));  stream free = max(ready(i+1), start(i) + c(i)) + r(i)

    ``prefetch`` "post" (a backward under torch FSDP's BACKWARD_POST, Training.fsdp_backward_prefetch):
    layer i+1's gather is issued only as layer i's backward ends, in its post-backward hook, and
    ahead of layer i's reduce-scatter (torch 2.x's torch/distributed/fsdp/_runtime_utils.py:
    _post_backward_hook calls _prefetch_handles before it reduce-scatters), so nothing hides the
    gathers; layer i's reduce-scatter runs beside layer i+1's backward and delays layer i+2's
    gather where it outlasts it:

        ready(i+1) = max(end(i), stream free) + g(i+1);  start(i+1) = ready(i+1);  stream free = ready(i+1) + r(i)
    """
    if not gathers_s:
        return 0.0
    if prefetch == "post":
        return _post_backward_gather_s(gathers_s, computes_s, reduces_s or [0.0] * len(gathers_s))
    if not reduces_s or not any(reduces_s):      # the closed form: the queue below gives the same
        exposed = gathers_s[0]                   # times to rounding, and these stay bit for bit
        for g, c in zip(gathers_s[1:], computes_s):
            hidden = min(g, c)
            exposed += g - hidden + (1.0 - overlap) * hidden
        return exposed
    n = len(gathers_s)
    start = stream = ready = gathers_s[0]            # layer 0 waits for its own gather in full
    charged = 0.0
    for i in range(n):
        start = max(start, ready)                    # layer i runs once its gather is in
        end = start + computes_s[i]
        if i + 1 < n:                                # layer i+1's gather, issued as layer i starts
            issued = max(start, stream)
            ready = stream = issued + gathers_s[i + 1]
            charged += (1.0 - overlap) * max(0.0, min(ready, end) - issued)
        stream = max(stream, end) + reduces_s[i]     # layer i's reduce-scatter, as it ends
        start = end
    return start - sum(computes_s[:n]) + charged


def _post_backward_gather_s(gathers_s: list[float], computes_s: list[float], reduces_s: list[float]) -> float:
    """prefetched_gather_s under BACKWARD_POST: every gather after the first waits for the layer
    before it to end, then for the queue (its docstring)."""
    n = len(gathers_s)
    end = stream = gathers_s[0]                      # layer 0 waits for its own gather in full
    for i in range(n):
        end += computes_s[i]
        gather = gathers_s[i + 1] if i + 1 < n else 0.0
        if gather:                                   # layer i+1 opens a unit: its gather, then i's reduce-scatter
            end = max(stream, end) + gather
            stream = end + reduces_s[i]
        else:
            stream = max(stream, end) + reduces_s[i]
    return end - sum(computes_s[:n])


def ddp_buckets(grad_bytes_reversed: list[float], cap_bytes: float = DDP_BUCKET_BYTES,
                alone: frozenset[int] = frozenset(),
                first_cap_bytes: float = DDP_FIRST_BUCKET_BYTES) -> list[list[int]]:
    """Group layers (given in backward order) into buckets as torch DDP fills them: a layer joins
    the open bucket, and the bucket closes once it holds at least its cap (so it may pass the cap
    by its last layer), the first bucket's cap ``first_cap_bytes``, every later one's
    ``cap_bytes`` (torch/csrc/distributed/c10d/reducer.cpp, compute_bucket_assignment_by_size:
    ``if (bucket.size >= bucket_size_limit)``, the limits [first_bucket_bytes_cap,
    bucket_bytes_cap]; the Reducer rebuilds its buckets so after the first iteration, in the
    order the gradients became ready).  Returns layer positions per bucket; a layer without
    gradient bytes joins the last bucket.
    The positions in ``alone`` get a bucket of their own: under ZeRO-1, a weight tied over
    pipeline stages, so that every stage holding it slices it the same way over the dp ranks and
    the slices' gradients can be summed over the stages after the reduce-scatter (Megatron's
    distributed optimizer, megatron/core/distributed/param_and_grad_buffer.py: shared embedding
    parameters go into a separate bucket).  Such a bucket does not advance the caps."""
    buckets: list[list[int]] = []
    size, is_open, closed = 0.0, False, 0
    for i, nbytes in enumerate(grad_bytes_reversed):
        if i in alone:
            buckets.append([i])
            is_open = False
            continue
        if nbytes <= 0:
            if buckets:
                buckets[-1].append(i)
            continue
        if not is_open:
            buckets.append([])
            size, is_open = 0.0, True
        buckets[-1].append(i)
        size += nbytes
        if size >= (first_cap_bytes if closed == 0 else cap_bytes):
            is_open, closed = False, closed + 1
    return buckets


def first_bucket_bytes(zero: int) -> float:
    """The first gradient bucket's cap: torch DDP's 1 MiB (DDP_FIRST_BUCKET_BYTES) without ZeRO;
    under ZeRO-1 (Megatron's distributed optimizer: its buckets are slices of one contiguous
    gradient buffer, megatron/core/distributed/param_and_grad_buffer.py) no smaller first
    bucket, every cap ``DDP_BUCKET_BYTES``.  What the simulator prices and parsim.exec.grad_sync runs."""
    return DDP_BUCKET_BYTES if zero else DDP_FIRST_BUCKET_BYTES


def fsdp_units(param_counts: list[int], tied: list[bool]) -> list[list[int]]:
    """The FSDP units ZeRO-2 and -3 shard a stage into, its layers given in forward order: first
    the root unit, the layers that share a parameter with another layer of the stage (FSDP2 keeps
    a shared parameter in the unit of the modules' common ancestor, here the stage module), then
    one unit per other layer that holds parameters, in order (torchtitan's one unit per block).
    Layer positions per unit; the root may be empty.  What parsim.exec.fsdp wraps."""
    root = [i for i, t in enumerate(tied) if t]
    return [root] + [[i] for i, (n, t) in enumerate(zip(param_counts, tied)) if n and not t]


def fsdp_unit_s(cluster: Cluster, op: str, unit_bytes: float, read_bytes: float) -> float:
    """FSDP2's time on the compute stream for one unit's ``op`` ("all_gather" or
    "reduce_scatter") beyond the collective: its host time (Collectives.fsdp_host_s) and its
    copies.  ``unit_bytes``: the unit's whole buffer as the collective moves it (the gathered
    parameters; the reduce-scatter's input, in the reduce dtype); ``read_bytes``: what the copy
    reads to make it.

    The copies, as torch runs them (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py,
    torch 2.13), both on the current (compute) stream: after each all-gather,
    foreach_all_gather_copy_out's ``split_with_sizes_copy`` reads the gathered buffer and writes
    each parameter's unsharded tensor (``unit_bytes`` read and written); before each
    reduce-scatter, foreach_reduce's ``chunk_cat`` (foreach_reduce_scatter_copy_in) reads the
    unsharded gradients, in the parameters' dtype (``read_bytes``), and writes the reduce-scatter
    input, in the reduce dtype (``unit_bytes``).  Memory-bound kernels: their bytes at the
    device's achieved memory bandwidth.  Where profile-comm measured a copy rate for ``op``
    (collective.fsdp_*_copy_gb_per_s, on a CPU, where the copies are host work), that
    measurement already holds them and they are not priced again."""
    per_unit, rate = cluster.profile.collectives.fsdp_terms(op)
    copies = unit_bytes / rate if rate else (read_bytes + unit_bytes) / cluster.device.achieved_bandwidth_bytes_per_s()
    return per_unit + copies


# ----------------------------------------------------------------------------- all-to-all

# The most loaded expert's tokens over the mean (tokens x top_k / experts), the default routing
# imbalance of a MoE layer's all-to-all and grouped GEMMs.  Switch Transformer's expert capacity is
# tokens / experts x a capacity factor, and it trains at capacity factors 1.0 and 1.25 (Fedus et
# al. 2022, JMLR, Sec. 2.2 "Efficient Sparse Routing", expert capacity, and Table 1); 1.25 is the headroom
# with which its routing, under an auxiliary balancing loss, dropped few tokens.  A capacity-
# limited router never exceeds it; a dropless one (DeepSeek-V3, which drops no token, Sec. 2.1.2,
# with its auxiliary-loss-free bias balancing) has no hard bound, and its own measured imbalance
# should replace this default.  1.0 is perfectly balanced routing.
ROUTING_IMBALANCE = 1.25


def _ranks_per_node(cluster: Cluster, ranks) -> list[int]:
    nodes: dict[int, int] = {}
    for r in ranks:
        nodes[cluster.node_of(r)] = nodes.get(cluster.node_of(r), 0) + 1
    return list(nodes.values())


def a2a_geometry(cluster: Cluster, ranks) -> tuple[list[int], int, str, str]:
    """What all_to_all_time_s reads of a group's placement: (its ranks on each node it spans, its
    ranks on the first rank's node, the link class among those, the farthest link class).  The
    planner prices one ep group at many sizes: its pricing context keeps them (parsim.sim.prices)."""
    first_node = [r for r in ranks if cluster.node_of(r) == cluster.node_of(ranks[0])]
    inner_class = cluster.span_class(first_node) if len(first_node) > 1 else "group"
    return _ranks_per_node(cluster, ranks), len(first_node), inner_class, cluster.span_class(ranks)


def all_to_all_time_s(cluster: Cluster, ranks: list[int], nbytes: float, imbalance: float = 1.0,
                      off_node_share: float | None = None, geometry: tuple | None = None) -> float:
    """An all-to-all (torch's ``all_to_all_single``) over ``ranks`` in which every rank holds
    ``nbytes`` to scatter evenly over the group (S / n to each rank, its own share kept), the
    busiest rank moving ``imbalance`` times its even share (a MoE dispatch's hottest expert
    receives imbalance x the mean: ROUTING_IMBALANCE).

    Pairwise exchange (Thakur, Rabenseifner & Gropp 2005, MPICH's all-to-all for long messages: n - 1 steps
    each of one alpha, (n-1)/n S in all per rank; nccl-tests' PERFORMANCE.md: alltoall bus
    bandwidth = algorithm bandwidth x (n-1)/n).  NCCL runs it as grouped sends and receives to
    every peer at once (ncclGroupStart/End), each over its own path:

    - inside one node, every peer over NVLink/NVSwitch (the group's link class):
          (n-1) a_in + (n-1)/n x S x imbalance / B_in;
    - across N nodes with k of the group's ranks on a node, a rank's (n-k)/n of S leaves the node
      over the NICs and its (k-1)/n stays on NVLink, both at once.  On a rail-optimised fabric
      NCCL's PXN (2.12+; NVIDIA, "Doubling all2all Performance with NVIDIA Collective
      Communication Library 2.12", 2022; on unless NCCL_PXN_DISABLE=1) sends a message for a
      peer on another rail through the local GPU on that peer's rail, over NVLink, then its NIC:
      every NIC carries the node's traffic for its own rail, which by symmetry is again (n-k)/n
      S per GPU, and the forwarding adds (k-1)/k of it to NVLink.  Time, the slower part:
          max((k-1)/n S' / B_in + PXN's (k-1)/k (n-k)/n S' / B_in,  (n-k)/n S' / B_out)
          + (k-1) a_in + (n-k) a_out,      S' = S x imbalance,
      with B_out, a_out those of the farthest tier the group crosses (Cluster.span_class:
      ``network`` on one rail, ``rail`` the PXN path, ``spine`` across pods, its
      oversubscription included) and k the fewest of the group's ranks on one node (that rank
      sends the most off the node).

    Bandwidths and per-step latency at the library's fit (_alpha_beta: an all_to_all fit where a
    profile has one, as profile-comm measures it, else the all-reduce's).  The
    latency term is pairwise exchange's n - 1 sequential steps; NCCL posts the peers' transfers
    at once, so for small messages over many ranks it is an upper bound until measured.
    ``imbalance`` is the busiest rank's load over the mean; ROUTING_IMBALANCE (one expert's) bounds
    a rank holding several experts from above.

    ``off_node_share``: a MoE dispatcher that sends each token once per destination node and fans
    it out to that node's experts over NVLink there (DeepSeek-V3's dispatch kernels, Sec. 3.2.2:
    "first transmitted via IB to the GPUs with the same in-node index on its target nodes ...
    instantly forwarded via NVLink"; DeepEP and Megatron-Core's flex dispatcher, HybridEP): the
    share of the buffer S that leaves a node, once per remote node a token's experts lie on
    (parsim.model.moe.Experts.remote_nodes_per_token over k), each over the rank's own NIC, so no
    PXN hop; inside the nodes every row but the receiving GPU's own reaches its expert over NVLink,
    (k-1)/k of S.  Across N nodes:
          max((k-1)/k S' / B_in, off_node_share x S' / B_out) + (k-1) a_in + (N-1) a_out.

    ``geometry``: a2a_geometry(cluster, ranks), where the caller keeps it."""
    n = len(ranks)
    if n <= 1 or nbytes <= 0:
        return 0.0
    moved = nbytes * imbalance
    per_node, first_node, inner_class, span = geometry or a2a_geometry(cluster, ranks)
    a_in, b_in = _alpha_beta(cluster, inner_class, "all_to_all")
    if len(per_node) == 1 or span == "domain":     # one node, or nodes of one scale-up domain: every
        if _full_mesh(cluster, span):               # peer through the device's own port(s)
            return hccl.mesh_time_s(n, moved, a_in, b_in, "all_to_all")
        a, b = (a_in, b_in) if len(per_node) == 1 else _alpha_beta(cluster, span, "all_to_all")
        return (n - 1) * a + (n - 1) / n * moved / b
    if _full_mesh(cluster, inner_class):            # the k - 1 peers in the node over their own links
        b_in *= first_node - 1
    k = min(per_node)
    a_out, b_out = _alpha_beta(cluster, span, "all_to_all")
    if off_node_share is not None:        # once per remote node, then NVLink inside it
        return (max((k - 1) / k * moved / b_in, off_node_share * moved / b_out)
                + (k - 1) * a_in + (len(per_node) - 1) * a_out)
    off_node = (n - k) / n * moved
    pxn = (k - 1) / k * off_node if cluster.profile.fabric.rail_optimized else 0.0
    inside = ((k - 1) / n * moved + pxn) / b_in
    return max(inside, off_node / b_out) + (k - 1) * a_in + (n - k) * a_out

