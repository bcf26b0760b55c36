"""No test writes a private field (a name starting with `_`) of an object other than its own `self`/`cls`: a test that
sets the app's or a client's internals checks a state a user can never reach, and breaks on a rename that changes
nothing a user sees. It drives the app through keys, public methods and seams (issue 22, point 6).

Found with `ast` in every file under tests/: an assignment, augmented assignment or `del` of `x._name` or of an item
of `x._name[...]`, and `setattr`/`delattr`/`monkeypatch.setattr`/`mock.patch.object` naming a private attribute.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
OWN = {"self", "cls"}

# monkeypatch.setattr of a private name of a module, not of the app: each with why, so the list only shrinks (an entry
# no longer found fails too).
KNOWN_MODULE_PATCHES = {
    ("engine/test_memsnap.py", "_record_memory_history"): "torch's own recorder, put back as torch had it",
    ("engine/test_nvml.py", "_default"): "the NVML module's cached default handle, reset between tests",
    ("engine/test_percentile_intervals.py", "_NEEDED"): "the stats module's cache of sample counts, emptied",
    ("test_cli.py", "_width"): "Rich's console width, fixed for one table",
    ("test_cli_baseline.py", "_width"): "Rich's console width, a terminal's 80 columns for the gate's lines",
}


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def owner_is_other(node: ast.expr) -> bool:
    return not (isinstance(node, ast.Name) and node.id in OWN)


def written_attribute(target: ast.expr) -> ast.Attribute | None:
    """The private attribute a store target writes: `x._a` itself, or `x._a` under `x._a[k]` / `x._a[k][j]`."""
    while isinstance(target, ast.Subscript):
        target = target.value
    if isinstance(target, ast.Attribute) and private(target.attr) and owner_is_other(target.value):
        return target
    return None


def store_targets(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if written_attribute(node) is not None:
                yield node.lineno, ast.unparse(node)


def patched_names(tree: ast.AST):
    """(line, the private name, the call) of each setattr-like call naming a private attribute."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        if not (func in ("setattr", "delattr") or func.endswith(".setattr") or func.endswith(".delattr")
                or func.endswith("patch.object")):
            continue
        args = node.args
        if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):  # "pkg.mod._name"
            name = args[0].value.rsplit(".", 1)[-1]
        elif len(args) >= 2 and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
            if not owner_is_other(args[0]):
                continue
            name = args[1].value
        else:
            continue
        if private(name):
            yield node.lineno, name, ast.unparse(node)


def private_writes(source: str, path: str = "<test>") -> tuple[list[str], set[tuple[str, str]]]:
    """(each private write as 'path:line: code', the (path, name) of each setattr-like patch of a private name)."""
    tree = ast.parse(source)
    writes = list(store_targets(tree))
    patches = set()
    for line, name, code in patched_names(tree):
        if (path, name) in KNOWN_MODULE_PATCHES:
            patches.add((path, name))
        else:
            writes.append((line, code))
    return [f"{path}:{line}: {code}" for line, code in sorted(writes)], patches


def test_no_test_writes_a_private_field_of_another_object():
    writes, patches = [], set()
    for path in sorted(TESTS.rglob("*.py")):
        found, known = private_writes(path.read_text(encoding="utf-8"), path.relative_to(TESTS).as_posix())
        writes += found
        patches |= known
    assert writes == [], "tests write private fields (drive the app through keys, public methods or a seam):\n" + \
        "\n".join(writes)
    assert patches == set(KNOWN_MODULE_PATCHES), f"no longer patched, drop from the list: " \
                                                 f"{set(KNOWN_MODULE_PATCHES) - patches}"


def test_the_scan_finds_each_way_of_writing_a_private_field():
    source = """
app._flag = 1
app.pane("timing")._record = None
client._jobs[7] = info
client._jobs[7]["x"] += 1
nvml._enter = lose
del app._cache
app._count += 1
setattr(app, "_flag", 1)
monkeypatch.setattr(client, "_jobs", {})
monkeypatch.setattr("torchperf_tui.cli._run", send)
"""
    writes, _ = private_writes(source)
    assert [w.split(":")[1] for w in writes] == [str(n) for n in range(2, 12)], writes
    allowed = """
self._x = 1
cls._y = 2
self._jobs[1] = 2
app.record = None
wrapped.__signature__ = sig
setattr(self, "_z", 3)
x = app._jobs[7]
"""
    assert private_writes(allowed) == ([], set())
