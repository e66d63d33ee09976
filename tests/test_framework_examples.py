"""docs/frameworks.md's worked exports (results/frameworks/, made by docs/make_frameworks.sh) are what
parsim writes now: each export of a committed plan equals its committed file.  A change of an export
turns this red until `bash docs/make_frameworks.sh` is run again and the docs quote the new files
(they had gone stale over three refits before this test).  The two configs priced as given open
with their `$ ` command and are run again by tests/test_quoted_outputs.py."""

from __future__ import annotations

import pytest

from parsim.cli import main

OUT = "results/frameworks"
EXPORTS = [("gpt_plan.json", "megatron", "gpt_plan.megatron.args"),
           ("llama_debug_plan.json", "torchtitan", "llama_debug_plan.torchtitan.toml"),
           ("gpt_tiny_plan.json", "deepspeed", "gpt_tiny_plan.deepspeed.json"),
           ("rn50_dp2_plan.json", "mindspore", "rn50_dp2_plan.mindspore.py"),
           ("mlp_tp2_plan.json", "mindspore", "mlp_tp2_plan.mindspore.py")]


@pytest.mark.parametrize("plan, target, committed", EXPORTS)
def test_an_export_is_its_committed_file(tmp_path, capsys, plan, target, committed):
    out = tmp_path / committed
    assert main(["export", f"{OUT}/{plan}", "--to", target, "-o", str(out)]) == 0, capsys.readouterr().err
    assert out.read_text() == open(f"{OUT}/{committed}").read(), f"run `bash docs/make_frameworks.sh` ({committed})"

