"""parsim.exec.launch's own bookkeeping: each rank's stderr folder is removed when every rank
succeeds, and kept and named, with faulthandler's Python stack, when a rank crashes."""

import glob
import os
import shutil
import tempfile

from parsim.exec.launch import launch


def _runs() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "parsim-run-*")))


def _module(tmp_path, monkeypatch, name: str, body: str) -> str:
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return name


def test_a_run_that_succeeds_leaves_no_folder(tmp_path, monkeypatch):
    before = _runs()
    module = _module(tmp_path, monkeypatch, "parsim_ok_worker", "import os\nassert os.environ['WORLD_SIZE'] == '2'\n")
    assert launch([], 2, timeout_s=60, module=module, quiet=True) == 0
    assert _runs() - before == set()


def test_a_crashed_rank_keeps_its_stack_and_names_the_file(tmp_path, monkeypatch, capfd):
    before = _runs()
    module = _module(tmp_path, monkeypatch, "parsim_crash_worker",
                     "import faulthandler, os\nif os.environ['RANK'] == '1':\n    faulthandler._sigsegv()\n")
    assert launch([], 2, timeout_s=60, module=module, quiet=True) != 0
    err = capfd.readouterr().err
    kept = _runs() - before
    assert len(kept) == 1
    path = os.path.join(kept.pop(), "rank1.err")
    assert "rank 1 was killed by signal 11" in err and path in err
    assert "Fatal Python error: Segmentation fault" in open(path).read()
    shutil.rmtree(os.path.dirname(path))


def test_the_workers_take_the_graphs_the_launcher_extracted(tmp_path, monkeypatch):
    """The launcher hands its workers the graphs it extracted (parsim.model.extracted.EXTRACTED_ENV;
    `parsim run` has loaded the plan's model to check the plan): a worker whose own extraction
    would fail still loads the model, the same graph."""
    from parsim.model.spec import load_model

    model = os.path.abspath("examples/gpt_tiny_local.yaml")
    graph = load_model(model).graph
    body = ("import parsim.model.extract as x\n"
            "def refuse(*args, **kwargs):\n    raise SystemExit(3)\n"
            "x.extract_graph = refuse\n"
            "from parsim.model.spec import load_model\n"
            f"g = load_model({model!r}).graph\n"
            f"assert (g.names, g.param_count) == ({graph.names!r}, {graph.param_count}), g.names\n")
    assert launch([], 2, timeout_s=120, module=_module(tmp_path, monkeypatch, "parsim_graph_worker", body),
                  quiet=True) == 0


def test_a_worker_extracts_its_own_graph_where_the_launchers_file_is_unreadable(tmp_path, monkeypatch):
    from parsim.model import extracted, spec

    bad = tmp_path / "extracted.pkl"
    bad.write_bytes(b"not a pickle")
    monkeypatch.setattr(extracted, "_EXTRACTED", {})
    monkeypatch.setenv(extracted.EXTRACTED_ENV, str(bad))
    assert spec.load_model("examples/gpt_tiny_local.yaml").graph.param_count > 0
    assert extracted.EXTRACTED_ENV not in os.environ          # read once
