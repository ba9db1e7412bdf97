"""The map end to end at toy size: its rows carry what a reader needs to place them, and a
session on a fresh machine resumed from the results file retrains nothing."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from looped import paper
from looped.runtime.metrics import read_metrics
from looped.studies.engine import escape_step, trunk_train
from looped.studies.map import QUICK, Block, MapSettings, run_map

ROW_FIELDS = {"d_model", "vocab_size", "params", "params_non_embedding", "tokens", "epochs"}
ROW_FIELDS |= {"lr", "seed", "schedule", "escape_step"}


def _tiny(corpus: str) -> MapSettings:
    return replace(
        QUICK,
        corpus=corpus,
        blocks=(Block("d16", 16, tpp=(2, 4), arms=(paper.RECIPE_200M,)),),
        rounds=(2,),
        max_seeds=2,
        workers=1,
    )


@pytest.mark.slow
def test_a_tiny_map_records_every_rows_place_and_resumes_without_training(
    tmp_path: Path, stdlib_corpus: str
):
    corpus = stdlib_corpus
    first = run_map(_tiny(corpus), tmp_path / "a")
    block = first["blocks"]["d16"]
    assert block["rows"] and all(ROW_FIELDS <= set(r) for r in block["rows"])
    assert {r["steps"] for r in block["rows"]} == set(block["meta"]["settings"]["lengths"])
    assert set(block["shared_lr"]) == {str(n) for n in block["meta"]["settings"]["lengths"]}
    # a branch logs from its branch point on; its plateau escape reads the trunk's steps first
    branches = [
        d
        for d in (tmp_path / "a" / "d16-bpe512" / "runs").iterdir()
        if (d / "lineage.json").is_file()
    ]
    assert branches
    for run in branches:
        own = [m["step"] for m in read_metrics(run) if m["kind"] == "train"]
        steps = [m["step"] for m in trunk_train(run)]
        assert steps[0] < own[0] and steps[-len(own) :] == own and steps == sorted(set(steps))
        assert escape_step(trunk_train(run), float("inf")) == steps[0]  # not the branch point
    saved = block["modeled_saving"][paper.RECIPE_200M]
    assert all(0.3 < v < 0.5 for v in saved.values())  # K=2 for 67%: the abstract's 45%, near
    path = tmp_path / "map.json"
    path.write_text(json.dumps(first))
    again = run_map(replace(_tiny(corpus), resume_from=str(path)), tmp_path / "b")
    runs = tmp_path / "b" / "d16-bpe512" / "runs"
    assert not runs.exists() or not any(runs.iterdir())  # every run came from the file
    assert again["blocks"]["d16"]["cells"] == block["cells"]
    # several files (a CPU map and a GPU loan's): each run's row comes from the first that has it
    other = json.loads(json.dumps(first))
    for r in other["blocks"]["d16"]["rows"]:
        r["mean_nll"] += 1.0
    (tmp_path / "other.json").write_text(json.dumps(other))
    both = f"{path},{tmp_path / 'other.json'}"
    again = run_map(replace(_tiny(corpus), resume_from=both), tmp_path / "c")
    assert again["blocks"]["d16"]["rows"] == block["rows"]
    flipped = f"{tmp_path / 'other.json'},{path}"
    again = run_map(replace(_tiny(corpus), resume_from=flipped), tmp_path / "d")
    assert [r["mean_nll"] for r in again["blocks"]["d16"]["rows"]] == [
        r["mean_nll"] + 1.0 for r in block["rows"]
    ]
    # a session cut off mid-sweep: its collected file kept only some LR seed runs and no
    # reported row (results/underway/); the next session, on a fresh disk, trains the rest only
    cut = json.loads(json.dumps(first))
    kept = [r for r in cut["blocks"]["d16"]["sweep"] if r["lr"] == min(QUICK.lrs)]
    assert kept and len(kept) < len(cut["blocks"]["d16"]["sweep"])
    cut["blocks"]["d16"] |= {"sweep": kept, "rows": [], "cells": []}
    (tmp_path / "cut.json").write_text(json.dumps(cut))
    again = run_map(replace(_tiny(corpus), resume_from=str(tmp_path / "cut.json")), tmp_path / "e")
    trained = {d.name for d in (tmp_path / "e" / "d16-bpe512" / "runs").iterdir()}
    assert trained and not trained & {r["run"] for r in kept}  # the kept runs were not retrained
    assert again["blocks"]["d16"]["cells"] == block["cells"]  # and the study ends the same
