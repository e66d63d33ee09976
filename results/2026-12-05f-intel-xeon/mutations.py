"""The fifty-ninth sitting's new tests, run against mutations of what they guard: each must go red.
Each mutation is applied to the working tree, the test run, the file restored.

    python results/2026-12-05f-intel-xeon/mutations.py > results/2026-12-05f-intel-xeon/mutations.txt
"""

import sys

sys.path.insert(0, "runners")
from mutations import check  # noqa: E402  (runners/mutations.py; run from the repository root)

GATHER = "tests/test_checkpoint_gather.py"
NEW = "tests/test_new_figures.py::"
PAX = NEW + "test_jax_toolbox_pax_rows_are_the_set_drawn_held_out_as_first_priced"
MAXTEXT = NEW + "test_maxtexts_a3_rows_are_the_set_drawn_held_out_as_first_priced"
AWS = NEW + "test_aws_qwen3_rows_are_the_set_drawn_held_out_as_first_priced"
ATORCH = NEW + "test_atorchs_rows_are_the_set_drawn_held_out_as_first_priced"
PAX_FILE = "results/published/jax_toolbox_pax_figures.yaml"
PAX_159 = "  # ---- rosetta/rosetta/projects/pax/README.md:159\n"
# the first 126M row's exclusion, the line before its successor's marker
PAX_126M_EXCLUDED = open(PAX_FILE).read().split(PAX_159)[0].rsplit("\n", 2)[-2] + "\n"
MUTATIONS = [
    ("the checkpoint's whole tensors through DTensor.full_tensor again (functional collectives)",
     "parsim/exec/tensor_parallel.py", "    if any(type(p) not in (Shard, Replicate) for p in t.placements):\n",
     "    if True:\n", GATHER),
    ("the mesh dimensions gathered outer first",
     "parsim/exec/tensor_parallel.py", "for mesh_dim in reversed(range(t.device_mesh.ndim)):",
     "for mesh_dim in range(t.device_mesh.ndim):", GATHER),
    ("uneven shards concatenated with their padding",
     "parsim/exec/tensor_parallel.py", "torch.cat([part.narrow(dim, 0, k) for part, k in zip(parts, lengths)], dim)",
     "torch.cat(parts, dim)", GATHER),
    ("the held-out jax-toolbox-pax-2404 source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - jax-toolbox-pax-2404 ", "\n  # - jax-toolbox-pax-2404 ", PAX),
    ("a Pax 126M row scored again (its review exclusion dropped)",
     "results/published/jax_toolbox_pax_figures.yaml", PAX_126M_EXCLUDED + PAX_159, PAX_159, PAX),
    ("a pinned first-pricing error of maxtext-a3-llama2-7b moved by 0.05",
     "tests/test_new_figures.py", '"maxtext-a3-llama2-7b-128gpu": +0.386', '"maxtext-a3-llama2-7b-128gpu": +0.436',
     MAXTEXT),
    ("a row of AWS's drawn set changed (its measured step)",
     "results/published/aws_qwen3_30b_p5_figures.yaml", "measured: {step_time_s: 27.89}",
     "measured: {step_time_s: 27.9}", AWS),
    ("the held-out aws-p5-qwen3-30b source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - aws-p5-qwen3-30b ", "\n  # - aws-p5-qwen3-30b ", AWS),
    ("the a100-rdma800 profile with dgx-a100's 200 Gb/s NICs",
     "hardware_profiles/a100-rdma800.yaml", "  nic_bandwidth_gb_per_s: 12.5 ", "  nic_bandwidth_gb_per_s: 25 ", ATORCH),
    ("a pinned first-pricing error of atorch-llama2-perf moved by 0.05",
     "tests/test_new_figures.py", '"atorch-llama2-7b-fsdp-8gpu-mbs4-gbs32": -0.070',
     '"atorch-llama2-7b-fsdp-8gpu-mbs4-gbs32": -0.020', ATORCH),
]

if __name__ == "__main__":
    sys.exit(check(MUTATIONS))
