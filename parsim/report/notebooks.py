"""The notebooks with their outputs: ``python -m parsim.report.notebooks [NAME ...]`` executes each
notebook under notebooks/ (or those named) in a fresh python3 kernel started in notebooks/, as
``jupyter execute`` and JupyterLab start it, and writes it back with its outputs, so that a reader
sees them without running anything.

- Deterministic where the notebook is: no execution timings are recorded, and a notebook listed in
  ``CHEAP_PATHS`` runs with those environment variables (02's validation on its ``quick`` set of
  3 plans, 4 steps each, profiles of 2 rounds of 1 repeat at micro-batch sizes 4, 8 and 16: its
  shipped numbers are measurements of this shared CPU, not of the default set; run it yourself for
  those).
- The notebook's metadata (``parsim``) records how it was built: the environment, and a digest of
  its code cells' sources (``sources_sha256``).
- tests/test_notebooks.py checks the shipped outputs are current: it executes each notebook the
  same way and compares ``comparable_outputs`` (text exactly for a deterministic notebook, the
  kinds of output per cell for one that measures), and the recorded digest against the sources.

Needs the ``notebooks`` extra (nbclient, ipykernel, nbformat, jupytext): ``pip install -e '.[notebooks]'``.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
FOLDER = ROOT / "notebooks"
# Environment for a notebook whose default path measures for long (its cheap path: stated above).
CHEAP_PATHS = {"02_validate_predictions": {"PARSIM_NB_SET": "quick", "PARSIM_NB_STEPS": "4",
                                           "PARSIM_NB_REPEATS": "1", "PARSIM_NB_ROUNDS": "2:2",
                                           "PARSIM_NB_SIZES": "4,8,16"}}
# Notebooks whose text outputs are the same on every run (the simulator and the planner only).
DETERMINISTIC = ("01_plan_resnet50",)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def notebook_paths(names: list[str] | None = None) -> list[pathlib.Path]:
    paths = sorted(FOLDER.glob("*.ipynb"))
    if names:
        wanted = {pathlib.Path(n).stem for n in names}
        missing = wanted - {p.stem for p in paths}
        if missing:
            raise SystemExit(f"parsim.report.notebooks: no notebook {', '.join(sorted(missing))} in {FOLDER}")
        paths = [p for p in paths if p.stem in wanted]
    return paths


def sources_sha256(nb) -> str:
    """A digest of the code cells' sources, in order."""
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    return hashlib.sha256("\n\x00".join(code).encode()).hexdigest()


def execute(nb, stem: str, timeout_s: int = 1800, env: dict | None = None):
    """Run every cell of ``nb`` (in place) in a fresh python3 kernel started in notebooks/, with
    the notebook's cheap path (CHEAP_PATHS) over ``env`` (default: this process's environment);
    a failing cell raises nbclient's CellExecutionError, its message without terminal colours."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    saved = dict(os.environ)
    os.environ.update(env or {})
    os.environ.update(CHEAP_PATHS.get(stem, {}))
    try:
        client = NotebookClient(nb, kernel_name="python3", timeout=timeout_s, record_timing=False,
                                resources={"metadata": {"path": str(FOLDER)}})
        try:
            client.execute()
        except CellExecutionError as e:
            raise CellExecutionError(ANSI.sub("", str(e)), e.ename, e.evalue) from None
    finally:
        os.environ.clear()
        os.environ.update(saved)
    nb.metadata["parsim"] = {"built_by": "python -m parsim.report.notebooks",
                             "environment": CHEAP_PATHS.get(stem, {}), "sources_sha256": sources_sha256(nb)}
    return nb


def comparable_outputs(nb, exact: bool) -> list[list[tuple]]:
    """Per code cell, its outputs as (kind, text): text exactly where ``exact`` (streams and
    text/plain, text/html; an image by its presence, never its bytes), else the kinds alone."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        row = []
        for o in cell.outputs:
            if o.output_type == "stream":
                row.append(("stream", o.name, o.text if exact else None))
            elif o.output_type in ("execute_result", "display_data"):
                data = o.get("data", {})
                row.append((o.output_type, tuple(sorted(data)),
                            tuple(data.get(k) for k in ("text/plain", "text/html")) if exact else None))
            else:
                row.append((o.output_type, None, None))
        cells.append(row)
    return cells


def build(path: pathlib.Path) -> None:
    import nbformat

    from parsim.fileio import write_text

    nb = nbformat.read(path, as_version=4)
    execute(nb, path.stem)
    write_text(str(path), nbformat.writes(nb) + "\n")


def main(argv: list[str] | None = None) -> int:
    names = sys.argv[1:] if argv is None else argv
    for path in notebook_paths(names):
        cheap = CHEAP_PATHS.get(path.stem)
        print(f"executing {path.relative_to(ROOT)}"
              + (f" on its cheap path ({' '.join(f'{k}={v}' for k, v in cheap.items())})" if cheap else ""),
              flush=True)
        build(path)
        print(f"wrote {path.relative_to(ROOT)} with its outputs", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
