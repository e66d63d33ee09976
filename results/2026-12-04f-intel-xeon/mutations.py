"""Issue 40's five tests that could not fail, each run against a mutation of what it guards: the
test must go red.  Each mutation is applied to the working tree, the test run, the file restored.

    python results/2026-12-04f-intel-xeon/mutations.py > results/2026-12-04f-intel-xeon/mutations.txt
"""

import sys

sys.path.insert(0, "runners")
from mutations import check  # noqa: E402  (runners/mutations.py; run from the repository root)

GROUP_SHAPE_BY_ID = '''

_unmutated_group_shape = group_shape
_BY_ID: dict = {}


def group_shape(cluster, ranks):            # MUTATION: a memo keyed by id(), as comm._shape_of once was
    if id(ranks) not in _BY_ID:
        _BY_ID[id(ranks)] = _unmutated_group_shape(cluster, ranks)
    return _BY_ID[id(ranks)]
'''

MUTATIONS = [
    ("tests/test_cp.py:353 chained two assert_close with `and`: the second (the merged lse) now runs",
     "parsim/exec/context_parallel.py",
     "return out * torch.exp(lse - new).unsqueeze(-1) + out_i * torch.exp(lse_i - new).unsqueeze(-1), new",
     "return out * torch.exp(lse - new).unsqueeze(-1) + out_i * torch.exp(lse_i - new).unsqueeze(-1), new + 1e-3",
     "tests/test_cp.py::test_online_softmax_merge_equals_softmax_over_all_keys"),
    ("tests/test_network_tiers.py:65 compared a function with itself: now each group priced by value",
     "parsim/cost/comm.py", None, GROUP_SHAPE_BY_ID,
     "tests/test_network_tiers.py::test_a_group_priced_by_identity_is_priced_as_by_value"),
    ("tests/test_heldout_set.py checked names only and left out the MoE set d: now every frozen set's content hash",
     "results/heldout/moe-2026-11-27d.yaml", None, "# one line appended\n",
     "tests/test_heldout_set.py"),
    ("tests/test_expert_parallel.py:150 turned a missing --ep flag into a skip: now it fails",
     "parsim/cli/__init__.py",
     '    p.add_argument("--ep", type=positive_int_arg,\n', '    p.add_argument("--ep-mutated", type=positive_int_arg,\n',
     "tests/test_expert_parallel.py::test_measured_all_to_all_bytes_equal_the_simulators"),
    ("tests/test_tp_overlap.py re-implemented the code it checks: now a closed form of its own",
     "parsim/sim/overlap.py",
     "    stretched = gemm_s * units / (units - comm_units)\n", "    stretched = gemm_s\n",
     "tests/test_tp_overlap.py::test_one_layer_in_the_simulator_equals_the_closed_form"),
]


if __name__ == "__main__":
    sys.exit(check(MUTATIONS))
