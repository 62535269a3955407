"""The import graph, read from the source (ast, nothing executed): direction of imports, no cycles, module size.

``dsroc`` <- ``site_node`` <- ``analyst`` <- ``simulations``/``benchmarks``: nothing imports upwards and
``simulations`` does not import ``site_node`` (a rule both need belongs in ``dsroc``). Imports inside
functions count: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dsroc", "site_node", "analyst", "simulations", "benchmarks")
# What each top-level package may not import.
FORBIDDEN = {
    "dsroc": {"site_node", "analyst", "simulations", "benchmarks"},
    "site_node": {"analyst", "simulations", "benchmarks"},
    "analyst": {"simulations", "benchmarks"},
    "simulations": {"site_node", "benchmarks"},
    "benchmarks": set(),
}
GENERATED = ("dsroc/v1/",)
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files() -> dict[str, Path]:
    """Every module of the packages (``benchmarks`` is a folder of scripts; each counts as a module)."""
    files = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not path.relative_to(ROOT).as_posix().startswith(GENERATED):
                files[module_name(path)] = path
    return files


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``name`` imports anywhere in its source (relative imports resolved)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module
            targets = [stem] + [f"{stem}.{alias.name}" for alias in node.names]  # `from . import boyd`
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import a.b.c` of a name inside a module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


GRAPH_FILES = source_files()
GRAPH = {name: imports_of(name, path, set(GRAPH_FILES)) for name, path in GRAPH_FILES.items()}


def unit(module: str) -> str:
    """The node a module belongs to: its subpackage (``dsroc.roc``), or itself if directly in a top package."""
    parts = module.split(".")
    if len(parts) >= 2 and (ROOT.joinpath(*parts[:2]) / "__init__.py").exists():
        return ".".join(parts[:2])
    return module


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph ``edges`` as a list of nodes, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def unit_graph(top: str) -> dict[str, set[str]]:
    """Imports between the units (subpackages and direct modules) of one top package, ignoring its ``__init__``."""
    edges: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        if module.split(".")[0] != top or module == top:
            continue
        for target in targets:
            if target.split(".")[0] == top and target != top and unit(target) != unit(module):
                edges.setdefault(unit(module), set()).add(unit(target))
    return edges


def test_the_graph_sees_the_packages_and_their_imports():
    # the parser must find real edges, or every assertion below would pass vacuously
    assert {"dsroc.roc.auc", "site_node.site", "analyst.federation", "simulations.protocol"} <= set(GRAPH)
    assert "dsroc._checks" in GRAPH["dsroc.roc.auc"]
    assert "dsroc.mechanisms.boyd" in GRAPH["dsroc.mechanisms"]  # `from . import boyd`
    assert any(t.startswith("dsroc") for t in GRAPH["site_node.rules.guard"])
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None


@pytest.mark.parametrize("top", PACKAGES)
def test_no_import_cycle_between_the_units_of_a_package(top):
    cycle = find_cycle(unit_graph(top))
    assert cycle is None, f"import cycle in {top}: {' -> '.join(cycle)}"


def test_no_import_cycle_between_the_top_packages():
    edges = {}
    for module, targets in GRAPH.items():
        for target in targets:
            if target.split(".")[0] != module.split(".")[0]:
                edges.setdefault(module.split(".")[0], set()).add(target.split(".")[0])
    cycle = find_cycle(edges)
    assert cycle is None, f"import cycle between packages: {' -> '.join(cycle)}"


def test_imports_point_downwards_only():
    wrong = sorted(f"{module} imports {target}" for module, targets in GRAPH.items() for target in targets
                   if target.split(".")[0] in FORBIDDEN[module.split(".")[0]])
    assert not wrong, "imports against the direction dsroc <- site_node <- analyst <- simulations/benchmarks:\n" + \
        "\n".join(wrong)


def oversized_modules() -> list[str]:
    """Every module of the product tree (generated code aside) above ``MAX_LINES`` lines."""
    return sorted(f"{name}: {n} lines" for name, path in GRAPH_FILES.items()
                  if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES)


def test_no_module_above_the_size_limit():
    long = oversized_modules()
    assert not long, f"modules above {MAX_LINES} lines (split them by idea):\n" + "\n".join(long)


PACKAGE_MODULES = {name for name, path in GRAPH_FILES.items() if path.name == "__init__.py"}


def module_graph(top: str) -> dict[str, set[str]]:
    """Imports between the modules of one top package; a package's ``__init__`` (its re-exports) is left out, as
    importing a name through it is importing the module that defines it."""
    return {module: {t for t in targets if t.split(".")[0] == top and t not in PACKAGE_MODULES}
            for module, targets in GRAPH.items() if module.split(".")[0] == top and module not in PACKAGE_MODULES}


def test_the_module_graph_sees_a_cycle_inside_a_package():
    # a lazy import inside a function still closes a cycle: that is the case the unit graph cannot see
    assert find_cycle({"p.a": {"p.b"}, "p.b": {"p.a"}}) == ["p.a", "p.b", "p.a"]
    assert "dsroc.histogram.grid" in module_graph("dsroc")["dsroc.histogram.estimates"]


@pytest.mark.parametrize("top", PACKAGES)
def test_no_import_cycle_between_the_modules_of_a_package(top):
    cycle = find_cycle(module_graph(top))
    assert cycle is None, f"import cycle between modules of {top}: {' -> '.join(cycle)}"


def private_imports() -> list[str]:
    """``from x import _name`` where ``x`` is another module of ours (a private name used across modules)."""
    found = []
    for name, path in GRAPH_FILES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in PACKAGES):
                found += [f"{name}: from {'.' * node.level}{node.module or ''} import {alias.name}"
                          for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    return sorted(found)


def test_no_private_name_is_imported_across_modules():
    found = private_imports()
    assert not found, "private names imported from another module (make them public or move them):\n" + \
        "\n".join(found)
