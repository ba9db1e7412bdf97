"""The notebooks' pairs: every notebooks/NAME.py has a NAME.ipynb with the same cells, and back.

.venv/bin/pytest tests/test_notebooks.py

The .py (jupytext percent format) is the source a reviewer reads; the .ipynb is what JupyterLab
and GitHub show, with outputs rendered by executing it (notebooks/README.md). Editing one and
forgetting `make notebooks` (jupytext --sync) leaves them different, which these tests catch.
Executing the notebooks is nbval's job (`make test` runs them); these checks only read files.
"""

from __future__ import annotations

import json
import re
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


# -- output hygiene: what a reader sees in the committed .ipynb ------------------------------
# Paths that only exist on the machine that rendered the notebook.
MACHINE_PATHS = re.compile(r"(/work/|/home/|/tmp/|/Users/|/root/|/private/var/|[A-Z]:\\\\)")
# An object's default repr: what a cell ending in a call with an ignored return value shows.
OBJECT_REPR = re.compile(r"^<[\w.]+ (object )?at 0x[0-9a-f]+>$")


def _outputs(rendered: Path):
    """(cell index, cell source, output, its text) of every output of a committed notebook."""
    nb = json.loads(rendered.read_text())
    for i, cell in enumerate(nb["cells"]):
        source = "".join(cell.get("source", ""))
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text = "".join(out.get("text", ""))
            else:
                data = out.get("data", {})
                text = "".join(
                    "".join(v) if isinstance(v, list) else str(v)
                    for k, v in data.items()
                    if k.startswith("text/")
                )
            yield i, source, out, text


@pytest.mark.parametrize("rendered", RENDERED, ids=lambda p: p.stem)
def test_no_stderr_or_warning_in_outputs(rendered: Path) -> None:
    for i, _, out, text in _outputs(rendered):
        assert not (out.get("output_type") == "stream" and out.get("name") == "stderr"), (
            f"{rendered.name}: cell {i} writes to stderr: {text[:120]!r}"
        )
        assert not re.search(r"\w*Warning:", text), (
            f"{rendered.name}: cell {i} shows a warning: {text[:120]!r}"
        )


@pytest.mark.parametrize("rendered", RENDERED, ids=lambda p: p.stem)
def test_no_machine_paths_in_outputs(rendered: Path) -> None:
    for i, _, _, text in _outputs(rendered):
        found = MACHINE_PATHS.search(text)
        assert not found, (
            f"{rendered.name}: cell {i} shows a path of the rendering machine "
            f"({text[max(0, found.start() - 40) : found.end() + 40]!r}); print paths relative "
            "to the repository"
        )


@pytest.mark.parametrize("rendered", RENDERED, ids=lambda p: p.stem)
def test_numbers_are_printed_rounded(rendered: Path) -> None:
    """No float noise such as `"lr": 0.0012000000000000001` in what a notebook prints."""
    from looped.studies.report.checks import FLOAT_NOISE

    for i, _, _, text in _outputs(rendered):
        found = FLOAT_NOISE.search(text)
        assert not found, (
            f"{rendered.name}: cell {i} prints float noise "
            f"({text[max(0, found.start() - 40) : found.end() + 10]!r}); round it"
        )


@pytest.mark.parametrize("rendered", RENDERED, ids=lambda p: p.stem)
def test_no_stray_result_of_a_non_result(rendered: Path) -> None:
    """A cell that ends in `torch.manual_seed(0)` shows `<torch._C.Generator at 0x...>`."""
    for i, _, out, text in _outputs(rendered):
        if out.get("output_type") == "execute_result":
            assert not OBJECT_REPR.match(text.strip()), (
                f"{rendered.name}: cell {i} ends in an expression whose value means nothing "
                f"({text.strip()!r}); assign it (`_ = ...`) or end the cell with a statement"
            )


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


@pytest.mark.parametrize("rendered", RENDERED, ids=lambda p: p.stem)
def test_a_widget_opened_without_a_kernel_shows_a_note_not_its_repr(rendered: Path) -> None:
    """JupyterLab without a kernel (and without saved widget state) falls back to a widget's
    text/plain: that must be a sentence, never `HBox(children=(...`."""
    for i, _, out, _ in _outputs(rendered):
        data = out.get("data", {})
        if WIDGET in data:
            text = "".join(data.get("text/plain", ""))
            assert "children=" not in text and "knobs" in text, f"{rendered.name}: cell {i}"


def test_the_knobs_notebooks_have_knobs() -> None:
    """02 (schedule knobs) and 04 (saving knobs) carry committed widgets."""
    for stem in ("02_schedules", "04_flop_model"):
        text = (NOTEBOOKS / f"{stem}.ipynb").read_text()
        assert WIDGET in text, f"{stem} has no widget output; execute it (notebooks/README.md)"


def test_notebook_06_run_names_are_the_launchers():
    """Every run directory 06's prose names is one its generated launch commands create."""
    rendered = NOTEBOOKS / "06_full_scale.ipynb"
    printed = "".join(text for _, _, _, text in _outputs(rendered))
    generated = set(re.findall(r"launch\.sh \S+ \"[^\"]+\" (runs/\S+)-s\$seed", printed))
    assert generated, "06 prints no launch commands"
    mentioned = set(
        re.findall(r"runs/(?:200m|1b)/[\w.\-]+", (NOTEBOOKS / "06_full_scale.py").read_text())
    )
    for path in mentioned:
        base = re.sub(r"-s\d+$", "", path)
        assert base in generated, f"06 names {path}, which no generated launch command writes"


def test_make_lab_opens_py_notebooks_as_notebooks():
    """`make lab` installs a JupyterLab settings override that makes jupytext's notebook view
    the default viewer of .py files, so a double-click opens a notebook as notebooks/README.md
    promises."""
    overrides = json.loads((NOTEBOOKS / "jupyterlab-overrides.json").read_text())
    viewers = overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers["python"] == "Jupytext Notebook"
    makefile = (NOTEBOOKS.parent / "Makefile").read_text()
    assert "share/jupyter/lab/settings/overrides.json" in makefile
    assert "notebooks/jupyterlab-overrides.json" in makefile


def test_lab_overrides_name_settings_this_jupyterlab_has():
    """A misspelt plugin or key in the overrides is silently ignored by JupyterLab, so each
    one must be a setting the installed JupyterLab defines, with a value its schema accepts
    (the name column's room in the file browser, Markdown as a preview, no news pop-up)."""
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
    browser = overrides["@jupyterlab/filebrowser-extension:browser"]
    assert browser["showLastModifiedColumn"] is False  # paired names fit the sidebar
