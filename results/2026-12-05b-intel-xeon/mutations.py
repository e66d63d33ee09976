"""The fifty-fifth sitting's new tests, each run against a mutation of what it guards: the test
must go red.  Each mutation is applied to the working tree, the test run, the file restored.

    python results/2026-12-05b-intel-xeon/mutations.py > results/2026-12-05b-intel-xeon/mutations.txt
"""

import sys

sys.path.insert(0, "runners")
from mutations import check  # noqa: E402  (runners/mutations.py; run from the repository root)

NEW = "tests/test_new_figures.py"
MUTATIONS = [
    ("the local sorts priced at one rank's rows under etp = tp (the rule before)",
     "parsim/cost/experts.py", "/ extraction_batch * imbalance * etp", "/ extraction_batch * imbalance",
     "tests/test_moe_routing.py::test_with_the_experts_split_over_tp_each_rank_sorts_the_groups_rows"),
    ("moe-parallel-folding put back in fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - paddlenlp-pretrain ", "\n  - moe-parallel-folding\n  - paddlenlp-pretrain ",
     NEW + "::test_the_parallel_folding_papers_rows_are_the_set_drawn_now_a_development_source"),
    ("moe-parallel-folding taken out of fit.yaml's kept_out (fitted on)",
     "results/published/fit.yaml", "\n  - moe-parallel-folding ", "\n  # - moe-parallel-folding ",
     NEW + "::test_the_parallel_folding_papers_rows_are_the_set_drawn_now_a_development_source"),
    ("FitSpec.fitted_on ignoring kept_out",
     "parsim/profile/loso.py", "and figure.source not in self.kept_out", "",
     "tests/test_loso.py::test_a_held_out_source_takes_part_in_no_fit_and_is_scored_at_the_shipped_values"),
    ("the held-out paddlenlp-pretrain source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - paddlenlp-pretrain ", "\n  # - paddlenlp-pretrain ",
     NEW + "::test_paddlenlps_rows_are_the_set_drawn_held_out_as_first_priced"),
    ("a pinned first-pricing error of paddlenlp-pretrain moved by 0.05",
     NEW, '"paddlenlp-llama2-7b-a100-8gpu-tp2sd4": +0.144', '"paddlenlp-llama2-7b-a100-8gpu-tp2sd4": +0.194',
     NEW + "::test_paddlenlps_rows_are_the_set_drawn_held_out_as_first_priced"),
    ("the held-out colossalai-readme-bench source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - colossalai-readme-bench ", "\n  # - colossalai-readme-bench ",
     NEW + "::test_colossalais_rows_are_the_set_drawn_held_out_as_first_priced"),
    ("colossalai-readme-bench's pinned first-pricing error moved by 0.05",
     NEW, '"colossalai-llama-7b-h200-8gpu-zero2": +0.064', '"colossalai-llama-7b-h200-8gpu-zero2": +0.114',
     NEW + "::test_colossalais_rows_are_the_set_drawn_held_out_as_first_priced"),
]


if __name__ == "__main__":
    sys.exit(check(MUTATIONS))
