"""The head-dimension change (parsim.cost.kernels.attention_head_efficiency) scored on rows that did
not choose it: the held-out source llm-foundry-narrow-heads (results/published/
llmfoundry_narrow_figures.yaml, MPT 125m and 350m, heads of 64, on A100 and H100), and the
development rows with heads of 64 that did (the Ascend 910B's small models).  Each row priced with
the shipped profiles as bench_published --quick prices it, with the change and with it taken out
(attention_head_efficiency returning 1).  Run from the repository root:
python results/2026-12-01b-intel-xeon/head_dim_heldout.py"""
import parsim.cost.kernels as kernels
from parsim.profile.published import load_all_figures, price

HELD_OUT = "llm-foundry-narrow-heads"
DEVELOPMENT = ("msllm-llama3_2-1b-a2-8npu", "msllm-qwen1_5-0_5b-a2-8npu", "msllm-qwen2-0_5b-4k-a2-8npu",
               "msllm-qwen2-0_5b-32k-a2-8npu", "msllm-minicpm-2b-a2-8npu", "mlr-qwen1_5-0_5b-910b-8npu",
               "mf2-qwen15-0.5b-s8192-900-a2")


def errors(figures) -> list[float]:
    return [price(f).error for f in figures]


def mape(errs) -> str:
    return f"MAPE {100 * sum(map(abs, errs)) / len(errs):.1f}%, max {100 * max(map(abs, errs)):.1f}%"


everything = load_all_figures().figures
groups = {"held out (" + HELD_OUT + ")": [f for f in everything if f.source == HELD_OUT],
          "development (the 910B rows with heads of 64)": [f for f in everything if f.id in DEVELOPMENT]}
shipped = kernels.attention_head_efficiency
for label, figures in groups.items():
    with_change = errors(figures)
    kernels.attention_head_efficiency = lambda head_dim, ex: 1.0
    without = errors(figures)
    kernels.attention_head_efficiency = shipped
    print(f"{label}: {len(figures)} rows; with the change {mape(with_change)}; without it {mape(without)}")
    for f, a, b in zip(figures, with_change, without):
        print(f"  {f.id:48s} with {100 * a:+6.1f}%   without {100 * b:+6.1f}%")
