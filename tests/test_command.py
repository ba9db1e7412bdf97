"""What every study's command line shares (looped/studies/commands/common.py,
results.write_result), and the text study's refusals."""

from __future__ import annotations

import json

import pytest

from looped.cli import main as cli
from looped.errors import UserError
from looped.studies.results import read_results_file, write_result

STUDIES = ("demo", "diagnose", "map", "samples")  # each with a committed result (--reference)
POOLED = ("demo", "diagnose", "map")  # those that train on a worker pool


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
    for study in STUDIES:
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


@pytest.mark.parametrize("study", POOLED)
@pytest.mark.parametrize("workers", ["0", "-1"])
def test_no_workers_is_refused_in_one_line_before_anything_is_written(
    study, workers, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    assert cli([study, "--quick", "--workers", workers]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--workers {workers}" in err[0] and "1 or more" in err[0]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "bad", [["--blocks", "d999"], ["--quick", "--gpu"], ["--resume-from", "absent.json"]]
)
def test_the_map_refuses_bad_flags_in_one_line_before_anything_is_written(
    bad, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    assert cli(["map", *bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and bad[0] in err[0]
    assert list(tmp_path.iterdir()) == []


def _refusal(path, flag="--resume-from") -> str:
    with pytest.raises(UserError) as err:
        read_results_file(path, flag, expect="a length*.json")
    said = str(err.value)
    assert "\n" not in said and said.startswith(f"{flag} {path}") and "a length*.json" in said
    return said


def test_a_results_file_that_is_missing_or_not_json_is_refused_naming_it(tmp_path):
    assert "no such file" in _refusal(tmp_path / "absent.json")
    assert "no such file" in _refusal(tmp_path)  # a folder is not a results file
    bad = tmp_path / "bad.json"
    bad.write_text('{"meta":\n')
    assert "not valid JSON" in _refusal(bad)
    bad.write_bytes(b"\xff\xfe\x00")  # not even text
    assert "not valid JSON" in _refusal(bad, flag="--results")


@pytest.mark.parametrize(("text", "kind"), [("[]", "list"), ("3", "int"), ("null", "null")])
def test_json_that_is_not_a_results_object_is_refused_naming_it(tmp_path, text, kind):
    path = tmp_path / "l.json"
    path.write_text(text)
    assert f"a JSON {kind}, not a results object" in _refusal(path)


def test_a_results_file_reads_back_what_was_written(tmp_path, capsys):
    result = {"meta": {"corpus": {"tokenizer": "bpe:512"}}, "rows": [{"run": "a"}]}
    path = write_result(tmp_path / "r.json", result, say=False)
    assert read_results_file(path, "--resume-from") == result
    assert read_results_file(str(path), "--resume-from") == result
