"""The planner's answers before and after a change to its bounds: for each case, in-process
plan() (the search `parsim plan` runs) and, of its result, the ranked plans (configuration, step,
peak memory, as repr: every digit), the explanation, the all-device plan, the simulated count and
the Pareto set.  ``dump OUT.json`` under a commit's code (PYTHONPATH=its worktree, run from that
worktree), then ``compare BEFORE.json AFTER.json``.

    (cd WORKTREE && PYTHONPATH=. python /path/to/plan_equivalence.py dump /tmp/before.json)
    python results/2026-12-02e-amd-epyc/plan_equivalence.py dump /tmp/after.json
    python results/2026-12-02e-amd-epyc/plan_equivalence.py compare /tmp/before.json /tmp/after.json
"""
import json
import sys

CASES = [("examples/resnet50_imagenet.yaml", "ascend910:1x8"),
         ("examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8"),
         ("examples/gpt3_175b.yaml", "dgx-a100:128x8"),
         ("examples/llama3_405b.yaml", "dgx-h100-superpod:2048x8"),
         ("examples/llama3_405b.yaml", "dgx-h100-superpod:16384x8"),
         ("examples/resnet50_imagenet.yaml", "ascend910:128x8"),
         ("examples/resnet50_imagenet.yaml", "dgx-a100:64x8"),
         ("examples/resnet50_cifar10_seeds.yaml", "local-cpu:1x2"),
         ("examples/gpt_small_local.yaml", "local-cpu:1x2"),
         ("examples/moe_tiny_local.yaml", "dgx-h100:2x8"),
         ("examples/mixtral_8x7b.yaml", "dgx-h100:8x8"),
         ("examples/llama3_70b.yaml", "atlas-900-a2:16x8")]


def dump(path: str) -> None:
    from parsim.cost.compute import AnalyticalCompute
    from parsim.hardware import load_cluster
    from parsim.model.spec import load_model
    from parsim.search.planner import plan

    out = {}
    for model, name in CASES:
        spec, cluster = load_model(model), load_cluster(name)
        r = plan(spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training), progress=False)
        out[f"{model} {name}"] = dict(
            ranked=[(repr(c.config), repr(c.estimate.step_time_s), repr(c.peak_memory_bytes)) for c in r.ranked],
            explanation=list(r.explanation), all_devices=repr(r.all_devices.config) if r.all_devices else None,
            simulated=r.simulated, pareto=[repr(c.config) for c in r.pareto])
    json.dump(out, open(path, "w"), indent=1)


def compare(before_path: str, after_path: str) -> None:
    before, after = json.load(open(before_path)), json.load(open(after_path))
    for case, a in before.items():
        b = after[case]
        print(f"{case:58s} ranked {'same' if a['ranked'] == b['ranked'] else 'DIFFERENT'}, explanation "
              f"{'same' if a['explanation'] == b['explanation'] else 'DIFFERENT'}, all-device plan "
              f"{'same' if a['all_devices'] == b['all_devices'] else 'DIFFERENT'}; simulated {a['simulated']} -> "
              f"{b['simulated']}; Pareto set {'same' if a['pareto'] == b['pareto'] else 'DIFFERENT'} "
              f"({len(a['pareto'])} -> {len(b['pareto'])})")
        for p in a["pareto"]:
            if p not in b["pareto"]:
                print(f"    left the Pareto set (no longer simulated): {p}")


if __name__ == "__main__":
    dump(sys.argv[2]) if sys.argv[1] == "dump" else compare(sys.argv[2], sys.argv[3])
