"""Mixed precision (parsim.exec.precision): fp32 master weights as the memory model prices them,
dynamic loss scaling, and bf16 through the profiler; the executor's bf16 runs are in test_exec."""

import copy
import json

import pytest
import torch

from parsim.cli import main
from parsim.cost.compute import load_profile_table
from parsim.errors import InputError
from parsim.exec.precision import DynamicLossScaler, MasterWeightOptimizer, check_supported
from parsim.model.spec import load_model
from parsim.profile.calibrate import profiled_compute
from parsim.hardware import load_cluster


def _params(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*shape, generator=g).to(dtype)) for shape in ((5, 3), (3,))]


def _grads(params, step):
    g = torch.Generator().manual_seed(100 + step)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g).to(p.dtype)


def _steps_as_torch_on_masters(model, ours, theirs, steps: int = 3):
    """Step ``ours`` (an optimizer of the bf16 ``model``) and ``theirs`` (torch's, on fp32 copies
    fed the same bf16 gradients) together; the masters equal the copies exactly, and the model
    holds them rounded to bf16.  Returns ours."""
    masters = [p.detach().float().clone().requires_grad_() for p in model]
    opt, ref = ours(model), theirs(masters)
    for step in range(steps):
        _grads(model, step)
        for m, p in zip(masters, model):
            m.grad = p.grad.float()
        opt.step(), ref.step()
    for p, m, kept in zip(model, masters, opt.masters):
        assert p.dtype == torch.bfloat16 and kept.dtype == torch.float32
        assert torch.equal(kept, m.detach()) and kept.grad is None
        assert torch.equal(p.detach(), m.detach().to(torch.bfloat16))
    return opt


def test_fp32_is_torch_sgd():
    ours, theirs = _params(torch.float32), _params(torch.float32)
    opt, ref = MasterWeightOptimizer(ours, lr=0.1, momentum=0.9), torch.optim.SGD(theirs, lr=0.1, momentum=0.9)
    for step in range(3):
        _grads(ours, step), _grads(theirs, step)
        opt.step(), ref.step()
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)


def test_bf16_steps_fp32_masters_and_rounds_them_into_the_model():
    """The masters follow fp32 momentum SGD on the bf16 gradients exactly; the model holds the
    masters rounded to bf16, so updates smaller than a bf16 step accumulate instead of vanishing."""
    model = _params(torch.bfloat16)
    opt = _steps_as_torch_on_masters(model, lambda ps: MasterWeightOptimizer(ps, lr=0.1, momentum=0.9),
                                     lambda ms: torch.optim.SGD(ms, lr=0.1, momentum=0.9))
    # held between steps: the master and the momentum, 4 + 4 bytes per parameter
    held = sum(t.numel() * t.element_size() for st in opt.state.values() for t in st.values())
    assert held == 8 * sum(p.numel() for p in model)
    # a step far below bf16's resolution still moves the master
    tiny = MasterWeightOptimizer([torch.nn.Parameter(torch.ones(1, dtype=torch.bfloat16))], lr=1e-4, momentum=0.0)
    for _ in range(10):
        tiny.params[0].grad = torch.ones(1, dtype=torch.bfloat16)
        tiny.step()
    assert tiny.masters[0].item() == pytest.approx(1 - 1e-3, rel=1e-6)


def test_state_dict_round_trip_resumes_identically():
    a, b = _params(torch.bfloat16), _params(torch.bfloat16)
    oa, ob = MasterWeightOptimizer(a, lr=0.1, momentum=0.9), MasterWeightOptimizer(b, lr=0.1, momentum=0.9)
    _grads(a, 0), _grads(b, 0)
    oa.step(), ob.step()
    fresh = _params(torch.bfloat16, seed=7)
    oc = MasterWeightOptimizer(fresh, lr=0.1, momentum=0.9)
    oc.load_state_dict(ob.state_dict())
    for p, q in zip(fresh, b):
        p.data.copy_(q.data)
    _grads(a, 1), _grads(fresh, 1)
    oa.step(), oc.step()
    assert all(torch.equal(p, q) for p, q in zip(a, fresh))


def test_loss_scale_is_divided_out_of_the_gradients():
    scaled, plain = _params(torch.bfloat16), _params(torch.bfloat16)
    os_, op = MasterWeightOptimizer(scaled, lr=0.1, momentum=0.9), MasterWeightOptimizer(plain, lr=0.1, momentum=0.9)
    _grads(plain, 0)
    for p, q in zip(scaled, plain):
        p.grad = q.grad * 1024           # exact in bf16: a power of two
    os_.scale = 1024.0
    os_.step(), op.step()
    assert all(torch.equal(p, q) for p, q in zip(scaled, plain))


def test_dynamic_loss_scaler_backs_off_after_its_hysteresis_and_grows_after_clean_steps():
    s = DynamicLossScaler(initial=2.0 ** 16, growth_interval=3, hysteresis=2)
    assert s.update(False) is False and s.scale == 2.0 ** 16       # first overflow: hysteresis absorbs it
    assert s.update(False) is False and s.scale == 2.0 ** 15       # second: halved
    assert s.update(True) and s.update(True) and s.scale == 2.0 ** 15
    assert s.update(True) and s.scale == 2.0 ** 16                 # third clean step in a row: doubled
    floor = DynamicLossScaler(initial=2.0, hysteresis=1, min_scale=1.0)
    floor.update(False), floor.update(False)
    assert floor.scale == 1.0


def test_fp16_needs_cuda():
    check_supported("bf16", torch.device("cpu"), "p.json")
    with pytest.raises(InputError, match="p.json: model.dtype: fp16 runs on CUDA only"):
        check_supported("fp16", torch.device("cpu"), "p.json")


def test_bf16_profile_times_the_model_in_bf16_and_is_refused_for_fp32(tmp_path):
    out = tmp_path / "p.json"
    assert main(["profile", "examples/gpt_tiny_local_bf16.yaml", "--microbatch-sizes", "2", "--repeats", "1",
                 "--nproc", "1", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["dtype"] == "bf16"
    table = load_profile_table(str(out))
    cluster = load_cluster("local-cpu")
    profiled_compute(table, load_model("examples/gpt_tiny_local_bf16.yaml").graph, cluster.device, "bf16")
    with pytest.raises(InputError, match="timed the model in bf16, but it trains in fp32"):
        profiled_compute(table, load_model("examples/gpt_tiny_local.yaml").graph, cluster.device, "fp32")


def test_bf16_adam_steps_fp32_masters_as_torch_adam_steps_fp32_parameters():
    """Adam on a bf16 model (make_optimizer("adam")): the masters follow torch's Adam on fp32
    copies fed the bf16 gradients, the model holds them rounded to bf16, and what is held
    between steps is the master and Adam's two moments (4 + 4 + 4 bytes a parameter, and the
    step counts); a checkpoint's state resumes identically."""
    from parsim.exec.objective import ADAM_LR
    from parsim.exec.precision import make_optimizer

    model = _params(torch.bfloat16)
    opt = _steps_as_torch_on_masters(model, lambda ps: make_optimizer("adam", ps),
                                     lambda ms: torch.optim.Adam(ms, lr=ADAM_LR, foreach=False))
    held = sum(t.numel() * t.element_size() for st in opt.state.values() for k, t in st.items() if k != "step")
    assert held == 12 * sum(p.numel() for p in model)
    resumed = _params(torch.bfloat16, seed=7)
    again = make_optimizer("adam", resumed)
    again.load_state_dict(copy.deepcopy(opt.state_dict()))   # as a checkpoint holds it: no tensor shared
    for p, q in zip(resumed, model):
        p.data.copy_(q.data)
    _grads(model, 3), _grads(resumed, 3)
    opt.step(), again.step()
    assert all(torch.equal(p, q) for p, q in zip(model, resumed))


def test_a_timed_step_waits_for_the_device_it_ran_on(monkeypatch):
    """parsim.exec.groups.synchronize, which the executor calls before and after its timed step:
    it waits on a CUDA or Ascend device (whose kernels run after the host queues them), and on the
    CPU it does nothing.  Before 2026-12-04 a GPU step was timed without it (its launches only)."""
    from parsim.exec import groups

    waited = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(("cuda", device)))
    monkeypatch.setattr(torch, "npu", type("npu", (), {"synchronize": staticmethod(
        lambda device=None: waited.append(("npu", device)))}), raising=False)
    groups.synchronize(torch.device("cpu"))
    assert waited == []
    groups.synchronize(torch.device("cuda", 1))
    npu = type("device", (), {"type": "npu"})()     # torch.device("npu") needs torch_npu installed
    groups.synchronize(npu)
    assert waited == [("cuda", torch.device("cuda", 1)), ("npu", npu)]


def test_masters_step_in_chunks_no_larger_than_the_largest_parameter():
    """The mixed step's chunks (MasterWeightOptimizer._chunks): consecutive parameters with a gradient,
    each run's elements at most the largest parameter's, so the fp32 gradients cast for one chunk
    are the transient of one parameter that parsim.cost.memory prices; the step equals torch's
    SGD on fp32 masters over three steps, a parameter without a gradient left as it is."""
    g = torch.Generator().manual_seed(3)
    model = [torch.nn.Parameter(torch.randn(n, generator=g).to(torch.bfloat16)) for n in (3, 4, 15, 5, 6, 2)]
    masters = [p.detach().float().clone().requires_grad_() for p in model]
    opt, ref = MasterWeightOptimizer(model, lr=0.1, momentum=0.9), torch.optim.SGD(masters[:5], lr=0.1, momentum=0.9)
    for step in range(3):
        for p, m in zip(model[:5], masters):
            p.grad = torch.randn(p.shape, generator=g).to(torch.bfloat16)
            m.grad = p.grad.float()
        assert opt._chunks() == [[0, 1], [2], [3, 4]]
        opt.step(), ref.step()
    for p, m, kept in zip(model[:5], masters, opt.masters):
        assert torch.equal(kept, m.detach()) and torch.equal(p.detach(), m.detach().to(torch.bfloat16))
    assert torch.equal(opt.masters[5], model[5].detach().float()) and opt.buffers[5] is None
