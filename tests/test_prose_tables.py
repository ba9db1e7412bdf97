"""Prose agrees with the tables it describes. A count of cells with a verdict ("2 cells
undecided") must be the count the next table with verdicts shows, and a verdict word quoted in a
sentence ("the verdict says "undecided"") must be one a table of the same section shows (a
section with no verdict in its tables describes none: ARCHITECTURE's account of the code). Checked
on the README, docs/ and the notebooks' committed renderings (their markdown cells and the
tables their cells display), in reading order."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from looped.studies.report import verdicts
from looped.studies.stats import Verdict

ROOT = Path(__file__).resolve().parents[1]
WORDS = sorted((v.value for v in Verdict), key=len, reverse=True)  # longest first: "no worse ..."
VERDICT = "|".join(map(re.escape, WORDS))
# a cell that is a verdict, or ends with one: "worse", "+1.03% [...], n=4, undecided",
# "worse (tolerance 0.8%)", "undecided, behind"
IN_CELL = re.compile(rf"(?:^|, )({VERDICT})(?:, behind)?(?: \([^)]*\))?$")
NUMBER = {w: i for i, w in enumerate("no one two three four five six seven eight nine ten".split())}
COUNT = re.compile(rf"\b(\d+|{'|'.join(NUMBER)}) cells? (?:are |were |still )?({VERDICT})\b", re.I)
QUOTED = re.compile(rf"\"({VERDICT})\"")


@dataclass
class Section:
    """A page's text under one heading: prose and tables, in reading order."""

    heading: str
    blocks: list[tuple[str, object]] = field(
        default_factory=list
    )  # ("prose", str) / ("table", Counter)

    def tables(self) -> list[Counter]:
        return [b for kind, b in self.blocks if kind == "table" and b]


def table_verdicts(rows: list[str]) -> Counter:
    """How many cells of a markdown table show each verdict."""
    found = Counter()
    for row in rows[2:]:
        for cell in row.strip().strip("|").split("|"):
            if m := IN_CELL.search(cell.strip()):
                found[m[1]] += 1
    return found


def sections(markdown: str) -> list[Section]:
    """The page cut at its headings, prose joined into paragraphs (a quote may wrap), code
    blocks left out; a table's row is also prose (a generated row may state a count, as a
    study's stop reason does)."""
    out, rows, para, fenced = [Section("(top)")], [], [], False
    for line in [*markdown.splitlines(), ""]:
        fenced ^= line.startswith("```")
        if fenced or line.startswith("```"):
            continue
        if para and (not line.strip() or line.startswith(("|", "#"))):
            out[-1].blocks.append(("prose", " ".join(para)))
            para = []
        if line.startswith("|"):
            rows.append(line)
            out[-1].blocks.append(("prose", line))
            continue
        if rows:
            out[-1].blocks.append(("table", table_verdicts(rows)))
            rows = []
        if line.startswith("#"):
            out.append(Section(line.lstrip("# ")))
        elif line.strip():
            para.append(line.strip())
    return out


def mismatches(markdown: str) -> list[str]:
    """Each count or quoted verdict in `markdown` that its tables do not show."""
    wrong = []
    for sec in sections(markdown):
        shown = set().union(*sec.tables()) if sec.tables() else set()
        for i, (kind, text) in enumerate(sec.blocks):
            if kind != "prose":
                continue
            for m in QUOTED.finditer(text):  # a section without verdicts describes no table
                if shown and m[1] not in shown:
                    wrong.append(f'{sec.heading}: "{m[1]}", but no table here shows it')
            for m in COUNT.finditer(text):
                said = int(m[1]) if m[1].isdigit() else NUMBER[m[1].lower()]
                after = [b for k, b in sec.blocks[i + 1 :] if k == "table" and b]
                if not after or after[0][m[2]] != said:
                    real = after[0][m[2]] if after else "no table"
                    wrong.append(f"{sec.heading}: '{m[0]}', the table beside it shows {real}")
    return wrong


def rendered_notebook(path: Path) -> str:
    """A committed notebook as a reader sees it: markdown cells and the markdown and text its
    code cells display, in order."""
    parts = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            parts.append("".join(cell["source"]))
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            parts.append("".join(data.get("text/markdown", "") or out.get("text", "")))
    return "\n\n".join(parts)


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _text(path: Path) -> str:
    return rendered_notebook(path) if path.suffix == ".ipynb" else path.read_text()


@pytest.mark.parametrize("path", PAGES + NOTEBOOKS, ids=lambda p: p.name)
def test_prose_agrees_with_the_tables_it_describes(path):
    found = mismatches(_text(path))
    assert not found, f"{path.name}: {found}"


def test_the_check_catches_a_count_or_a_quote_its_table_does_not_show():
    table = "| steps | gap |\n|---|---|\n| 480 | +0.1% [-0.2, +0.4], n=4, undecided |\n"
    head = "## A study\n\n"
    assert mismatches(head + "One cell undecided at 4 seeds.\n\n" + table) == []
    assert len(mismatches(head + "2 cells undecided at 4 seeds.\n\n" + table)) == 1
    assert mismatches(head + 'The verdict says\n"undecided".\n\n' + table) == []
    assert len(mismatches(head + 'The verdict says "no worse\nthan tolerance".\n\n' + table)) == 1
    said = head + 'The verdict says "worse".\n\n' + table
    assert mismatches(said) == ['A study: "worse", but no table here shows it']
    assert mismatches('## Code\n\nA wide interval reads "worse" nowhere.\n') == []
    other = "## Another\n\n" + table.replace("undecided", "worse")
    assert len(mismatches(said + other)) == 1  # a table under another heading does not count
    assert len(mismatches("| a |\n|---|\n| 2 cells undecided |\n\n" + table)) == 1  # a row too


def test_each_cost_row_names_the_model_and_run_its_number_comes_from():
    """The README's cost table: no two savings share a name. A modeled saving names its model;
    the bench's two wall-clock rows say which is a whole run's exact draws and which one short
    run, with the mean K its uniform draws averaged against the 8.5 the schedule expects."""
    rows = verdicts.cost_rows(ROOT)
    assert len({row[0] for row in rows}) == len(rows)
    bench = json.loads((ROOT / "results" / "bench.json").read_text())
    short = {"precision": "fp32", "steps": 2, "measured_saving": 0.5, "modeled_saving": 0.4,
             "depths": {"uniform:1-16": [16, 12]}}  # fmt: skip
    row = verdicts.bench_row(bench, short)
    assert row[0].endswith("a short run") and "averaging K=14.0 (expected 8.5)" in row[3]
    assert row[2] == "50.0% timed, 40.0% modeled for its draws"
    whole = {k: v for k, v in short.items() if k != "depths"}
    assert verdicts.bench_row(bench, whole)[0].endswith("a whole run")
    for row in rows:
        assert re.search(r"d=\d+", row[3]), row
