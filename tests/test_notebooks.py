"""Every notebook's code cells run, in order, in one namespace (outputs are kept cleared in git)."""

import json
import pathlib

import matplotlib
import pytest

matplotlib.use("Agg")

NOTEBOOKS = sorted(pathlib.Path("notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_and_is_stored_without_outputs(path, tmp_path, monkeypatch):
    # the validation notebook on its reduced set: 3 plans, 4 steps each, profiles of 1 repeat
    monkeypatch.setenv("PARSIM_NB_SET", "quick")
    monkeypatch.setenv("PARSIM_NB_STEPS", "4")
    monkeypatch.setenv("PARSIM_NB_REPEATS", "1")
    monkeypatch.setenv("PARSIM_NB_OUT", str(tmp_path / "nb"))
    nb = json.loads(path.read_text())
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert cells
    assert all(not c["outputs"] and c["execution_count"] is None for c in cells), "clear outputs before committing"
    namespace = {"__name__": "__main__"}
    for i, cell in enumerate(cells):
        exec(compile("".join(cell["source"]), f"{path.name}[cell {i}]", "exec"), namespace)
    import matplotlib.pyplot as plt
    plt.close("all")
