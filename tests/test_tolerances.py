"""One tolerance per recipe: every verdict a page shows is read at the tolerance looped/paper.py
states for that recipe (0.5% for K=2 (67%), 0.8% for K=4 (80%)), wherever the table sits: the
README, docs/ and the notebooks' committed outputs. The verdict is recomputed from the interval
the table prints, so a row judged at another recipe's tolerance fails even where its tolerance
column is right (and the other way round)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import looped.studies.stats as stats
from looped import paper
from looped.studies.report import verdicts
from looped.studies.stats import Verdict

ROOT = Path(__file__).resolve().parents[1]
NUM = r"([+-]?\d+\.\d+)%?"
# "+0.26% [+0.06, +0.46]" or "-33.9% [-52.4%, -8.4%]", then optionally ", n=4, within tolerance"
INTERVAL = re.compile(rf"^{NUM} \[{NUM}, {NUM}\](?:, n=(\d+)(?:, (.+))?)?$")
CLAIM = re.compile(r"^K=(\d+) for (\d+)%")  # the claims table names a recipe by its fixed phase
VERDICT_WORDS = {v.value: v for v in Verdict}


def _recipe(text: str) -> str | None:
    """The recipe (a spec in paper.TOLERANCE) a header or cell names, if it names one."""
    for spec in paper.TOLERANCE:
        if paper.label(spec) in text:
            return spec
    if m := CLAIM.match(text):
        k, frac = int(m[1]), int(m[2]) / 100
        for spec in paper.TOLERANCE:
            if spec.startswith("fixed-first") and paper.fixed_phase(spec) == (k, frac):
                return spec
    return None


def md_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every markdown table in `text`: (header, rows), cells stripped."""
    tables, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif block:
            if len(block) > 2:
                tables.append((block[0], block[2:]))
            block = []
    return tables


def verdicts_shown(header: list[str], row: list[str]) -> list[tuple[str, stats.Interval, str, str]]:
    """(recipe, interval, verdict word, tolerance cell or "") for each interval in a row that has
    a verdict beside it: in its own cell, or in the row's "verdict" column."""
    named = {h.lower(): c for h, c in zip(header, row, strict=False)}
    row_recipe = next((r for c in row if (r := _recipe(c))), None)
    found = []
    for head, cell in zip(header, row, strict=False):
        if not (m := INTERVAL.match(cell)):
            continue
        word = m[5] or named.get("verdict")
        recipe = _recipe(head) or row_recipe
        if word in VERDICT_WORDS and recipe:
            mean, lo, hi = (float(x) / 100 for x in m.groups()[:3])
            iv = stats.Interval(mean, lo, hi, int(m[4] or 2), ())
            found.append((recipe, iv, word, named.get("tolerance", "")))
    return found


def readable_verdicts(iv: stats.Interval, tol: float, unit: float = 1e-4) -> set[str]:
    """The verdicts an interval shown to two decimals in percent allows: each end may lie half
    a shown unit either way, so an end printed on the tolerance (+0.80 against 0.8%) reads as
    either side of it; the docs' verdict comes from the unrounded end."""
    half = unit / 2
    return {
        stats.verdict(stats.Interval(iv.mean, iv.lo + a, iv.hi + b, iv.n, ()), tol).value
        for a in (-half, 0, half)
        for b in (-half, 0, half)
    }


def wrong_tolerances(text: str) -> list[str]:
    """Each verdict in `text`'s tables that its recipe's tolerance does not give, or whose
    tolerance column is not its recipe's."""
    wrong = []
    for header, rows in md_tables(text):
        for row in rows:
            for recipe, iv, word, tol_cell in verdicts_shown(header, row):
                tol = paper.tolerance(recipe)
                if tol_cell and tol_cell != f"{tol:.1%}":
                    wrong.append(f"{paper.label(recipe)} shown at {tol_cell}: {' | '.join(row)}")
                if VERDICT_WORDS[word] is Verdict.NOT_INFORMATIVE or iv.n < 2:
                    continue  # no interval read: the bigram rule or one seed decided it
                if word not in readable_verdicts(iv, tol):
                    wrong.append(f"{paper.label(recipe)} at {tol:.1%} is not '{word}': {row}")
    return wrong


def notebook_outputs(path: Path) -> str:
    """The text and markdown a committed notebook shows."""
    shown = []
    for cell in json.loads(path.read_text())["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            shown.append("".join(out.get("text", "") or data.get("text/markdown", "")))
    return "\n\n".join(shown)  # one output's table never runs into the next


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_the_paper_states_one_tolerance_per_recipe():
    assert paper.tolerance(paper.RECIPE_200M) == 0.005
    assert paper.tolerance(paper.FIXED_FIRST) == 0.008 == paper.tolerance("fixed-first K=4 (80%)")
    with pytest.raises(KeyError, match="no tolerance"):
        paper.tolerance(paper.UNIFORM)


@pytest.mark.parametrize("path", PAGES + NOTEBOOKS, ids=lambda p: p.name)
def test_every_verdict_shown_reads_its_recipes_tolerance(path):
    text = notebook_outputs(path) if path.suffix == ".ipynb" else path.read_text()
    assert not wrong_tolerances(text), f"{path.name}: {wrong_tolerances(text)}"


def test_the_bios_claims_judge_k4_at_k4s_tolerance_on_both_bases():
    """The regression this file was written for: the equal-FLOPs row judged K=4 (80%) at 0.5%."""
    bios = verdicts.load_result(ROOT, "demo")
    rows = verdicts.bios_rows(bios)
    assert len(rows) == 2 and {r[6] for r in rows} == {"0.8%"}


def test_the_maps_cells_carry_their_recipes_tolerance():
    """results/map.json stores the tolerance each cell was judged at: the paper's for it."""
    study = json.loads((ROOT / "results" / "map.json").read_text())
    judged = [c for b in study["blocks"].values() for c in b["cells"] if "tolerance" in c]
    assert judged
    for c in judged:
        assert c["tolerance"] == paper.tolerance(c["schedule"]), c["label"]


def test_the_check_catches_a_recipe_at_another_recipes_tolerance():
    k4 = "| K=4 for 80% ends within its tolerance | +0.20% [-1.00%, +0.70%] | {} | {} |"
    head = "| claim | gap | tolerance | verdict |\n|---|---|---|---|\n"
    assert wrong_tolerances(head + k4.format("0.8%", "no worse than tolerance")) == []
    assert len(wrong_tolerances(head + k4.format("0.5%", "no worse than tolerance"))) == 1
    assert len(wrong_tolerances(head + k4.format("0.8%", "worse"))) == 1
    cell = "| steps | fixed-first K=2 (67%) vs uniform |\n|---|---|\n| 480 | {} |\n"
    assert wrong_tolerances(cell.format("+0.26% [+0.06, +0.46], n=4, within tolerance")) == []
    assert len(wrong_tolerances(cell.format("+0.26% [+0.06, +0.66], n=4, within tolerance"))) == 1
