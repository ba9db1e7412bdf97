"""The notebooks' pairs: every notebooks/NAME.py has a NAME.ipynb with the same cells, and back.

.venv/bin/pytest tests/test_notebooks.py

The .py (jupytext percent format) is the source a reviewer reads; the .ipynb is what JupyterLab
and GitHub show, with outputs rendered by executing it (notebooks/README.md). Editing one and
forgetting `make notebooks` (jupytext --sync) leaves them different, which these tests catch.
Executing the notebooks is nbval's job (`make test` runs them); these checks only read files.
"""

from __future__ import annotations

import json
from pathlib import Path

import jupytext
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("*.py"))
RENDERED = sorted(NOTEBOOKS.glob("*.ipynb"))


def cells(path: Path) -> list[tuple[str, str]]:
    """(cell type, source) of every cell, as jupytext reads the file (magics uncommented)."""
    return [(c.cell_type, c.source.strip()) for c in jupytext.read(path).cells]


def test_there_are_notebooks_and_every_one_has_both_halves() -> None:
    assert SOURCES, f"no notebooks found in {NOTEBOOKS}"
    stems_py = {p.stem for p in SOURCES}
    stems_nb = {p.stem for p in RENDERED}
    assert stems_py - stems_nb == set(), "a .py without its .ipynb: run `make notebooks`"
    assert stems_nb - stems_py == set(), "an .ipynb without its .py: run `make notebooks`"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_pair_has_the_same_cells(source: Path) -> None:
    py, nb = cells(source), cells(source.with_suffix(".ipynb"))
    assert len(py) == len(nb), f"{source.stem}: {len(py)} cells in .py, {len(nb)} in .ipynb"
    for i, (a, b) in enumerate(zip(py, nb)):
        assert a == b, (
            f"{source.stem}: cell {i} differs between .py and .ipynb; run `make notebooks`"
        )


@pytest.mark.parametrize("rendered", RENDERED, ids=lambda p: p.stem)
def test_committed_outputs_are_clean(rendered: Path) -> None:
    """Rendered outputs come from a successful run, without per-cell timestamps (which would
    change every render and bloat diffs)."""
    nb = json.loads(rendered.read_text())
    for i, cell in enumerate(nb["cells"]):
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{rendered.name}: cell {i} holds an error output; re-render it"
        assert "execution" not in cell.get("metadata", {}), (
            f"{rendered.name}: cell {i} has execution timestamps; render with "
            "--ExecutePreprocessor.record_timing=False (notebooks/README.md)"
        )


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_follows_the_conventions(source: Path) -> None:
    """Each notebook uses the package (never a copy of it), has the LOOPED_FULL switch, opens
    with prose, and is listed in the reading order."""
    text = source.read_text()
    kinds = [kind for kind, _ in cells(source)]
    assert "from looped" in text, f"{source.name} imports nothing from looped"
    assert "LOOPED_FULL" in text, f"{source.name} has no LOOPED_FULL switch to full size"
    assert kinds[0] == "markdown", f"{source.name} must open with prose, not code"
    readme = (NOTEBOOKS / "README.md").read_text()
    assert source.stem in readme, f"{source.stem} is missing from notebooks/README.md"
