"""A published row can state HSDP's shard group (``parallel: dp_shard``, as `--dp-shard`): FSDP rows that
shard within a node and replicate across nodes (IBM's fms-fsdp 7B rows, the forty-fifth sitting's
survey) are priced as they ran, not as ZeRO over every rank."""

from __future__ import annotations

import json

import pytest

from parsim.cli import main
from parsim.errors import InfeasibleError
from parsim.profile.published import load_figures, price

ROW = """schema_version: 1
sources: {{hsdp-test: a row written by this test}}
figures:
  - id: hsdp-gpt
    source: hsdp-test
    row: "none: a test row"
    model: {{model: gpt, args: {{layers: 4, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32000}},
            training: {{global_batch_size: 32, dtype: bf16, optimizer: adam}}}}
    cluster: {{profile: dgx-h100, nodes: 2}}
    parallel: {{dp: 16, tp: 1, pp: 1, zero: 3, microbatches: 1{extra}}}
    measured: {{step_time_s: 1.0}}
    tolerance: 0.15
"""


def test_a_rows_shard_group_is_priced_as_the_cli_prices_it(tmp_path, capsys):
    steps = {}
    for extra in ("", ", dp_shard: 8"):
        path = tmp_path / f"x{len(extra)}_figures.yaml"
        path.write_text(ROW.format(extra=extra))
        fig = load_figures(path).figures[0]
        priced = price(fig)
        steps[extra] = priced.step_time_s
        assert ("dp_shard=8" in priced.config) is bool(extra), priced.config
    model = tmp_path / "gpt.yaml"
    model.write_text("schema_version: 1\nname: gpt\nmodel: gpt\nargs: {layers: 4, hidden: 1024, heads: 16, "
                     "seq_len: 1024, vocab: 32000}\ntraining: {global_batch_size: 32, dtype: bf16, optimizer: adam}\n")
    assert main(["simulate", str(model), "--cluster", "dgx-h100:2x8", "--dp", "16", "--zero", "3", "--dp-shard", "8",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] == pytest.approx(steps[", dp_shard: 8"], rel=1e-12)
    assert steps[", dp_shard: 8"] != steps[""]             # the group is priced, not dropped


def test_a_shard_group_that_does_not_divide_dp_is_refused_naming_the_row(tmp_path):
    path = tmp_path / "bad_figures.yaml"
    path.write_text(ROW.format(extra=", dp_shard: 3"))
    with pytest.raises(InfeasibleError) as e:
        price(load_figures(path).figures[0])
    assert "(hsdp-gpt): parallel:" in str(e.value) and "does not divide dp = 16" in str(e.value), e.value
