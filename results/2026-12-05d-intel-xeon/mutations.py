"""The fifty-seventh sitting's new tests, run against mutations of what they guard: each must go red.
Each mutation is applied to the working tree, the test run, the file restored.

    python results/2026-12-05d-intel-xeon/mutations.py > results/2026-12-05d-intel-xeon/mutations.txt
"""

import sys

sys.path.insert(0, "runners")
from mutations import check  # noqa: E402  (runners/mutations.py; run from the repository root)

NEW = "tests/test_new_figures.py::"
MAIN = NEW + "test_blooms_main_run_rows_are_the_set_drawn_held_out_as_first_priced"
ULTRA = NEW + "test_the_ultrascale_playbooks_rows_are_the_set_drawn_held_out_as_first_priced"
PUB = "tests/test_published.py::"
BAND = "tests/test_band.py::"
MUTATIONS = [
    ("the held-out bloom-tr11-main source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - bloom-tr11-main ", "\n  # - bloom-tr11-main ", MAIN),
    ("a pinned first-pricing error of bloom-tr11-main moved by 0.05",
     "tests/test_new_figures.py", '"bloom-main-reshape59-36n-dp4tp2pp36-mbs1-gbs2048": +0.067',
     '"bloom-main-reshape59-36n-dp4tp2pp36-mbs1-gbs2048": +0.117', MAIN),
    ("the held-out ultrascale-playbook source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - ultrascale-playbook ", "\n  # - ultrascale-playbook ", ULTRA),
    ("a pinned first-pricing error of ultrascale-playbook moved by 0.05",
     "tests/test_new_figures.py", '"ultrascale-1b-n2-dp2-tp2-pp4-mbs8-ga16-z1": +0.038',
     '"ultrascale-1b-n2-dp2-tp2-pp4-mbs8-ga16-z1": +0.088', ULTRA),
    ("a row of the Playbook's drawn set changed (its measured tokens/s/GPU, by one)",
     "results/published/ultrascale_playbook_figures.yaml", "measured: {tokens_per_s_per_gpu: 30886}",
     "measured: {tokens_per_s_per_gpu: 30887}", ULTRA),
    ("a family left without its stack in results/published/harnesses.yaml",
     "results/published/harnesses.yaml", "  fms-fsdp: torch-fsdp ", "  # fms-fsdp: torch-fsdp ",
     PUB + "test_every_family_names_the_stack_that_ran_it"),
    ("a stack's MAPE over its families' medians instead of its rows",
     "parsim/profile/harness.py", "statistics.mean(abs(e) for e in rows)",
     "statistics.mean(abs(m) for m in medians.values())",
     PUB + "test_a_stack_line_counts_its_rows_and_each_family_once"),
    ("a pick's regret taken from its price instead of its measurement",
     "parsim/profile/picks.py", "1 - _rate(metric, pick[2]) / top", "1 - _rate(metric, pick[3]) / top",
     PUB + "test_a_pick_is_scored_by_the_measured_speed_of_the_row_parsim_prices_fastest"),
    ("rows that recompute otherwise kept out of one choice",
     "parsim/profile/picks.py", 'PLAN_FIELDS = ("recompute",)', "PLAN_FIELDS = ()",
     PUB + "test_a_pick_is_scored_by_the_measured_speed_of_the_row_parsim_prices_fastest"),
    ("the stack check counting rows, not families",
     "parsim/sim/band.py", "ratios.setdefault(r.family, []).append(r.log_ratio)",
     "ratios.setdefault(r.id, []).append(r.log_ratio)",
     BAND + "test_a_plans_stack_says_how_the_public_families_on_it_ran_and_moves_nothing"),
    ("simulate's band not told the model's stack",
     "parsim/cli/plan.py", "est = with_band(est, spec.graph, cluster, cfg, stack=spec.training.stack)",
     "est = with_band(est, spec.graph, cluster, cfg)",
     BAND + "test_a_stated_stack_reaches_simulates_band_and_a_wrong_one_names_its_field"),
    ("a config read --from a framework not given that framework's stack",
     "parsim/export/commands.py", '{"stack": FRAMEWORK_STACK[framework], **mapping.get("training", {})',
     '{**mapping.get("training", {})', "tests/test_export.py::test_megatron_roundtrip"),
    ("device_check.sh without attention's batched GEMMs by head dimension",
     "runners/device_check.sh",
     "    python3 runners/gemm_alignment.py --device cpu --seq 128 --batch 4 --reps 3 >> \"$OUT/compare.txt\" 2>&1 \\",
     "    true \\",
     "tests/test_profile_device.py::test_the_prepared_gpu_check_runs_here_on_the_cpu"),
    ("a rank that exited after its peer taken for the cause before the peer killed by a signal",
     "parsim/exec/launch.py", "key=lambda rc: (rc[1] >= 0, rc[0])", "key=lambda rc: rc[0]",
     "tests/test_exec.py::test_the_failure_named_is_the_cause_whenever_the_ranks_are_seen_to_end"),
]


if __name__ == "__main__":
    sys.exit(check(MUTATIONS))
