"""Why mlp_semi_auto's tp=2 run can differ from its single-process reference beyond fp32's
assert_close tolerance (issue 40: 9.weight, on an Intel Xeon): another fp32 summation order is
enough.  The fp32 reference against the same two Adam steps in float64, element by element, and
the smallest gradients Adam divides by (its eps is 1e-8: below it, an update moves by lr / eps =
1e5 times the gradient's rounding).  Deterministic; run from the repository root:

    PYTHONPATH=. python results/2026-11-28-amd-epyc/diagnosis-adam-order/measure.py > results/2026-11-28-amd-epyc/diagnosis-adam-order/output.txt
"""
import contextlib
import io
import os
import tempfile

import torch

import parsim.exec.reference as ref
from parsim.cli import main
from parsim.exec.objective import ADAM_LR

plan = os.path.join(tempfile.mkdtemp(), "plan.json")
with contextlib.redirect_stdout(io.StringIO()):
    assert main(["simulate", "examples/mlp_semi_auto.yaml", "--cluster", "local-cpu", "--dp", "1", "--pp", "1",
                 "--tp", "2", "--microbatches", "2", "-o", plan]) == 0
torch.set_num_threads(1)
_, fp32 = ref.reference_run(plan, 2, synthetic_size=256)            # tests/test_exec.py's SYNTH

grads: list[list[torch.Tensor]] = []


class Recording(torch.optim.Adam):
    def step(self, closure=None):
        grads.append([p.grad.detach().abs().clone() for g in self.param_groups for p in g["params"]])
        return super().step(closure)


ref.TORCH_DTYPES = dict(ref.TORCH_DTYPES, fp32=torch.float64)
ref.make_optimizer = lambda kind, params: Recording(params, lr=ADAM_LR, foreach=False)
_, fp64 = ref.reference_run(plan, 2, synthetic_size=256)
print(f"torch {torch.__version__}; two Adam steps (lr {ADAM_LR}), fp32 reference against float64")
print(f"{'parameter':10} {'shape':12} {'max |fp32 - fp64|':>18} {'beyond atol 1e-5 + rtol 1.3e-6':>31} "
      f"{'grad |g| < 1e-8 (step 1, 2)':>28}")
for i, name in enumerate(fp32):
    diff = (fp32[name].double() - fp64[name]).abs()
    beyond = int((diff > 1e-5 + 1.3e-6 * fp64[name].abs()).sum())
    tiny = [int(((g[i] > 0) & (g[i] < 1e-8)).sum()) for g in grads]
    print(f"{name:10} {str(tuple(fp32[name].shape)):12} {diff.max():18.2e} {beyond:31d} {str(tiny):>28}")
