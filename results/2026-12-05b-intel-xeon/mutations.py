"""The fifty-fifth sitting's new tests, each run against a mutation of what it guards: the test
must go red.  Each mutation is applied to the working tree, the test run, the file restored.

    python results/2026-12-05b-intel-xeon/mutations.py > results/2026-12-05b-intel-xeon/mutations.txt
"""

import sys

sys.path.insert(0, "runners")
from mutations import check  # noqa: E402  (runners/mutations.py; run from the repository root)

BAND = "tests/test_band.py"
NEW = "tests/test_new_figures.py"
MUTATIONS = [
    ("the local sorts priced at one rank's rows under etp = tp (the rule before)",
     "parsim/cost/experts.py", "/ extraction_batch * imbalance * etp", "/ extraction_batch * imbalance",
     "tests/test_moe_routing.py::test_with_the_experts_split_over_tp_each_rank_sorts_the_groups_rows"),
    ("the held-out sources' residuals kept out of every band (the rule before)",
     "parsim/sim/band.py", "    pool = [r for r in residuals if r.family != leave_out]\n",
     "    pool = [r for r in residuals if r.family != leave_out and not r.held_out]\n",
     BAND + "::test_a_held_out_sources_rows_are_in_the_band_and_say_how_they_fared"),
    ("a band's class widening through the device and model before the mix and model",
     "parsim/sim/band.py",
     '    yield "mix, model", lambda k: (k.mix, k.model) == (kind.mix, kind.model)\n'
     '    yield "device, model", lambda k: (k.device, k.model) == (kind.device, kind.model)\n',
     '    yield "device, model", lambda k: (k.device, k.model) == (kind.device, kind.model)\n'
     '    yield "mix, model", lambda k: (k.mix, k.model) == (kind.mix, kind.model)\n',
     BAND + "::test_the_class_widens_until_it_holds_enough_sources"),
    ("the device alone a class again, before every row",
     "parsim/sim/band.py", '    yield "every row", lambda k: True\n',
     '    yield "device", lambda k: k.device == kind.device\n    yield "every row", lambda k: True\n',
     BAND + "::test_a_widened_class_says_so_and_why_and_takes_every_row_before_a_devices_other_plans"),
    ("moe-parallel-folding put back in fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - paddlenlp-pretrain ", "\n  - moe-parallel-folding\n  - paddlenlp-pretrain ",
     NEW + "::test_the_parallel_folding_papers_rows_are_the_set_drawn_now_a_development_source"),
    ("a held-out row the refit moved pinned at its first price again",
     NEW, '    "msmoe-t3-megatron-352b-h800-240gpu": +0.274,\n', "",
     NEW + "::test_megascale_moes_rows_are_the_set_drawn_held_out_as_first_priced"),
    ("the held-out paddlenlp-pretrain source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - paddlenlp-pretrain ", "\n  # - paddlenlp-pretrain ",
     NEW + "::test_paddlenlps_rows_are_the_set_drawn_held_out_as_first_priced"),
    ("a pinned first-pricing error of paddlenlp-pretrain moved by 0.05",
     NEW, '"paddlenlp-llama2-7b-a100-8gpu-tp2sd4": +0.144', '"paddlenlp-llama2-7b-a100-8gpu-tp2sd4": +0.194',
     NEW + "::test_paddlenlps_rows_are_the_set_drawn_held_out_as_first_priced"),
]


if __name__ == "__main__":
    sys.exit(check(MUTATIONS))
