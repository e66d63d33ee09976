"""Per-rank checkpoints, written atomically (temporary file, then rename), so an interrupted
write never replaces a good checkpoint.  Each rank saves its own stages, optimizer and position."""

from __future__ import annotations

import os

import torch

from parsim.errors import InputError
from parsim.fileio import atomic_path


def path_for(out_dir: str, rank: int) -> str:
    return os.path.join(out_dir, "checkpoint", f"rank{rank}.pt")


def save(out_dir: str, rank: int, state: dict) -> None:
    path = path_for(out_dir, rank)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load(out_dir: str, rank: int) -> dict:
    path = path_for(out_dir, rank)
    if not os.path.isfile(path):
        raise InputError(f"--resume: no checkpoint at {path}; run without --resume first, or check --out")
    return torch.load(path, map_location="cpu", weights_only=False)
