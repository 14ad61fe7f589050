"""The package's layers import downward only: its import graph, read from the sources with ``ast`` (nothing is
imported), has no circle, and no module of the package imports one of the old paths kept as re-exports.

Every import counts, wherever it stands (module level, inside a function, under ``TYPE_CHECKING``): a deferred
import still ties two modules together. ``from pkg import name`` is an arrow to ``pkg.name`` where that is a module,
else to ``pkg``; a module's own parent packages are not arrows (Python runs them first whatever the module imports).
"""

from __future__ import annotations

import ast
from pathlib import Path

import torchtrt_plugins

PACKAGE = "torchtrt_plugins"
ROOT = Path(torchtrt_plugins.__file__).resolve().parent

# Old module paths kept importable for one release; the package itself imports the new ones.
SHIMS = {f"{PACKAGE}.kernels_aot", f"{PACKAGE}.eager_kernel"}
# Names the converter re-exports from their own layer (torchtrt_plugins.plan, spec) for one release.
CONVERTER_REEXPORTS = {"FieldValue", "PluginCall", "bind", "plan_node", "weights_as_fields"}


def _modules(root: Path) -> dict[str, Path]:
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(module: str, path: Path, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".") if _is_package(path) else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(name, path, node.level, node.module)
                targets = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names
                ]
            else:
                continue
            for target in targets:
                while target and target not in modules:  # `import a.b.c` of a non-module tail
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _describe(graph: dict[str, set[str]], component: list[str]) -> str:
    members = set(component)
    arrows = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
    return f"{len(component)} modules: " + ", ".join(component) + "\n  " + "\n  ".join(arrows)


def test_the_package_has_no_import_circle():
    graph = import_graph()
    found = circles(graph)
    assert not found, "import circles in the package:\n" + "\n".join(_describe(graph, c) for c in found)


def test_no_module_of_the_package_imports_an_old_path():
    graph = import_graph()
    users = {name: sorted(targets & SHIMS) for name, targets in graph.items() if name not in SHIMS}
    offenders = {name: shims for name, shims in users.items() if shims}
    assert not offenders, f"modules importing a re-export kept for old paths: {offenders}"


def test_no_module_of_the_package_takes_the_plan_from_the_converter():
    offenders = []
    for name, path in _modules(ROOT).items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                source = _resolve(name, path, node.level, node.module)
                taken = {alias.name for alias in node.names} & CONVERTER_REEXPORTS
                if source == f"{PACKAGE}.converters._factory" and taken and name != source:
                    offenders.append(f"{name}: {sorted(taken)}")
    assert not offenders, f"modules taking the plan from the converter, not from torchtrt_plugins.plan: {offenders}"


def test_the_graph_reader_finds_a_circle(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from .sub import b\n")
    (package / "sub" / "__init__.py").write_text("from . import b\n")
    (package / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import a\n")
    (package / "c.py").write_text("from pkg.sub import b\n")
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub"] == {"pkg.sub.b"} and graph["pkg.c"] == {"pkg.sub.b"}
    assert circles(graph) == [["pkg.a", "pkg.sub.b"]]
