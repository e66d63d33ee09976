"""Where a decoder's first pipeline stage reaches its peak, from torch.profiler's allocation trace: the stage's
units (the embedding and the first half of the blocks, between the boundary modules a pp = 2 run puts around
them) run ``m`` forwards and then their ``m`` backwards (GPipe's order on the first stage), each backward fed a
gradient of the stage output's size, as the second stage sends it.  The script prints the bytes allocated when the
backwards start, the peak, the operator the peak falls in, and the allocations alive at the peak by the operator
that made them; beside them, what the analytical model prices for the same micro-batches: the stage's saved bytes
(LayerGraph.stage_saved_bytes, CPU graph) and the backward's workspace (parsim.cost.memory.backward_workspace_bytes).

    python -W ignore results/2026-12-07c-amd-epyc/first_stage_trace.py $(for m in glm_tiny deepseek_v2_dense_tiny \
        internlm3_tiny bitnet_tiny jais2_tiny nemotron_tiny arcee_tiny apertus_tiny; do
        echo results/heldout/models/$m.yaml; done) > results/2026-12-07c-amd-epyc/first-stage-trace.txt

Each model at the micro-batch of its GPipe m = 2 plan (half its global batch), one forward and one backward (m = 1): a
diagnosis, in sample (every model here is of a development set), of why the first pipeline stages of decoders with
squared-ReLU or xIELU MLPs are priced 3-6% low while their single process is exact.
"""

from __future__ import annotations

import sys
from collections import defaultdict

import torch

from parsim.cost.memory import backward_workspace_bytes
from parsim.exec.measure import profiled_events
from parsim.exec.stages import DenseBoundary, sequential
from parsim.model.extract import cut_units
from parsim.model.spec import build_module, load_model

MIB = 2 ** 20


def innermost(ops: list[dict], t: float) -> str:
    """The shortest operator event spanning time ``t``, with its parent's name: where an allocation falls."""
    spans = sorted((e for e in ops if e["ts"] <= t <= e["ts"] + e["dur"]), key=lambda e: e["dur"])
    names = [e["name"] for e in spans[:3]]
    return " < ".join(names) if names else "(outside every operator)"


def main(path: str, m: int = 1, stop: int | None = None) -> None:
    spec = load_model(path)
    b = spec.training.global_batch_size // 2
    torch.manual_seed(0)
    units = cut_units(build_module(spec.source, spec.path))
    graph = spec.graph.cpu_graph or spec.graph
    blocks = len(graph) - 2
    stop = stop or 1 + (blocks + 1) // 2        # as validate split the pp = 2 runs: embed..layers.1 for 3 or 4 blocks
    stage = sequential([("boundary_in", DenseBoundary()), *units[:stop], ("boundary_out", DenseBoundary())])
    stage.train()
    seq = spec.source.kwargs["seq_len"]
    vocab = units[0][1].embed_tokens.num_embeddings if hasattr(units[0][1], "embed_tokens") else 1000
    xs = [torch.randint(0, vocab, (b, seq)) for _ in range(m)]

    def step():
        outs = [stage(x) for x in xs]
        marks["backward"] = torch.ones(1)          # a marker allocation: the backwards start here
        for o in reversed(outs):
            o.backward(torch.ones_like(o))

    marks: dict = {}
    step()                                          # warm-up: oneDNN and the profiler's first-call allocations
    stage.zero_grad(set_to_none=False)
    events = profiled_events(step)   # as the executor measures a step (parsim.exec.measure)
    ops = [e for e in events if e.get("ph") == "X" and "dur" in e]
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    totals = [e["args"]["Total Allocated"] for e in memory]
    k_peak = max(range(len(totals)), key=totals.__getitem__)
    first_bwd = next(e["ts"] for e in ops if "evaluate_function" in e["name"])
    at_bwd = max((e["args"]["Total Allocated"] for e in memory if e["ts"] < first_bwd), default=0)
    base = totals[0] - memory[0]["args"]["Bytes"]
    live: dict[int, tuple[int, str]] = {}
    for e in memory[:k_peak + 1]:
        a = e["args"]
        if a["Bytes"] > 0:
            live[a["Addr"]] = (a["Bytes"], innermost(ops, e["ts"]))
        else:
            live.pop(a["Addr"], None)
    saved = graph.stage_saved_bytes(0, stop) * b * m
    workspace = backward_workspace_bytes(graph, [range(0, stop)], b)
    print(f"{spec.name}: units [0, {stop}) of {len(graph)}, micro-batch {b}, {m} forwards then {m} backwards")
    print(f"  measured: at the first backward {(at_bwd - base) / MIB:8.2f} MiB; peak "
          f"{(totals[k_peak] - base) / MIB:8.2f} MiB (+{(totals[k_peak] - at_bwd) / MIB:.2f}), in "
          f"{innermost(ops, memory[k_peak]['ts'])}")
    print(f"  priced:   saved bytes {saved / MIB:8.2f} MiB; + workspace {workspace / MIB:.2f} MiB = "
          f"{(saved + workspace) / MIB:.2f} MiB")
    by_op: dict[str, list[int]] = defaultdict(list)
    for size, where in live.values():
        by_op[where].append(size)
    print("  alive at the peak, by the operator that allocated them (MiB, count):")
    for where, sizes in sorted(by_op.items(), key=lambda kv: -sum(kv[1]))[:12]:
        print(f"    {sum(sizes) / MIB:8.2f} {len(sizes):4d}  {where[:140]}")


if __name__ == "__main__":
    for model in sys.argv[1:]:
        main(model)
