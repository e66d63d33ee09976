"""docs/frameworks.md's worked examples (results/frameworks/, made by docs/make_frameworks.sh) are what
parsim writes and prints now: each export of a committed plan equals its committed file, and the
two configs priced as given print the committed step line.  A change of an export or of the cost
model that moves them turns this red until `bash docs/make_frameworks.sh` is run again and the
docs quote the new figures (they had gone stale over three refits before this test)."""

from __future__ import annotations

import pytest

from parsim.cli import main

OUT = "results/frameworks"
EXPORTS = [("gpt_plan.json", "megatron", "gpt_plan.megatron.args"),
           ("llama_debug_plan.json", "torchtitan", "llama_debug_plan.torchtitan.toml"),
           ("gpt_tiny_plan.json", "deepspeed", "gpt_tiny_plan.deepspeed.json"),
           ("rn50_dp2_plan.json", "mindspore", "rn50_dp2_plan.mindspore.py"),
           ("mlp_tp2_plan.json", "mindspore", "mlp_tp2_plan.mindspore.py")]
PRICED = [(["simulate", "--from", "megatron", f"{OUT}/gpt_plan.megatron.args", "--cluster", "dgx-h100:1x8"],
           "gpt_plan.megatron.simulate.txt"),
          (["simulate", "--from", "torchtitan", "examples/torchtitan/llama3_8b.toml", "--set",
            "training.batch_size=2", "--cluster", "dgx-h100:1x8"], "torchtitan_llama3_8b_h100x8.simulate.txt")]


@pytest.mark.parametrize("plan, target, committed", EXPORTS)
def test_an_export_is_its_committed_file(tmp_path, capsys, plan, target, committed):
    out = tmp_path / committed
    assert main(["export", f"{OUT}/{plan}", "--to", target, "-o", str(out)]) == 0, capsys.readouterr().err
    assert out.read_text() == open(f"{OUT}/{committed}").read(), f"run `bash docs/make_frameworks.sh` ({committed})"


@pytest.mark.parametrize("argv, committed", PRICED)
def test_a_config_priced_as_given_prints_its_committed_step(capsys, argv, committed):
    assert main(argv) in (0, None)
    printed = [x for x in capsys.readouterr().out.splitlines() if x.startswith("step ")]
    step = [x for x in open(f"{OUT}/{committed}").read().splitlines() if x.startswith("step ")]
    assert printed == step and len(step) == 1, f"run `bash docs/make_frameworks.sh` ({committed})"
