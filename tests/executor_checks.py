"""What the executor tests check of a run against one process (imported by the test files; not a
test module itself)."""

import json
import os
import socket
from collections import OrderedDict
from pathlib import Path

import torch
import torch.multiprocessing as mp

from parsim.exec.objective import ADAM_LR
from parsim.exec.reference import distributed_params, reference_run
from parsim.plan import load_plan

# Adam divides each gradient element by its own running magnitude plus eps = 1e-8, so where a
# gradient is below eps its update moves by lr / eps = 1e5 times the gradient's rounding error.
# fp32 summation order alone (a split contraction, another CPU's BLAS) then moves parameters by
# more than assert_close's fp32 atol of 1e-5: mlp_semi_auto's single-process reference in fp32
# against the same steps in float64 differs by up to 1.6e-5 (3.weight) and 1.2e-5 (9.weight) (AMD EPYC,
# results/2026-11-28-amd-epyc/diagnosis-adam-order/), and its tp=2 run failed the default
# tolerance on an Intel Xeon (issue 40).  Adam moves an element by at most about lr = 1e-3 a step,
# so a fault (a missing or doubled sum) shows at that scale: lr / 10 tells the two apart.
ADAM_PARAM_ATOL = ADAM_LR / 10

# The last few single-process references, by what parsim.exec.reference.reference_run reads of a
# plan: its model file (path and bytes), dtype, optimizer, global batch, dp and micro-batches (the
# seed, data and thread count are this module's).  The pipeline schedules' tests of one model
# train the same reference; each is read, never changed, by the caller.
_REFERENCES: OrderedDict = OrderedDict()
_KEPT = 2


def _reference(plan: str, steps: int, synthetic_size: int) -> tuple[list[float], dict]:
    p = load_plan(plan)
    model = Path(p.model_path).resolve()
    key = (str(model), model.read_bytes(), p.dtype, p.optimizer, p.global_batch_size, p.config.dp,
           p.config.microbatches, steps, synthetic_size)
    if key not in _REFERENCES:
        _REFERENCES[key] = reference_run(plan, steps, synthetic_size=synthetic_size)
        while len(_REFERENCES) > _KEPT:
            _REFERENCES.popitem(last=False)
    _REFERENCES.move_to_end(key)
    return _REFERENCES[key]


def assert_equals_reference(plan: str, out, steps: int, synthetic_size: int) -> tuple[dict, dict]:
    """The run in ``out`` against the single-process reference of ``steps`` steps
    (parsim.exec.reference): the same parameters, every one (within fp32 rounding; for Adam,
    within ADAM_PARAM_ATOL), and the same losses for the steps the run measured (its last, when
    it resumed).  Returns its measured.json and its parameters."""
    measured = json.loads((Path(out) / "measured.json").read_text())
    torch.set_num_threads(1)
    losses, ref = _reference(plan, steps, synthetic_size)
    got = distributed_params(str(out), plan)
    assert set(got) == set(ref)
    tolerance = {"atol": ADAM_PARAM_ATOL, "rtol": 1.3e-6} if load_plan(plan).optimizer == "adam" else {}
    for key in ref:
        torch.testing.assert_close(got[key], ref[key], msg=key, **tolerance)
    torch.testing.assert_close(torch.tensor(measured["loss"]), torch.tensor(losses[len(losses) - len(measured["loss"]):]))
    return measured, got


def spawned(worker, nprocs: int) -> dict:
    """What ``worker(rank)`` returned (a dict) on each of ``nprocs`` processes, merged: each started by torch's
    spawn, one thread, in a gloo process group of them all on a free local port (``_gloo_rank``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with mp.Manager() as m:
        results = m.dict()
        mp.spawn(_gloo_rank, args=(worker, port, nprocs, results), nprocs=nprocs)
        return dict(results)


def _gloo_rank(rank, worker, port, nprocs, results):
    """One process of ``spawned``: join the group, run the worker, hand back what it found, and leave
    without the interpreter's teardown (parsim.exec.runtime.exit_without_teardown)."""
    import torch.distributed as dist

    from parsim.exec.runtime import exit_without_teardown

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=nprocs)
    results.update(worker(rank))
    dist.destroy_process_group()
    exit_without_teardown(0)
