"""benchmarks/executor_vs_reference.py's choices, without its runs (those are timings, taken on a
quiet machine): which plans it compares and where its results go."""

import importlib.util
import sys

from parsim.cli import main


def _script(name: str):
    """benchmarks/<name>.py as a module (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, f"benchmarks/{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


def _bench():
    return _script("executor_vs_reference")


def test_results_go_to_a_folder_named_by_the_cpu():
    bench = _bench()
    assert bench.cpu_slug("AMD EPYC 9B14") == "amd-epyc" == bench.cpu_slug("AMD EPYC")
    assert bench.cpu_slug("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz") == "intel-xeon"


def test_a_validate_folder_gives_the_two_rank_plans_the_reference_runs(tmp_path):
    """dp=2 and pp=2 under GPipe or 1F1B; not one process, not ZB-H1 (plain torch's script
    runs GPipe and 1F1B only)."""
    model = "examples/resnet50_cifar10_local.yaml"
    for label, flags in (("single", ["--dp", "1", "--pp", "1"]), ("dp2", ["--dp", "2", "--pp", "1"]),
                         ("pp2-gpipe", ["--dp", "1", "--pp", "2", "--microbatches", "2", "--schedule", "gpipe"]),
                         ("pp2-zbh1", ["--dp", "1", "--pp", "2", "--microbatches", "2", "--schedule", "zbh1"])):
        assert main(["simulate", model, "--cluster", "local-cpu", *flags, "-o", str(tmp_path / f"{label}.plan.json"),
                     "--json"]) == 0
    chosen = _bench().plans_from(str(tmp_path), str(tmp_path))
    assert [label for label, _ in chosen] == ["dp2", "pp2-gpipe"]


def test_the_reference_sums_a_tied_weight_over_the_stages_that_hold_it():
    """A Gemma-style decoder (tied embedding and head) cut in two: each stage holds the shared
    weight, so each sums its gradient with the other's (as Megatron-LM and the executor do); a
    model with an untied head has nothing to sum."""
    from torch import nn

    from parsim.model.extract import cut_units
    from parsim.model.spec import build_module, load_model

    ref = _script("reference_torch")
    for path, tied in (("results/heldout/models/gemma_tiny.yaml", True),
                       ("results/heldout/models/phi3_tiny.yaml", False)):
        spec = load_model(path)
        units = cut_units(build_module(spec.source, spec.path))
        cut = len(units) // 2
        shared = [ref.tied_params(nn.Sequential(*[u for _, u in units[a:b]]), units, a, b)
                  for a, b in ((0, cut), (cut, len(units)))]
        if tied:
            assert len(shared[0]) == len(shared[1]) == 1 and shared[0][0] is shared[1][0]
            assert shared[0][0] is units[0][1].embed_tokens.weight is units[-1][1].lm_head.weight
        else:
            assert shared == [[], []]
