"""The fifty-sixth sitting's new tests, run against mutations of what they guard: each must go red.
Each mutation is applied to the working tree, the test run, the file restored.

    python results/2026-12-05c-intel-xeon/mutations.py > results/2026-12-05c-intel-xeon/mutations.txt
"""

import sys

sys.path.insert(0, "runners")
from mutations import check  # noqa: E402  (runners/mutations.py; run from the repository root)

BLOOM = "tests/test_new_figures.py::test_blooms_topology_rows_are_the_set_drawn_held_out_as_first_priced"
DSV2 = "tests/test_new_figures.py::test_xtuners_deepseek_v2_rows_are_the_set_drawn_held_out_as_first_priced"
MOE = "tests/test_moe.py"
MUTATIONS = [
    ("the held-out bigscience-tr11-prequel source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - bigscience-tr11-prequel ", "\n  # - bigscience-tr11-prequel ", BLOOM),
    ("a pinned first-pricing error of bigscience-tr11-prequel moved by 0.05",
     "tests/test_new_figures.py", '"bloom-pre-l950-h14336-l70-a64-dp8tp4pp12-mbs4-gbs2048-bf16": +0.026',
     '"bloom-pre-l950-h14336-l70-a64-dp8tp4pp12-mbs4-gbs2048-bf16": +0.076', BLOOM),
    ("a row of the drawn set changed (its measured step, by 0.01 s)",
     "results/published/bloom_prequel_figures.yaml", "measured: {step_time_s: 769.99}",
     "measured: {step_time_s: 769.98}", BLOOM),
    ("jean-zay-a100's Omni-Path links at twice their bandwidth",
     "hardware_profiles/jean-zay-a100.yaml", "nic_bandwidth_gb_per_s: 12.5", "nic_bandwidth_gb_per_s: 25", BLOOM),
    ("DeepSeek-V2's complex rotary embedding taken as (cos, sin) again",
     "parsim/model/hf.py", "self.freqs = emb if isinstance(emb, torch.Tensor) else None",
     "self.freqs = None", MOE + "::test_tiny_deepseek_v2_builds_with_its_complex_rotary_and_its_router_limit"),
    ("DeepSeek-V2's greedy router read as group-limited (the module's topk_method ignored)",
     "parsim/model/hf.py", 'if getattr(gate, "topk_method", None) == "greedy":', "if False:",
     MOE + "::test_tiny_deepseek_v2_builds_with_its_complex_rotary_and_its_router_limit"),
    ("deepseek_v2 configs read as dense (config_experts)",
     "parsim/model/moe.py", 'if kind in ("deepseek_v3", "deepseek_v2"):', 'if kind == "deepseek_v3":',
     MOE + "::test_published_moe_counts"),
    ("the held-out xtuner-train-moe-pr765 source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - xtuner-train-moe-pr765 ", "\n  # - xtuner-train-moe-pr765 ", DSV2),
    ("a pinned first-pricing error of xtuner-train-moe-pr765 moved by 0.05",
     "tests/test_new_figures.py", '"xtdsv2-a100-128gpu-shard10-16k-fixed": +1.815',
     '"xtdsv2-a100-128gpu-shard10-16k-fixed": +1.865', DSV2),
]


if __name__ == "__main__":
    sys.exit(check(MUTATIONS))
