"""Issue 41 item 5: a tensor that crosses a unit boundary as a view (Flatten, reshape, view,
transpose, permute, narrow; contiguous or not) profiles, and a pipeline cut at a non-contiguous
view runs and equals one process.  A unit that raises inside a profiler reaches the user as one
line naming it, exit code 2.  The networks are examples/view_units.py's."""


import pytest
import torch

from executor_checks import assert_equals_reference
from parsim.cli import main
from parsim.exec.stages import DenseBoundary, not_a_view
from parsim.model.spec import load_model
from parsim.profile.layers import profile_layers
from parsim.profile.rounds import RoundsPolicy

KINDS = ("flatten", "reshape", "view", "transpose", "permute", "narrow")


def view_model(tmp_path, kind: str, raises: str = "") -> str:
    path = tmp_path / f"view_{kind}{raises}.yaml"
    path.write_text(f"""schema_version: 1
name: view-{kind}
module: "examples.view_units:view_net"
args: {{kind: {kind}{f', raises: {raises}' if raises else ''}}}
input: {{shape: [3, 4, 4], dtype: float32}}
training: {{global_batch_size: 8, dtype: fp32, optimizer: sgd}}
""")
    return str(path)


def _profile(model: str, b: int = 2) -> dict:
    torch.set_num_threads(1)
    return profile_layers(load_model(model), [b], policy=RoundsPolicy(1, 1, 1), warmup=0)


@pytest.mark.parametrize("kind", KINDS)
def test_a_view_at_a_unit_boundary_profiles(tmp_path, kind):
    """Every unit has F, B, I and W (the split backward failed with "Can't detach views in-place"
    for every kind); the units after the view ran their backward, and the view unit, which only
    reinterprets its input, saves nothing for it."""
    table = _profile(view_model(tmp_path, kind))
    rows = {r["name"]: r for r in table["layers"]}
    assert list(rows) == ["0", "1", "2", "3"]
    for r in rows.values():
        assert all(v >= 0 for k in ("fwd_s", "bwd_s", "bwd_input_s", "bwd_weight_s") for v in r[k]), r
    for name in ("2", "3"):        # after the view: a Linear (the head's too) with an input and weights
        assert rows[name]["bwd_s"][0] > 0 and rows[name]["bwd_input_s"][0] > 0 and rows[name]["bwd_weight_s"][0] > 0
    assert rows["1"]["saved_bytes"] == [0] and rows["2"]["saved_bytes"][0] > 0   # the Linear keeps its input


def test_units_after_a_parameter_free_first_unit_profile():
    """examples/mlp_module.yaml starts with Flatten over the input batch: its output needs no
    gradient, so it has no backward (0), where the profiler called backward on it and failed."""
    table = _profile("examples/mlp_module.yaml", 1)
    first = table["layers"][0]
    assert first["name"] == "0" and first["bwd_s"] == first["bwd_input_s"] == first["bwd_weight_s"] == [0.0]
    assert all(r["bwd_s"][0] > 0 for r in table["layers"] if r["name"] in ("1", "9"))


def test_the_resnet18_shaped_held_out_network_profiles():
    """The network issue 41 found crashing the profiler: a flat nn.Sequential ending in
    AdaptiveAvgPool2d, Flatten and Linear (results/heldout/models/resnet18_seq_w24.yaml)."""
    table = _profile("results/heldout/models/resnet18_seq_w24.yaml", 1)
    rows = table["layers"]
    assert [r["name"] for r in rows][-3:] == ["11", "12", "13"]          # pool, Flatten, Linear
    assert rows[-1]["bwd_input_s"][0] > 0 and rows[-1]["bwd_weight_s"][0] > 0
    # the first unit (a convolution, BatchNorm and ReLU over the input batch) as torch's first stage
    # runs it under a zero-bubble schedule: no I, its whole backward as its W (about nothing before)
    first = rows[0]
    assert first["bwd_input_s"] == [0.0] and first["bwd_weight_s"][0] > 0.3 * first["bwd_s"][0], first


def test_a_boundary_sends_a_dense_tensor_without_copying_one_that_is():
    """What crosses a pipeline boundary is dense and never an autograd view (torch's split
    backward detaches stage outputs in place); a dense tensor crosses as an alias, no copy."""
    x = torch.randn(2, 4, 8, requires_grad=True)
    h = x * 2
    for view, copies in ((h.flatten(1), False), (h.transpose(1, 2), True), (h.narrow(2, 1, 6), True)):
        out = DenseBoundary()(view)
        assert out.is_contiguous() and not out._is_view()
        assert (out.data_ptr() == view.data_ptr()) is not copies
        torch.testing.assert_close(out, view)
        out.detach_()                                   # what stage_backward_input does to a stage output
    alias = not_a_view(h.transpose(1, 2))
    assert not alias._is_view() and alias.data_ptr() == h.data_ptr() and alias.stride() == (32, 1, 8)
    (alias * torch.arange(32.0).view(8, 4)).sum().backward()
    torch.testing.assert_close(x.grad, 2 * torch.arange(32.0).view(8, 4).t().expand(2, 4, 8))
    assert not_a_view(h) is h


@pytest.mark.parametrize("kind,flags", [
    ("transpose", ["--schedule", "1f1b", "--split", "0,2,4"]),       # stage 0 ends in the transposed view
    # four stages, two a rank: stage 1 (the view unit alone) is a middle stage, whose split backward
    # (stage_backward_input) detaches its output in place; ZB-H1 with 2 chunks failed on every model
    ("permute", ["--schedule", "zbh1", "--chunks", "2", "--split", "0,1,2,3,4"]),
])
def test_a_pipeline_cut_at_a_non_contiguous_view_equals_one_process(tmp_path, capfd, kind, flags):
    plan = str(tmp_path / "plan.json")
    assert main(["simulate", view_model(tmp_path, kind), "--cluster", "local-cpu", "--dp", "1", "--pp", "2",
                 "--microbatches", "2", *flags, "-o", plan, "--json"]) == 0
    out = tmp_path / "run"
    assert main(["run", plan, "--out", str(out), "--synthetic-size", "64", "--steps", "3", "--warmup", "1"]) == 0
    measured, _ = assert_equals_reference(plan, out, 3, 64)
    assert measured["config"]["bounds"] == [int(b) for b in flags[-1].split(",")]


@pytest.mark.parametrize("when", ["forward", "backward"])
def test_a_unit_that_raises_in_the_profiler_is_one_line_naming_it(tmp_path, capfd, when):
    model = view_model(tmp_path, "transpose", when)
    capfd.readouterr()
    assert main(["profile", model, "--nproc", "1", "--microbatch-sizes", "2", "--repeats", "1", "--min-rounds", "1",
                 "--max-rounds", "1", "-o", str(tmp_path / "p.json")]) == 2
    err = capfd.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("parsim: error")]
    assert len(lines) == 1, err
    assert f"unit '3' (Raises) failed in its {when}" in lines[0] and "refuses to run" in lines[0]
    assert "fix the unit" in lines[0] and model in lines[0]
