"""What the commands share: printing (JSON on stdout, lines), the default cluster, and a
model.yaml read and checked."""

from __future__ import annotations

import json
import sys

DEFAULT_CLUSTER = "ascend910:1x8"   # the seeds' 8-chip Atlas 800


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=True, default=float)
    sys.stdout.write("\n")


def print_lines(lines, file=None) -> None:
    for line in lines:
        print(line, file=file or sys.stdout)


def load_model_checked(path: str):
    """The model.yaml, read and checked: its shard: section too (parsim.shard.prepare)."""
    from parsim.model.spec import load_model
    from parsim.shard.prepare import check_shard_section

    return check_shard_section(load_model(path))
