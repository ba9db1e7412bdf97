"""Project set-up: one dependency list (pyproject) mirrored by environment.yml, both entry
points, and docs a reader can follow: the README's first screen tells the story, a hand-written
count cannot drift, every link and figure resolves, the report layer reads results only. The
docs' numbers, recomputed from results/: tests/test_doc_numbers.py."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from looped.studies.commands import report as report_command
from looped.studies.report import docs

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


def _sections(text: str) -> dict[str, str]:
    return dict(re.findall(r"<!-- (\w+):begin -->\n(.*?)\n<!-- \1:end -->", text, re.S))


def test_readme_first_screen_tells_the_story():
    """Before its first section, in at most 40 lines: the terms, the finding (its numbers:
    tests/test_doc_numbers.py), the two commands and one figure (the rendered first screen at
    1280x900 is checked by eye: scripts/screenshots.py); the verdicts and the map of the code
    follow, the rest links out."""
    lines = (ROOT / "README.md").read_text().splitlines()
    head = "\n".join(lines[: lines.index("## What we measured")])
    assert head.count("\n") < 40
    assert "finding" in _sections(head)
    assert len(re.findall(r"!\[[^]]*\]\(figures/[\w.]+\.png\)", head)) == 1
    assert "make demo" in head and "make test" in head and "](docs/RESULTS.md)" in head
    rest = _sections("\n".join(lines))
    assert "verdicts" in rest and "## The code" in lines and "](docs/USAGE.md)" in "\n".join(lines)


# the terms the README's first screen uses, each defined (in bold) before its first use
GLOSSARY = ("serving depth", "uniform 1..16", "fixed-first K=4 (80%)", "K=2 (67%)", "gap",
            "tolerance", "d", "tokens/param")  # fmt: skip


def test_readme_defines_each_term_before_using_it():
    """K is what the opening sentence explains; every other term the finding and its table
    use is defined, in bold, where it first appears."""
    text = (ROOT / "README.md").read_text()
    body = text[text.index("\n\n") :]  # past the title
    for term in GLOSSARY:
        first = re.search(rf"(?<![\w=]){re.escape(term)}(?![\w=])", body)
        assert first and body[first.start() - 2 : first.start()] == "**", term
    assert "K times" in body.split("\n\n")[1]


def _prose(text: str) -> str:
    """A doc's hand-written text: the generated sections left out."""
    return re.sub(r"<!-- (\w+):begin -->.*?<!-- \1:end -->", "", text, flags=re.S)


DOC_FILES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "notebooks" / "README.md",
]


def test_no_hand_written_notebook_count_can_drift():
    """A sentence typed by hand that states the count of notebooks ("six notebooks") must state
    the real one."""
    n = len(docs.notebooks(ROOT))
    spelled = "no one two three four five six seven eight nine ten eleven twelve".split()
    words = {w: k for k, w in enumerate(spelled)} | {str(k): k for k in range(100)}
    for path in DOC_FILES:
        for said in re.findall(r"\b(\w+) notebooks\b", _prose(path.read_text()).lower()):
            assert words.get(said, n) == n, f"{path.name} says '{said} notebooks'; there are {n}"


def test_the_readme_s_map_of_the_code_names_every_module_and_subpackage():
    """The map is written by hand; each top-level module and subpackage of looped/ is linked
    from it (so a new one cannot go unmentioned), and each link names one that exists."""
    pkg = ROOT / "looped"
    parts = {f"[`{p.stem}`](looped/{p.name})" for p in pkg.glob("*.py") if p.stem[:2] != "__"}
    parts |= {
        f"[`{p.name}/`](looped/{p.name})" for p in pkg.iterdir() if (p / "__init__.py").is_file()
    }
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## The code\n", 1)[1].split("\n## ", 1)[0]
    linked = set(re.findall(r"\[`[\w/]+`\]\(looped/[\w./]*\)", section))
    assert parts - linked == set(), "not on the README's map of the code"
    assert linked - parts == set(), "on the README's map of the code, not in looped/"


def test_every_link_resolves_and_every_figure_is_shown():
    """Relative links and images in the docs point at files that exist, and every figure in
    figures/ appears on the results page."""
    for path in DOC_FILES:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"\w+://", target):
                continue
            assert (path.parent / target).exists(), f"{path.name} links {target}, which is missing"
    results = (ROOT / "docs" / "RESULTS.md").read_text()
    for png in sorted((ROOT / "figures").glob("*.png")):
        assert f"(../figures/{png.name})" in results, f"docs/RESULTS.md does not show {png.name}"


def test_the_report_layer_reads_results_not_the_studies():
    """looped/studies/report/ draws and writes from results dicts: it never imports the studies that
    compute them (looped.studies) or the training loop, at module level or in a function."""
    import ast

    for path in sorted((ROOT / "looped" / "report").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert not name.startswith(("looped.studies", "looped.training")), (
                    f"{path.name} imports {name}"
                )
