"""The house's rules, held in the suite: the layers (import-linter's contracts in pyproject.toml: arrows point down
only, the app imports no torch, the engine no Textual, the ground floor no torch), no import cycle anywhere in the
package, no private name taken from another module, and an import inside a function only with its reason beside it
(it keeps torch or another heavy library off a path that must not pay for it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

# import-linter (and grimp under it) is a test dependency of the project, not on the GPU machine, which runs the
# tests marked gpu from the checkout: there this file is skipped, not an error that stops the collection.
grimp = pytest.importorskip("grimp")

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tui" / "torchperf_tui"


def package_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_import_linter_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def cycles(graph) -> list[list[str]]:
    """The package's import cycles: strongly connected sets of more than one module (Tarjan's algorithm)."""
    modules = sorted(graph.modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.find_modules_directly_imported_by(v)):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle_anywhere_in_the_package():
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    graph = grimp.build_graph("torchperf_tui", include_external_packages=False, cache_dir=None)
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_planted_cycle(tmp_path, monkeypatch):
    package = tmp_path / "planted"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from planted import b\n")
    (package / "b.py").write_text("def f():\n    from planted import a\n")
    (package / "c.py").write_text("from planted import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cycles(grimp.build_graph("planted", cache_dir=None)) == [["planted.a", "planted.b"]]


def imports_of(path: Path):
    """(node, inside a function) for each import statement of the module."""
    found = []

    def walk(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, inside))
            walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    walk(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def test_no_private_name_is_imported_from_another_module():
    taken = []
    for path in package_files():
        for node, _ in imports_of(path):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torchperf_tui"):
                taken += [f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.module}.{alias.name}"
                          for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert taken == []


def test_an_import_inside_a_function_says_why():
    """An internal import inside a function keeps something heavy off a path (torch, numpy, rich, Textual): its
    reason is a comment on it or on the line above. Everything else is imported at the module's top."""
    silent = []
    for path in package_files():
        lines = path.read_text(encoding="utf-8").split("\n")
        for node, inside in imports_of(path):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if not inside or not any(m.startswith("torchperf_tui") for m in modules):
                continue
            own = lines[node.lineno - 1:node.end_lineno]
            if not any("#" in line for line in own) and not lines[node.lineno - 2].strip().startswith("#"):
                silent.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {own[0].strip()}")
    assert silent == []
