"""Extraction speed of mixtures of experts on the meta device (issue 32's goal: a 61-layer,
256-expert model extracts in seconds).

    python benchmarks/bench_moe_extract.py          # DeepSeek-V3, Mixtral 8x7B, Qwen3-30B-A3B

Prints, per example, the seconds load_model takes (building the transformers model on meta and
extracting it: parsim.model.hf's grouped experts; identical decoder layers are measured once),
the median of 3 runs after one warm-up (the warm-up pays transformers' imports), and the counts.
"""

import statistics
import time

from parsim.model.spec import load_model

EXAMPLES = ("examples/deepseek_v3.yaml", "examples/mixtral_8x7b.yaml", "examples/qwen3_30b_a3b.yaml")


def case(path: str, repeats: int = 3):
    load_model(path)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        spec = load_model(path)
        times.append(time.perf_counter() - t)
    return statistics.median(times), spec.graph


if __name__ == "__main__":
    print("goal: each under 10 s")
    for path in EXAMPLES:
        s, g = case(path)
        print(f"{path}: {s:.2f} s, {len(g)} units, {g.param_count:,} parameters, {g.active_param_count:,} active")
