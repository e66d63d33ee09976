"""Per-rank checkpoints that survive a crash, a full disk and a flipped byte.

Each rank saves its own stages, optimizer and position after step N as ``checkpoint/rankR-stepN.pt``,
with the SHA-256 of its bytes beside it in ``rankR-stepN.pt.sha256`` (``sha256sum`` format, so
``sha256sum -c`` checks it too).  The data is written first, then the checksum, each atomically
(temporary file, fsync, rename): a checkpoint whose checksum file is missing or does not match
its bytes was interrupted or damaged, and is never loaded.  A rank keeps the checkpoint it just
wrote and the one before it, so a damaged newest checkpoint leaves an older one to resume from.
A resume uses the newest step that verifies on every rank (``agree``), as DeepSpeed's
``latest`` tag and torch.distributed.checkpoint name one step for the whole job.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
from dataclasses import dataclass

import torch

from parsim.errors import InputError, RunError
from parsim.fileio import atomic_path

_NAME = re.compile(r"rank(\d+)-step(\d+)\.pt(\.sha256)?$")
_CHUNK_BYTES = 1 << 22        # written in 4 MiB pieces; a full disk fails one of them


def folder(out_dir: str) -> str:
    return os.path.join(out_dir, "checkpoint")


def path_for(out_dir: str, rank: int, step: int) -> str:
    return os.path.join(folder(out_dir), f"rank{rank}-step{step}.pt")


def _sums_path(path: str) -> str:
    return path + ".sha256"


def _write(path: str, data: bytes) -> None:
    """``data`` to ``path`` atomically and durably (fsync before the rename)."""
    with atomic_path(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view[:_CHUNK_BYTES]):]
            os.fsync(fd)
        finally:
            os.close(fd)


def _steps(out_dir: str, rank: int) -> list[int]:
    """Steps with a data or checksum file of ``rank``, newest first."""
    try:
        names = os.listdir(folder(out_dir))
    except FileNotFoundError:
        return []
    found = {int(m[2]) for m in map(_NAME.match, names) if m and int(m[1]) == rank}
    return sorted(found, reverse=True)


def save(out_dir: str, rank: int, step: int, state: dict) -> None:
    """Write rank ``rank``'s checkpoint of ``step``; then drop its checkpoints other than this one
    and the newest before it.  On a write error (a full disk) the older checkpoints are untouched,
    the new one is not left half-made, and a RunError says so in one line.  The state is
    serialized in memory first, so that a write error arrives as the OSError it is (torch.save's
    own file writer turns it into a RuntimeError that has lost the errno)."""
    path = path_for(out_dir, rank, step)
    os.makedirs(folder(out_dir), exist_ok=True)
    buf = io.BytesIO()
    torch.save(state, buf)
    data = buf.getbuffer()
    try:
        _write(path, data)
    except OSError as e:
        raise _write_error(out_dir, rank, step, e) from None
    try:
        _write(_sums_path(path), f"{hashlib.sha256(data).hexdigest()}  {os.path.basename(path)}\n".encode())
    except OSError as e:
        for p in (_sums_path(path), path):           # data without its checksum is no checkpoint
            if os.path.exists(p):
                os.unlink(p)
        raise _write_error(out_dir, rank, step, e) from None
    dir_fd = os.open(folder(out_dir), os.O_RDONLY)
    try:
        os.fsync(dir_fd)                              # the renames, durable
    finally:
        os.close(dir_fd)
    steps = _steps(out_dir, rank)
    keep = {step, *[s for s in steps if s < step][:1]}
    for s in steps:
        if s not in keep:
            _remove(out_dir, rank, s)


def _remove(out_dir: str, rank: int, step: int) -> None:
    for p in (_sums_path(path_for(out_dir, rank, step)), path_for(out_dir, rank, step)):   # checksum first
        if os.path.exists(p):
            os.unlink(p)


def drop_after(out_dir: str, rank: int, step: int) -> None:
    """Remove rank ``rank``'s checkpoints newer than ``step``, the one a resume continues from:
    they belong to the run being replaced, and one of them failed to verify somewhere."""
    for s in _steps(out_dir, rank):
        if s > step:
            _remove(out_dir, rank, s)


def _write_error(out_dir: str, rank: int, step: int, e: OSError) -> RunError:
    older = [s for s in _steps(out_dir, rank) if s < step]
    kept = f"the checkpoint of step {older[0]} is kept" if older else "there is no earlier checkpoint"
    what = "the disk is full" if e.errno in (errno.ENOSPC, errno.EDQUOT) else (e.strerror or str(e))
    return RunError(f"{path_for(out_dir, rank, step)}: cannot write the checkpoint of step {step}: {what}; {kept}. "
                    f"Free space in {folder(out_dir)} (or choose another --out) and continue with --resume")


def _read_verified(out_dir: str, rank: int, step: int) -> bytes:
    """The checkpoint's bytes; ValueError (the reason, a few words) when it cannot be trusted."""
    path = path_for(out_dir, rank, step)
    try:
        with open(_sums_path(path)) as f:
            expected = f.read().split()[0]
    except (FileNotFoundError, IndexError):
        raise ValueError("no checksum beside it (its write did not finish)") from None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise ValueError("missing") from None
    if hashlib.sha256(data).hexdigest() != expected:
        raise ValueError("corrupt or truncated (its SHA-256 does not match)")
    return data


@dataclass(frozen=True)
class Scan:
    """One rank's checkpoints: the steps that verify, and one phrase per one that does not."""

    rank: int
    valid: tuple[int, ...]
    bad: tuple[tuple[int, str], ...]


def scan(out_dir: str, rank: int) -> Scan:
    valid, bad = [], []
    for step in _steps(out_dir, rank):
        try:
            _read_verified(out_dir, rank, step)
            valid.append(step)
        except ValueError as e:
            bad.append((step, f"{path_for(out_dir, rank, step)}: {e}"))
    return Scan(rank, tuple(valid), tuple(bad))


def agree(scans: list[Scan], out_dir: str) -> tuple[int, str | None]:
    """The newest step whose checkpoint verifies on every rank, and a line naming the newer
    checkpoints passed over to reach it (None when there were none)."""
    seen = sorted({step for s in scans for step in (*s.valid, *dict(s.bad))}, reverse=True)
    if not seen:
        raise InputError(f"--resume: no checkpoint in {folder(out_dir)}; run without --resume first, or check --out")
    common = set.intersection(*(set(s.valid) for s in scans))
    chosen = max(common, default=0)
    skipped = [dict(s.bad).get(step, f"{path_for(out_dir, s.rank, step)}: missing")
               for s in scans for step in seen if step > chosen and step not in s.valid]
    if not common:
        raise InputError(f"--resume: no step has a checkpoint that verifies on every rank ({'; '.join(skipped[:3])}); "
                         "run without --resume, or check --out")
    if not skipped:
        return chosen, None
    more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
    return chosen, f"{'; '.join(skipped[:3])}{more}; resuming every rank from step {chosen}"


def load(out_dir: str, rank: int, step: int | None = None) -> dict:
    """Rank ``rank``'s checkpoint of ``step`` (default: its newest that verifies), checked against its SHA-256."""
    if step is None:
        valid = scan(out_dir, rank).valid
        if not valid:
            raise InputError(f"{folder(out_dir)}: no checkpoint of rank {rank} that verifies; run without --resume "
                             "first, or check --out")
        step = valid[0]
    try:
        data = _read_verified(out_dir, rank, step)
    except ValueError as e:
        raise InputError(f"{path_for(out_dir, rank, step)}: {e}; run without --resume, or check --out") from None
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
