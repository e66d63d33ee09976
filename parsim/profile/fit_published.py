"""``parsim calibrate --published``: fit named fields of a hardware profile to published
end-to-end figures, and write them into the profile file with their citation.

    figures (parsim.profile.published) --> least squares on log(predicted / measured) over the
    rows named, moving only the fields named --> the profile's YAML text with those fields set
    (every other line and comment kept, parsim.profile.profile_edit) and a ``calibrated:``
    section naming the command, the figures file, each row used (source, row, value) and the fit

Only the fields in ``FITTABLE`` may be fitted: the numbers per-kernel measurements do not ground
(a convolution's efficiency against a GEMM's, memory-bound kernels' share of the bandwidth, host
dispatch, the collectives' efficiency).  Every other number of the profile stays as it is: the
candidate profiles are the file's own text with the fitted fields changed, loaded as
``parsim simulate`` loads it, so what is fitted is what every command then sees.
"""

from __future__ import annotations

import datetime
import math
import os
import tempfile

import numpy as np
from scipy.optimize import least_squares

from parsim.errors import InputError
from parsim.hardware.cluster import load_profile
from parsim.inputs import read_text
from parsim.profile.profile_edit import get_field, set_field, set_section
from parsim.profile.published import Figures, Priced, price

# The fields an end-to-end figure may fix, with the bounds of the fit.  Fractions of a peak or
# bandwidth are in (0, 1]; times in microseconds.
FITTABLE = {
    "device.kernels.conv_efficiency": (0.02, 1.0),
    "device.kernels.gemm_efficiency": (0.02, 1.0),
    "device.kernels.vector_gemm_efficiency": (0.02, 1.0),
    "device.kernels.vector_conv_efficiency": (0.02, 1.0),
    "device.memory_efficiency": (0.05, 1.0),
    "device.kernels.launch_us": (0.0, 100.0),
    "device.kernels.host_dispatch_us": (0.0, 500.0),
    "collective.bandwidth_efficiency": (0.05, 1.0),
    "collective.latency_us": (0.0, 1000.0),
}
# Where a fitted field is absent from the file, the field whose value it starts from.
FALLBACK = {"device.kernels.conv_efficiency": "device.kernels.gemm_efficiency",
            "device.kernels.vector_conv_efficiency": "device.kernels.vector_gemm_efficiency"}


def _initial(text: str, field: str, where: str) -> float:
    v = get_field(text, field)
    if v is None and field in FALLBACK:
        v = get_field(text, FALLBACK[field])
    if v is None:
        lo, hi = FITTABLE[field]
        v = (lo + hi) / 2
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise InputError(f"{where}: {field}: holds {v!r}, not a number; fix the profile")
    lo, hi = FITTABLE[field]
    return min(max(float(v), lo), hi)


def _text_with(text: str, fields: tuple[str, ...], x, comment: str = "") -> str:
    for field, value in zip(fields, x):
        text = set_field(text, field, f"{float(value):.4g}", comment)
    return text


def _load(text: str, name: str):
    """The profile of ``text``, read by load_profile as any profile is."""
    with tempfile.TemporaryDirectory(prefix="parsim-calibrate-") as folder:
        path = os.path.join(folder, f"{name}.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return load_profile(path)


def check_fields(fields, where: str) -> tuple[str, ...]:
    fields = tuple(fields)
    for field in fields:
        if field not in FITTABLE:
            raise InputError(f"{where}: {field!r} is not a field parsim calibrate --published fits; choose among "
                             f"{', '.join(FITTABLE)}")
    if len(set(fields)) != len(fields):
        raise InputError(f"{where}: a field is named twice")
    return fields


def fit_profile(figures: Figures, profile_file: str, profile_name: str, fields, rows) -> tuple[str, dict, list[Priced]]:
    """Fit ``fields`` of the profile in ``profile_file`` to the figures ``rows``.  Returns the
    profile's text with the fitted values (no provenance yet), the values, and the fitted rows
    as priced with them."""
    text = read_text(profile_file, "a hardware profile YAML")
    if "\nextends:" in "\n" + text:
        raise InputError(f"{profile_file}: extends: calibrate the profile it extends, then this one inherits it")
    load_profile(profile_file)                          # its own errors first, naming it
    fields = check_fields(fields, f"{figures.path}: calibration.{profile_name}.fit")
    targets = []
    for ident in rows:
        try:
            fig = figures.by_id(ident)
        except KeyError:
            raise InputError(f"{figures.path}: calibration.{profile_name}.rows: {ident!r} is no figure's id") from None
        if fig.profile != profile_name:
            raise InputError(f"{figures.path}: calibration.{profile_name}.rows: {ident!r} runs on {fig.profile}")
        targets.append(fig)
    if len(targets) < len(fields):
        raise InputError(f"{figures.path}: calibration.{profile_name}: {len(fields)} fields from {len(targets)} "
                         "rows is underdetermined; name at least as many rows as fields")
    x0 = np.array([_initial(text, f, profile_file) for f in fields])
    lo = np.array([FITTABLE[f][0] for f in fields])
    hi = np.array([FITTABLE[f][1] for f in fields])

    def residuals(x):
        profile = _load(_text_with(text, fields, x), profile_name)
        return [math.log(price(fig, profile).predicted / fig.measured) for fig in targets]

    fit = least_squares(residuals, x0, bounds=(lo, hi), diff_step=1e-3, xtol=1e-6, ftol=1e-8)
    x = [float(f"{v:.4g}") for v in fit.x]              # the values as written, so the check below prices them
    fitted_text = _text_with(text, fields, x)
    profile = _load(fitted_text, profile_name)
    priced = [price(fig, profile) for fig in targets]
    return fitted_text, dict(zip(fields, x)), priced


def provenance(text: str, values: dict, priced: list[Priced], figures_path: str, command: str) -> str:
    """The fitted profile text with each fitted field's comment pointing at the ``calibrated:``
    section, and that section: command, figures file, date, fields and the rows used."""
    ids = ", ".join(p.figure.id for p in priced)
    for field, value in values.items():
        text = set_field(text, field, f"{value:.4g}", f"calibrated end to end on {ids} (calibrated: at the end)")
    rows = "\n".join(f"    - {{id: {p.figure.id}, source: \"{_q(_short(p.figure.citation))}\", row: \"{_q(p.figure.row)}\", "
                     f"{p.figure.metric}: {p.figure.measured:g}, predicted: {p.predicted:.5g}}}" for p in priced)
    fields = ", ".join(f"{k}: {v:.4g}" for k, v in values.items())
    body = (f"calibrated:                     # written by parsim calibrate --published; rerun the command to refit\n"
            f"  command: \"{command}\"\n"
            f"  figures_file: {figures_path}\n"
            f"  date: \"{datetime.date.today().isoformat()}\"\n"
            f"  fields: {{{fields}}}\n"
            f"  rows:\n{rows}\n")
    return set_section(text, "calibrated", body)


def _short(citation: str) -> str:
    words = " ".join(citation.split())
    return words if len(words) <= 90 else words[:87] + "..."


def _q(text: str) -> str:
    """Text safe inside a double-quoted YAML scalar."""
    return text.replace("\\", "/").replace('"', "'")
