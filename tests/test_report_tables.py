"""The diagnosis's and the text track's generated sections: tables only, and every number in
them is its results file's, recomputed here from the file; the bios tables fit GitHub's column."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from looped import paper
from looped.studies import stats
from looped.studies.report import bios, diagnose, text

ROOT_DIR = Path(__file__).resolve().parents[1]
RESULTS = ROOT_DIR / "results"


def _load(name: str) -> dict:
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"no committed results/{name}.json")
    return json.loads(path.read_text())


def _tables(section: str) -> list[list[list[str]]]:
    """Each markdown table of a section as rows of cells (header and rule left out)."""
    blocks = section.strip().split("\n\n")
    assert all(line.startswith("|") for b in blocks for line in b.splitlines()), "not a table"
    return [[[c.strip() for c in row.strip("|").split("|")] for row in b.splitlines()[2:]]
            for b in blocks]  # fmt: skip


def test_every_number_of_the_diagnosis_is_its_results_file():
    result = _load("diagnose")
    v, meta = result["variants"], result["meta"]
    settings, summary, agreement, interventions = _tables(diagnose.section(result))
    assert settings[0][:5] == [meta["preset"], str(meta["d_model"]), str(meta["settings"]["steps"]),
                               str(meta["tokens_per_step"]), str(meta["settings"]["seeds"])]  # fmt: skip
    for row, (variant, e) in zip(summary, v.items(), strict=True):
        assert row[0] == paper.label(diagnose.SPECS[variant])
        assert float(row[1]) == pytest.approx(e["mean_nll"], abs=5e-4)
        if variant == "uniform":
            rest = [x for k, x in e["grad_norm_by_depth"].items() if k != "1"]
            assert float(row[3]) == pytest.approx(e["grad_norm_by_depth"]["1"], abs=5e-3)
            assert float(row[4]) == pytest.approx(np.median(rest), abs=5e-3)
    for row in agreement:
        probe = next(e for k, e in v.items() if diagnose.label(k) == row[0])["agreement"][-1]
        d = probe["depths"]
        assert float(row[2]) == pytest.approx(probe["cosine"][d.index(1)][d.index(16)], abs=5e-3)
    u, f = v["uniform"]["seed_mean_nll"], v["fixed-first"]["seed_mean_nll"]
    for row, variant in zip(interventions, diagnose.INTERVENTIONS, strict=True):
        x = v[variant]["seed_mean_nll"]
        share = (np.mean(u) - np.mean(x)) / (np.mean(u) - np.mean(f))
        seeds = [(a - c) / (a - b) for a, b, c in zip(u, f, x)]
        assert row[4] == f"{share:.0%}" and row[5] == f"{min(seeds):.0%} to {max(seeds):.0%}"


def test_every_number_of_the_text_section_is_its_results_file():
    result = _load("demo_text")
    baseline = result.get("baselines")
    _, base, table, verdicts, _ = _tables(text.section(result, "looped demo"))
    worst = max(max(r["mean_nll"]["max"], r["uniform_nll"]["max"]) for r in result["equal_tokens"])
    assert float(base[0][3]) == pytest.approx(worst, abs=5e-4)
    assert float(base[0][2]) == pytest.approx(baseline["bigram"], abs=5e-4)
    rows = result["equal_tokens"] + result["equal_flops"]
    for cells, r in zip(table, rows, strict=True):
        assert cells[1] == paper.label(r["schedule"])
        assert float(cells[4].split()[0]) == pytest.approx(r["mean_nll"]["mean"], abs=5e-4)
    fixed_first = [r for r in result["equal_tokens"] if r["schedule"].startswith("fixed-first")]
    for cells, r in zip(verdicts, fixed_first, strict=True):
        tol = paper.tolerance(r["schedule"])
        iv = stats.ratio_interval(r["vs_uniform_by_seed"]["values"])
        found = stats.verdict(iv, tol, worst < baseline["bigram"])
        assert cells[3] == found.value
        assert cells[1] == f"{100 * iv.mean:+.1f}% [{100 * iv.lo:+.1f}, {100 * iv.hi:+.1f}]"


GITHUB_COLUMN = 890  # px: the width of a README's or a doc's text on github.com
PX_PER_CHAR, CELL_PADDING = 7.5, 26  # GitHub's 16 px font, a cell's 13 px padding either side


def rendered_width(table: str) -> float:
    """Roughly how wide GitHub draws a markdown table, in px: it wraps a cell's text at spaces
    before it lets a table scroll, so a column is as wide as its longest word (its widest cell's
    unbreakable run) plus the cell's padding. Hyphens may break too, so this errs wide: it puts
    the demo's old 12-column tables at 972 px, which a browser drew 947 and 951 px wide."""
    rows = [[c.strip() for c in row.strip().strip("|").split("|")] for row in table.splitlines()]
    rows = [r for r in rows if not set("".join(r)) <= set("-: ")]  # the rule line
    return sum(
        PX_PER_CHAR * max(len(word) for cell in column for word in cell.split() or [""])
        + CELL_PADDING
        for column in zip(*rows)
    )


def test_the_bios_tables_fit_githubs_column():
    """No bios table of RESULTS is cut off in GitHub's column (the K=16 column of the summaries
    once was), with room to spare for a wider number."""
    result = _load("demo")
    tables = [b for b in bios.section(result).split("\n\n") if b.startswith("|")]
    assert len(tables) >= 3
    for table in tables:
        assert rendered_width(table) < GITHUB_COLUMN - 40, table.splitlines()[0]
    old = "| " + " | ".join(["fixed-first", "0.01", "steps", "compute", "wall-clock",
                             "(1.248-1.797)", "uniform", "per-seed", "bits/person", "31.1",
                             "26.5", "K=16"]) + " |"  # fmt: skip
    assert rendered_width(old) > GITHUB_COLUMN  # the estimate sees the old tables overflow


def test_the_demos_recipe_change_fits_githubs_column():
    from looped.studies.report.render import demo_recipe_section

    table = demo_recipe_section(Path(__file__).resolve().parents[1])
    assert table.startswith("| track") and rendered_width(table) < GITHUB_COLUMN - 40


def test_the_claims_move_to_the_chosen_recipe_once_it_has_judged_their_cell(tmp_path):
    """The claims table reads the map's d64 block until the probe's chosen recipe has the same
    length judged for every fixed-first recipe at a planned look; then it reads that rerun and
    names its recipe. An interim look, or another length, leaves it."""
    from looped.studies.report import verdicts
    from looped.studies.report.block import longest

    root = Path(__file__).resolve().parents[1]
    results = tmp_path / "results"
    results.mkdir()
    study = json.loads((root / "results" / "map.json").read_text())
    (results / "map.json").write_text(json.dumps(study))
    (results / "recipe.json").write_text(json.dumps({"chosen_recipe": {"recipe": "w7_i3"}}))
    old = [longest(study["blocks"][verdicts.BLOCK], s) for s in verdicts.RECIPES]
    cells = [{**c, "gap": {**c["gap"], "mean": 0.0123 + i / 100}} for i, c in enumerate(old)]
    rerun = {"blocks": {verdicts.RERUN_BLOCK: {"cells": cells}}}

    def read(cells: list[dict]) -> str:
        rerun["blocks"][verdicts.RERUN_BLOCK]["cells"] = cells
        (results / "map-w7_i3.json").write_text(json.dumps(rerun))
        return verdicts.verdicts_section(tmp_path)

    table = read(cells)
    assert "`looped map --recipe w7_i3`, block d64-160 (d=64)" in table and "+1.23%" in table
    for changed in ({"planned_look": False}, {"steps": old[0]["steps"] // 2}):
        table = read([{**cells[0], **changed}, *cells[1:]])
        assert "+1.23%" not in table and "w7_i3" not in table


def test_the_bottom_line_gives_each_arms_pooled_interval_in_at_most_50_words(tmp_path):
    from looped.studies import gapfit
    from looped.studies.report import map as map_report
    from looped.studies.report import verdicts
    from looped.studies.report.tables import gap_text
    from looped.studies.stats import Verdict

    # every verdict with a gap has its plain words, and so does one whose interval clears zero
    assert set(map_report.PLAIN) | {Verdict.NOT_INFORMATIVE.value} == {v.value for v in Verdict} | {
        "undecided, behind"
    }
    (tmp_path / "results").mkdir()
    assert "not measured" in verdicts.bottom_line(tmp_path)
    line = verdicts.bottom_line(ROOT_DIR)
    chosen = _load("recipe")["chosen_recipe"]["recipe"]
    assert len(line.split()) <= 50 and "`" not in line
    for p in gapfit.pooled_gaps(_load(f"map-{chosen}")):
        assert gap_text(p["gap"]) in line
    assert "pooled after the fact" in line


def test_an_undecided_verdict_whose_interval_clears_zero_says_behind():
    """ "undecided" alone would claim less than [+0.36, +2.66] shows: fixed-first is behind."""
    from looped.studies.report.tables import verdict_words

    row = {"verdict": "undecided", "gap": {"mean": 0.015, "lo": 0.0036, "hi": 0.0266}}
    assert verdict_words(row) == "undecided, behind"
    assert verdict_words(row | {"gap": {"mean": 0.015, "lo": -0.0038, "hi": 0.034}}) == "undecided"
    assert verdict_words({"verdict": "worse", "gap": {"lo": 0.02}}) == "worse"
    assert verdict_words({"verdict": "undecided", "gap": None}) == "undecided"  # one seed


def test_the_chosen_recipes_depth_table_fits_githubs_column():
    from looped.studies.report.render import depth_section

    section = depth_section(Path(__file__).resolve().parents[1])
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    assert table.startswith("| cell | arm") and rendered_width(table) < GITHUB_COLUMN - 40


DOC_PAGES = [ROOT_DIR / "README.md", *sorted((ROOT_DIR / "docs").glob("*.md"))]
CODE_CHARS = 100  # a code line GitHub's column shows without scrolling (85% of 16 px, monospace)


def _page_tables(text: str) -> list[str]:
    """Every markdown table of a page, outside code blocks."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return ["\n".join(m) for m in re.findall(r"((?:^\|.*\n?)+)", text, re.M) if m]


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: p.name)
def test_every_table_and_code_block_of_the_docs_fits_githubs_column(page):
    """No table wider than GitHub's 890 px column by `rendered_width` (columns as wide as their
    longest word), none with more than 8 columns, and no code line longer than CODE_CHARS: the
    wide tables once cut off the column a reader was asked to check."""
    text = page.read_text()
    for table in _page_tables(text):
        head = table.splitlines()[0]
        assert head.count("|") - 1 <= 8, f"{page.name}: too many columns: {head[:80]}"
        assert rendered_width(table) < GITHUB_COLUMN, f"{page.name}: too wide: {head[:80]}"
    for block in re.findall(r"```\w*\n(.*?)```", text, re.S):
        long = [line for line in block.splitlines() if len(line) > CODE_CHARS]
        assert not long, f"{page.name}: code lines wider than the column: {long}"
