"""looped.paper is the one place the paper's schedules, labels and reported numbers live; these
tests tie it to the presets that launch the paper's runs and to the report that judges them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import looped.studies.stats as stats
from looped import paper
from looped.commands.flops import preset_rows
from looped.config import load_config
from looped.studies.report import bios, block, render, verdicts
from looped.studies.report.tables import verdict_words
from looped.studies.stats import Verdict

ROOT = Path(__file__).resolve().parents[1]


def test_the_presets_launch_the_recipes_paper_py_names():
    assert paper.RECIPE_200M in load_config("200m").paper_schedules
    assert set(paper.RECIPES_1B) <= set(load_config("1b").paper_schedules)
    for name in ("200m", "1b"):
        assert {paper.FIXED, paper.UNIFORM} <= set(load_config(name).paper_schedules)


@pytest.mark.parametrize("preset", ["200m", "1b"])
def test_the_presets_reproduce_the_abstracts_savings(preset):
    """The abstract's 45% (200M) and 31% / 37% (1B), within half a point of the modeled ones."""
    rows = {r["schedule"]: r["saving_vs_uniform"] for r in preset_rows(preset)}
    claimed = {s: v for s, v in paper.SAVINGS.items() if s in rows}
    assert claimed, f"{preset} runs none of the paper's recipes"
    for schedule, saving in claimed.items():
        assert rows[schedule] == pytest.approx(saving, abs=0.005), schedule


def test_every_shown_schedule_is_told_apart_and_its_label_states_its_fixed_phase():
    """A legend tells each schedule apart (its own label, colour and marker), finds the same
    entry from the spec or the label, and a fixed-first label states the K and the share of
    steps its spec trains at, also for a recipe SHOWN leaves out."""
    for part in range(3):
        assert len({entry[part] for entry in paper.SHOWN.values()}) == len(paper.SHOWN)
    for spec in paper.SHOWN:
        name = paper.label(spec)
        assert (paper.color_of(name), paper.marker_of(name)) == (
            paper.color_of(spec),
            paper.marker_of(spec),
        )
        if spec.startswith("fixed-first"):
            k, frac = paper.fixed_phase(spec)
            assert f"K={k} ({frac:.0%})" in name
    assert paper.label("fixed-first:k=3,frac=0.5,then=uniform:1-16").endswith("K=3 (50%)")
    assert paper.color_of(paper.label("fixed:8")) is None
    assert paper.fixed_depth("fixed:8") == 8 and "8" in paper.label("fixed:8")
    with pytest.raises(ValueError, match="not a fixed-first"):
        paper.fixed_phase(paper.UNIFORM)


def _gap(*values: float) -> dict:
    import numpy as np

    return {"mean": float(np.mean(values)), "min": min(values), "max": max(values),
            "values": list(values)}  # fmt: skip


@pytest.mark.parametrize(
    ("values", "verdict"),
    [
        ((0.001, -0.001, 0.0), Verdict.WITHIN),  # tight around zero, inside +-0.5%
        ((-0.03, -0.025, -0.028), Verdict.BETTER),  # wholly below zero
        ((-0.004, -0.002, -0.001, -0.003, -0.0025), Verdict.WITHIN),
        ((-0.02, -0.015, -0.01, 0.0), Verdict.NO_WORSE),  # upper end within +0.5%
        ((0.02, 0.021, 0.022), Verdict.WORSE),  # wholly above +0.5%
        ((-0.03, 0.002, -0.02), Verdict.UNDECIDED),  # 3 seeds: 2% mean, interval crosses +0.5%
        ((0.095, -0.087, 0.116), Verdict.UNDECIDED),
    ],
)  # fmt: skip
def test_the_headline_verdict_reads_the_95_percent_interval(values, verdict):
    from looped.studies.engine import judge  # the one place a row's verdict is decided

    assert judge(list(values), paper.RECIPE_200M)["verdict"] == verdict.value


def test_a_text_row_whose_models_do_not_beat_the_bigram_gets_no_verdict():
    from looped.studies.engine import judge  # the one place a row's verdict is decided

    got = judge([-0.03, -0.01, -0.02], paper.RECIPE_200M, informative=False)
    assert got["verdict"] == Verdict.NOT_INFORMATIVE.value


def _cells(table: str) -> list[list[str]]:
    """A markdown table's body rows, cell by cell."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def _num(cell: str) -> float:
    """A table cell's first number; percentages as fractions."""
    head = cell.split(" ")[0].rstrip("x")
    return float(head.rstrip("%")) / 100 if head.endswith("%") else float(head)


SPEC = {paper.label(s): s for s in paper.MAIN_SCHEDULES}


def test_every_number_of_the_bios_tables_is_demo_jsons():
    """Each cell of the bios section, recomputed here from the runs in results/demo.json: the
    per-depth table, the depth specialisation, the switch and both summary tables."""
    result = json.loads((ROOT / "results" / "demo.json").read_text())
    runs, top = result["runs"], max(r["budget"] for r in result["runs"] if "main" in r["group"])
    at = {k: result["runs"][0]["depths"].index(k) for k in (1, 4, 8, 16)}
    keys = {"fact NLL": "fact_nll", "exact recall": "exact", "two-hop accuracy": "two_hop_acc"}
    rows = _cells(bios.depth_table(result))
    assert len(rows) == 9
    for name, measure, *cells in rows:
        mine = [r for r in runs if r["schedule"] == SPEC[name] and r["budget"] == top
                and "main" in r["group"]]  # fmt: skip
        for k, cell in zip((1, 4, 8, 16), cells):
            want = np.mean([r[keys[measure]][at[k]] for r in mine])
            assert _num(cell) == pytest.approx(want, abs=0.006), (name, measure, k)
    for k, steps, best, there, at_16 in _cells(bios.specialisation_table(result)):
        r = next(r for r in runs if r["schedule"] == f"fixed:{k}" and "depth" in r["group"])
        assert int(steps) == r["steps"]
        assert int(best) == r["depths"][int(np.argmin(r["fact_nll"]))]
        assert _num(there) == pytest.approx(min(r["fact_nll"]), abs=5e-4)
        assert _num(at_16) == pytest.approx(r["fact_nll"][at[16]], abs=5e-4)
    ff = [r for r in runs if r["schedule"] == paper.FIXED_FIRST and r["budget"] == top
          and "main" in r["group"]]  # fmt: skip
    switch = dict(_cells(bios.section(result).split("The switch:")[1].split("\n\n")[1]))
    pre = np.mean([np.mean(r["pre_switch"]["fact_nll"]) for r in ff])
    assert _num(switch["mean fact NLL before the switch"]) == pytest.approx(pre, abs=5e-4)
    for key in ("summary", "summary_tokens"):
        for row, cells in zip(result[key], _cells(bios.format_summary(result[key]))):
            assert SPEC[cells[0]] == row["schedule"] and int(cells[2]) == row["steps"]
            assert _num(cells[4]) == pytest.approx(row["mean_fact_nll"], abs=5e-4)
            assert _num(cells[5]) == pytest.approx(bios.paired_mean(row), abs=5e-4)
            compute, wall = (float(x.rstrip("x")) for x in cells[3].split(" / "))
            assert compute == pytest.approx(row["compute_vs_uniform"], abs=5e-3)
            assert wall == pytest.approx(row["wall_vs_uniform"], abs=5e-3)
            bits = [float(c) for c in cells[6:]]
            assert bits == pytest.approx([row["bits"][str(k)] for k in (1, 4, 8, 16)], abs=0.05)


def test_every_number_of_the_verdicts_is_its_results_files():
    """The claims table's text rows are the longest cells of the block `judged` picks (the map's
    d64, or its longest length under the chosen recipe: tests/test_report_tables.py), its bios
    rows the demo's paired gaps; the costs are demo_text.json's and bench.json's."""
    study, on, _ = verdicts.judged(ROOT)
    demo = json.loads((ROOT / "results" / "demo.json").read_text())
    claims, costs, *_ = (_cells(t) for t in verdicts.verdicts_section(ROOT).split("\n\n"))
    for row, schedule in zip(claims, verdicts.RECIPES):
        if (c := block.longest(study, schedule)) is None:
            assert row[-1] == verdicts.NOT_MEASURED
            continue
        assert row[1] == f"{on} (d={c['d_model']})"
        assert int(row[2]) == c["steps"] and int(row[4]) == c["gap"]["n"]
        assert _num(row[5]) == pytest.approx(c["gap"]["mean"], abs=5e-5) and row[
            7
        ] == verdict_words(c)
    tok = next(r for r in demo["summary_tokens"] if r["schedule"] == paper.FIXED_FIRST)
    bios_row = claims[len(verdicts.RECIPES)]
    iv = stats.ratio_interval(tok["vs_uniform_by_seed"]["values"])
    assert (
        _num(bios_row[5]) == pytest.approx(iv.mean, abs=5e-4) and int(bios_row[2]) == tok["steps"]
    )
    assert bios_row[7] == stats.verdict(iv, paper.tolerance(paper.FIXED_FIRST)).value
    text = json.loads((ROOT / "results" / "demo_text.json").read_text())
    saved = {r["schedule"]: r["compute_saving"] for r in text["equal_tokens"]}
    for row in costs[:2]:
        schedule = next(s for s in verdicts.RECIPES if paper.label(s) in row[0])
        assert _num(row[1]) == pytest.approx(paper.SAVINGS[schedule])
        assert _num(row[2]) == pytest.approx(saved[schedule], abs=0.005)


def test_the_claims_table_reads_the_blocks_longest_cells(tmp_path):
    """Each recipe's row is the map block's cell at its longest length with more than one
    seed; a recipe the block has no cell of is "not measured"; a bios-only root has no text."""
    k4 = paper.RECIPES_1B[1]

    def cell(steps, n, verdict):
        gap = {"mean": 0.01 * steps, "lo": 0.0, "hi": 0.02 * steps, "n": n}
        return {"schedule": k4, "steps": steps, "tokens_per_non_embedding_param": steps / 10,
                "gap": gap, "verdict": verdict, "tolerance": 0.008, "d_model": 64}  # fmt: skip

    cells = [cell(100, 4, "within tolerance"), cell(400, 4, "worse"), cell(800, 1, "undecided")]
    study = {"meta": {"settings": {"setup": {"d_model": 64}}}, "cells": cells, "trends": {}}
    rows = {r[0]: r for r in verdicts.text_rows(study)}
    k4_row = next(r for r in rows.values() if r[0].startswith("K=4"))
    assert k4_row[2] == 400 and k4_row[7] == "worse" and k4_row[6] == "0.8%"
    k2_row = next(r for r in rows.values() if r[0].startswith("K=2"))
    assert k2_row[7] == verdicts.NOT_MEASURED and k2_row[6] == "0.5%"
    (tmp_path / "results").mkdir()
    assert verdicts.text_rows(None)[0][7] == verdicts.NOT_MEASURED
    assert "| K=4 for 80% ends within" in verdicts.verdicts_section(tmp_path)


def test_the_timing_line_says_each_phase():
    timing = {"command": "looped demo --time-to x.json", "wall_seconds": 570.0, "machine": "CPU",
              "dtype": "fp32", "runs_trained": 36, "text_runs": 21,
              "phase_seconds": {"bios": 400.0, "text": 150.0, "probe": 12.0, "figures": 8.0}}  # fmt: skip
    assert render.demo_minutes(timing) == (9.5, True)
    slow = {**timing, "wall_seconds": 604.0}  # 10.07 min, printed as 10.1: over the budget
    assert render.demo_minutes(slow) == (10.1, False)
