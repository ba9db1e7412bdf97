"""looped.paper is the one place the paper's schedules, labels and reported numbers live; these
tests tie it to the presets that launch the paper's runs and to the report that judges them."""

from __future__ import annotations

import pytest

from looped import fidelity, paper, report
from looped.config import load_config
from looped.flops import preset_rows


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
    assert {f.verdict for f in found} <= {"shows", "does not show", "reverses", ""}
    assert [f.markdown() for f in found] == report.findings(result)
    assert sum(bool(f.claim) for f in found) >= 5  # the README's bold claims


def _gap(*values: float) -> dict:
    import numpy as np

    return {"mean": float(np.mean(values)), "min": min(values), "max": max(values),
            "values": list(values)}  # fmt: skip


@pytest.mark.parametrize(
    ("values", "verdict", "said"),
    [
        ((0.004, -0.002, 0.001), "shows", "shows: within 0.5%"),
        ((-0.03, -0.01, -0.02), "shows", "shows, and more: fixed-first is better in every seed"),
        ((-0.03, 0.002, -0.02), "shows",
         "shows, and more: fixed-first is better on average, not in every seed"),
        ((0.02, 0.01, 0.03), "does not show", "does not show: fixed-first is worse in every seed"),
        ((0.02, -0.004, 0.03), "does not show",
         "does not show: fixed-first is worse on average, not in every seed"),
        ((0.095, -0.087, 0.116), "undecided",
         "undecided: the seeds disagree (1 of 3 favour fixed-first), so 3 seeds cannot tell"),
        ((-0.05, 0.05, 0.0), "undecided",  # a mean within the tolerance is still one seed's luck
         "undecided: the seeds disagree (1 of 3 favour fixed-first), so 3 seeds cannot tell"),
    ],
)  # fmt: skip
def test_the_headline_verdict_reads_the_seed_spread(values, verdict, said):
    assert fidelity.gap_verdict(_gap(*values), paper.NLL_GAP[0]) == (verdict, said)


def test_the_bottom_line_counts_the_verdicts():
    assert report.bottom_line(["shows", "shows"]).startswith("on every track")
    assert report.bottom_line(["shows", "undecided", "does not show", "shows"]) == (
        "fixed-first ends as good as uniform or better at equal tokens in 2 of 4 comparisons "
        "above; 1 is undecided (the seeds disagree in sign, so more seeds are needed); in 1 it "
        "is worse (rows marked 'does not show')."
    )


def _cell(d: int, params: float, steps: int, *gaps: float) -> dict:
    return {"d_model": d, "params": params, "steps": steps, "gap": _gap(*gaps)}


def test_the_scale_trend_extrapolates_only_what_every_length_supports():
    shrinking = [
        _cell(48, 1e5, 100, -0.04, -0.05), _cell(96, 1e6, 100, -0.02, -0.03),
        _cell(192, 1e7, 100, -0.01, -0.01),
        _cell(48, 1e5, 200, -0.05, -0.05), _cell(96, 1e6, 200, -0.03, -0.03),
        _cell(192, 1e7, 200, -0.02, -0.02),
    ]  # fmt: skip
    text = report.study_trend(shrinking)
    assert text.count("shrinks as the model grows") == 2
    # least squares in log10(params): at 100 steps |gap| = 2.667% - 1.75%/decade from 1e6, so
    # 0.5% at 10^(6 + 2.167/1.75) = 17.3M; at 200 steps 3.333% - 1.5%/decade: 10^7.889 = 77.4M
    assert "reaches 0.5% at about 17.3M-77.4M parameters" in text and "an extrapolation" in text
    mixed = shrinking[:3] + [_cell(48, 1e5, 200, -0.03), _cell(96, 1e6, 200, -0.05),
                             _cell(192, 1e7, 200, -0.01)]  # fmt: skip
    text = report.study_trend(mixed)
    assert "has no monotone trend" in text and "do not support extrapolating" in text


def test_the_verdicts_table_reads_every_track_from_its_results_file(tmp_path):
    import json

    def row(schedule, gap, saving, wall):
        return {"schedule": schedule, "steps": 150, "vs_uniform": gap,
                "vs_uniform_by_seed": _gap(gap - 0.001, gap + 0.001),
                "compute_saving": saving, "wall_saving": wall}  # fmt: skip

    text = {
        "meta": {"settings": {"d_model": 64}},
        "equal_tokens": [row(paper.RECIPE_200M, -0.02, 0.30, 0.25),
                         row(paper.RECIPES_1B[1], 0.003, 0.25, -0.05)],
    }  # fmt: skip
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "demo_text.json").write_text(json.dumps(text))
    lines = report.verdicts_section(tmp_path).splitlines()
    assert lines[2] == (
        "| K=2 for 67% ends within 0.5% of uniform at equal tokens (200M) | text, demo (d=64, "
        "150 steps) | -2.0% (-2.1% to -1.9%) | shows, and more: fixed-first is better in every "
        "seed |"
    )
    assert (
        "| text, demo (d=64, 150 steps) | +0.3% (+0.2% to +0.4%) | shows: within 0.8% |" in lines[3]
    )
    assert "30% (K=2, 67%), 25% (K=4, 80%) | shows, smaller" in lines[4]
    assert lines[5].endswith(
        "25% (K=2, 67%), -5% (K=4, 80%), runs' own training time on a shared CPU | does not show |"
    )
    assert lines[-1].startswith("- **Bottom line at this scale**: on every track")


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
