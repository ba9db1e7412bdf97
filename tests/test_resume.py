"""`looped map --resume-from` reads an earlier map.json as data: every malformed shape is refused
in one line that names the file and the field, with no traceback, before any corpus is built or
any run trained (`looped.studies.resume`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from looped.cli import main as cli
from looped.studies.map import KNOWN, MapSettings, check_resume
from looped.studies.resume import map_problem, read_map

ROOT = Path(__file__).resolve().parents[1]
ROW = {"run": "uniform-lr0.001-s0-n8", "config_sha": "0" * 16, "lr": 1e-3}
META = {"corpus": {"dataset": "stdlib"}}

# (the file's text, the field the one line must name)
BAD = {
    "block-a-number": (
        '{"meta": {}, "blocks": {"d64": 5}}',
        "blocks.d64 is a number, not an object",
    ),
    "rows-not-objects": (
        json.dumps({"blocks": {"d64": {"meta": META, "rows": [1, 2]}}}),
        "blocks.d64.rows[0] is a number, not a row object",
    ),
    "meta-a-string": (
        json.dumps({"blocks": {"d64": {"meta": "stdlib", "rows": []}}}),
        "blocks.d64.meta is a string, not an object",
    ),
    "unknown-block": (
        json.dumps({"blocks": {"d999": {"meta": META}}}),
        "blocks.d999 is no block of the map",
    ),
    "truncated": ('{"blocks": {"d64": {', "is not valid JSON"),
    "a-list": ("[1, 2]", "holds a JSON list"),
    "no-blocks": ('{"meta": {}}', "holds no map blocks (blocks is null)"),
    "empty-blocks": ('{"blocks": {}}', "holds no map blocks (blocks is an object)"),
    "blocks-a-list": ('{"blocks": [1]}', "holds no map blocks (blocks is a list)"),
    "rows-an-object": (
        json.dumps({"blocks": {"d64": {"meta": META, "rows": {"a": 1}}}}),
        "blocks.d64.rows is an object, not a list of rows",
    ),
    "row-without-run": (
        json.dumps({"blocks": {"d64": {"meta": META, "sweep": [{"lr": 1e-3}]}}}),
        "blocks.d64.sweep[0].run is missing",
    ),
    "lr-a-string": (
        json.dumps({"blocks": {"d64": {"meta": META, "rows": [ROW | {"lr": "1e-3"}]}}}),
        "blocks.d64.rows[0].lr is a string",
    ),
    "rows-without-corpus": (
        json.dumps({"blocks": {"d64": {"meta": {}, "rows": [ROW]}}}),
        "blocks.d64.meta.corpus is missing",
    ),
    "corpus-a-list": (
        json.dumps({"blocks": {"d64": {"meta": {"corpus": []}, "rows": [ROW]}}}),
        "blocks.d64.meta.corpus is a list, not an object",
    ),
    "tuned-a-list": (
        json.dumps({"blocks": {"d64": {"meta": META, "tuned": []}}}),
        "blocks.d64.tuned is a list, not an object",
    ),
    "tuned-rows-bad": (
        json.dumps({"blocks": {"d64": {"meta": META, "tuned": {"rows": [None]}}}}),
        "blocks.d64.tuned.rows[0] is null, not a row object",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_malformed_shape_is_refused_in_one_line_naming_file_and_field(
    name, tmp_path, monkeypatch, capsys
):
    text, field = BAD[name]
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    assert cli(["map", "--out", str(out), "--resume-from", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"looped map: error: --resume-from {path}") and field in err[0]
    assert "Traceback" not in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # nothing built or trained


def test_the_first_problem_is_the_one_named():
    """Blocks in file order, and within a block its own fields before its rows'."""
    old = {"blocks": {"d32": {"meta": "x", "rows": [1]}, "d64": 5}}
    assert map_problem(old, KNOWN) == "blocks.d32.meta is a string, not an object"


def test_every_committed_map_file_reads_and_a_block_without_rows_needs_no_meta(tmp_path):
    for path in sorted((ROOT / "results").glob("map*.json")) + [ROOT / "results" / "recipe.json"]:
        assert read_map(str(path), KNOWN)["blocks"]
    lone = tmp_path / "lone.json"
    lone.write_text(json.dumps({"blocks": {"d64": {"rows": [], "sweep": []}}}))
    check_resume(MapSettings(resume_from=str(lone)))


def test_a_file_naming_a_block_of_another_layout_is_taken():
    """A GPU loan's map names widths the CPU map has not (d256): the CPU map may read it."""
    assert map_problem({"blocks": {"d256": {}, "probe-d32-w10_i1": {}}}, KNOWN) is None
