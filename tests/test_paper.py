"""looped.paper is the one place the paper's schedules, labels and reported numbers live; these
tests tie it to the presets that launch the paper's runs and to the report that judges them."""

from __future__ import annotations

import pytest

import looped.eval.stats as stats
from looped import paper
from looped.config import load_config
from looped.eval.stats import Verdict
from looped.flops import preset_rows
from looped.report import sections as report


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
    ("at_16", "verdict"), [(8.0, "shows"), (3.0, "does not show"), (1.0, "reverses")]
)
def test_the_fixed_depth_claim_reads_its_verdict_from_the_numbers(at_16, verdict):
    nll = [2.0] * 16
    nll[16 - 1] = at_16
    found = report.fixed_degrades(report._Data(_result(nll)))
    assert found.verdict == verdict
    assert found.claim == "Fixed K=4 degrades away from K=4"
    assert found.sentence == f"NLL 2.000 at K=4, 2.000 at K=1, {at_16:.3f} at K=16."
    assert found.markdown().startswith(f"**{found.claim}** ({verdict}")


def test_every_claim_of_the_reference_has_a_known_verdict():
    import json
    from pathlib import Path

    result = json.loads((Path(__file__).resolve().parents[1] / "results/demo.json").read_text())
    found = report.claims(result)
    known = {"shows", "does not show", "reverses", ""} | {v.value for v in Verdict}
    assert {str(f.verdict) for f in found} <= known
    assert [f.markdown() for f in found] == report.findings(result)
    assert sum(bool(f.claim) for f in found) >= 5  # the README's bold claims


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
    iv = stats.interval(list(values))
    assert f"{iv.lo:+.1%} to {iv.hi:+.1%}" in said


def test_a_text_row_whose_models_do_not_beat_the_bigram_gets_no_verdict():
    got, said = stats.gap_verdict(_gap(-0.03, -0.01, -0.02), 0.005, informative=False)
    assert got is Verdict.NOT_INFORMATIVE and "bigram" in said


def test_the_bottom_line_counts_only_informative_text_verdicts():
    none = report.bottom_line([Verdict.NOT_INFORMATIVE] * 4)
    assert none.startswith("none of the 4 text comparisons is informative")
    some = report.bottom_line([Verdict.BETTER, Verdict.UNDECIDED, Verdict.NOT_INFORMATIVE])
    assert "of the 2 text comparisons whose models beat a bigram table" in some
    assert "holds in 1" in some and "uniform lags" in some and "1 shorter" in some


def _cell(d: int, params: float, steps: int, *gaps: float) -> dict:
    return {"d_model": d, "params": params, "steps": steps, "gap": _gap(*gaps)}


def _study_cell(d: int, params: float, steps: int, nll: float, *gaps: float) -> dict:
    spread = {"max": nll}
    return {**_cell(d, params, steps, *gaps), "uniform_nll": spread, "fixed_first_nll": spread}


def test_the_scale_trend_reads_the_signed_gap_and_only_where_models_beat_the_bigram():
    # +3.3% -> -1.9% -> -12.2%: the size of the gap is not monotone, its sign is
    falling = [_study_cell(48, 1e5, 200, 3.9, 0.033, 0.030), _study_cell(96, 1e6, 200, 3.9, -0.019, -0.02),
               _study_cell(192, 1e7, 200, 3.9, -0.122, -0.12)]  # fmt: skip
    text = report.study_trend(falling, {"bigram": 4.0})
    assert "per tenfold parameters [-" in text and "not informative" not in text
    assert "not informative at this size" in report.study_trend(falling, {"bigram": 3.5})
    assert "not informative at this size" in report.study_trend(falling, None)


def test_the_verdicts_table_reads_every_track_from_its_results_file(tmp_path):
    import json

    def row(schedule, gap, saving):
        return {"schedule": schedule, "steps": 150, "vs_uniform": gap,
                "vs_uniform_by_seed": _gap(gap - 0.001, gap, gap + 0.001),
                "mean_nll": {"max": 3.0}, "uniform_nll": {"max": 3.1},
                "compute_saving": saving, "wall_saving": 0.9}  # fmt: skip

    text = {
        "meta": {"settings": {"d_model": 64}},
        "equal_tokens": [row(paper.RECIPE_200M, -0.02, 0.30), row(paper.RECIPES_1B[1], 0.0, 0.25)],
        "baselines": {"bigram": 3.5, "unigram": 5.0, "tokens": 100},
    }  # fmt: skip
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "demo_text.json").write_text(json.dumps(text))
    lines = report.verdicts_section(tmp_path).splitlines()
    assert lines[2].startswith(
        "| K=2 for 67% ends within 0.5% of uniform at equal tokens (200M) | text, demo (d=64, "
        "150 steps) | -2.0% [-2.2%, -1.8%] | better: 95% interval"
    )
    assert "| +0.0% [-0.2%, +0.2%] | within tolerance" in lines[3]
    assert "modeled, not measured: no verdict" in lines[4]
    assert "wall" not in " ".join(lines[:5])  # per-run times of the track are never compared
    assert lines[-1].startswith("- **Bottom line at this scale**: of the 2 text comparisons")
    text["baselines"]["bigram"] = 2.9  # the same rows, models now worse than the bigram
    (tmp_path / "results" / "demo_text.json").write_text(json.dumps(text))
    lines = report.verdicts_section(tmp_path).splitlines()
    assert "not informative at this size" in lines[2] and "none of the 2" in lines[-1]


def test_the_timing_line_says_each_phase():
    timing = {"command": "looped demo --time-to x.json", "wall_seconds": 690.0, "machine": "CPU",
              "dtype": "fp32", "runs_trained": 36, "text_runs": 21,
              "phase_seconds": {"bios": 480.0, "text": 190.0, "probe": 12.0, "figures": 8.0}}  # fmt: skip
    assert report.timing_section(timing) == (
        "Measured: `looped demo --time-to x.json` on a fresh clone took 11.5 minutes on CPU in "
        "fp32 (36 bios runs and 21 text runs; bios 8.0 min, text 3.2 min, probe 12 s, figures "
        "8 s), after the one-time set-up of the virtual environment: within the 12-minute "
        "budget for 2 cores."
    )
    slow = {**timing, "wall_seconds": 724.0}  # 12.07 min, printed as 12.1
    assert report.timing_section(slow).endswith("over the 12-minute budget for 2 cores.")
