"""Issue 40's five tests that could not fail, each run against a mutation of what it guards: the
test must go red.  Each mutation is applied to the working tree, the test run, the file restored.

    python results/2026-12-04f-intel-xeon/mutations.py > results/2026-12-04f-intel-xeon/mutations.txt
"""

import subprocess
import sys
from pathlib import Path

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


def run(test: str) -> tuple[int, str]:
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
                       capture_output=True, text=True)
    last = [line for line in p.stdout.splitlines() if line.strip()][-1]
    return p.returncode, last


def main() -> int:
    bad = 0
    for what, path, old, new, test in MUTATIONS:
        f = Path(path)
        text = f.read_text()
        if old is None:
            mutated = text + new
        else:
            assert text.count(old) == 1, (path, old)
            mutated = text.replace(old, new)
        rc0, clean = run(test)
        try:
            f.write_text(mutated)
            rc1, red = run(test)
        finally:
            f.write_text(text)
        ok = rc0 == 0 and rc1 != 0
        bad += not ok
        print(f"{what}\n  {path} mutated; {test}\n  unmutated: {clean}\n  mutated:   {red}\n  "
              f"{'red under the mutation, green without: it can fail' if ok else 'NOT CAUGHT'}\n")
    return bad


if __name__ == "__main__":
    sys.exit(main())
