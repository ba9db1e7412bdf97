"""Project set-up: one dependency list (pyproject) mirrored by environment.yml, both entry
points, and docs a reader can follow: their generated sections are what `looped report` writes,
every link and figure resolves, the report layer reads results only. The docs' numbers,
recomputed from results/: tests/test_doc_numbers.py."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from looped.studies.commands import report as report_command

ROOT = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_lists_the_same_dependencies_as_pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {r for r in project["dependencies"] + project["optional-dependencies"]["dev"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = {r for r in pip if not r.startswith("-e")}
    assert {_name(r): r for r in listed} == {_name(r): r for r in declared}
    assert "-e .[dev]" in pip


def test_console_script_and_module_entry_point_agree():
    direct = subprocess.run(
        [sys.executable, "-m", "looped", "--help"], capture_output=True, text=True
    )
    script = Path(sys.executable).with_name("looped")
    via_script = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert direct.returncode == 0 and via_script.returncode == 0
    assert direct.stdout == via_script.stdout and "train" in direct.stdout


def test_unknown_command_exits_2():
    proc = subprocess.run(
        [sys.executable, "-m", "looped", "frobnicate"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "unknown command" in proc.stderr


def test_report_writes_each_doc_of_a_root_that_has_it(tmp_path):
    """`looped report --root DIR` renders the docs DIR holds (a lone README here, from the
    committed demo results) and leaves out the ones it lacks."""
    (tmp_path / "README.md").write_text("<!-- demo:begin -->\nold\n<!-- demo:end -->\n")
    demo = ROOT / "results" / "demo.json"
    assert report_command.main(["--root", str(tmp_path), "--results", str(demo)]) == 0
    text = (tmp_path / "README.md").read_text()
    assert "old" not in text and "Equal FLOPs" in text
    assert report_command.main(["--root", str(tmp_path), "--results", str(demo), "--check"]) == 0


def test_the_committed_docs_are_what_looped_report_writes_from_results():
    """Every generated section of README.md, docs/ and notebooks/README.md (the tables, the
    notebooks' reading order) equals what `looped report` renders from results/ and the code."""
    assert report_command.main(["--root", str(ROOT), "--check"]) == 0


DOC_FILES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "notebooks" / "README.md",
]
LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown page's headings."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    headings = re.findall(r"^#+ (.+)$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_link_resolves_and_every_figure_is_shown():
    """Relative links and images in the docs point at files that exist, an anchor at a heading
    of the page it names, and every figure in figures/ appears on the results pages."""
    for path in DOC_FILES:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
        for target, anchor in LINK.findall(text):
            if re.match(r"\w+:", target):
                continue
            linked = path.parent / target if target else path
            assert linked.exists(), f"{path.name} links {target}, which is missing"
            if anchor and linked.suffix == ".md":
                assert anchor in _anchors(linked), f"{path.name} links {target}#{anchor}"
    # the results page and its appendix, the history
    results = "".join((ROOT / "docs" / p).read_text() for p in ("RESULTS.md", "HISTORY.md"))
    for png in sorted((ROOT / "figures").glob("*.png")):
        assert f"(../figures/{png.name})" in results, f"the results pages do not show {png.name}"


def test_the_report_layer_reads_results_not_the_studies():
    """looped/studies/report/ draws and writes from results dicts: it never imports the studies
    that compute them (the rest of looped.studies but its statistics and recipe names) or the
    training loop, at module level or in a function."""
    allowed = (
        "looped.studies.report",
        "looped.studies.stats",
        "looped.studies.gapfit",
        "looped.studies.recipe",  # a recipe's name read as its knobs: no study in it
    )
    files = sorted((ROOT / "looped" / "studies" / "report").glob("*.py"))
    assert files
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                study = name.startswith("looped.studies") and not name.startswith(allowed)
                assert not (study or name.startswith("looped.training")), (
                    f"{path.name} imports {name}"
                )
