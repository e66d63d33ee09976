"""Set fields of a hardware profile's YAML text in place, keeping every other line and comment.

A field is named by its dotted path (``device.kernels.conv_efficiency``, ``device.memory_efficiency``,
``collective.bandwidth_efficiency``).  The edit is by line: a block mapping's key is found by its
indentation under its parents' keys; a key inside a one-line flow mapping (``collective: {library:
nccl, bandwidth_efficiency: 0.8}``) is replaced within that line.  A field absent from its block
is added as the block's first key.  The value's inline comment is replaced by ``comment`` (on a flow
mapping's line, the field's name and ``comment`` come first, the line's own comment after
"before calibration:").  The result is parsed again and the edit checked, so a profile this cannot edit faithfully is refused
rather than written wrong.
"""

from __future__ import annotations

import re

import yaml

_BEFORE = "; before calibration: "
_KEY = re.compile(r"^(\s*)([A-Za-z0-9_.-]+):(\s*)(.*)$")


def _split_comment(rest: str) -> tuple[str, str]:
    """(value, comment) of a line's text after ``key:``; the comment keeps its ``#``."""
    m = re.search(r"\s+#", rest)
    if m is None or rest.lstrip().startswith("#"):
        return (rest, "") if not rest.lstrip().startswith("#") else ("", rest.strip())
    return rest[:m.start()], rest[m.start():].strip()


def _lookup(data, path: list[str]):
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def get_field(text: str, dotted: str):
    """The field's value in the YAML text (None where absent)."""
    return _lookup(yaml.safe_load(text), dotted.split("."))


def set_field(text: str, dotted: str, value: str, comment: str = "") -> str:
    """``text`` with ``dotted`` set to ``value`` (YAML source text, e.g. "0.523") and its inline
    comment replaced by ``comment`` (without the ``#``); ValueError if it cannot be placed."""
    path = dotted.split(".")
    lines = text.split("\n")
    stack: list[tuple[int, str]] = []         # (indent, key) of the open block keys
    parent_line = None
    for i, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _KEY.match(line)
        if m is None:
            continue
        indent, key, _, rest = len(m.group(1)), m.group(2), m.group(3), m.group(4)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        here = [k for _, k in stack] + [key]
        if here == path:
            val, _ = _split_comment(rest)
            if val.strip().startswith(("{", "[")) or not val.strip():
                raise ValueError(f"{dotted}: holds a mapping or list, not a number")
            lines[i] = f"{m.group(1)}{key}: {value}" + (f"   # {comment}" if comment else "")
            return _checked("\n".join(lines), dotted, value)
        if here == path[:len(here)] and len(here) == len(path) - 1:
            val, old_comment = _split_comment(rest)
            if val.strip().startswith("{"):          # a flow mapping on one line
                pat = re.compile(r"(\b" + re.escape(path[-1]) + r":\s*)([^,}]+)")
                if pat.search(val):
                    new_val = pat.sub(lambda mm: mm.group(1) + value, val, count=1)
                else:
                    new_val = val.rstrip()[:-1].rstrip() + f", {path[-1]}: {value}}}"
                before = old_comment.lstrip("#").strip().split(_BEFORE)[-1]     # the line's own comment, once
                note = (f"{path[-1]} {comment}" + (f"{_BEFORE}{before}" if before else "")) if comment else before
                lines[i] = f"{m.group(1)}{key}: {new_val.strip()}" + (f"   # {note}" if note else "")
                return _checked("\n".join(lines), dotted, value)
            if not val.strip():
                parent_line = (i, indent)
        stack.append((indent, key))
    if parent_line is None:
        raise ValueError(f"{dotted}: no block {'.'.join(path[:-1])} to put it in")
    i, indent = parent_line
    child = next((len(l) - len(l.lstrip()) for l in lines[i + 1:] if l.strip() and not l.lstrip().startswith("#")),
                 indent + 2)
    child = child if child > indent else indent + 2
    lines.insert(i + 1, " " * child + f"{path[-1]}: {value}" + (f"   # {comment}" if comment else ""))
    return _checked("\n".join(lines), dotted, value)


def _checked(text: str, dotted: str, value: str) -> str:
    got = get_field(text, dotted)
    want = yaml.safe_load(value)
    if got != want:
        raise ValueError(f"{dotted}: the edited text reads {got!r}, not {want!r}")
    return text


def set_section(text: str, key: str, body: str) -> str:
    """``text`` with the top-level block ``key:`` (and the comment lines right above it that
    begin with ``# <key>``) replaced by ``body`` (which starts with its own ``key:`` line), or
    ``body`` appended where absent."""
    lines = text.rstrip("\n").split("\n")
    start = next((i for i, l in enumerate(lines) if l.startswith(f"{key}:")), None)
    if start is not None:
        end = start + 1
        while end < len(lines) and (not lines[end].strip() or lines[end][0] in " #"):
            end += 1
        while start > 0 and lines[start - 1].startswith(f"# {key}"):
            start -= 1
        lines = lines[:start] + lines[end:]
        while lines and not lines[-1].strip():
            lines.pop()
    return "\n".join(lines) + "\n" + body.rstrip("\n") + "\n"
