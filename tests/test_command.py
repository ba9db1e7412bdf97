"""What every study's command line shares (looped/commands/common.py, results.write_result)."""

from __future__ import annotations

import json

import pytest

from looped.cli import main as cli
from looped.experiments.results import write_result

STUDIES = ("demo", "fidelity", "diagnose", "length", "samples")
REFERENCED = ("demo", "diagnose", "length", "samples")  # those with a committed result


@pytest.mark.parametrize("study", REFERENCED)
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
    for study in STUDIES:
        with pytest.raises(SystemExit):
            cli([study, "--help"])
        shown = capsys.readouterr().out
        assert "--out" in shown, study
        assert ("--reference" in shown) == (study in REFERENCED), study


def test_a_study_without_a_committed_result_refuses_reference(tmp_path, monkeypatch, capsys):
    """`looped fidelity` writes to its --out only: `--reference` is no flag of it."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        cli(["fidelity", "--quick", "--reference"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --reference" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_results_file_round_trips_and_ends_with_a_newline(tmp_path, capsys):
    result = {"meta": {"label": "fixed-first K=4 (80%)", "nll": [3.25, float("inf")]}, "é": 1}
    path = write_result(tmp_path / "r.json", result)
    text = path.read_text()
    assert text.endswith("}\n") and "é" in text and json.loads(text) == result
    assert capsys.readouterr().out == f"wrote {path}\n"
