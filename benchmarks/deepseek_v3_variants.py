"""DeepSeek-V3 on 2,048 H100s (examples/deepseek_v3_pretrain.yaml, dgx-h100-superpod:256x8): the
planner's pick priced again with one of what production runs taken away at a time, and DeepSeek's own
layout (DeepSeek-V3 report, Sec. 3.2: PP 16, EP 64 over 8 nodes, ZeRO-1, no TP), to say what each
is worth.  Deterministic (simulated): a figure of the cost model, not a measurement.

    python benchmarks/deepseek_v3_variants.py [--plan PLAN.json] [-o results/simulated/deepseek_v3_variants_h100_2048.txt]

PLAN.json is the pick, ``parsim plan examples/deepseek_v3_pretrain.yaml --cluster
dgx-h100-superpod:256x8 --ep-overlap -o PLAN.json`` (results/simulated/deepseek_v3_pretrain_plan_h100_2048.txt); without it the
pick's configuration as that file records it is used.  Tokens per second per GPU are global batch
x 4096 / step / 2048; DeepSeek's published figure is 1,543 on 2,048 H800s (a whole-run average:
results/published/moe_figures.yaml, deepseek-v3-h800-2048gpu).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from parsim.fileio import write_text
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig, load_plan
from parsim.search.resolve import resolve_config
from parsim.sim import simulate

MODEL, CLUSTER, SEQ = "examples/deepseek_v3_pretrain.yaml", "dgx-h100-superpod:256x8", 4096
# the pick of results/simulated/deepseek_v3_pretrain_plan_h100_2048.txt (2026-12-02, after the
# multi-token-prediction module was priced in the head; 2026-11-28's was dp 128, pp 8, tp 2, ep 32)
PICK = ParallelConfig(dp=32, pp=16, microbatches=480, schedule="1f1b",
                      bounds=(0, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61, 63),
                      placement="dp-inner", tp=4, tp_layout="megatron-sp", recompute="none", zero=1,
                      tp_comm_overlap=True, ep=64, ep_overlap=True, etp=1)


def _bf16(path: str):
    """The model with its GEMMs in bf16: its model.yaml with training.fp8 false."""
    from parsim.inputs import load_file
    from parsim.model.spec import model_from_mapping

    raw = load_file(path, "a model.yaml")
    raw["training"]["fp8"] = False
    return model_from_mapping(raw, path)


def rows(pick: ParallelConfig):
    spec = load_model(MODEL)
    cluster = load_cluster(CLUSTER)
    bf16 = _bf16(MODEL)
    unlimited = replace(spec.graph, layers=tuple(
        replace(x, experts=replace(x.experts, groups=1, group_limit=0)) if x.experts is not None else x
        for x in spec.graph.layers))
    from parsim.cost.compute import AnalyticalCompute

    own = resolve_config(spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training), dp=128, pp=16, microbatches=120, schedule="1f1b", placement="dp-inner",
                         zero=1, recompute="deepseek", ep=64, ep_overlap=True)
    variants = [
        ("the pick", spec.graph, spec.training, pick),
        ("all-to-all by NCCL, every (token, expert) row (moe_dispatcher alltoall)", spec.graph,
         replace(spec.training, moe_dispatcher="alltoall"), pick),
        ("no node limit (a token's 8 experts from any of the 256)", unlimited, spec.training, pick),
        ("all-to-alls exposed (no ep_overlap)", spec.graph, spec.training, replace(pick, ep_overlap=False)),
        ("full recomputation", spec.graph, spec.training, replace(pick, recompute="full")),
        ("bf16 GEMMs (no fp8)", bf16.graph, bf16.training, pick),
        ("DeepSeek's layout: dp 128, pp 16, ep 64, tp 1 (balanced split)", spec.graph, spec.training, own),
        ("DeepSeek's layout, no node limit", unlimited, spec.training, own),
        ("DeepSeek's layout, all-to-alls exposed", spec.graph, spec.training, replace(own, ep_overlap=False)),
        ("DeepSeek's layout, all-to-alls exposed, no node limit", unlimited, spec.training,
         replace(own, ep_overlap=False)),
    ]
    for name, graph, training, cfg in variants:
        est = simulate(graph, training, cluster, cfg, keep_timeline=False)
        tokens = training.global_batch_size * SEQ / est.step_time_s / cluster.world_size
        yield name, cfg, est, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", help="the planner's pick as plan.json (default: the recorded pick)")
    ap.add_argument("-o", "--output", help="also write the table here")
    args = ap.parse_args()
    pick = load_plan(args.plan).config if args.plan else PICK
    lines = [f"# python benchmarks/deepseek_v3_variants.py{' --plan PLAN.json' if args.plan else ''} (simulated on "
             f"{CLUSTER}; DeepSeek's published figure: 1543 tokens/s/GPU on 2,048 H800s)",
             f"{'variant':74} {'step':>9} {'tok/s/GPU':>10} {'exp.comm':>9} {'peak mem':>10}"]
    for name, _, est, tokens in rows(pick):
        lines.append(f"{name:74} {est.step_time_s:8.3f}s {tokens:10.1f} {est.exposed_comm_fraction:9.1%} "
                     f"{max(est.peak_memory_bytes) / 2**30:7.2f} GiB")
    print("\n".join(lines))
    if args.output:
        write_text(args.output, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
