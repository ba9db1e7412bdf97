"""looped.paper is the one place the paper's schedules, labels and reported numbers live; these
tests tie it to the presets that launch the paper's runs and to the report that judges them."""

from __future__ import annotations

import pytest

import looped.eval.stats as stats
from looped import paper
from looped.config import load_config
from looped.eval.stats import Verdict
from looped.flops import preset_rows
from looped.report import claims, render, verdicts
from looped.report.claims import Shows


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


def test_labels_colours_and_fixed_first_facts():
    assert [paper.label(s) for s in paper.MAIN_SCHEDULES] == [
        "fixed K=4",
        "fixed-first (80%)",
        "uniform 1..16",
    ]
    assert paper.label("fixed:8") == "fixed K=8"
    assert paper.color_of(paper.FIXED_FIRST) == paper.color_of("fixed-first (80%)") is not None
    assert paper.color_of("fixed K=8") is None
    assert paper.fixed_phase() == (4, 0.8) and paper.fixed_phase(paper.RECIPE_200M) == (2, 0.67)
    assert paper.fixed_depth("fixed:8") == 8
    with pytest.raises(ValueError, match="not a fixed-first"):
        paper.fixed_phase(paper.UNIFORM)


def _result(fixed_nll: list[float]) -> dict:
    """A demo.json with one fixed K=4 run at the full budget, served at depths 1..16."""
    run = {"schedule": paper.FIXED, "budget": 1.0, "group": "main", "depths": list(range(1, 17))}
    return {"runs": [{**run, "fact_nll": fixed_nll}]}


@pytest.mark.parametrize(
    ("at_16", "verdict"), [(8.0, Shows.SHOWS), (3.0, Shows.DOES_NOT_SHOW), (1.0, Shows.REVERSES)]
)
def test_the_fixed_depth_claim_reads_its_verdict_from_the_numbers(at_16, verdict):
    nll = [2.0] * 16
    nll[16 - 1] = at_16
    found = claims.fixed_degrades(claims._Data(_result(nll)))
    assert found.verdict is verdict
    assert found.numbers == {"k": 4, "at_k": 2.0, "at_1": 2.0, "at_16": at_16}


def test_every_claim_of_the_reference_has_a_known_verdict():
    import json
    from pathlib import Path

    result = json.loads((Path(__file__).resolve().parents[1] / "results/demo.json").read_text())
    found = claims.claims(result)
    assert all(f.verdict is None or isinstance(f.verdict, (Shows, Verdict)) for f in found)
    assert all(bool(f.claim) or f.verdict is None for f in found)  # measurements: no verdict
    assert [f.markdown() for f in found] == claims.findings(result)
    assert sum(bool(f.claim) for f in found) >= 5  # the README's bold claims
    fixed = next(f for f in found if f.claim.startswith("Fixed K=4 degrades"))
    at_16 = fixed.numbers["at_16"] / fixed.numbers["at_k"]
    assert fixed.verdict is (
        Shows.SHOWS if at_16 > 1.5 else Shows.REVERSES if at_16 < 1 else Shows.DOES_NOT_SHOW
    )


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
    got, said = stats.gap_verdict(_gap(*values), paper.NLL_GAP[0])
    assert got is verdict and said.startswith(verdict.value)
    iv = stats.ratio_interval(list(values))  # paired by seed, over log ratios
    assert f"{iv.lo:+.1%} to {iv.hi:+.1%}" in said


def test_a_text_row_whose_models_do_not_beat_the_bigram_gets_no_verdict():
    got, said = stats.gap_verdict(_gap(-0.03, -0.01, -0.02), 0.005, informative=False)
    assert got is Verdict.NOT_INFORMATIVE and "bigram" in said


def test_the_bottom_line_counts_only_informative_text_verdicts():
    none = verdicts.tally([Verdict.NOT_INFORMATIVE] * 4)
    assert (none.told, none.quiet, none.holds, none.counts) == (0, 4, 0, {})
    some = verdicts.tally([Verdict.BETTER, Verdict.UNDECIDED, Verdict.NOT_INFORMATIVE])
    assert (some.told, some.quiet, some.holds) == (2, 1, 1)
    assert some.counts == {Verdict.BETTER: 1, Verdict.UNDECIDED: 1}


def test_the_verdicts_table_reads_the_length_studys_longest_cells(tmp_path):
    """Each recipe's row is the length study's cell at its longest length, with the verdict
    and group-sequential interval the study reached; a bios-only root has no text rows."""
    import json

    from looped.experiments.length import LABELS, TOLERANCE

    uni, k4, k2 = paper.UNIFORM, paper.RECIPES_1B[1], paper.RECIPE_200M

    def row(s, steps, seed, nll):
        return {"schedule": s, "label": LABELS[s], "steps": steps, "seed": seed, "lr": 3e-3,
                "tokens": steps * 4096, "params": 86_000, "params_non_embedding": 53_000,
                "mean_nll": nll, "se": 0.01, "token_nll": [nll] * 16}  # fmt: skip

    rows = [row(s, n, k, 3.0 + d + 0.001 * k) for n in (100, 400) for k in range(4)
            for s, d in ((uni, 0.0), (k4, 0.2 if n == 400 else 0.0), (k2, 0.0))]  # fmt: skip
    cells = stats.sequential_cells(rows, 4.0, (uni, k4, k2), (4, 8), TOLERANCE)
    study = {"meta": {"settings": {"setup": {"d_model": 64}}, "stopped": {"reason": "x"}},
             "cells": cells, "rows": rows, "trends": stats.seed_trends(cells)}  # fmt: skip
    (tmp_path / "results").mkdir()
    assert verdicts.text_claims(tmp_path) == []
    (tmp_path / "results" / "length.json").write_text(json.dumps(study))
    found = {c.schedule: c for c in verdicts.text_claims(tmp_path)}
    assert found[k4].verdict is Verdict.WORSE and found[k2].verdict is Verdict.WITHIN
    cell = next(c for c in cells if c["schedule"] == k4 and c["steps"] == 400)
    assert found[k4].gap["lo"] == cell["gap"]["lo"] and found[k4].gap["n"] == 4
    assert "400 steps" in found[k4].track and found[k2].tolerance == 0.005
    assert "| K=4 for 80% ends within 0.8%" in verdicts.verdicts_section(tmp_path)


def test_the_timing_line_says_each_phase():
    timing = {"command": "looped demo --time-to x.json", "wall_seconds": 690.0, "machine": "CPU",
              "dtype": "fp32", "runs_trained": 36, "text_runs": 21,
              "phase_seconds": {"bios": 480.0, "text": 190.0, "probe": 12.0, "figures": 8.0}}  # fmt: skip
    assert render.demo_minutes(timing) == (11.5, True)
    slow = {**timing, "wall_seconds": 724.0}  # 12.07 min, printed as 12.1
    assert render.demo_minutes(slow) == (12.1, False)
