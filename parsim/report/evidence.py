"""Where ``parsim validate`` keeps its evidence, committed: ``results/<date>-<cpu>/<set>/<model>/``
holds the small files a figure is computed from (validation.json, validation.csv,
memory_breakdown.csv) and, under ``profiles/``, the profiles that priced it (the layer profiles
and the measured collectives of every pass).  The large outputs (each run's folder, plots, plan
files) stay in ``--out`` (runs/, git-ignored).  ``parsim.report.accuracy`` builds the docs'
accuracy tables from these folders alone.

``<cpu>`` is the CPU model as ``lscpu`` names it (/proc/cpuinfo's "model name",
parsim.hardware.machine), slugged: "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz" ->
"intel-xeon-platinum-8481c-cpu-2-70ghz".
"""

from __future__ import annotations

import os
import re

FILES = ("validation.json", "validation.csv", "memory_breakdown.csv")


def slug(text: str) -> str:
    """Lower case, trademarks dropped, every run of other characters one '-'."""
    text = re.sub(r"\((r|tm|c)\)", "", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "unknown"


def evidence_dir(root: str, date: str, cpu_model: str, set_name: str, model_name: str) -> str:
    """``root/<date>-<cpu>/<set>/<model>``."""
    return os.path.join(root, f"{date}-{slug(cpu_model)}", slug(set_name), slug(model_name))


def profile_copies(measured_per_pass: list[dict]) -> dict[str, str]:
    """Source path -> its name under ``profiles/``: ``pass<k>/<file>`` for each pass's own
    profiles (the first pass's where passes shared one), each file once."""
    names: dict[str, str] = {}
    for k, m in enumerate(measured_per_pass):
        paths = [*(m.get("layers") or {}).values(), *(m.get("tp") or ()), *(m.get("ep") or ()),
                 *([m["collectives"]] if m.get("collectives") else [])]
        for path in paths:
            if path and path not in names:
                names[path] = f"pass{k + 1}/{os.path.basename(path)}"
    return names
