"""How a drawn validation set is pinned: the sha256 of its rows as drawn and of the model files they
read (a public figures file), or of its files (a frozen CPU set), so that a set held out (or once
held out) cannot change unseen.  One rule for every set a test pins (tests/test_new_figures.py,
tests/test_published.py, tests/test_heldout_set.py)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
import yaml

# A row's fields recorded after it was drawn: how it priced since (note) and the miss it may carry
# (miss_within); every other field is the row as drawn.
LATER_FIELDS = ("note", "miss_within")


def file_sha256(path: str) -> str:
    """sha256 of a file's bytes (a frozen set's file, a model file its rows read)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def rows_sha256(path: str) -> str:
    """sha256 of the figures file's rows as drawn (every field but LATER_FIELDS)."""
    rows = yaml.safe_load(open(path).read())["figures"]
    drawn = [{k: v for k, v in r.items() if k not in LATER_FIELDS} for r in rows]
    return hashlib.sha256(json.dumps(drawn, sort_keys=True).encode()).hexdigest()


def assert_drawn_as_hashed(path, rows_digest, models_sha256=None, figures=None):
    """A drawn set's rows and its model files hash as recorded when it was drawn; with its loaded
    ``figures``, the files hashed are every model file its rows read (a row whose model is an inline
    config, or the zoo's, reads none: its model is in the rows the first hash covers)."""
    assert rows_sha256(path) == rows_digest, path
    for model, digest in (models_sha256 or {}).items():
        assert file_sha256(model) == digest, model
    if figures is not None:
        read = {os.path.normpath(os.path.join(os.path.dirname(path), dict(f.model)["hf"])) for f in figures.figures
                if isinstance(dict(f.model).get("hf"), str)}
        assert read == set(models_sha256 or {}), path


def assert_held_out_as_pinned(figures, source, errors):
    """Every row of ``figures`` comes from ``source``, a held-out source of results/published/fit.yaml;
    its scored rows are those of ``errors``, each fitted on by no fold and priced at its pinned error
    (within 0.02)."""
    from parsim.profile.loso import load_fit_spec
    from parsim.profile.published import price

    spec = load_fit_spec("results/published/fit.yaml")
    assert {f.source for f in figures} == {source} and source in spec.held_out
    scored = [f for f in figures if not f.excluded]
    assert {f.id for f in scored} == set(errors)
    for f in scored:
        assert not spec.fitted_on(f), f.id
        assert price(f).error == pytest.approx(errors[f.id], abs=0.02), f.id


def assert_held_out_set(path, rows_digest, models_sha256, rows, profiles, source, errors):
    """A held-out public set as drawn and first priced, in one call: its rows and model files hash as recorded
    (assert_drawn_as_hashed), it has ``rows`` rows on exactly ``profiles``, and its scored rows are priced at
    their pinned errors (assert_held_out_as_pinned)."""
    from parsim.profile.published import load_figures

    drawn = load_figures(path)
    assert_drawn_as_hashed(path, rows_digest, models_sha256, drawn)
    assert len(drawn.figures) == rows and {f.profile for f in drawn.figures} == set(profiles)
    assert_held_out_as_pinned(drawn.figures, source, errors)
