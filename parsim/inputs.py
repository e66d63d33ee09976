"""Strict reading of user input: files (model.yaml, plan.json, layer profiles, hardware
profiles, rank tables) and command-line values.

Every rule about what a file or a field may hold lives here once: a missing, binary, empty,
oversized or truncated file, unknown keys, wrong types, non-finite numbers and sizes out of
range are rejected with one line naming the file and the field.

    r = Fields(data, source="examples/m.yaml")
    batch = r.positive_int("global_batch_size")
    dtype = r.choice("dtype", ("fp32", "fp16", "bf16"), default="fp32")
    r.done()                      # rejects any key not read
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from typing import Any, Iterable

import yaml

from parsim.errors import InputError

_MISSING = object()

# The largest file parsim reads.  Its inputs are a few KiB to a few MiB: the biggest is a rank
# table at the cluster bound (parsim.hardware.cluster.MAX_WORLD_SIZE ranks of about 70 bytes
# each, 70 MiB).  Anything larger is another file given by mistake (a checkpoint, a dataset),
# refused before it is read into memory.
MAX_FILE_BYTES = 256 * 2**20

_SIZE_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def parse_bytes(text: str | int | float, where: str = "size", allow_zero: bool = False) -> int:
    """'24GiB' -> 25769803776; plain numbers are bytes.  Zero only where ``allow_zero``."""
    if isinstance(text, bool):
        raise InputError(f"{where}: expected a size such as 24GiB, got {text!r}")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*", str(text))
        if not m or m.group(2).lower() not in _SIZE_UNITS:
            raise InputError(f"{where}: expected a size such as 24GiB or 80GB, got {text!r}")
        value = float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    if not math.isfinite(value):
        raise InputError(f"{where}: expected a finite size such as 24GiB, got {text!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise InputError(f"{where}: must be {'>= 0' if allow_zero else 'positive'}, got {text!r}")
    return int(value)


def read_text(path: str | os.PathLike, what: str = "") -> str:
    """A user file's text.  Missing, a folder, over MAX_FILE_BYTES, not UTF-8 text (a binary
    file) or empty is an InputError naming the file; ``what`` (e.g. "a model.yaml") says what was
    expected there."""
    path = os.fspath(path)
    expected = f"; expected {what}" if what else ""
    if os.path.isdir(path):
        raise InputError(f"{path}: is a folder, not a file{expected}")
    if not os.path.isfile(path):
        raise InputError(f"{path}: file not found; check the path")
    size = os.path.getsize(path)
    if size > MAX_FILE_BYTES:
        raise InputError(f"{path}: {size / 2**20:,.0f} MiB, larger than any parsim input ({MAX_FILE_BYTES // 2**20} "
                         f"MiB at most){expected}; is it the right file?")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror}); check its permissions") from None
    nul = raw.find(b"\0")                          # UTF-16 or binary data
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")   # a byte-order mark, as some editors write, is fine
        if nul >= 0:
            raise UnicodeDecodeError("utf-8", raw, nul, nul + 1, "NUL byte")
    except UnicodeDecodeError as e:
        at, why = (nul, "NUL byte") if 0 <= nul < e.start else (e.start, e.reason)
        raise InputError(f"{path}: not a text file (byte 0x{raw[at]:02x} at offset {at}: {why}){expected}; "
                         "is it the right file?") from None
    if not text.strip():
        raise InputError(f"{path}: the file is empty{expected}")
    return text


def load_file(path: str | os.PathLike, what: str = "") -> Any:
    """Read a YAML or JSON file (by its extension) through ``read_text``; a file that does not
    parse is an InputError naming the line, and one that ends mid-way says it looks truncated."""
    path = os.fspath(path)
    text = read_text(path, what)
    is_json = path.endswith(".json")
    try:
        return json.loads(text) if is_json else yaml.safe_load(text)
    except json.JSONDecodeError as e:
        where, problem, at = f"line {e.lineno} column {e.colno}", e.msg, e.pos
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "somewhere"
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        at = mark.index if mark else 0
    ends_early = at >= len(text.rstrip()) or (is_json and _unclosed_json(text))
    raise InputError(f"{path}: not valid {'JSON' if is_json else 'YAML'} at {where}: {problem}"
                     + ("; the file ends early: is it truncated?" if ends_early else "")
                     + (f" (expected {what})" if what and not ends_early else ""))


def _unclosed_json(text: str) -> bool:
    """Whether JSON text stops inside a string or with brackets open: the mark of a file cut short."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
    return in_string or depth > 0


# ------------------------------------------------------------------------- command-line values

def positive_int_arg(text: str) -> int:
    """argparse type: an integer > 0."""
    value = _int_arg(text, "a positive integer")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def nonnegative_int_arg(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = _int_arg(text, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def _float_arg(text: str, allow_zero: bool) -> float:
    what = "a number >= 0" if allow_zero else "a positive number"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise argparse.ArgumentTypeError(f"expected a finite {what.removeprefix('a ')}, got {text!r}")
    return value


def positive_float_arg(text: str) -> float:
    """argparse type: a finite number > 0 (seconds, thresholds)."""
    return _float_arg(text, allow_zero=False)


def nonnegative_float_arg(text: str) -> float:
    """argparse type: a finite number >= 0."""
    return _float_arg(text, allow_zero=True)


def _int_arg(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def rising_sizes_arg(text: str) -> list[int]:
    """argparse type: '1,2,4,8' -> [1, 2, 4, 8], rising positive integers."""
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v <= 0 for v in values) or values != sorted(set(values)):
        raise argparse.ArgumentTypeError(f"expected rising positive integers like 1,2,4,8; got {text!r}")
    return values


def layer_counts_arg(text: str) -> tuple[int, ...]:
    """argparse type: '2' -> (2,), '4,0' -> (4, 0): whole numbers, 0 or more."""
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        values = ()
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected a count of layers like 2, or one per stage like 4,0; got {text!r}")
    return values


def _type_name(types: tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
             dict: "a mapping", list: "a list"}
    return " or ".join(names.get(t, t.__name__) for t in types)


class Fields:
    """A strict view of one mapping read from a user file."""

    def __init__(self, data: Any, source: str, prefix: str = ""):
        self.source = source
        self.prefix = prefix
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise InputError(f"{source}: {prefix or 'top level'}: expected a mapping, got {type(data).__name__}")
        self.data = data
        self._read: set[str] = set()

    def where(self, key: str) -> str:
        return f"{self.source}: {self.prefix}{key}"

    def fail(self, key: str, message: str) -> InputError:
        return InputError(f"{self.where(key)}: {message}")

    def has(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str, types: type | tuple[type, ...], default: Any = _MISSING) -> Any:
        types = types if isinstance(types, tuple) else (types,)
        self._read.add(key)
        if key not in self.data or self.data[key] is None:
            if default is _MISSING:
                raise self.fail(key, f"missing; add {key}: <{_type_name(types)}>")
            return default
        value = self.data[key]
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not ok and float in types and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            raise self.fail(key, f"expected {_type_name(types)}, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(key, f"expected a finite number, got {value!r}")
        return value

    def positive_int(self, key: str, default: Any = _MISSING, at_most: int | None = None, why: str = "") -> int:
        """``at_most``: the largest sensible value, refused above with ``why`` (where the bound comes from)."""
        value = self.get(key, int, default)
        if value is not None and value is not default and value <= 0:
            raise self.fail(key, f"must be a positive integer, got {value}")
        if at_most is not None and value is not None and value is not default and value > at_most:
            raise self.fail(key, f"{value:,} is more than {at_most:,}{f' ({why})' if why else ''}")
        return value

    def positive_float(self, key: str, default: Any = _MISSING) -> float:
        value = self.get(key, float, default)
        if value is not None and value is not default and value <= 0:
            raise self.fail(key, f"must be positive, got {value}")
        return value

    def fraction(self, key: str, default: Any = _MISSING) -> float:
        value = self.get(key, float, default)
        if value is not None and value is not default and not 0 < value <= 1:
            raise self.fail(key, f"must be in (0, 1], got {value}")
        return value

    def size_bytes(self, key: str, default: Any = _MISSING, allow_zero: bool = False) -> int:
        value = self.get(key, (int, float, str), default)
        if value is default:
            return value
        return parse_bytes(value, self.where(key), allow_zero)

    def choice(self, key: str, options: Iterable[str] | Iterable[int], default: Any = _MISSING) -> str | int:
        """One of ``options`` (strings, or integers such as ZeRO's stages 0..3)."""
        options = tuple(options)
        value = self.get(key, type(options[0]), default)
        if value is not default and value not in options:
            raise self.fail(key, f"must be one of {', '.join(map(str, options))}; got {value!r}")
        return value

    def sub(self, key: str, required: bool = True) -> "Fields":
        """The nested mapping at ``key`` as its own strict reader (empty if optional and absent)."""
        if key not in self.data or self.data[key] is None:
            self._read.add(key)
            if required:
                raise self.fail(key, "missing section")
            return Fields({}, self.source, f"{self.prefix}{key}.")
        return Fields(self.get(key, dict), self.source, f"{self.prefix}{key}.")

    def schema_version(self, expected: int, required: bool = False, hint: str = "") -> None:
        """Reject a file written for another schema version (absent means current, unless required)."""
        version = self.get("schema_version", int) if required else self.get("schema_version", int, expected)
        if version != expected:
            raise self.fail("schema_version", f"this parsim reads version {expected}, got {version}"
                                              + (f"; {hint}" if hint else ""))

    def done(self) -> None:
        unknown = [k for k in self.data if k not in self._read]
        if unknown:
            known = ", ".join(sorted(self._read)) or "none"
            raise InputError(f"{self.where(str(unknown[0]))}: unknown key; known keys here: {known}")
