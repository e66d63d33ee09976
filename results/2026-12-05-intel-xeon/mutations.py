"""The fifty-fourth sitting's new tests, each run against a mutation of what it guards: the test
must go red.  Each mutation is applied to the working tree, the test run, the file restored.

    python results/2026-12-05-intel-xeon/mutations.py > results/2026-12-05-intel-xeon/mutations.txt
"""

import sys

sys.path.insert(0, "runners")
from mutations import check  # noqa: E402  (runners/mutations.py; run from the repository root)

SW = "tests/test_sliding_window.py"
MUTATIONS = [
    ("a windowed layer run on real tensors without its banded mask (full causal attention)",
     "parsim/model/hf.py", "if self.eager or (window and window < t and not meta):", "if self.eager:",
     SW + "::test_the_units_compute_what_transformers_computes_under_a_window"),
    ("a windowed layer's fused attention priced as full causal attention",
     "parsim/model/attention.py", "    if share >= 1.0:\n        return ops, kernels, 0.0, 0.0",
     "    if True:\n        return ops, kernels, 0.0, 0.0",
     SW + "::test_a_windowed_layers_fused_attention_is_priced_at_the_bands_share"),
    ("Mistral's window, which its attention reads from the config, not read",
     "parsim/model/attention.py", 'return int(getattr(getattr(attention, "config", None), "sliding_window", None) or 0)',
     "return 0", SW + "::test_a_windowed_layers_fused_attention_is_priced_at_the_bands_share"),
    ("the search trying context parallelism beside a window",
     "parsim/search/enumerate.py", "or attention_window(spec.graph):", ":",
     SW + "::test_the_search_tries_no_context_parallelism_beside_a_window"),
    ("check_cp letting cp > 1 through beside a window",
     "parsim/model/attention.py", "    window = attention_window(graph)\n    if window:",
     "    window = attention_window(graph)\n    if False:",
     SW + "::test_context_parallelism_is_refused_beside_a_window"),
    ("the Megatron-LM export writing a windowed plan as a run over the whole sequence",
     "parsim/export/megatron.py", "    if d.window:\n", "    if False:\n",
     SW + "::test_megatron_export_refuses_a_window_it_would_not_write"),
    ("the held-out mcore-release-0.9.0 source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - mcore-release-0.9.0 ", "\n  # - mcore-release-0.9.0 ",
     "tests/test_new_figures.py::test_mcore_release_rows_are_the_set_drawn_held_out_as_first_priced"),
    ("a pinned first-pricing error of mcore-release-0.9.0 moved by 0.05",
     "tests/test_new_figures.py", '"mcore090-mixtral-8x7b-h100-64gpu-tp1-pp4-vp8-ep8": +0.011',
     '"mcore090-mixtral-8x7b-h100-64gpu-tp1-pp4-vp8-ep8": +0.061',
     "tests/test_new_figures.py::test_mcore_release_rows_are_the_set_drawn_held_out_as_first_priced"),
    ("the held-out fast-llm-docs source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - fast-llm-docs ", "\n  # - fast-llm-docs ",
     "tests/test_new_figures.py::test_fast_llms_rows_are_the_set_drawn_held_out_the_windows_test"),
    ("Fast-LLM's rows priced without their window (Mistral's config read as full causal attention)",
     "parsim/model/attention.py", 'return int(getattr(getattr(attention, "config", None), "sliding_window", None) or 0)',
     "return 0", "tests/test_new_figures.py::test_fast_llms_rows_are_the_set_drawn_held_out_the_windows_test"),
]


if __name__ == "__main__":
    sys.exit(check(MUTATIONS))
