"""The house's size rules (issue 40): no module in parsim/ over MODULE_LINES lines, and the two
functions a reader starts from, planner.plan and engine.run, each a page (FUNCTION_LINES).  A module
that grows past the rule is split by what it holds (search/bound.py's floors went to
search/floor.py at 684 lines), not trimmed of its docstrings."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODULE_LINES = 600
FUNCTION_LINES = 80
READ_FIRST = (("parsim/search/planner.py", "plan"), ("parsim/sim/engine.py", "run"))


def oversize_modules(root: pathlib.Path, package: str, limit: int) -> list[str]:
    """'path: N lines' for every .py under root/package longer than ``limit`` lines."""
    out = []
    for path in sorted((root / package).rglob("*.py")):
        n = len(path.read_text().splitlines())
        if n > limit:
            out.append(f"{path.relative_to(root)}: {n} lines")
    return out


def function_lines(path: pathlib.Path, name: str) -> int:
    """Lines of the module-level function ``name`` in ``path``, its decorators and docstring counted."""
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return node.end_lineno - first + 1
    raise LookupError(f"{path}: no function {name}")


def test_no_module_in_parsim_is_over_the_limit():
    bad = oversize_modules(ROOT, "parsim", MODULE_LINES)
    assert not bad, f"modules over {MODULE_LINES} lines: " + "; ".join(bad)


def test_plan_and_engine_run_each_read_as_a_page():
    for rel, name in READ_FIRST:
        n = function_lines(ROOT / rel, name)
        assert 10 < n <= FUNCTION_LINES, f"{rel}:{name} is {n} lines"


def test_the_size_rules_find_and_name_what_breaks_them(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "small.py").write_text("x = 1\n" * 5)
    (tmp_path / "pkg" / "sub" / "big.py").write_text("x = 1\n" * 7)
    assert oversize_modules(tmp_path, "pkg", 6) == ["pkg/sub/big.py: 7 lines"]
    assert oversize_modules(tmp_path, "pkg", 7) == []
    f = tmp_path / "f.py"
    f.write_text("import functools\n\n@functools.cache\ndef g(a):\n    '''doc'''\n    return a\n\ndef h():\n    pass\n")
    assert function_lines(f, "g") == 4 and function_lines(f, "h") == 2
