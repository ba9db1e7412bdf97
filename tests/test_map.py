"""The map: a pinned one-pass corpus, cells past one pass never reported, the per-seed fit, the
wall-clock saving from a schedule's exact draws, and shorter runs branched off longer ones."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from looped import paper
from looped.config import load_config
from looped.data.package_corpus import package_documents, write_manifest
from looped.data.splits import split_of
from looped.errors import UserError
from looped.schedule_spec import parse_schedule
from looped.studies import engine, stats, textstudy
from looped.studies.gapfit import gap_fit
from looped.studies.report.map import finding, fit_cells, map_rows
from looped.studies.textsetup import prepare_documents
from looped.studies.timing import drawn_seconds
from looped.training.lineage import branch_point
from looped.training.trainer import train

torch.set_num_threads(1)


def _module(i: int) -> str:
    """A module whose long lines are its own: no two of them form a near-duplicate family."""
    return "\n".join(
        f"def function_{i}_{j}(argument_{j}):  return argument_{j} * {i + j}" for j in range(12)
    )


def _names_for(fracs: dict) -> tuple[str, str]:
    """An original module that alone would go to train, and a vendored copy whose name (its
    family's key: it sorts first) sends the family to test: apart, they would straddle."""
    original = next(
        f"pkg/m{i}.py" for i in range(999) if split_of(f"pkg/m{i}.py", **fracs) == "train"
    )
    vendored = next(
        f"pkg/_vendor/v{i}.py"
        for i in range(999)
        if split_of(f"pkg/_vendor/v{i}.py", **fracs) == "test"
    )
    return original, vendored


def test_the_corpus_builder_keeps_a_vendored_copy_in_its_familys_split(tmp_path: Path):
    fracs = {"val_frac": 0.2, "test_frac": 0.2}
    original, vendored = _names_for(fracs)
    root = tmp_path / "site" / "pkg"
    for i in range(30):
        (root / f"x{i}.py").parent.mkdir(parents=True, exist_ok=True)
        (root / f"x{i}.py").write_text(_module(i))
    (root / original.split("/", 1)[1]).write_text(_module(500))
    (root / vendored.split("/", 1)[1]).parent.mkdir(parents=True)
    (root / vendored.split("/", 1)[1]).write_text(_module(500))  # the vendored copy
    manifest = tmp_path / "pkg-1.0.tsv"
    write_manifest(root, "pkg", manifest)
    docs = package_documents("pkg-1.0", root=root, manifest=manifest)
    assert {original, vendored} <= {n for n, _ in docs}
    meta = prepare_documents(tmp_path / "corpus", docs, "bpe:300", dataset="pkg-1.0", **fracs)
    held = meta["held_out_documents"]
    assert original in held["test"] and vendored in held["test"]  # together, in the key's split


def test_a_corpus_file_that_differs_from_its_manifest_is_refused_in_one_line(tmp_path: Path):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    write_manifest(root, "pkg", tmp_path / "pkg-2.0.tsv")
    (root / "a.py").write_text("x = 2\n")
    with pytest.raises(UserError, match=r"a.py differs from the committed manifest.*pkg==2.0"):
        package_documents("pkg-2.0", root=root, manifest=tmp_path / "pkg-2.0.tsv")


def test_the_committed_torch_manifest_lists_only_python_sources():
    lines = (Path(textstudy.__file__).parents[1] / "data/manifests/torch-2.13.0.tsv").read_text()
    paths = [line.split("\t")[0] for line in lines.splitlines()]
    assert len(paths) > 2000 and all(p.startswith("torch/") and p.endswith(".py") for p in paths)
    assert "torch/version.py" not in paths  # differs between the CPU and CUDA wheels


def _row(schedule: str, seed: int, nll: float, tokens: int, train_tokens: int) -> dict:
    return {
        "run": f"{schedule}-{seed}",
        "schedule": schedule,
        "label": paper.label(schedule),
        "steps": tokens // 100,
        "seed": seed,
        "lr": 3e-3,
        "tokens": tokens,
        "params": 1000,
        "params_non_embedding": 500,
        "d_model": 8,
        "vocab_size": 512,
        "mean_nll": nll,
        "token_nll": [nll] * 16,
        "se": 0.01,
        "epochs": engine.epochs(
            {"tokens": tokens}, {"splits": {"train": {"tokens": train_tokens}}}
        ),
    }


def test_epochs_are_tokens_over_the_train_split_and_a_cell_past_one_pass_is_never_reported():
    k2 = paper.RECIPE_200M
    rows = []
    for tokens in (1000, 4000):  # 0.5 and 2.0 passes over 2,000 train tokens
        for seed in range(4):
            rows += [_row(paper.UNIFORM, seed, 3.0, tokens, 2000)]
            rows += [_row(k2, seed, 3.0 * (1.01 + 0.001 * seed), tokens, 2000)]
    assert {r["epochs"] for r in rows} == {0.5, 2.0}
    cells = textstudy.sequential_cells(rows, 9.0, (paper.UNIFORM, k2), (4,), {k2: 0.005})
    judged = {c["steps"]: c for c in cells if "gap" in c}
    assert judged[10]["one_pass"] and not judged[40]["one_pass"]
    assert not judged[40]["open"]  # no more seeds for a cell that is never reported
    result = {"blocks": {"d8": {"cells": cells}}}
    assert [c["steps"] for c in fit_cells(result, k2)] == [10]
    table = map_rows(result)
    assert "past one pass: not reported" in table and table.count("worse") == 1


def test_a_cell_whose_seeds_trained_on_two_devices_says_so_and_one_device_says_nothing():
    k2 = paper.RECIPE_200M
    rows = [
        _row(s, seed, 3.0 + 0.01 * seed, 1000, 2000)
        for seed in range(4)
        for s in (paper.UNIFORM, k2)
    ]
    args = (9.0, (paper.UNIFORM, k2), (4,), {k2: 0.005})
    table = map_rows({"blocks": {"d8": {"cells": textstudy.sequential_cells(rows, *args)}}})
    assert "trained on" not in table  # rows from before the field was recorded are CPU rows
    for r in rows:
        if r["seed"] == 3:  # a GPU loan finished the last seed of both arms
            r["device"] = "cuda"
    table = map_rows({"blocks": {"d8": {"cells": textstudy.sequential_cells(rows, *args)}}})
    assert table.count("(seeds trained on cpu and cuda)") == 1  # the arm's row, not uniform's


def test_a_length_past_one_pass_is_not_trained_and_a_block_with_none_left_is_skipped(capsys):
    from looped.studies.map import QUICK, block_settings, one_pass

    bs = block_settings(QUICK.blocks[0], QUICK)  # d16 at 2, 4 and 8 tokens per parameter
    per_step = bs.setup.batch_size * bs.setup.seq_len
    bs.tuned_at = max(bs.lengths)
    train = bs.lengths[1] * per_step  # the middle length is exactly one pass
    kept = one_pass(bs, {"splits": {"train": {"tokens": train}}}, "d16")
    assert kept.lengths == bs.lengths[:2] and kept.lr_lengths == bs.lengths[:2]
    assert kept.tuned_at == bs.lengths[1]  # the robustness check moves to the longest kept
    said = capsys.readouterr().out
    assert said.count("\n") == 1 and f"{bs.lengths[2]} steps would pass" in said
    none = one_pass(bs, {"splits": {"train": {"tokens": per_step}}}, "d16")
    assert none.lengths == () and "skipped" in capsys.readouterr().out


def _finding_cells(d: int, lengths: tuple[int, ...], vocab: int = 512) -> list[dict]:
    """Width d's judged cells at `lengths` (tokens; 500 non-embedding parameters, 2,000 train
    tokens): K=4 (80%) 2% behind uniform in every seed, K=2 (67%) level."""
    k4, k2 = paper.RECIPES_1B[1], paper.RECIPE_200M
    rows = []
    for tokens in lengths:
        for seed in range(4):
            rows += [_row(paper.UNIFORM, seed, 3.0, tokens, 2000)]
            rows += [_row(k4, seed, 3.0 * (1.02 + 0.001 * seed), tokens, 2000)]
            rows += [_row(k2, seed, 3.0 * (1.0 + 0.001 * (seed - 1.5)), tokens, 2000)]
    cells = textstudy.sequential_cells(
        rows, 9.0, (paper.UNIFORM, k4, k2), (4,), {k4: 0.008, k2: 0.005}
    )
    return [c | {"d_model": d, "vocab_size": vocab} for c in cells]


def test_the_finding_shows_each_widths_longest_one_pass_cell_and_says_what_has_not_run():
    """d=8 reaches 3 tokens/param on one pass (6,000 tokens is past it), d=16 only 2: d=8 shows
    its longest cell and its cell at d=16's longest, so widths are also compared at one length;
    d=32 is planned and has not run. A BPE-4096 block shows only its cell at that matched length,
    after the BPE-512 rows, and never moves the length the BPE-512 widths are matched at."""
    blocks = {"d8": {"cells": _finding_cells(8, (1000, 1500, 4000))}}
    blocks["d16"] = {"cells": _finding_cells(16, (500, 1000))}
    blocks["d16-bpe4096"] = {"cells": _finding_cells(16, (500, 1000, 1500), vocab=4096)}
    planned = [{"d_model": 8}, {"d_model": 16}, {"d_model": 32}]
    table = finding({"meta": {"settings": {"blocks": planned}}, "blocks": blocks})
    head, _, *lines = table.splitlines()
    assert "K=4 (80%)" in head and "tolerance 0.8%" in head and "tolerance 0.5%" in head
    regimes = [line.strip("| ").split(" | ")[0] for line in lines]
    assert regimes == [
        "d=8, BPE-512, 10 steps, 2 tokens/non-emb. param",  # matched to d=16's longest
        "d=8, BPE-512, 15 steps, 3 tokens/non-emb. param",  # d=8's longest on one pass
        "d=16, BPE-512, 10 steps, 2 tokens/non-emb. param",
        "d=32",
        "d=16, BPE-4096, 10 steps, 2 tokens/non-emb. param",  # the 2x2's, at the matched length
    ]
    k4_cell, k2_cell = lines[1].strip("| ").split(" | ")[1:3]
    assert k4_cell.endswith("4 seeds: worse") and k2_cell.endswith("4 seeds: within tolerance")
    assert lines[3] == "| d=32 | not yet run | not yet run |"


def test_the_fit_recovers_a_known_crossing_from_constructed_cells():
    # gap = a + b log2 T + c log2 P, so at P the gap crosses 0 at log2 T = -(a + c log2 P) / b
    a, b, c = -0.05, 0.01, 0.001
    rng = np.random.default_rng(0)
    seeds = range(6)
    noise = {s: rng.normal(0, 1e-4, 3) for s in seeds}
    cells = []
    for d, params in ((32, 2**14), (64, 2**16), (128, 2**18)):
        for tpp in (20, 40, 80):
            gaps = [
                a
                + noise[s][0]
                + (b + noise[s][1]) * math.log2(tpp)
                + (c + noise[s][2]) * math.log2(params)
                for s in seeds
            ]
            cells.append(
                {
                    "d_model": d,
                    "params_non_embedding": params,
                    "tokens_per_non_embedding_param": tpp,
                    "seed_ids": list(seeds),
                    "gap": {"values": gaps},
                }
            )
    fit = gap_fit(cells, tolerance=0.005)
    for d, params in ((32, 14), (64, 16), (128, 18)):
        want = 2 ** (-(a + c * params) / b)
        got = fit["crossing"][str(d)]["zero"]
        assert got["lo"] <= want <= got["hi"] and got["tokens_per_param"] == pytest.approx(
            want, rel=0.05
        )
        tol = fit["crossing"][str(d)]["tolerance"]["tokens_per_param"]
        assert tol == pytest.approx(2 ** ((0.005 - a - c * params) / b), rel=0.05)
    slope = fit["fit"]["per_doubling_tokens_per_param"]
    assert slope["lo"] <= b <= slope["hi"]
    assert fit["extrapolation"]["params"] == 200e6


def test_the_fit_table_says_interim_and_does_not_locate_a_crossing_its_seeds_scatter():
    """Read while a width's seeds are training (an interim look), the fit says so; two seeds
    whose slopes agree in sign but not in size leave a crossing no interval can place."""
    from looped.studies.report.map import fit_section

    k4 = paper.RECIPES_1B[1]
    cells = []
    for d, params in ((64, 2**16), (128, 2**18)):
        for tpp in (20, 40, 80):
            gaps = [0.001 * math.log2(tpp) - 0.01, 0.03 * math.log2(tpp) - 0.05]  # two seeds
            cells.append(
                {
                    "d_model": d,
                    "vocab_size": 512,
                    "steps": tpp,
                    "schedule": k4,
                    "verdict": "undecided",
                    "tolerance": 0.008,
                    "planned_look": d == 64,  # d=128 has two of its four seeds
                    "params_non_embedding": params,
                    "tokens_per_non_embedding_param": tpp,
                    "seed_ids": [0, 1],
                    "gap": {"values": [g + 1e-4 * d for g in gaps]},
                }
            )
    row = next(
        r for r in fit_section({"blocks": {"b": {"cells": cells}}}).splitlines() if "K=4" in r
    )
    assert "2 seeds, interim look" in row and "0: not located (interval over a thousandfold)" in row
    for c in cells:
        c["planned_look"] = True
    assert "interim" not in fit_section({"blocks": {"b": {"cells": cells}}})


def test_a_fit_whose_seeds_disagree_in_direction_says_so_once():
    """Two seeds whose gaps move in opposite directions with length place no crossing at any
    width: the row says why in one phrase, not once per width and level."""
    from looped.studies.report.map import fit_section

    k2 = paper.RECIPE_200M
    cells = [
        {
            "d_model": d,
            "vocab_size": 512,
            "steps": tpp,
            "schedule": k2,
            "verdict": "undecided",
            "tolerance": 0.005,
            "params_non_embedding": params,
            "tokens_per_non_embedding_param": tpp,
            "seed_ids": [0, 1],
            "gap": {"values": [0.01 * math.log2(tpp) - 0.04, 0.02 - 0.005 * math.log2(tpp)]},
        }
        for d, params in ((64, 2**16), (128, 2**18))
        for tpp in (20, 40, 80)
    ]
    row = next(
        r for r in fit_section({"blocks": {"b": {"cells": cells}}}).splitlines() if "K=2" in r
    )
    assert row.count("no crossing (seeds' slopes differ in sign)") == 2  # the widths', the 200M's
    assert "d=64" not in row


def _fit_row(noise: float, width_slope: float) -> str:
    """fit_section's K=4 row over constructed cells, gap = 2% + 1% per doubling of T +
    `width_slope` per doubling of P, four seeds' slopes in P off by up to 1.5 `noise`."""
    from looped.studies.report.map import fit_section

    off = {s: (0.0, 0.0, noise * x) for s, x in enumerate((-1.0, 1.0, -1.5, 1.5))}
    cells = [
        {
            "d_model": d,
            "vocab_size": 512,
            "steps": tpp,
            "schedule": paper.RECIPES_1B[1],
            "verdict": "undecided",
            "tolerance": 0.008,
            "params_non_embedding": params,
            "tokens_per_non_embedding_param": tpp,
            "seed_ids": list(off),
            "gap": {
                "values": [
                    0.02
                    + o[0]
                    + (0.01 + o[1]) * math.log2(tpp / 20)
                    + (width_slope + o[2]) * math.log2(params / 2**16)
                    for o in off.values()
                ]
            },
        }
        for d, params in ((64, 2**16), (128, 2**18))
        for tpp in (20, 40, 80)
    ]
    rows = fit_section({"blocks": {"b": {"cells": cells}}}).splitlines()
    return next(r for r in rows if "K=4" in r)


def test_an_extrapolation_wider_than_the_gaps_it_extrapolates_prints_no_point_value():
    """Seeds that scatter in their width slope leave 200M parameters, ten doublings away, an
    interval wider than any gap fitted: the row says "uninformative" and gives the interval
    alone, never a point value; a tight fit gives the point with its interval."""
    far = _fit_row(noise=0.005, width_slope=0.0).split(" | ")[3]
    assert far.startswith("uninformative: [") and "wider than any gap fitted" in far
    assert not re.search(r"[-+]\d+\.\d+% \[", far)  # no "+10.10% [...]": no point value
    tight = _fit_row(noise=1e-5, width_slope=0.002).split(" | ")[3]
    assert re.match(r"[-+]\d+\.\d+% \[[-+]\d+\.\d+, [-+]\d+\.\d+\] at 80 tokens/param$", tight)


def test_a_slope_whose_interval_spans_zero_is_undetermined():
    """The width slope of a fit whose seeds straddle zero is written "undetermined" beside its
    interval; a slope whose interval excludes zero (the length's here) is not."""
    row = _fit_row(noise=0.005, width_slope=0.0)
    assert "per doubling of parameters (undetermined)" in row
    assert "per doubling of tokens/param (undetermined)" not in row
    assert "(undetermined)" not in _fit_row(noise=1e-5, width_slope=0.002)


def test_a_fit_needs_two_widths_and_two_lengths():
    cells = [
        {
            "d_model": 64,
            "params_non_embedding": 5e4,
            "tokens_per_non_embedding_param": t,
            "seed_ids": [0, 1],
            "gap": {"values": [0.01, 0.02]},
        }
        for t in (20, 40, 80)
    ]
    assert gap_fit(cells, 0.005)["fit"] is None


def test_the_wall_clock_saving_weights_per_depth_step_times_by_the_exact_draws():
    total = 40
    seconds = {k: 0.1 + 0.05 * k for k in range(1, 17)}  # a fixed part and a part per loop
    uniform = parse_schedule(paper.UNIFORM, 3)
    k2 = parse_schedule(paper.RECIPE_200M, 3)
    draws_u = [uniform.depth(s, total) for s in range(total)]
    draws_k2 = [k2.depth(s, total) for s in range(total)]
    assert drawn_seconds(seconds, uniform, total) == pytest.approx(sum(seconds[k] for k in draws_u))
    assert drawn_seconds(seconds, k2, total) == pytest.approx(sum(seconds[k] for k in draws_k2))
    assert draws_k2[:26] == [2] * 26  # the fixed phase: 67% of 40 steps at K=2
    # a fixed schedule takes its one depth's time at every step
    assert drawn_seconds(seconds, parse_schedule("fixed:4"), total) == pytest.approx(12.0)


def _weights(run: Path) -> dict:
    ckpt = sorted((run / "checkpoints").iterdir())[-1]
    return load_file(str(ckpt / "model.safetensors"))


@pytest.mark.slow
def test_a_shorter_run_branched_off_a_longer_trunk_equals_it_trained_from_scratch(tmp_path: Path):
    """The map's trunks: with WSD, a 20-step K=2 (67%) run is the 40-step run's prefix up to its
    own switch, then its own uniform phase and decay; branched there, it is bitwise the same."""
    common = [
        "data.kind=bios",
        "data.persons=12",
        "model.d_model=16",
        "model.n_head=2",
        "batch_size=4",
        "seq_len=64",
        "model.seq_len=64",
        "eval_interval=0",
        "eval_batches=1",
        "eval_depths=1-2",
        "optim.lr_schedule=wsd",
        "optim.warmup_steps=2",
        f"schedule={paper.RECIPE_200M}",
    ]
    short, long_ = (
        load_config("demo", [*common, "max_steps=20"]),
        load_config("demo", [*common, "max_steps=40"]),
    )
    at = branch_point(short, 20, long_, 40)
    switch = next(s for s in range(20) if parse_schedule(paper.RECIPE_200M, 0).depth(s, 20) != 2)
    assert 0 < at == switch  # the short run's own switch, before its decay
    train(
        load_config("demo", [*common, "max_steps=40"]),
        tmp_path / "trunk",
        quiet=True,
        save_steps=(at,),
    )
    ckpt = tmp_path / "trunk" / "checkpoints" / f"step_{at:07d}"
    train(short, tmp_path / "branch", quiet=True, branch_from=str(ckpt))
    train(load_config("demo", [*common, "max_steps=20"]), tmp_path / "scratch", quiet=True)
    a, b = _weights(tmp_path / "branch"), _weights(tmp_path / "scratch")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((tmp_path / "branch" / "lineage.json").read_text())["parent_step"] == at


def test_the_map_figure_scales_to_the_cells_that_decide(tmp_path: Path, monkeypatch):
    """A width whose cells all miss the bigram is drawn faint, and its wide intervals may run
    off the panel; the reported cells' intervals and every cell's mean stay inside it."""
    from looped.studies.report import map as report_map

    def cell(d: int, s: str, tpp: float, lo: float, mean: float, hi: float, verdict: str):
        gap = {"lo": lo, "mean": mean, "hi": hi, "n": 4, "values": [mean] * 4}
        return {"d_model": d, "vocab_size": 512, "steps": int(tpp), "schedule": s}, {
            "gap": gap,
            "verdict": verdict,
            "tokens_per_non_embedding_param": tpp,
            "tolerance": paper.tolerance(s),
            "one_pass": True,
        }

    blocks: dict = {}
    for d, (lo, mean, hi), verdict in (
        (32, (-0.25, -0.09, 0.20), "not informative at this size"),
        (64, (0.006, 0.03, 0.056), "worse"),
    ):
        for s in (paper.RECIPES_1B[1], paper.RECIPE_200M):
            for tpp in (20, 40):
                key, rest = cell(d, s, tpp, lo, mean, hi, verdict)
                blocks.setdefault(f"d{d}", {"cells": []})["cells"].append(key | rest)
    drawn = {}

    def edge_marks(ax) -> list[tuple[float, float]]:
        """(x, 1) for a mark on the top edge, (x, 0) on the bottom one."""
        on_edge = [
            c for c in ax.collections if c.get_offset_transform() is ax.get_xaxis_transform()
        ]
        return sorted((float(x), float(y)) for c in on_edge for x, y in c.get_offsets())

    def keep(fig, path):
        drawn["ylim"] = fig.axes[0].get_ylim()
        drawn["legend"] = [t.get_text() for t in fig.legends[0].get_texts()]
        drawn["marks"] = [edge_marks(ax) for ax in fig.axes]
        fig.axes[0].set_ylim(top=18.0)  # a taller axis, as a legend above the data would need
        drawn["raised"] = [edge_marks(ax) for ax in fig.axes]
        return path

    monkeypatch.setattr(report_map.plotting, "save", keep)
    report_map.fig_map({"blocks": blocks}, tmp_path / "map.png")
    lo, hi = drawn["ylim"]
    assert lo < -9.0 and hi > 5.6  # every mean, and the reported intervals, are shown
    assert lo > -25.0 and hi < 20.0  # the unreported width's interval does not set the scale
    assert (
        "d=32: no verdict (a model misses the bigram table)" in drawn["legend"]
        and "d=64" in drawn["legend"]
    )
    off = "interval runs off the panel (its row has it)"
    assert off in drawn["legend"] and drawn["marks"][0]  # d=32's
    # one arm of a width in its second round of seeds: the key names that arm and its seeds,
    # not the other's, and its wide two-seed interval neither scales the panel nor vanishes:
    # it ends in a mark on each edge it runs off, which moves with the range
    del blocks["d32"]
    for c in blocks["d64"]["cells"]:
        if c["schedule"] == paper.RECIPE_200M:
            c |= {"planned_look": False, "gap": c["gap"] | {"n": 2, "lo": -0.14, "hi": 0.17}}
    report_map.fig_map({"blocks": blocks}, tmp_path / "map.png")
    assert "d=64, interim look: K=2 (67%) has 2 seeds so far" in drawn["legend"]
    assert "d=64" not in drawn["legend"] and not any("K=4" in t for t in drawn["legend"])
    lo, hi = drawn["ylim"]
    assert hi < 17.0 and lo > -14.0  # the interim interval runs off the panel...
    assert off in drawn["legend"]  # ...and is marked, in K=2's panel only, at both lengths
    assert drawn["marks"] == [[], [(20.0, 0.0), (20.0, 1.0), (40.0, 0.0), (40.0, 1.0)]]
    assert drawn["raised"] == [[], [(20.0, 0.0), (40.0, 0.0)]]  # the top now holds +17%


def test_the_own_lr_table_lists_each_width_that_ran_the_check():
    from looped.studies.report.map import own_lr

    arm = paper.RECIPE_200M
    gap = {"mean": 0.015, "lo": -0.004, "hi": 0.034, "n": 4}
    tuned = {"steps": 2088, "cells": [{"schedule": arm, "lr": 0.01, "shared_lr": 0.003}]}
    tuned["cells"][0] |= {"gap": gap, "verdict": "undecided"}
    block = {"meta": {"settings": {"setup": {"d_model": 64}}}, "tuned": tuned}
    table = own_lr({"blocks": {"d64": {"meta": block["meta"]}, "robust-d64": block}})
    (row,) = [line for line in table.splitlines() if line.startswith("| 64")]
    assert row == (
        "| 64 | 2088 | fixed-first K=2 (67%) | 0.01 | 0.003 | +1.50% [-0.40, +3.40], n=4, undecided |"
    )
    assert "not yet run" in own_lr({"blocks": {}})


def test_the_trend_table_gives_each_widths_per_seed_slopes_and_what_has_not_run():
    """The README's "its per-seed trend rises" is read off this table: a row per width and arm,
    each seed's slope of the gap per doubling of tokens (constructed: 1, 2, 3, 2 points)."""
    from looped.studies.report.map import trends

    k4 = paper.RECIPES_1B[1]
    slopes = {0: 0.01, 1: 0.02, 2: 0.03, 3: 0.02}
    cells = [
        {"schedule": k4, "tokens": 2**n, "verdict": "undecided", "seed_ids": list(slopes),
         "gap": {"values": [0.01 + b * (n - 10) for b in slopes.values()]}}
        for n in (10, 11, 12)
    ]  # fmt: skip
    setup = {"setup": {"d_model": 64, "tokenizer": "bpe:512"}}
    wide = {"setup": {"d_model": 128, "tokenizer": "bpe:512"}}
    blocks = {
        "d64": {"meta": {"settings": setup}, "trends": stats.seed_trends(cells)},
        "d128": {"meta": {"settings": wide}},
        "frontier-d64": {"meta": {"settings": setup}, "trends": {}},  # one length: no row
    }
    rows = [line.strip("| ").split(" | ") for line in trends({"blocks": blocks}).splitlines()[2:]]
    assert [r[:3] for r in rows] == [
        ["64", "512", "fixed-first K=4 (80%)"],
        ["64", "512", "fixed-first K=2 (67%)"],
        ["128", "512", "fixed-first K=4 (80%)"],
        ["128", "512", "fixed-first K=2 (67%)"],
    ]
    assert rows[0][3:5] == ["3", "4"] and rows[0][6] == "rising"
    assert rows[0][7] == "+1.00, +2.00, +3.00, +2.00"
    assert rows[1][3] == rows[2][3] == "not yet run"
    # a width with two lengths: every seed has a line through two points, so no trend is
    # claimed, and the row says it is the lengths that are missing, not the seeds
    blocks["d128"]["trends"] = stats.seed_trends(cells[:2])
    rows = [line.strip("| ").split(" | ") for line in trends({"blocks": blocks}).splitlines()[2:]]
    assert rows[2][3:7] == ["2", "-", "-", "too few lengths (a trend needs 3)"]
    # three lengths but one seed: a slope, no interval; no length with a verdict: nothing
    one = [c | {"seed_ids": [0], "gap": {"values": c["gap"]["values"][:1]}} for c in cells]
    blocks["d128"]["trends"] = stats.seed_trends(one)
    rows = [line.strip("| ").split(" | ") for line in trends({"blocks": blocks}).splitlines()[2:]]
    assert rows[2][3:8] == ["3", "1", "-", "too few seeds", "+1.00"]
    quiet = [c | {"verdict": "not informative at this size"} for c in cells]
    blocks["d128"]["trends"] = stats.seed_trends(quiet)
    rows = [line.strip("| ").split(" | ") for line in trends({"blocks": blocks}).splitlines()[2:]]
    assert rows[2][3:7] == ["0", "-", "-", "no length with a verdict"]


def test_collecting_a_block_still_in_its_lr_sweep_draws_no_empty_figure(tmp_path: Path):
    """A block with no paired cell yet (d=128 BPE-4096 mid-sweep) once failed its collect with
    "figure has panels without data"; its map.json is written and no figure is drawn."""
    from looped.studies.report.map import figures

    block = {"meta": {"settings": {"setup": {"d_model": 128}}}, "cells": [], "rows": []}
    assert figures({"blocks": {"d128-bpe4096": block}}, tmp_path) == []


def test_timing_one_width_keeps_the_other_widths_step_times(tmp_path, monkeypatch):
    """`looped map --time 5 --blocks d128` after d32 and d64 were timed: d128's entry is added
    (or replaced), the others stay, and so does everything else in map.json."""
    from looped.studies.commands import map as map_command

    old = {"blocks": {"d64": {"cells": []}}, "wallclock": {"d32-bpe512": "a", "d64-bpe512": "b"}}
    (tmp_path / "map.json").write_text(json.dumps(old))
    monkeypatch.setattr(
        map_command, "time_blocks", lambda s, out, reps: {"d64-bpe512": "c", "d128-bpe512": "d"}
    )
    assert map_command.main(["--time", "2", "--blocks", "d128", "--out", str(tmp_path)]) == 0
    new = json.loads((tmp_path / "map.json").read_text())
    assert new["blocks"] == old["blocks"]
    assert new["wallclock"] == {"d32-bpe512": "a", "d64-bpe512": "c", "d128-bpe512": "d"}


def test_step_times_are_taken_on_one_thread_with_the_depths_taking_turns(tmp_path, monkeypatch):
    """`map --time` times the step a worker takes (one core), and no depth always goes first."""
    from looped.studies import map as study
    from looped.studies.textsetup import TextSetup

    seen: list[tuple[int, list[int]]] = []

    def fake_time_min(fns, warmup, reps, device):
        seen.append((torch.get_num_threads(), list(fns)))
        return {k: float(k) for k in fns}

    monkeypatch.setattr(study, "time_min", fake_time_min)
    threads = torch.get_num_threads()
    corpus = {"path": str(tmp_path), "vocab_size": 512}
    sec = study.depth_seconds(TextSetup(d_model=16), corpus, reps=3)
    assert torch.get_num_threads() == threads  # the cores are given back
    assert {n for n, _ in seen} == {1}
    assert [order[0] for _, order in seen[1:]] == [1, 2, 3]  # repeat r starts at depth r+1
    assert sec == {k: [float(k)] * 3 for k in range(1, 17)}


def test_a_cell_read_at_one_seed_says_it_has_no_interval_rather_than_printing_infinities():
    from looped.studies.report.block import gap_cell

    one = {"gap": {"mean": -0.032, "lo": -math.inf, "hi": math.inf, "n": 1},
           "verdict": "undecided", "planned_look": False}  # fmt: skip
    assert gap_cell(one) == "-3.20% [no interval from one seed], n=1, undecided (interim look)"
    two = one | {"gap": {"mean": 0.021, "lo": 0.004, "hi": 0.038, "n": 2}}
    assert gap_cell(two) == "+2.10% [+0.40, +3.80], n=2, undecided, behind (interim look)"


def test_a_crossing_outside_the_lengths_fitted_gets_no_point_value():
    """Below the shortest length fitted, a crossing is an extrapolation: its interval is given,
    its point value is not (it would read as a length the map measured)."""
    from looped.studies.report.map import _crossing, _crossings

    c = {"tokens_per_param": 16.7, "lo": 4.44, "hi": 62.9}
    below = "point below the lengths fitted (from 40); interval [4.44, 62.9]"
    assert _crossing(c, (40, 160)) == below
    assert _crossing(c | {"tokens_per_param": 200.0}, (40, 160)).startswith("point above")
    assert _crossing(c | {"tokens_per_param": 60.0}, (40, 160)) == "60 [4.44, 62.9]"
    assert _crossing(c | {"lo": 0.01}, (40, 160)).startswith("not located")
    # each width is read against its own lengths: d=128's fitted 20..40 holds 30, d=64's does not
    both = {"64": {"zero": c | {"tokens_per_param": 30.0}, "tolerance": None}}
    both["128"] = both["64"]
    text = _crossings(both, {64: (40, 160), 128: (20, 40)})
    assert text.startswith("d=64: 0: point below the lengths fitted (from 40)")
    assert "d=128: 0 at 30 [4.44, 62.9]" in text


def test_resuming_runs_that_took_other_cpu_kernels_warns_with_the_pin_that_follows_them(
    tmp_path: Path, capsys
):
    """A study continued on another CPU pairs runs that parted within tens of steps unless the
    kernels are pinned: the resume says so, and how, in one line, and still goes on."""
    from looped.studies.map import QUICK, check_resume, kernel_note

    block = QUICK.blocks[0].name
    sweep = [_scored(lr=lr) for lr in QUICK.lrs]
    rows = [_scored(cpu_kernels="AVX2")]
    old = {"blocks": {block: {"meta": {"corpus": {}}, "rows": rows, "sweep": sweep}}}
    note = kernel_note(old, QUICK, "AVX512")
    assert "took AVX2 kernels, this machine takes AVX512" in note
    assert "MKL_CBWR=AVX2 ATEN_CPU_CAPABILITY=avx2" in note
    assert kernel_note(old, QUICK, "AVX2") is None  # the same path: nothing to say
    assert "will part" in kernel_note(old, QUICK, "DEFAULT")  # a lower level cannot follow
    other = {"blocks": {"elsewhere": old["blocks"][block]}}
    assert kernel_note(other, QUICK, "AVX512") is None  # only the blocks this run resumes
    path = tmp_path / "map.json"
    path.write_text(json.dumps(old))
    check_resume(dataclasses.replace(QUICK, resume_from=str(path)))
    err = capsys.readouterr().err
    if torch.backends.cpu.get_cpu_capability() == "AVX2":
        assert err == ""
    else:  # one line, naming the file
        assert (
            err.startswith(f"--resume-from {path}: its CPU runs took AVX2") and err.count("\n") == 1
        )


def _scored(**fields) -> dict:
    """A scored row with the fields a resume matches it by (`resume.ROW_FIELDS`)."""
    return {"run": "r", "config_sha": "0" * 16, "lr": 1e-3} | fields


def test_resuming_a_block_whose_sweep_left_out_an_lr_says_so_and_how_to_keep_it(
    tmp_path: Path, capsys
):
    """A block swept with `--lrs` and continued without it would train the left-out LR first, and
    its cells could move to another LR: the resume names the LR and the flag that keeps the sweep,
    in one line per block, and an LR the sweep added past its grid's edge is no gap."""
    from looped.studies.map import QUICK, check_resume, lr_notes

    block = QUICK.blocks[0].name
    grid = sorted(QUICK.lrs)
    sweep = [_scored(lr=lr) for lr in grid[1:]]  # the sweep left the lowest out
    old = {"blocks": {block: {"meta": {"corpus": {}}, "rows": [], "sweep": sweep}}}
    (note,) = lr_notes(old, QUICK)
    kept = ",".join(f"{lr:g}" for lr in grid[1:])
    assert f"block {block}'s LR sweep left out {grid[0]:g}," in note
    assert note.endswith(f"pass --lrs {kept} to continue it as it was")
    past = [{"lr": lr} for lr in (*grid, grid[-1] * 3)]  # the whole grid and an extension
    assert lr_notes({"blocks": {block: {"sweep": past}}}, QUICK) == []
    assert lr_notes({"blocks": {"elsewhere": {"sweep": sweep}}}, QUICK) == []  # not resumed
    path = tmp_path / "map.json"
    path.write_text(json.dumps(old))
    check_resume(dataclasses.replace(QUICK, resume_from=str(path)))
    lines = [x for x in capsys.readouterr().err.splitlines() if "LR sweep" in x]
    assert lines == [f"--resume-from {path}: {note}"]


def test_the_map_figure_draws_another_vocabularys_cells_as_diamonds_and_says_so(
    tmp_path: Path, monkeypatch
):
    """The prose reads BPE-4096 cells beside the BPE-512 curves, so the figure draws them (a lone
    diamond in its width's colour, its interval among those that set the scale), and the title
    and legend name both vocabularies; a map of one vocabulary says it is that one alone."""
    from matplotlib.colors import to_hex

    from looped.studies.report import map as report_map

    def cell(d, v, s, mean, lo, hi, verdict="undecided"):
        gap = {"mean": mean, "lo": lo, "hi": hi, "n": 4}
        return {"d_model": d, "vocab_size": v, "steps": 100, "schedule": s, "gap": gap} | {
            "tokens_per_non_embedding_param": 40.0,
            "verdict": verdict,
            "one_pass": True,
        }

    arms = report_map.RECIPES
    small = [cell(64, 512, s, 0.01, -0.005, 0.02) for s in arms]
    big = [cell(128, 4096, s, -0.02, -0.12, -0.01, "better") for s in arms]
    drawn = {}

    def keep(fig, path):
        ax = fig.axes[0]
        diamonds = [ln for ln in ax.lines if ln.get_marker() == "D"]
        drawn["diamonds"] = [(to_hex(ln.get_color()), list(ln.get_ydata())) for ln in diamonds]
        drawn["ylim"] = ax.get_ylim()
        drawn["title"] = fig._suptitle.get_text()
        drawn["legend"] = [t.get_text() for t in fig.legends[0].get_texts()]
        return path

    monkeypatch.setattr(report_map.plotting, "save", keep)
    both = {"blocks": {"d64": {"cells": small}, "d128-bpe4096": {"cells": big}}}
    report_map.fig_map(both, tmp_path / "map.png", "w2pct_i1")
    assert drawn["diamonds"] == [(report_map.WIDTH_COLOURS[128], [-2.0])]
    assert drawn["ylim"][0] < -12.0  # a deciding diamond's interval is on the panel
    assert (
        drawn["title"]
        == "Training recipe w2pct_i1; lines: 512-token BPE, diamonds: 4,096-token BPE"
    )
    assert "diamond: a 4,096-token BPE (colour: width)" in drawn["legend"]
    report_map.fig_map({"blocks": {"d64": {"cells": small}}}, tmp_path / "map.png", "w2pct_i1")
    assert drawn["diamonds"] == [] and drawn["title"].endswith("512-token BPE cells only")
    assert not any("diamond" in t for t in drawn["legend"])
