"""The graphs this process extracted, kept by value: a built-in or Hugging Face model's
LayerGraph (frozen values) by (ModelSource, InputSpec, name, dtype), the newest ``EXTRACTED_KEPT``
of them (parsim.model.spec asks ``kept`` before it extracts, and ``keep``s what it extracted).

Extraction runs the model under torch's fake tensors (ResNet-50: 1.2 s on a 2-core EPYC), and one
process loads the same model again and again: a notebook's cells, the Python API, the test suite.
Benchmark line: tests/test_exec.py::test_matches_single_process_reference[dp2] loads
examples/resnet50_cifar10_local.yaml 5 times in its pytest process (simulate, run's check, the
reference, reading the run's parameters, the test's own count): 9.2-9.7 s of loading without
this, 2.9-3.7 s with it (results/2026-11-30c-amd-epyc/extraction-memo.txt).

A launcher hands its workers the graphs it extracted (parsim.exec.launch: `parsim run` has loaded
the plan's model to check the plan before it starts a rank): a pickle of them at the path
``EXTRACTED_ENV`` names, read by each worker once, before it would extract.  Benchmark line: a
two-rank ResNet-50 run of 4 steps took 10.6-11.9 s from launch to exit with every rank extracting
the graph again, 8.7-9.5 s with this and the two other start-up changes of the same commit
(results/2026-12-01d-amd-epyc/startup-ab.txt).
"""

from __future__ import annotations

import os

from parsim.model.graph import LayerGraph

EXTRACTED_KEPT = 16
EXTRACTED_ENV = "PARSIM_EXTRACTED"
_EXTRACTED: dict[tuple, LayerGraph] = {}


def kept(key: tuple) -> LayerGraph | None:
    """The graph extracted for ``key`` in this process (or by its launcher), else None."""
    if EXTRACTED_ENV in os.environ:
        _inherit()
    return _EXTRACTED.get(key)


def keep(key: tuple, graph: LayerGraph) -> None:
    """Keep ``graph`` for ``key``, the oldest pushed out past EXTRACTED_KEPT."""
    _EXTRACTED[key] = graph
    while len(_EXTRACTED) > EXTRACTED_KEPT:
        del _EXTRACTED[next(iter(_EXTRACTED))]


def save_extracted(path: str) -> bool:
    """Write this process's extracted graphs to ``path`` for the workers it starts (EXTRACTED_ENV);
    False where it has none, or they do not pickle (the workers then extract their own)."""
    import pickle

    from parsim.fileio import atomic_path

    if not _EXTRACTED:
        return False
    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            pickle.dump(dict(_EXTRACTED), f, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError, OSError):
        return False
    return True


def _inherit() -> None:
    """The graphs the launcher wrote (save_extracted), once per process; none where it wrote none
    or the file cannot be read (the worker extracts as it would have)."""
    import pickle

    path = os.environ.pop(EXTRACTED_ENV, None)
    if not path:
        return
    try:
        with open(path, "rb") as f:
            graphs = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return
    for key, graph in graphs.items():
        _EXTRACTED.setdefault(key, graph)
