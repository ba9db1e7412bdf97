"""What every study's command line shares (looped/experiments/command.py, results.write_result)."""

from __future__ import annotations

import json

import pytest

from looped.cli import main as cli
from looped.experiments.results import write_result

STUDIES = ("demo", "fidelity", "diagnose", "length", "samples")


@pytest.mark.parametrize("study", STUDIES)
def test_quick_with_reference_is_refused_before_anything_is_written(
    study, tmp_path, monkeypatch, capsys
):
    """`--reference` writes the committed results; a toy-size run must never land there."""
    monkeypatch.chdir(tmp_path)
    assert cli([study, "--quick", "--reference"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--quick" in err[0] and "--reference" in err[0]
    assert list(tmp_path.iterdir()) == []


def test_the_shared_flags_mean_the_same_in_every_study(capsys):
    for study in (*STUDIES, "baselines"):
        with pytest.raises(SystemExit):
            cli([study, "--help"])
        shown = capsys.readouterr().out
        assert "--out" in shown and "--reference" in shown, study


def test_a_results_file_round_trips_and_ends_with_a_newline(tmp_path, capsys):
    result = {"meta": {"label": "fixed-first K=4 (80%)", "nll": [3.25, float("inf")]}, "é": 1}
    path = write_result(tmp_path / "r.json", result)
    text = path.read_text()
    assert text.endswith("}\n") and "é" in text and json.loads(text) == result
    assert capsys.readouterr().out == f"wrote {path}\n"
