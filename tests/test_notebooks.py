"""The notebooks, as users run them: each executes in a Jupyter kernel (nbclient with ipykernel's
python3 kernel, which runs this interpreter) started in the notebook's own folder, as `jupyter
execute` and JupyterLab start it.  Each ships with its outputs, built by
`python -m parsim.report.notebooks`, and the outputs must be current: executed again, a notebook
prints what it ships (parsim.report.notebooks.comparable_outputs: text exactly where the notebook
is deterministic, the kinds of output per cell where it measures).  Each is paired with a
py:percent script (jupytext.toml) holding the same cells."""

import os
import pathlib
import shutil
import subprocess
import sys

import jupytext
import nbformat
import pytest
from jupytext.config import load_jupytext_config
from jupytext.paired_paths import paired_paths
from nbclient.exceptions import CellExecutionError

from parsim.report import notebooks as builder

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDS = [p.name for p in NOTEBOOKS]
REBUILD = "rebuild: python -m parsim.report.notebooks"


def outputs(nb, kind: str) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == kind]


def text_of(nb) -> str:
    return "".join(o.get("text", "") for o in outputs(nb, "stream")) + "".join(
        o.data.get("text/plain", "") for o in outputs(nb, "execute_result"))


def test_the_kernel_is_this_interpreter_in_the_notebooks_folder_and_a_failing_cell_is_shown():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import os, sys, parsim\nx = 41\nprint(sys.executable)\nprint(parsim.__file__)\n"
                                  "print(os.getcwd())"),
        nbformat.v4.new_code_cell("%time y = x + 1"),                 # a magic: a kernel, not exec()
        nbformat.v4.new_code_cell("raise ValueError(f'the third cell fails at y={y}')"),
        nbformat.v4.new_code_cell("print('never reached')")])
    with pytest.raises(CellExecutionError) as failed:
        builder.execute(nb, "scratch", timeout_s=120)
    message = str(failed.value)
    assert "raise ValueError(f'the third cell fails at y={y}')" in message      # the cell's source
    assert "ValueError: the third cell fails at y=42" in message                 # and its error
    printed = nb.cells[0].outputs[0].text.splitlines()
    assert printed == [sys.executable, str(ROOT / "parsim" / "__init__.py"), str(ROOT / "notebooks")]
    assert "Wall time" in "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert not nb.cells[3].outputs


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_ships_current_outputs(path, tmp_path, monkeypatch):
    """The committed notebook holds the outputs of its committed cells (the digest it recorded),
    and executing it again, as the builder does, gives the same outputs."""
    shipped = nbformat.read(path, as_version=4)
    code = [c for c in shipped.cells if c.cell_type == "code"]
    assert code and all(c.outputs for c in code), f"{path.name} ships without outputs; {REBUILD}"
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), REBUILD
    built = shipped.metadata.get("parsim", {})
    assert built.get("sources_sha256") == builder.sources_sha256(shipped), f"cells edited since the build; {REBUILD}"
    assert built.get("environment") == builder.CHEAP_PATHS.get(path.stem, {})
    again = nbformat.read(path, as_version=4)
    # the validation notebook's runs and profiles go to a scratch folder
    builder.execute(again, path.stem, env={"PARSIM_NB_OUT": str(tmp_path / "nb")})
    exact = path.stem in builder.DETERMINISTIC
    assert builder.comparable_outputs(again, exact) == builder.comparable_outputs(shipped, exact), \
        f"{path.name}'s outputs are not what it prints now; {REBUILD}"
    assert any("image/png" in o.data for o in outputs(again, "display_data"))        # the plots, as shown
    if path.stem.startswith("01_"):
        said = text_of(again)
        # the dp x pp table names each plan's tp and the devices it uses (the chart's labels)
        assert "planner's overall choice: " in said and " tp  devices " in said
    else:
        assert "mape_step_time" in text_of(again) and (tmp_path / "nb" / "scatter.png").is_file()


def test_jupyter_execute_runs_a_notebook_from_another_folder(tmp_path):
    """The user's command, `jupyter execute`, on a copy of notebook 01 outside the checkout: the
    kernel starts in the copy's folder, and the notebook finds the examples through parsim's
    checkout."""
    jupyter = pathlib.Path(sys.executable).with_name("jupyter")
    assert jupyter.is_file(), "no jupyter command beside this interpreter: pip install -e '.[test]' (nbclient's)"
    copy = tmp_path / "01.ipynb"
    shutil.copy(ROOT / "notebooks" / "01_plan_resnet50.ipynb", copy)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([str(jupyter), "execute", str(copy), "--output", "executed"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "planner's overall choice: " in text_of(nbformat.read(tmp_path / "executed.ipynb", as_version=4))


def cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source) for c in nb.cells]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_and_its_py_percent_twin_hold_the_same_cells(path):
    config = load_jupytext_config(str(path))
    assert config is not None, "jupytext.toml pairs the notebooks"
    paired = [p for p, _ in paired_paths(str(path), "ipynb", config.default_formats(str(path))) if p != str(path)]
    assert paired == [str(path.with_suffix(".py"))]
    twin = pathlib.Path(paired[0])
    assert twin.is_file(), f"run: jupytext --sync {path.relative_to(ROOT)}"
    ours, theirs = cells(jupytext.read(path)), cells(jupytext.read(twin))
    differ = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    assert ours == theirs, (f"{path.name} and {twin.name} differ from cell {differ} on; "
                            f"run: jupytext --sync {path.relative_to(ROOT)}")


def test_every_py_in_notebooks_is_a_notebook_twin():
    assert {p.stem for p in (ROOT / "notebooks").glob("*.py")} == {p.stem for p in NOTEBOOKS}
