"""The sixtieth sitting's new tests, run against mutations of what they guard: each must go red.
Each mutation is applied to the working tree, the test run, the file restored.

    python results/2026-12-05g-intel-xeon/mutations.py > results/2026-12-05g-intel-xeon/mutations.txt
"""

import sys

sys.path.insert(0, "runners")
from mutations import check  # noqa: E402  (runners/mutations.py; run from the repository root)

NO_SYNC = "tests/test_no_sync.py"
EXEC = "tests/test_exec.py::test_fsdp2_without_sync_reduce_scatters_once_a_step"
BAND = "tests/test_band.py::test_a_device_no_row_ran_on_takes_its_architectures_rows_and_says_so"
P5 = "tests/test_aws_p5.py"
NEW = "tests/test_new_figures.py::"
LLAMA = NEW + "test_megatron_llamas_rows_are_the_set_drawn_held_out_as_first_priced"
KFORGE = NEW + "test_kempnerforges_rows_are_the_set_drawn_held_out_as_first_priced"
LONGSEQ = NEW + "test_nemo_long_sequence_rows_are_the_set_drawn_held_out_as_first_priced"
MUTATIONS = [
    ("no_sync's reduce-scatters counted every micro-batch again",
     "parsim/sim/simulate.py", "syncs = 1 if cfg.no_sync else m", "syncs = m", NO_SYNC),
    ("no_sync's buckets run every micro-batch in the engine",
     "parsim/sim/simulate.py", "buckets_every_microbatch=zero >= 2 and not cfg.no_sync,",
     "buckets_every_microbatch=zero >= 2,", NO_SYNC),
    ("FSDP2's reduce hooks charged every backward under no_sync",
     "parsim/sim/engine.py", "if k in self.hooks and (costs.buckets_every_microbatch or mb == self.M - 1):",
     "if k in self.hooks:", NO_SYNC),
    ("the unsharded gradients not held",
     "parsim/sim/memory.py", "        static[\"grads_bytes\"] += graph.held_param_count(held) * width\n",
     "        static[\"grads_bytes\"] += 0\n", NO_SYNC),
    ("no_sync taken below ZeRO-2",
     "parsim/refusals.py", "    if cfg.zero < 2:\n        return \"no_sync\"",
     "    if cfg.zero < 0:\n        return \"no_sync\"", NO_SYNC),
    ("the executor syncs every micro-batch",
     "parsim/exec/fsdp.py", "        module.set_requires_gradient_sync(last, recurse=True)",
     "        module.set_requires_gradient_sync(True, recurse=True)", EXEC),
    ("no architecture stands in for a device without rows",
     "parsim/sim/band.py",
     "    same = sorted({r.kind.device for r in pool if arch and architecture(r.kind.device) == arch})",
     "    same = []", BAND),
    ("the H200 outside Hopper",
     "parsim/sim/band.py", '("H100", "H800", "H200", "H20-")', '("H100", "H800", "H20-")', BAND),
    ("aws-p5's network efficiency off its fit",
     "hardware_profiles/aws-p5.yaml", "  efficiency: 0.895 ", "  efficiency: 0.85 ", P5),
    ("aws-p5 with one 12.5 GB/s NIC a GPU",
     "hardware_profiles/aws-p5.yaml", "  nic_bandwidth_gb_per_s: 50 ", "  nic_bandwidth_gb_per_s: 12.5 ", P5),
    ("the held-out alibaba-megatron-llama source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - alibaba-megatron-llama ", "\n  # - alibaba-megatron-llama ", LLAMA),
    ("an ODO row back to zero 1 (the review undone)",
     "results/published/megatron_llama_figures.yaml",
     "parallel: {dp: 128, tp: 2, tp_layout: megatron-sp, pp: 1, zero: 2, microbatches: 4, overlap_grad_reduce: true}",
     "parallel: {dp: 128, tp: 2, tp_layout: megatron-sp, pp: 1, zero: 1, microbatches: 4, overlap_grad_reduce: true}",
     LLAMA),
    ("a pinned first-pricing error of kempnerforge-bench moved by 0.05",
     "tests/test_new_figures.py", '"kforge-weak-70b-32gpu-tp4fsdp8": +0.158',
     '"kforge-weak-70b-32gpu-tp4fsdp8": +0.208', KFORGE),
    ("a KempnerForge row's no_sync dropped",
     "results/published/kempnerforge_bench_figures.yaml",
     "parallel: {dp: 8, tp: 1, zero: 3, no_sync: true,", "parallel: {dp: 8, tp: 1, zero: 3,", KFORGE),
    ("the held-out nemo-longseq source taken out of fit.yaml's held_out",
     "results/published/fit.yaml", "\n  - nemo-longseq ", "\n  # - nemo-longseq ", LONGSEQ),
    ("a NeMo long-sequence row's measured step changed",
     "results/published/nemo_longseq_figures.yaml", "measured: {step_time_s: 25.981}", "measured: {step_time_s: 25.98}",
     LONGSEQ),
]

if __name__ == "__main__":
    sys.exit(check(MUTATIONS))
