"""parsim's modules import one way: no module reaches itself through its imports, counting the
imports inside functions (a lazy import still ties the two modules together); and each package
imports only the floors below its own (FLOORS), so that the house's layering is kept, not only its
lack of cycles."""

from __future__ import annotations

import ast
import pathlib
from collections import deque

ROOT = pathlib.Path(__file__).resolve().parent.parent


def module_files(root: pathlib.Path, package: str) -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every .py under root/package (a package is its __init__)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imported_modules(name: str, path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its file. ``from p import x`` names
    the module p.x where there is one, else p; relative imports are resolved against the package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:      # parsim.a.b.attr -> parsim.a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: pathlib.Path, package: str) -> dict[str, set[str]]:
    modules = module_files(root, package)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle (first module repeated at the end) per group of modules that reach
    each other, in name order."""
    def reach(start):
        seen, todo = {start}, [start]
        while todo:
            for nxt in graph[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reaches = {m: reach(m) for m in graph}
    cycles, covered = [], set()
    for start in sorted(graph):
        if start in covered:
            continue
        group = {m for m in reaches[start] if start in reaches[m]}
        if len(group) < 2:
            continue
        covered |= group
        back = {start: None}                             # breadth first from start, back to start
        queue = deque([start])
        while queue:
            m = queue.popleft()
            if start in graph[m]:
                path = [m]
                while back[path[-1]] is not None:
                    path.append(back[path[-1]])
                cycles.append(path[::-1] + [start])
                break
            for nxt in sorted(graph[m] & group):
                if nxt not in back:
                    back[nxt] = m
                    queue.append(nxt)
    return cycles


# The floors of the house, lowest first (../shared/STYLE.md, "The shape of parsim"): a package may
# import its own modules and any package of a lower floor, never one of its own floor or above.
# Packages on one floor do not import each other: model, hardware and schedule are the ground;
# sim and exec both run a schedule, neither through the other; search drives the simulator;
# report reads what search, sim and exec hand it, and they never import it.
FLOORS = (
    ("errors",),
    ("inputs", "fileio", "fmt", "progress"),            # utilities: read inputs, write outputs, print numbers
    ("model", "hardware", "schedule", "validation_sets"),  # the ground
    ("refusals",),                                    # where a parallel configuration does not apply
    ("cost", "plan"),
    ("shard",),
    ("sim", "exec"),
    ("search",),
    ("report", "export"),                             # export: adapters from a Plan to a framework's names
    ("profile",),
    ("validation", "run"),
    ("cli",),
)


def package_of(module: str) -> str:
    """parsim.sim.engine -> sim; parsim.cli -> cli; parsim -> parsim."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor_violations(graph: dict[str, set[str]], floors) -> list[str]:
    """Every import of a package on the same floor or above, as 'importer -> imported (floor a -> b)';
    the top package (its __init__) may import anything, a package not on any floor is reported."""
    floor_of = {p: k for k, names in enumerate(floors) for p in names}
    out = []
    for module, imported in sorted(graph.items()):
        mine = package_of(module)
        if mine == module.split(".")[0]:
            continue
        if mine not in floor_of:
            out.append(f"{module}: package {mine} is on no floor")
            continue
        for target in sorted(imported):
            theirs = package_of(target)
            if theirs != mine and floor_of.get(theirs, len(floors)) >= floor_of[mine]:
                out.append(f"{module} -> {target} (floor {floor_of[mine]} -> {floor_of.get(theirs, '?')})")
    return out


def test_each_package_imports_only_the_floors_below_it():
    graph = import_graph(ROOT, "parsim")
    assert {package_of(m) for m in graph} - {"parsim"} == {p for names in FLOORS for p in names}
    bad = floor_violations(graph, FLOORS)
    assert not bad, "imports across floors: " + "; ".join(bad)


def test_a_floor_violation_is_found_and_named(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "low").mkdir(parents=True)
    (pkg / "high").mkdir()
    for f in ("__init__.py", "low/__init__.py", "high/__init__.py"):
        (pkg / f).write_text("")
    (pkg / "low" / "a.py").write_text("def f():\n    from pkg.high import b\n")     # up a floor, lazily
    (pkg / "high" / "b.py").write_text("from pkg.low import a\n")                    # down: fine
    (pkg / "side.py").write_text("import pkg.low.a\n")                               # the same floor as low
    graph = import_graph(tmp_path, "pkg")
    assert floor_violations(graph, (("low", "side"), ("high",))) == \
        ["pkg.low.a -> pkg.high.b (floor 0 -> 1)", "pkg.side -> pkg.low.a (floor 0 -> 0)"]
    assert floor_violations(graph, (("low",), ("high",))) == \
        ["pkg.low.a -> pkg.high.b (floor 0 -> 1)", "pkg.side: package side is on no floor"]


def test_parsim_has_no_import_cycle():
    graph = import_graph(ROOT, "parsim")
    assert len(graph) > 50 and "parsim.cli" in graph
    assert "parsim.exec.reference" in graph["parsim.exec.measure"]     # a function-level import is seen
    cycles = import_cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_a_cycle_is_found_and_named(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")                 # a module named by `from p import m`
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import g\n")  # relative, inside a function
    (pkg / "c.py").write_text("import pkg.a as a\nimport json\n")
    (pkg / "d.py").write_text("from pkg.c import g\nfrom pkg import a\n")   # reaches the cycle, not in it
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.sub.b"] == {"pkg.c"} and graph["pkg.c"] == {"pkg.a"}
    assert import_cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]]
    (pkg / "c.py").write_text("import json\n")
    assert import_cycles(import_graph(tmp_path, "pkg")) == []
