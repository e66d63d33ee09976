"""What the executor tests check of a run against one process (imported by the test files; not a
test module itself)."""

import json
from pathlib import Path

import torch

from parsim.exec.reference import distributed_params, reference_run


def assert_equals_reference(plan: str, out, steps: int, synthetic_size: int) -> tuple[dict, dict]:
    """The run in ``out`` against the single-process reference of ``steps`` steps
    (parsim.exec.reference): the same parameters, every one, and the same losses for the steps the
    run measured (its last, when it resumed).  Returns its measured.json and its parameters."""
    measured = json.loads((Path(out) / "measured.json").read_text())
    torch.set_num_threads(1)
    losses, ref = reference_run(plan, steps, synthetic_size=synthetic_size)
    got = distributed_params(str(out), plan)
    assert set(got) == set(ref)
    for key in ref:
        torch.testing.assert_close(got[key], ref[key], msg=key)
    torch.testing.assert_close(torch.tensor(measured["loss"]), torch.tensor(losses[len(losses) - len(measured["loss"]):]))
    return measured, got
