"""Project set-up: one dependency list (pyproject) mirrored by environment.yml, both entry
points, and a README whose measured sections match the results files."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from looped import report

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


def test_readme_sections_are_generated_from_results():
    """The numbers in README.md are exactly what `looped report` renders from results/."""
    readme = (ROOT / "README.md").read_text()
    assert report.render(readme, ROOT) == readme, (
        "run `looped report` after `looped demo`/`looped bench`"
    )
