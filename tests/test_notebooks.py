"""The notebooks' pairs: every notebooks/NAME.py has a NAME.ipynb with the same cells, and back.

.venv/bin/pytest tests/test_notebooks.py

The .py (jupytext percent format) is the source a reviewer reads; the .ipynb is what JupyterLab
and GitHub show, with outputs rendered by executing it (notebooks/README.md). Editing one and
forgetting `make notebooks` (jupytext --sync) leaves them different, which these tests catch.
Executing the notebooks is nbval's job (`make test` runs them); these checks read files, and
`make lab` is dry-run to see where it installs the JupyterLab settings.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
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
def test_committed_outputs_come_from_a_successful_run(rendered: Path) -> None:
    """What GitHub shows of a notebook is a run whose every cell worked."""
    nb = json.loads(rendered.read_text())
    for i, cell in enumerate(nb["cells"]):
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{rendered.name}: cell {i} holds an error output; re-render it"


def _printed(rendered: Path) -> str:
    """The text every output of a committed notebook shows, in order."""
    shown = []
    for cell in json.loads(rendered.read_text())["cells"]:
        for out in cell.get("outputs", []):
            data = {"text/plain": out.get("text", ""), **out.get("data", {})}
            shown += ["".join(v) for k, v in data.items() if k.startswith("text/")]
    return "".join(shown)


WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.mark.parametrize("rendered", RENDERED, ids=lambda p: p.stem)
def test_every_widget_has_a_static_rendering(rendered: Path) -> None:
    """A cell with knobs (sliders) also shows the figure of their default setting as a plain
    output, so the committed notebook reads without a kernel (GitHub renders no widget)."""
    nb = json.loads(rendered.read_text())
    for i, cell in enumerate(nb["cells"]):
        kinds = {k for out in cell.get("outputs", []) for k in out.get("data", {})}
        if WIDGET in kinds:
            assert "image/png" in kinds, (
                f"{rendered.name}: cell {i} shows a widget without a static figure of its "
                "default setting"
            )


def test_notebook_06_run_names_are_the_launchers():
    """Every run directory 06's prose names is one its generated launch commands create."""
    rendered = NOTEBOOKS / "06_full_scale.ipynb"
    printed = _printed(rendered)
    generated = set(re.findall(r"launch\.sh \S+ \"[^\"]+\" (runs/\S+)-s\$seed", printed))
    assert generated, "06 prints no launch commands"
    mentioned = set(
        re.findall(r"runs/(?:200m|1b)/[\w.\-]+", (NOTEBOOKS / "06_full_scale.py").read_text())
    )
    for path in mentioned:
        base = re.sub(r"-s\d+$", "", path)
        assert base in generated, f"06 names {path}, which no generated launch command writes"


def test_make_lab_installs_the_overrides_where_this_jupyterlab_reads_them():
    """`make lab` copies notebooks/jupyterlab-overrides.json to the overrides file of the
    JupyterLab it starts, so a double-click opens a .py notebook as a notebook."""
    commands = pytest.importorskip("jupyterlab.commands")
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    dry = subprocess.run(
        ["make", "-n", "-B", "lab", f"VENV={sys.prefix}"],
        cwd=NOTEBOOKS.parent, capture_output=True, text=True,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    target = Path(commands.get_app_dir()) / "settings" / "overrides.json"
    assert f"cp notebooks/jupyterlab-overrides.json {target}" in dry.stdout


def test_lab_overrides_name_settings_this_jupyterlab_has():
    """A misspelt plugin or key in the overrides is silently ignored by JupyterLab, so each
    one must be a setting the installed JupyterLab defines, with a value its schema accepts;
    .py files open in jupytext's notebook view."""
    jsonschema = pytest.importorskip("jsonschema")
    schemas = Path(sys.prefix) / "share/jupyter/lab/schemas"
    if not schemas.is_dir():
        pytest.skip("JupyterLab is not installed in this environment")
    overrides = json.loads((NOTEBOOKS / "jupyterlab-overrides.json").read_text())
    for plugin, values in overrides.items():
        package, name = plugin.split(":")
        schema_file = schemas / package / f"{name}.json"
        assert schema_file.is_file(), f"{plugin} is no JupyterLab settings plugin"
        properties = json.loads(schema_file.read_text())["properties"]
        for key, value in values.items():
            assert key in properties, f"{plugin} has no setting {key}"
            if "$ref" not in json.dumps(properties[key]):
                jsonschema.validate(value, properties[key])
    viewers = overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers["python"] == "Jupytext Notebook"
