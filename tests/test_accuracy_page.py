"""python -m parsim.report.accuracy: the docs' accuracy tables from a results folder alone,
tested on a tiny synthetic one (two models of one set, written as parsim validate writes them)."""

import json
import os


from parsim.report.accuracy import main
from parsim.report.validation import Row, summary


def _row(label, pred, steps, dp=1, pp=1):
    import statistics
    meas = statistics.median(statistics.median(s) for s in steps)
    return Row(label, dp, pp, 1, "1f1b", "", pred, meas, 100.0, 100.0, 0.5, 0.3, 0.2, 0.5,
               analytical_step_s=pred * 1.2, measured_steps_s=tuple(tuple(s) for s in steps),
               predicted_runs_s=(pred,) * len(steps))


def _write(root, model, rows, **extra):
    out = summary(rows)
    out.update(model=f"results/heldout/models/{model}.yaml", cluster="local-cpu", set="results/heldout/s.yaml",
               passes=2, steps=12, machine={"cpu_model": "Test CPU", "cores": 2, "torch": "2.13.0"},
               set_definition={"path": "results/heldout/s.yaml", "name": "heldout-x", "date": "2026-11-27",
                               "rule": "report once per model change"}, **extra)
    where = root / "2026-11-27-test-cpu" / "heldout-x" / model
    os.makedirs(where)
    (where / "validation.json").write_text(json.dumps(out))
    return out


def test_the_page_is_generated_from_the_files_alone(tmp_path):
    root = tmp_path / "results"
    a = _write(root, "vit", [_row("single", 1.1, [[1.0] * 5, [1.0] * 5]), _row("dp2", 0.5, [[0.6] * 5, [0.6] * 5], 2),
                             _row("planner", 0.5, [[0.62] * 5, [0.62] * 5], 2)])
    _write(root, "bert", [_row("single", 2.0, [[2.0, 2.1, 1.9]] * 2), _row("dp2", 1.0, [[1.0] * 3] * 2, 2),
                          _row("pp2", 1.5, [[1.5] * 3] * 2, 1, 2)])
    out = tmp_path / "docs" / "accuracy.md"
    assert main([str(root), "-o", str(out)]) == 0
    text = out.read_text()
    assert "## 2026-11-27-test-cpu/heldout-x" in text and "chosen 2026-11-27" in text
    assert "Test CPU, 2 cores" in text
    # the set line of vit: its MAPE with the interval, the pick pooled with dp2 (2 plans counted)
    assert a["pick_same_as"] == ["dp2"]
    (lo, hi), mape = a["mape_step_time_ci"], a["mape_step_time"]
    assert lo < mape < hi
    assert f"| vit | 2 | 2 | {mape:.1%} [{lo:.1%}, {hi:.1%}] | 18.0% |" in text
    assert "| single | 1 | 1 | 1 | 1f1b | 1.1000 | 1.0000 [1.0000, 1.0000] | +10.0% [+10.0%, +10.0%] | yes |" in text
    assert "| dp2 = planner | 2 | 1 | 1 | 1f1b | 0.5000 | 0.6100 [0.6000, 0.6200] | -18.0% [-19.4%, -16.7%] | yes |" \
        in text
    assert "`parsim validate results/heldout/models/bert.yaml --cluster local-cpu --set results/heldout/s.yaml " \
           "--passes 2 --steps 12`" in text
    assert "| single | 1 | 1 | 1 | 1f1b | 2.0000 | 2.0000 [1.9000, 2.1000] | +0.0% [-4.8%, +5.3%] | no |" in text


def test_an_empty_results_folder_is_one_line(tmp_path, capsys):
    assert main([str(tmp_path), "-o", str(tmp_path / "a.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no validation.json under it" in err
