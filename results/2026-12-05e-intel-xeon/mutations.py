"""The fifty-eighth sitting's new tests, run against mutations of what they guard: each must go red.
Each mutation is applied to the working tree, the test run, the file restored.

    python results/2026-12-05e-intel-xeon/mutations.py > results/2026-12-05e-intel-xeon/mutations.txt
"""

import sys

sys.path.insert(0, "runners")
from mutations import check  # noqa: E402  (runners/mutations.py; run from the repository root)

NEW = "tests/test_new_figures.py::"
NEMO = NEW + "test_nemotron4s_rows_are_the_sets_drawn_held_out_as_first_priced"
MSD = NEW + "test_megascales_megatron_baseline_rows_are_the_set_drawn_held_out_as_first_priced"
LAMBDA = NEW + "test_lambdas_deepspeed_pipeline_rows_are_the_set_drawn_held_out_as_first_priced"
CLOSED = "tests/test_band.py::test_a_band_adds_a_sources_bias_quantile_to_the_spread_within_a_source"
DFA = NEW + "test_distflashattns_megatron_rows_are_the_set_drawn_held_out_as_first_priced"
INTERNLM = NEW + "test_internlms_rows_are_the_set_drawn_held_out_as_first_priced"
ZB = NEW + "test_zero_bubbles_baseline_rows_are_the_set_drawn_held_out_as_first_priced"
KWAI = NEW + "test_kwais_megatron_rows_are_the_set_drawn_held_out_as_first_priced"
YANDEX = NEW + "test_yandexs_fsdp_rows_are_the_set_drawn_held_out_as_first_priced"
COVER = "tests/test_band.py::test_a_new_sources_rows_fall_inside_as_often_as_the_two_parts_promise"
MUTATIONS = [
    ("the band without the spread within a source (q_b alone)",
     "parsim/sim/band.py", "    q = q_b + q_e\n", "    q = q_b\n", CLOSED),
    ("the band without the sources' biases (q_e alone)",
     "parsim/sim/band.py", "    q = q_b + q_e\n", "    q = q_e\n", COVER),
    ("the between-sources quantile without the finite-sample correction (ceil(F x level))",
     "parsim/sim/band.py", "conformal_rank(len(between), level)", "math.ceil(len(between) * level - 1e-9)",
     CLOSED),
    ("the spread within a source measured from the median of every row, not the row's own source's bias",
     "parsim/sim/band.py", "spread = [(abs(x - bias[f]), 1 / len(v))", "spread = [(abs(x - m), 1 / len(v))", CLOSED),
    ("the held-out nemotron4-15b-report source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - nemotron4-15b-report ", "\n  # - nemotron4-15b-report ", NEMO),
    ("a pinned first-pricing error of nemotron4-340b-report moved by 0.05",
     "tests/test_new_figures.py", '"nemotron4-340b-t2-dp64-6144gpu-gbs2304": +0.038',
     '"nemotron4-340b-t2-dp64-6144gpu-gbs2304": +0.088', NEMO),
    ("the held-out megascale-dense-baseline source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - megascale-dense-baseline ", "\n  # - megascale-dense-baseline ", MSD),
    ("a row of MegaScale's drawn set changed (its measured tokens/s/GPU)",
     "results/published/megascale_dense_baseline_figures.yaml", "measured: {tokens_per_s_per_gpu: 119.368}",
     "measured: {tokens_per_s_per_gpu: 119.369}", MSD),
    ("Lambda's one-node row excluded as well",
     "results/published/lambda_deepspeed_pp_figures.yaml",
     "    measured: {samples_per_s: 6.381}\n",
     "    measured: {samples_per_s: 6.381}\n    excluded: \"mutated\"\n", LAMBDA),
    ("DistFlashAttn's two-box rows back on dgx-a100's 8 x 200 Gb/s a node",
     "results/published/distflashattn_baselines_figures.yaml",
     "    cluster: {profile: dgx-a100-ib100, nodes: 2}\n    parallel: {dp: 1, tp: 16, pp: 1, cp: 1, zero: 0, "
     "microbatches: 1, tp_layout: megatron-sp}\n    measured: {step_time_s: 14.26}",
     "    cluster: {profile: dgx-a100, nodes: 2}\n    parallel: {dp: 1, tp: 16, pp: 1, cp: 1, zero: 0, "
     "microbatches: 1, tp_layout: megatron-sp}\n    measured: {step_time_s: 14.26}", DFA),
    ("the dgx-a100-ib100 profile with dgx-a100's eight NICs",
     "hardware_profiles/dgx-a100-ib100.yaml", "  nics_per_node: 1 ", "  nics_per_node: 8 ", DFA),
    ("the held-out internlm-train-perf source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - internlm-train-perf ", "\n  # - internlm-train-perf ", INTERNLM),
    ("InternLM's model file changed (one more layer)",
     "examples/internlm_7b/config.json", '"num_hidden_layers": 32', '"num_hidden_layers": 33', INTERNLM),
    ("a pinned first-pricing error of zero-bubble-paper moved by 0.05",
     "tests/test_new_figures.py", '"zb-t12-14.6b-1f1b-p16-m16-b1": -0.044',
     '"zb-t12-14.6b-1f1b-p16-m16-b1": +0.006', ZB),
    ("the held-out zero-bubble-paper source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - zero-bubble-paper ", "\n  # - zero-bubble-paper ", ZB),
    ("the hgx-h800-roce100 profile with hgx-h800's 400 Gb/s NICs",
     "hardware_profiles/hgx-h800-roce100.yaml", "  nic_bandwidth_gb_per_s: 12.5 ", "  nic_bandwidth_gb_per_s: 50 ",
     KWAI),
    ("the held-out kwai-atc24 source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - kwai-atc24 ", "\n  # - kwai-atc24 ", KWAI),
    ("the held-out yandex-fsdp source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - yandex-fsdp ", "\n  # - yandex-fsdp ", YANDEX),
    ("a pinned first-pricing error of yandex-fsdp moved by 0.05",
     "tests/test_new_figures.py", '"yandex-fsdp-llama3-8b-64gpu-s4096": +0.198',
     '"yandex-fsdp-llama3-8b-64gpu-s4096": +0.248', YANDEX),
]

if __name__ == "__main__":
    sys.exit(check(MUTATIONS))
