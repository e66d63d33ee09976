"""Issue 40 item 5's last ask: tests that cannot fail, scanned for across tests/ by their shape.

- an expression statement or assert joining calls with `and`/`or` whose left side returns None
  (assert_close, assert_allclose, np.testing.*): the right side never runs;
- a comparison of an expression with itself (`a == a`);
- pytest.skip / skipif / importorskip / xfail: each listed, to be read for whether it hides a regression;
- an assert inside `if ...:` with no else, whose condition reads a file or a table (a check that
  quietly does nothing when the data is missing): listed to be read.

    python results/2026-12-04f-intel-xeon/test_scan.py > results/2026-12-04f-intel-xeon/test_scan.txt
"""

import ast
import sys
from pathlib import Path

NONE_RETURNING = {"assert_close", "assert_allclose", "assert_array_equal", "assert_equal", "assert_array_almost_equal"}


def call_name(node) -> str:
    if isinstance(node, ast.Call):
        f = node.func
        return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    return ""


def scan(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and call_name(node.values[0]) in NONE_RETURNING:
            yield node.lineno, "chained", ast.unparse(node)[:110]
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.Is)) \
                and ast.dump(node.left) == ast.dump(node.comparators[0]):
            yield node.lineno, "self-compare", ast.unparse(node)[:110]
        if isinstance(node, ast.Call) and call_name(node) in ("skip", "importorskip", "xfail", "skipif"):
            yield node.lineno, "skip", ast.unparse(node)[:110]
        if isinstance(node, ast.If) and not node.orelse and all(isinstance(s, ast.Assert) for s in node.body) \
                and ("None" in ast.unparse(node.test) or "exists" in ast.unparse(node.test)):
            yield node.lineno, "guarded-assert", ast.unparse(node.test)[:110]


def main() -> None:
    found = [(str(p), *hit) for p in sorted(Path("tests").rglob("*.py")) for hit in scan(p)]
    for path, line, kind, text in found:
        print(f"{kind:15s} {path}:{line}  {text}")
    counts = {k: sum(1 for f in found if f[2] == k) for k in ("chained", "self-compare", "skip", "guarded-assert")}
    print("counts:", counts, file=sys.stderr)
    print("counts:", counts)


if __name__ == "__main__":
    main()
