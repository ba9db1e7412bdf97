"""What the docs list that the code already knows, written by `looped report` so it cannot
drift: the notebooks (read from their jupytext sources) and the module map of
docs/ARCHITECTURE.md (read from the package's files)."""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

from looped.report.tables import md_table

# The tower of layers, lowest first: a module imports only from its own layer and those below
# (tests/test_layers.py enforces it); a module belongs to the layer of its longest prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("library", ("looped.errors", "looped.kernels", "looped.model", "looped.schedules",
                 "looped.schedule_spec", "looped.schedules_more", "looped.paper", "looped.config",
                 "looped.flops")),
    ("runtime", ("looped.runtime",)),
    ("data", ("looped.data",)),
    ("eval", ("looped.eval",)),
    ("training", ("looped.training",)),
    ("report", ("looped.report",)),
    ("experiments", ("looped.experiments",)),
    ("bench", ("looped.bench",)),
    ("commands", ("looped.commands", "looped.cli", "looped.__main__", "looped")),
)  # fmt: skip


@dataclass(frozen=True)
class Notebook:
    """One notebook as its source states it."""

    stem: str  # file stem: 02_depth_schedules
    title: str  # the heading without its number
    sections: tuple[str, ...]  # its numbered section headings, without their numbers


def _markdown_lines(source: str) -> list[str]:
    """The prose lines of a jupytext percent-format notebook, outside code fences."""
    lines, in_markdown, fenced = [], False, False
    for line in source.splitlines():
        if line.startswith("# %%"):
            in_markdown, fenced = "[markdown]" in line, False
            continue
        if not in_markdown:
            continue
        text = line[2:] if line.startswith("# ") else line.lstrip("#")
        if text.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(text)
    return lines


def read_notebook(path: Path) -> Notebook:
    """A notebook's title (`# 02 · Title`) and numbered sections (`## 1. Heading`)."""
    prose = _markdown_lines(path.read_text())
    title = next(line[2:] for line in prose if line.startswith("# "))
    sections = tuple(m.group(1) for line in prose if (m := re.match(r"## \d+\. (.+)", line)))
    return Notebook(path.stem, re.sub(r"^\d+\s*·\s*", "", title).strip(), sections)


def notebooks(root: Path) -> list[Notebook]:
    """Every notebook of ROOT/notebooks, in reading order."""
    return [read_notebook(p) for p in sorted((root / "notebooks").glob("[0-9]*.py"))]


def notebooks_section(root: Path, doc: Path = Path("README.md")) -> str:
    """A table of the notebooks, in reading order, with their sections."""
    rows = []
    for nb in notebooks(root):
        link = os.path.relpath(root / "notebooks" / f"{nb.stem}.ipynb", (root / doc).parent)
        name = f"[{nb.stem.split('_')[0]} · {nb.title}]({Path(link).as_posix()})"
        rows.append([name, "; ".join(nb.sections)])
    return md_table(["notebook", "its sections"], rows)


def layer_of(module: str) -> int:
    """The index in LAYERS of a module's layer (-1: none); the longest matching prefix wins."""
    prefixes = [(len(p), i, p) for i, (_, ps) in enumerate(LAYERS) for p in ps]
    found = [(n, i) for n, i, p in prefixes if (module + ".").startswith(p + ".")]
    return max(found)[1] if found else -1


def _modules(root: Path) -> dict[str, Path]:
    """Every module of the package by dotted name; a package's __init__ under the package's."""
    out = {}
    for path in sorted((root / "looped").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(tree: ast.AST) -> set[str]:
    """The dotted names a module imports anywhere (`from a import x`: a, a.x); the package has
    no relative and no type-only imports (tests/test_imports.py walks the graph its own way)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def package_imports(root: Path) -> dict[str, set[str]]:
    """Each module of the package and the package modules it imports (not their __init__)."""
    modules = _modules(root)
    packages = {m for m, path in modules.items() if path.name == "__init__.py"}
    graph = {}
    for name, path in modules.items():
        found = _imports(ast.parse(path.read_text()))
        graph[name] = {m for m in found if m in modules and m not in packages and m != name}
    return graph


def _first_sentence(path: Path) -> str:
    """A module docstring's first sentence, on one line, with its closing period dropped."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    paragraph = " ".join(doc.split("\n\n")[0].split()).replace("Fig. ", "Fig.\u00a0")
    first = re.split(r"(?<=[.?!]) ", paragraph)[0].rstrip(".")
    return first.replace("\u00a0", " ").replace("|", "/")


def tower_order(graph: dict[str, set[str]]) -> list[str]:
    """Modules lowest layer first, each after everything it imports (ties: by name)."""
    done: list[str] = []
    left = dict(graph)
    while left:
        ready = [m for m, deps in left.items() if deps <= set(done)]
        if not ready:
            raise ValueError(f"an import cycle among {sorted(left)}")
        first = min(ready, key=lambda m: (layer_of(m), m))
        done.append(first)
        del left[first]
    return done


def module_map(root: Path) -> str:
    """docs/ARCHITECTURE.md's module map: per module in tower order, its layer, imports and
    docstring's first sentence."""
    modules = _modules(root)
    graph = package_imports(root)
    rows = []
    for name in (n for n in tower_order(graph) if modules[n].name != "__init__.py"):
        deps = ", ".join(sorted(d.removeprefix("looped.") for d in graph[name])) or "-"
        path = f"`{modules[name].relative_to(root).as_posix()}`"
        rows.append([LAYERS[layer_of(name)][0], path, deps, _first_sentence(modules[name])])
    return md_table(["layer", "module", "imports from the package", "what it is for"], rows)
