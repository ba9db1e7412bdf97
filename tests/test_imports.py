"""The package's import graph has no cycles: no module imports one that imports it back, directly
or through others, counting imports inside functions (they run too, only later). Imports under
`if TYPE_CHECKING:` never run: the runtime graph (and the architecture map) leaves them out, and
a second test counts them too, so that no two modules need each other even for their types."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "looped"

# Cycles known and accepted (none); the test fails when this set is stale.
KNOWN: set[frozenset[str]] = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported(path: Path, modules: set[str], type_only: bool = False) -> set[str]:
    """The package modules `path` imports anywhere in its code (module level or in functions);
    with `type_only`, also those under `if TYPE_CHECKING:`."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_only:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # from looped import checkpoint
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {m for m in found if m in modules and m != name and m != "looped"}


def import_graph(type_only: bool = False) -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: imported(path, set(paths), type_only) for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_no_module_imports_one_that_imports_it_back():
    found = cycles(import_graph())
    new = [sorted(c) for c in found - KNOWN]
    assert not new, f"import cycles: {new}; move the shared piece into a module both can import"
    assert not KNOWN - found, f"{[sorted(c) for c in KNOWN - found]} is gone: drop it from KNOWN"


def test_no_cycle_even_through_type_only_imports():
    """An import under `if TYPE_CHECKING:` does not run, but a cycle through one still ties two
    modules together: neither can be read, moved or tested without the other."""
    found = cycles(import_graph(type_only=True))
    assert not found, (
        f"import cycles through TYPE_CHECKING imports: {[sorted(c) for c in found]}; "
        "move the shared type into a module both can import"
    )


def test_the_graph_sees_function_level_and_from_package_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "looped"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from looped.b import g\n")
    (pkg / "b.py").write_text("from looped import c\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from looped import a\n"
        "def h():\n    from . import a\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    graph = import_graph()
    assert graph == {
        "looped": set(),
        "looped.a": {"looped.b"},
        "looped.b": {"looped.c"},
        "looped.c": {"looped.a"},
    }
    assert cycles(graph) == {frozenset({"looped.a", "looped.b", "looped.c"})}
    # a cycle only through a type-only import: left out at runtime, found with type_only
    (pkg / "d.py").write_text("import looped.e\n")
    (pkg / "e.py").write_text(
        "import typing\nif typing.TYPE_CHECKING:\n    from looped.d import X\nelse:\n    pass\n"
    )
    assert import_graph()["looped.e"] == set()
    assert import_graph(type_only=True)["looped.e"] == {"looped.d"}
    assert frozenset({"looped.d", "looped.e"}) not in cycles(import_graph())
    assert frozenset({"looped.d", "looped.e"}) in cycles(import_graph(type_only=True))


def test_subpackage_init_files_hold_only_a_docstring():
    """So that the map can treat `from looped.runtime import lock` as an arrow to lock alone."""
    for path in PACKAGE.glob("*/__init__.py"):
        body = ast.parse(path.read_text()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), f"{path} holds code"
