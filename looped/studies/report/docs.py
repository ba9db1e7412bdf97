"""What the docs list that the code already knows, written by `looped report` so it cannot
drift: the notebooks, read from their jupytext sources."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from looped.studies.report.tables import md_table


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
