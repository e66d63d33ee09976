"""The fifty-ninth sitting's new tests, run against mutations of what they guard: each must go red.
Each mutation is applied to the working tree, the test run, the file restored.

    python results/2026-12-05f-intel-xeon/mutations.py > results/2026-12-05f-intel-xeon/mutations.txt
"""

import sys

sys.path.insert(0, "runners")
from mutations import check  # noqa: E402  (runners/mutations.py; run from the repository root)

GATHER = "tests/test_checkpoint_gather.py"
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
]

if __name__ == "__main__":
    sys.exit(check(MUTATIONS))
