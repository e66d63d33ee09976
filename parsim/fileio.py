"""Atomic output: write to a temporary file beside the target, then rename over it, so a
reader never sees half a file and an interrupted run loses nothing that was there."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager

from parsim.errors import InputError


def check_output(path: str | os.PathLike | None, flag: str = "") -> None:
    """An output path must be in an existing folder and not be a folder itself; commands check
    theirs before the work that fills them (``flag``: the option that named it)."""
    if path is None:
        return
    path = os.fspath(path)
    where = f"{flag} {path}" if flag else path
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"{where}: folder {folder} does not exist; create it or choose another path")
    if os.path.isdir(path):
        raise InputError(f"{where}: is a folder; give a file name")


def check_output_folder(path: str | os.PathLike | None, flag: str = "") -> None:
    """An output folder (``--report DIR``) is a writable folder, or a new name in one; the
    writer creates it, so a command that fails before writing leaves nothing behind."""
    if path is None:
        return
    path = os.fspath(path)
    where = f"{flag} {path}" if flag else path
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"{where}: is a file, not a folder; give a folder to write into")
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"{where}: folder {folder} does not exist; create it or choose another path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{where}: folder {folder} is not writable; choose another folder")


@contextmanager
def atomic_path(path: str | os.PathLike):
    """Yields a temporary path in the target's folder; renamed to ``path`` on success."""
    path = os.fspath(path)
    check_output(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.splitext(path)[1])
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)          # mkstemp makes 0600; outputs get the user's usual mode
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def write_json(path: str | os.PathLike, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=float) + "\n")
