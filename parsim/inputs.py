"""Strict reading of user files (model.yaml, hardware profiles, rank tables).

Every rule about what a field may hold lives here once: unknown keys, wrong types and
non-positive sizes are rejected with one line naming the file and the field.

    r = Fields(data, source="examples/m.yaml")
    batch = r.positive_int("global_batch_size")
    dtype = r.choice("dtype", ("fp32", "fp16", "bf16"), default="fp32")
    r.done()                      # rejects any key not read
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Iterable

import yaml

from parsim.errors import InputError

_MISSING = object()

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
    if value < 0 or (value == 0 and not allow_zero):
        raise InputError(f"{where}: must be {'>= 0' if allow_zero else 'positive'}, got {text!r}")
    return int(value)


def load_file(path: str | os.PathLike) -> Any:
    """Read a YAML or JSON file; a missing or unparsable file is an InputError."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError(f"{path}: file not found; check the path")
    try:
        with open(path, encoding="utf-8") as f:
            if path.endswith(".json"):
                return json.load(f)
            return yaml.safe_load(f)
    except (yaml.YAMLError, json.JSONDecodeError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"{path}: not valid {'JSON' if path.endswith('.json') else 'YAML'}: {first}") from None


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
        return value

    def positive_int(self, key: str, default: Any = _MISSING) -> int:
        value = self.get(key, int, default)
        if value is not None and value is not default and value <= 0:
            raise self.fail(key, f"must be a positive integer, got {value}")
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

    def choice(self, key: str, options: Iterable[str], default: Any = _MISSING) -> str:
        options = tuple(options)
        value = self.get(key, str, default)
        if value is not default and value not in options:
            raise self.fail(key, f"must be one of {', '.join(options)}; got {value!r}")
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
