"""The learner's notebooks (01-04 and 06) import only the library: what they teach is what a
learner's own code can import, never the reproduction's harness (`looped.studies`). Notebooks 05
and 07 read the studies' results and are the harness's. The layers are test_layers.LAYERS."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_layers import HARNESS, LAYERS, layer_of

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
LEARNER = ("01", "02", "03", "04", "06")  # the library's notebooks, by number
HARNESS_LAYER = next(i for i, (name, _) in enumerate(LAYERS) if name == HARNESS)


def learner_notebooks() -> list[Path]:
    return [p for p in sorted(NOTEBOOKS.glob("*.py")) if p.name[:2] in LEARNER]


def package_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of the package in a notebook's source, at any depth (a
    cell's function too); `from looped import x` names the module looped.x."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "looped"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "looped":
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def harness_imports(source: str) -> list[str]:
    """ "line: module" for each import that reaches the harness (a name imported from a library
    module, looped.flops.saving say, belongs to that module's layer)."""
    return [f"{line}: {m}" for line, m in package_imports(source) if layer_of(m) >= HARNESS_LAYER]


def test_there_are_five_learner_notebooks():
    assert [p.name[:2] for p in learner_notebooks()] == list(LEARNER)


@pytest.mark.parametrize("path", learner_notebooks(), ids=lambda p: p.stem)
def test_a_learner_notebook_imports_only_the_library(path: Path):
    source = path.read_text(encoding="utf-8")
    assert package_imports(source), f"{path.name} imports nothing from looped"
    found = harness_imports(source)
    assert not found, f"{path.name} imports the harness:\n" + "\n".join(found)


def test_the_check_catches_every_way_to_import_the_harness():
    source = (
        "import looped.studies.stats\n"
        "from looped.studies import map\n"
        "from looped import studies\n"
        "def f():\n    from looped.studies.report.tables import md_table\n"
        "from looped.flops import saving\n"
        "import looped.model as m\n"
    )
    assert harness_imports(source) == [
        "1: looped.studies.stats",
        "2: looped.studies.map",
        "3: looped.studies",
        "5: looped.studies.report.tables.md_table",
    ]
