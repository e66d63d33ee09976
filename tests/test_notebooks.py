"""The notebooks, as users run them: each executes in a Jupyter kernel (nbclient with ipykernel's
python3 kernel, which runs this interpreter), from the repository root, on a copy held in memory.
The committed files keep no outputs, and each is paired with a py:percent script (jupytext.toml)
holding the same cells."""

import pathlib
import re
import sys

import jupytext
import nbformat
import pytest
from jupytext.config import load_jupytext_config
from jupytext.paired_paths import paired_paths
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDS = [p.name for p in NOTEBOOKS]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def execute(nb, timeout_s: int = 600):
    """Run every cell in a fresh python3 kernel whose working directory is the repository root;
    a cell that raises stops the run with CellExecutionError, whose message shows the cell's
    source and the traceback.  The kernel inherits this process's environment."""
    client = NotebookClient(nb, kernel_name="python3", timeout=timeout_s, resources={"metadata": {"path": str(ROOT)}})
    try:
        client.execute()
    except CellExecutionError as e:               # the same message, without the terminal colours
        raise CellExecutionError(ANSI.sub("", str(e)), e.ename, e.evalue) from None
    return nb


def outputs(nb, kind: str) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == kind]


def text_of(nb) -> str:
    return "".join(o.get("text", "") for o in outputs(nb, "stream")) + "".join(
        o.data.get("text/plain", "") for o in outputs(nb, "execute_result"))


def test_the_kernel_is_this_interpreter_and_a_failing_cell_is_shown():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import sys, parsim\nx = 41\nprint(sys.executable)\nprint(parsim.__file__)"),
        nbformat.v4.new_code_cell("%time y = x + 1"),                 # a magic: a kernel, not exec()
        nbformat.v4.new_code_cell("raise ValueError(f'the third cell fails at y={y}')"),
        nbformat.v4.new_code_cell("print('never reached')")])
    with pytest.raises(CellExecutionError) as failed:
        execute(nb, timeout_s=120)
    message = str(failed.value)
    assert "raise ValueError(f'the third cell fails at y={y}')" in message      # the cell's source
    assert "ValueError: the third cell fails at y=42" in message                 # and its error
    printed = nb.cells[0].outputs[0].text.splitlines()
    assert printed == [sys.executable, str(ROOT / "parsim" / "__init__.py")]   # this interpreter, this checkout
    assert "Wall time" in "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert not nb.cells[3].outputs


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs_in_a_kernel_and_is_stored_without_outputs(path, tmp_path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    assert all(not c.outputs and c.execution_count is None for c in code), "clear outputs before committing"
    # the validation notebook on its reduced set: 3 plans, 4 steps each, profiles of 1 repeat
    monkeypatch.setenv("PARSIM_NB_SET", "quick")
    monkeypatch.setenv("PARSIM_NB_STEPS", "4")
    monkeypatch.setenv("PARSIM_NB_REPEATS", "1")
    monkeypatch.setenv("PARSIM_NB_OUT", str(tmp_path / "nb"))
    execute(nb)                                  # the copy in memory; the file is never written
    assert [c.execution_count for c in nb.cells if c.cell_type == "code"] == list(range(1, len(code) + 1))
    assert any("image/png" in o.data for o in outputs(nb, "display_data"))        # the plots, as shown
    if path.name.startswith("01_"):
        assert "planner's overall choice: " in text_of(nb)
    else:
        assert "mape_step_time" in text_of(nb) and (tmp_path / "nb" / "scatter.png").is_file()


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
