"""The recipe a uniform baseline trains with: warmup as a share of the run, a residual init that
counts the block's applications, and the probe that chooses between them (`looped map --probe`)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from looped import paper
from looped.config import OptimConfig, load_config, lr_at
from looped.errors import UserError
from looped.model import LoopedConfig, LoopedTransformer
from looped.studies.commands import map as map_command
from looped.studies.engine import fingerprint
from looped.studies.gapfit import delay_fit, escape_delays, recipe_change
from looped.studies.map import (
    ARMS,
    LATE,
    PROBE,
    QUICK,
    QUICK_PROBE,
    Block,
    MapSettings,
    block_settings,
    choose_late,
    choose_recipe,
    late_blocks,
    own_recipes,
    probe_blocks,
    run_map,
    with_recipe,
)
from looped.studies.recipe import parse_recipe, recipe_of, recipe_overrides
from looped.studies.report.recipe import own_section, recipe_section
from looped.training.lineage import branch_point

ROOT = Path(__file__).resolve().parents[1]


def test_a_warmup_fraction_is_that_share_of_every_run_and_parts_runs_of_other_lengths():
    optim = OptimConfig(lr=1e-2, warmup_frac=0.05, lr_schedule="wsd")
    for total in (200, 2000):
        warm = round(0.05 * total)
        assert lr_at(warm - 1, total, optim) == 1e-2  # the peak at the warmup's last step
        assert lr_at(warm // 2, total, optim) < 1e-2
    steps = OptimConfig(lr=1e-2, warmup_steps=10, lr_schedule="wsd")
    assert [lr_at(s, 200, steps) for s in range(20)] == [lr_at(s, 2000, steps) for s in range(20)]
    short = load_config("tiny", ["optim.warmup_frac=0.05", "optim.lr_schedule=wsd"])
    assert branch_point(short, 200, short, 2000) == 0  # no shared trunk: the LRs part at once
    fixed = load_config("tiny", ["optim.lr_schedule=wsd"])
    assert branch_point(fixed, 200, fixed, 2000) > 0


def test_the_depth_aware_init_scales_the_residual_projections_by_the_applications():
    torch.manual_seed(0)
    flat = LoopedTransformer(LoopedConfig(d_model=128, n_head=4))
    torch.manual_seed(0)
    deep = LoopedTransformer(LoopedConfig(d_model=128, n_head=4, init_loops=16))
    for name, w in flat.named_parameters():
        other = dict(deep.named_parameters())[name]
        if name.endswith(("attn.proj.weight", "mlp.down.weight")):
            ratio = other.std().item() / w.std().item()
            assert math.isclose(ratio, math.sqrt(1 / 16), rel_tol=0.05), name
        else:  # every other weight is drawn the same
            assert torch.equal(w, other), name


def test_a_config_at_the_new_fields_defaults_fingerprints_as_the_committed_runs_did():
    """The committed map's rows stand for their runs only if the fingerprint is unchanged."""
    block = json.loads((ROOT / "results" / "map.json").read_text())["blocks"]["d32"]
    row = next(r for r in block["rows"] if r["schedule"] == "uniform:1-16")
    settings = block_settings(MapSettings().blocks[0], MapSettings())
    from looped.studies.textsetup import run_config  # the map's own run config

    corpus = {"path": "x", "vocab_size": row["vocab_size"]}
    kw = {"schedule": row["schedule"], "lr": row["lr"], "seed": row["seed"], "steps": row["steps"]}
    assert fingerprint(run_config(settings.setup, corpus, **kw)) == row["config_sha"]
    frac = replace(settings.setup, warmup_frac=0.05)
    assert fingerprint(run_config(frac, corpus, **kw)) != row["config_sha"]
    cfg = run_config(settings.setup, corpus, **kw)  # fingerprints are remembered per config:
    cfg.batch_size //= 4  # one changed in place since (a micro-batched run's) is a new one
    assert fingerprint(cfg) != row["config_sha"]
    cfg.batch_size *= 4
    assert fingerprint(cfg) == row["config_sha"]


def test_each_probe_recipe_has_a_home_of_its_own_and_a_plain_block_keeps_its_warmup():
    uniform = [b for b in PROBE.blocks if b.sweep == paper.UNIFORM and not b.lrs]  # not late-
    assert len({b.name for b in uniform}) == len(uniform) == 6 + 2 * 4 + 3 + 3  # + the floor
    # one home per width, vocabulary and recipe: the floor's d64-40 cell shares d64's runs dir
    homes = {b.home: (b.d_model, b.tokenizer, b.recipe) for b in uniform}
    assert len(homes) == len({(b.d_model, b.tokenizer, b.recipe) for b in uniform}) == 7 + 5 + 5
    assert all(b.arms == () for b in PROBE.blocks)  # one schedule alone, its LR sweep only
    assert block_settings(QUICK.blocks[0], QUICK).setup.warmup_steps == QUICK.setup.warmup_steps
    frac = block_settings(replace(QUICK.blocks[0], warmup=0.05, init_loops=16), QUICK).setup
    assert (frac.warmup_frac, frac.init_loops) == (0.05, 16)
    assert Block("d32", 32).home == "d32-bpe512"  # the map's own runs stay where they are


def test_the_probe_chooses_the_recipe_whose_uniform_is_best_at_the_complete_cells():
    cells = (Block("a", 16, tpp=(8,)), Block("b", 32, tpp=(8,)))
    blocks = replace(
        PROBE,
        blocks=tuple(
            replace(c, name=f"probe-{c.name}-{r}", arms=(), warmup=w, init_loops=i)
            for c in cells
            for r, w, i in (("w10_i1", 10, 1), ("w5pct_i16", 0.05, 16))
        ),
    )
    val = {"probe-a-w10_i1": 3.0, "probe-a-w5pct_i16": 2.9, "probe-b-w10_i1": 3.1}
    result = {
        name: {"sweep": [{"lr": lr, "val_nll": v + lr, "seed": s} for lr in (3e-3, 1e-2)
                         for s in (200, 201)]}
        for name, v in val.items()
    }  # fmt: skip
    assert choose_recipe(result, blocks)["cells"] == ["a"]  # b is missing a recipe
    result["probe-b-w5pct_i16"] = {
        "sweep": [dict(r, val_nll=3.2) for r in result["probe-b-w10_i1"]["sweep"]]
    }
    chosen = choose_recipe(result, blocks)
    assert chosen["cells"] == ["a", "b"] and chosen["recipe"] == "w5pct_i16"
    assert chosen["excess"]["w5pct_i16"] < chosen["excess"]["w10_i1"]


def _sweep(v: float, schedule: str = paper.UNIFORM, lrs: tuple = PROBE.lrs) -> dict:
    """A probe block's whole sweep: each LR on each LR seed, the lower LR 0.1 nats worse."""
    rows = [
        {"lr": lr, "seed": s, "schedule": schedule, "steps": 644, "escape_step": 300}
        for lr in lrs
        for s in PROBE.lr_seeds
    ]
    return {"sweep": [r | {"val_nll": v + (0.1 if r["lr"] == min(lrs) else 0)} for r in rows]}


def test_the_own_recipe_check_reads_the_shared_recipe_against_each_arms_own_best():
    own = [b for b in PROBE.blocks if b.sweep != paper.UNIFORM and not b.lrs]
    assert {b.sweep for b in own} == set(ARMS) and len(own) == 2 * 4  # the four in contention
    assert len({b.name for b in PROBE.blocks}) == len(PROBE.blocks)
    # an arm's runs sit beside uniform's of the same recipe, apart by their schedule's run names
    assert {b.home for b in own} <= {b.home for b in PROBE.blocks if b.sweep == paper.UNIFORM}
    assert block_settings(own[0], PROBE).sweep_schedule == own[0].sweep
    k4 = [b for b in own if b.sweep == own[0].sweep]
    val = dict(zip((b.recipe for b in k4), (3.00, 3.03, 3.06, 3.09)))
    blocks = {b.name: _sweep(val[b.recipe], b.sweep) for b in k4}
    blocks |= {b.name: _sweep(3.0) for b in PROBE.blocks if b.name.startswith("probe-d32")}
    (check,) = own_recipes(blocks, PROBE, "w2pct_i16")  # the other arm has not run: no row
    assert check["best"] == k4[0].recipe and check["nll"][k4[0].recipe] == pytest.approx(3.0)
    assert check["excess"] == pytest.approx(val["w2pct_i16"] / 3.0 - 1)
    assert check["seed_spread"] == 0  # the two seeds agree in every sweep here
    assert own_recipes(blocks, PROBE, "w5pct_i1") == []  # not among the arm's recipes
    # the arms' runs never choose uniform's recipe, however good they look
    blocks |= {b.name: _sweep(1.0, b.sweep) for b in own}
    assert choose_recipe(blocks, PROBE)["cells"] == ["d32"]
    section = own_section({"blocks": blocks, "own_recipes": own_recipes(blocks, PROBE, "w10_i1")})
    assert section.count("fixed-first K=") == 2 * 4 * 2 + 2  # each arm x recipe x LR, each arm
    assert "+0.00%" in section  # every recipe ties for each arm: the shared one is its best


@pytest.mark.slow
def test_an_arm_alone_sweeps_its_lr_on_the_lr_seeds_and_trains_no_reported_seed(
    tmp_path: Path, stdlib_corpus: str
):
    corpus = stdlib_corpus
    arm = next(b for b in QUICK_PROBE.blocks if b.sweep != paper.UNIFORM)
    tiny = replace(QUICK_PROBE, corpus=corpus, blocks=(arm,), lrs=(1e-2,), workers=1)
    block = run_map(tiny, tmp_path / "m")["blocks"][arm.name]
    assert {(r["schedule"], r["seed"]) for r in block["sweep"]} == {
        (arm.sweep, s) for s in QUICK_PROBE.lr_seeds
    }
    assert block["rows"] == [] and all(r["val_nll"] > 0 for r in block["sweep"])


def test_a_recipe_left_out_of_the_larger_cells_is_scored_where_it_ran_not_chosen_from_one_cell():
    cells = (Block("a", 16, tpp=(8,)), Block("b", 32, tpp=(8,)))
    both = (("w10_i1", 10, 1), ("w2pct_i16", 0.02, 16))
    settings = replace(
        PROBE,
        blocks=probe_blocks(cells[:1], warmups=(10, 0.02, 0.05), inits=(1, 16))
        + probe_blocks(cells[1:], warmups=(10, 0.02), inits=(1, 16)),
    )
    val = {f"probe-a-{r}": 3.0 for r, _, _ in both} | {"probe-a-w5pct_i1": 2.5}
    val |= {"probe-a-w5pct_i16": 2.9, "probe-a-w10_i16": 3.0, "probe-a-w2pct_i1": 3.0}
    val |= {"probe-b-w10_i1": 3.3, "probe-b-w2pct_i16": 3.0, "probe-b-w10_i16": 3.3}
    val |= {"probe-b-w2pct_i1": 3.3}
    result = {
        name: {"sweep": [{"lr": lr, "val_nll": v, "seed": s} for lr in (3e-3, 1e-2)
                         for s in (200, 201)]}
        for name, v in val.items()
    }  # fmt: skip
    chosen = choose_recipe(result, settings)
    # w5pct_i1 is best at a, but ran nowhere else: the choice is among the four probed everywhere
    assert chosen["recipe"] == "w2pct_i16" and chosen["cells"] == ["a", "b"]
    assert set(chosen["excess"]) == {"w10_i1", "w10_i16", "w2pct_i1", "w2pct_i16"}
    assert chosen["dropped"]["w5pct_i1"] == pytest.approx(2.5 / 3.0 - 1)
    assert chosen["dropped_cells"]["w5pct_i1"] == ["a"]  # the table names where it ran
    table = recipe_section({"blocks": {}, "chosen_recipe": chosen})
    assert "| w5pct_i1 (a only) | -16.67% |" in table
    assert chosen["excess"]["w10_i1"] == pytest.approx((0 + 0.1) / 2)


def test_a_recipe_that_skipped_a_cell_where_it_equals_another_is_scored_there_through_it():
    """At 500 steps 2% of the run is 10 warmup steps: w10_i16 skipped there is w2pct_i16's runs,
    so the table scores it at every cell (not "only" where it ran, which flattered it), through
    the same best as the recipes in contention; a recipe equal to none there stays "only"."""

    def block(v: float, steps: int) -> dict:
        at = {"steps": steps, "escape_step": 90}
        rows = [at | {"lr": lr, "seed": s} for lr in (3e-3, 1e-2) for s in (200, 201)]
        return {"sweep": [r | {"val_nll": v + (0.1 if r["lr"] == 3e-3 else 0)} for r in rows]}

    val = {("a", "w2pct_i1"): 3.0, ("a", "w2pct_i16"): 3.3, ("a", "w10_i16"): 3.0}
    val |= {("a", "w5pct_i1"): 3.0, ("b", "w2pct_i1"): 2.0, ("b", "w2pct_i16"): 2.2}
    steps = {"a": 2000, "b": 500}
    blocks = {f"probe-{c}-{r}": block(v, steps[c]) for (c, r), v in val.items()}
    chosen = {
        "recipe": "w2pct_i1",
        "excess": {"w2pct_i1": 0.0, "w2pct_i16": 0.1},
        "cells": ["a", "b"],
        "dropped": {"w10_i16": 0.0, "w5pct_i1": 0.0},
        "dropped_cells": {"w10_i16": ["a"], "w5pct_i1": ["a"]},
    }
    table = recipe_section({"blocks": blocks, "chosen_recipe": chosen})
    assert "| w10_i16 (at b it trains as w2pct_i16) | +5.00% |" in table  # (0 + 10%) / 2
    assert "| w5pct_i1 (a only) | +0.00% |" in table  # 25 warmup steps at b: no recipe's
    # a cell whose name starts another's ("a" and "a-40") reads its own length: at a's 2,000
    # steps 2% is 40 warmup steps, not w10_i16's 10, though it is 10 at a-40's 500
    short = {f"probe-a-40-{r}": block(3.0, 500) for r in ("w2pct_i1", "w2pct_i16", "w10_i16")}
    late = dict(chosen, cells=["a-40", "a"], dropped_cells={"w10_i16": ["a-40"]})
    late["dropped"] = {"w10_i16": 0.0}
    blocks = short | {k: v for k, v in blocks.items() if k != "probe-a-w10_i16"}
    table = recipe_section({"blocks": blocks, "chosen_recipe": late})
    assert "| w10_i16 (a-40 only) |" in table


def test_a_recipe_name_round_trips_and_a_bad_one_is_refused_in_one_line():
    """Name -> (warmup, loops, state norm) -> a block's name, and name -> a run's overrides -> its
    config -> name: the report reads the demo reference's recipe back from its overrides this way."""
    for name in ("w2pct_i16", "w10_i1", "w5pct_i1", "w40_i16", "w10pct_i1_sn", "w40_i1_sn"):
        warmup, loops, normed = parse_recipe(name)
        assert normed == name.endswith("_sn")
        block = Block("x", 16, warmup=warmup, init_loops=loops, state_norm=normed)
        assert block.recipe == name
        cfg = load_config("tiny", recipe_overrides(name))
        assert recipe_of(cfg) == name and cfg.model.state_norm == normed
    bad_names = ("w2_pct_i16", "2pct_i16", "w0pct_i1", "w100pct_i1", "w2pct_i0", "w2pct")
    for bad in (*bad_names, "w2pct_i1_sm", "w2pct_sn"):
        with pytest.raises(UserError, match="--recipe .*w2pct_i16"):
            parse_recipe(bad)


def test_the_map_under_a_recipe_moves_every_block_to_its_own_home_and_its_own_results_file():
    moved = with_recipe(MapSettings(), "w2pct_i16")
    assert {b.recipe for b in moved.blocks} == {"w2pct_i16"} and moved.lr_seeds == (100, 101)
    assert not {b.home for b in moved.blocks} & {b.home for b in MapSettings().blocks}
    assert with_recipe(MapSettings(), "w10_i1") == MapSettings()  # the map's own: same runs
    a = map_command.parser().parse_args(["--recipe", "w2pct_i16"])
    assert map_command.stem(a, map_command.settings_from(a)) == "map-w2pct_i16"
    a = map_command.parser().parse_args([])
    assert map_command.stem(a, map_command.settings_from(a)) == "map"
    with pytest.raises(UserError, match="leave out --recipe"):
        map_command.settings_from(
            map_command.parser().parse_args(["--probe", "--recipe", "w10_i1"])
        )


def test_the_map_sweeps_the_lrs_given_and_refuses_a_sweep_it_cannot_train():
    a = map_command.parser().parse_args(["--lrs", "1e-3, 3.33e-4,1e-3"])
    assert map_command.settings_from(a).lrs == (3.33e-4, 1e-3)
    assert map_command.settings_from(map_command.parser().parse_args([])).lrs == (1e-3, 3e-3, 1e-2)
    for bad in ("fast", "0,1e-3", "1e-3,2", ","):
        with pytest.raises(UserError, match=f"--lrs {bad}: give learning rates"):
            map_command.settings_from(map_command.parser().parse_args(["--lrs", bad]))


def _cell(schedule: str, nll: list, escapes: list, steps: int = 100, gap: bool = True) -> dict:
    c = {"schedule": schedule, "steps": steps, "lr": 0.01, "seed_ids": [0, 1, 2]}
    c |= {"seed_nll": nll, "escape_steps": escapes, "d_model": 32, "vocab_size": 512}
    return c | ({"gap": {}} if gap else {})


def test_each_seed_cells_gap_is_paired_with_how_late_uniform_escaped_after_the_arm():
    arm = "fixed-first:k=4,frac=0.8,then=uniform:1-16"
    block = {
        "cells": [
            _cell("uniform:1-16", [2.0, 2.0, 4.0], [50, None, 30], gap=False),
            _cell(arm, [1.8, 2.2, 4.0], [20, 40, None]),
        ]
    }
    points = escape_delays({"blocks": {"a": block, "b": block}})  # a shared cell counts once
    assert [(p["seed"], p["delay"], p["censored"]) for p in points] == [
        (0, 30, False),
        (1, 60, True),
    ]
    assert [p["gap"] for p in points] == pytest.approx([-0.1, 0.1])
    line = [{"delay": d, "gap": 0.5 - 0.01 * d, "censored": False} for d in (0, 50, 100)]
    fit = delay_fit(line + [{"delay": 999, "gap": 9.0, "censored": True}])
    assert fit["r"] == pytest.approx(-1) and fit["pct_per_100_steps"] == pytest.approx(-100)
    assert (fit["n"], fit["censored"]) == (3, 1)
    assert delay_fit(line[:2]) is None  # two points fit any line


def test_a_new_recipe_is_read_against_the_old_cell_by_cell_paired_by_seed():
    old = {"blocks": {"d32": {"cells": [_cell("uniform:1-16", [2.0, 4.0, 3.0], [300, None, 200])]}}}
    new = {"blocks": {"d32": {"cells": [_cell("uniform:1-16", [1.8, 3.6, 2.7], [100, 120, 90])]}}}
    new["blocks"]["d32"]["cells"].append(_cell("uniform:1-16", [1.0, 1.0, 1.0], [9, 9, 9], steps=7))
    (c,) = recipe_change(old, new)  # the 7-step cell ran under the new recipe only
    assert c["change"]["mean"] == pytest.approx(-0.1) and c["change"]["n"] == 3
    assert c["escape_steps"] == ([300, None, 200], [100, 120, 90]) and c["lr"] == (0.01, 0.01)
    wider = [c | {"d_model": 64} for c in new["blocks"]["d32"]["cells"]]
    assert recipe_change(old, {"blocks": {"d64": {"cells": wider}}}) == []  # another width
    # a one-length block's cell is its width block's; a block's own name is read first
    (alone,) = recipe_change(old, {"blocks": {"d32-100": new["blocks"]["d32"]}})
    assert alone["change"]["mean"] == pytest.approx(-0.1)
    other = {"cells": [_cell("uniform:1-16", [1.0, 2.0, 1.5], [1, 2, 3])]}
    both = {"blocks": {"robust-d32": other, **old["blocks"]}}
    assert recipe_change(both, new)[0]["change"]["mean"] == pytest.approx(-0.1)
    # a second round of seeds under the new recipe alone: its escapes stay out of the pairing
    more = _cell("uniform:1-16", [1.8, 3.6, 2.7, 5.0], [100, 120, 90, 700])
    (c,) = recipe_change(old, {"blocks": {"d32": {"cells": [more | {"seed_ids": [0, 1, 2, 9]}]}}})
    assert c["escape_steps"] == ([300, None, 200], [100, 120, 90]) and c["change"]["n"] == 3


def test_the_rerun_section_reads_the_map_under_the_recipe_the_probe_chose(tmp_path):
    from looped.studies.report import render

    (tmp_path / "results").mkdir()
    write = lambda name, obj: (tmp_path / "results" / name).write_text(json.dumps(obj))  # noqa: E731
    assert "No block has run" in render.rerun_section(tmp_path)
    write("recipe.json", {"chosen_recipe": {"recipe": "w2pct_i16"}})
    assert render.chosen_map(tmp_path) is None  # chosen, not yet run
    old = {
        "blocks": {
            "d32": {"cells": [_cell("uniform:1-16", [2.0, 4.0, 3.0], [300, None, 200], gap=False)]}
        }
    }
    new = {
        "blocks": {
            "d32": {"cells": [_cell("uniform:1-16", [1.8, 3.6, 2.7], [100, 120, 90], gap=False)]}
        }
    }
    write("map.json", old)
    write("map-w10_i16.json", {"blocks": {}})  # another recipe's map is not the chosen one's
    new["blocks"]["d64"] = {"cells": [], "sweep": [{"lr": 1e-3}, {"lr": 3e-3}]}  # sweep so far
    write("map-w2pct_i16.json", new)
    assert render.chosen_map(tmp_path) == ("w2pct_i16", new)
    section = render.rerun_section(tmp_path)
    assert "-10.00%" in section
    assert "blocks d32, d64 (its LR sweep alone so far, 2 runs)" in section
    assert set(render.recipe_maps(tmp_path)) == {"w10_i1 (the map's)", "w10_i16", "w2pct_i16"}
    # the present choice first; a rerun under another recipe stays, labelled as not the choice
    assert section.index("Under `w2pct_i16`** (the probe's present choice") < section.index(
        "Under `w10_i16`** (an earlier choice"
    )
    # the probe changes its mind before anything ran under its new choice: nothing hidden
    write("recipe.json", {"chosen_recipe": {"recipe": "w2pct_i1"}})
    section = render.rerun_section(tmp_path)
    assert section.startswith("No block has run yet under `w2pct_i1`") and "-10.00%" in section


@pytest.mark.slow
def test_collecting_some_blocks_keeps_the_files_other_blocks(tmp_path: Path, stdlib_corpus: str):
    """A probe collected block by block (`--blocks`) keeps what the file held: the recipe is still
    chosen from every block, not from the last ones collected."""
    lrs = QUICK_PROBE.lrs
    val = {"w4_i1": 3.0, "w4_i16": 3.1, "w5pct_i1": 3.2, "w5pct_i16": 3.3}
    kept = {f"probe-d16-{r}": _sweep(v, lrs=lrs) for r, v in val.items()}
    (tmp_path / "recipe.json").write_text(json.dumps({"blocks": kept}))
    arm = next(b.name for b in QUICK_PROBE.blocks if b.sweep != paper.UNIFORM)
    argv = ["--probe", "--quick", "--collect", "--blocks", arm, "--out", str(tmp_path)]
    argv += ["--corpus", stdlib_corpus]
    assert map_command.main(argv) == 0  # the arm has no finished run: nothing of its own
    saved = json.loads((tmp_path / "recipe.json").read_text())
    assert saved["blocks"] == kept
    assert saved["chosen_recipe"]["recipe"] == "w4_i1"


def test_the_demo_under_a_new_recipe_is_read_beside_its_old_reference_schedule_by_schedule():
    from looped.studies.report.bios import recipe_change as demo_change

    def row(schedule: str, nll: float, gap: float | None = None, bits: float = 1.0) -> dict:
        r = {"schedule": schedule, "mean_fact_nll": nll, "bits": {"1": bits, "16": 2 * bits}}
        r |= {"mean_nll": {"mean": nll}}
        return r | ({"gap": {"mean": gap, "lo": gap - 0.1, "hi": gap + 0.1}} if gap else {})

    arm = paper.FIXED_FIRST
    new = {"summary": [row(paper.UNIFORM, 2.0), row(arm, 1.0, -0.5, 3.0)]}
    old = {"summary": [row(paper.UNIFORM, 4.0), row(arm, 1.0, -0.75, 5.0)]}
    new["summary_tokens"] = [row(paper.UNIFORM, 2.0), row(arm, 1.5, -0.25)]
    text = {"equal_tokens": [row(paper.UNIFORM, 3.0)]}
    table = demo_change(new, old, text, {}, ("w2pct_i16", "w20_i1", "w10_i1"))
    lines = table.splitlines()
    assert lines[0].startswith("| track (w2pct_i16 / w20_i1 and w10_i1) | schedule |")
    label = paper.label(arm)
    assert f"| bios, equal FLOPs | {label} | 1.000 / 1.000 | -50.0% [-60.0, -40.0] / " in table
    assert "-75.0% [-85.0, -65.0] | 3.0 / 5.0 | 6.0 / 10.0 |" in table
    assert "| bios, equal FLOPs | uniform 1..16 | 2.000 / 4.000 | - |" in table
    # uniform's equal-tokens run is its equal-FLOPs run; a row the old reference lacks shows "-"
    assert sum("equal tokens" in line for line in lines) == 2
    assert f"| bios, equal tokens | {label} | 1.500 / - | - |" in table
    assert "| text, equal tokens | uniform 1..16 | 3.000 / - | - | - | - |" in table


def test_a_tracks_warmup_share_is_of_its_whole_length_so_its_shorter_runs_still_branch():
    from looped.studies.textsetup import TextSetup, track_setup

    setup = track_setup(TextSetup(), "w2pct_i16", 480)
    assert (setup.warmup_steps, setup.warmup_frac, setup.init_loops) == (10, 0.0, 16)
    assert track_setup(TextSetup(), "w2pct_i1", 20).warmup_steps == 1  # at least one step
    assert track_setup(TextSetup(warmup_frac=0.5), "w40_i1", 480).warmup_steps == 40
    assert track_setup(TextSetup(warmup_frac=0.5), "w40_i1", 480).warmup_frac == 0.0


def _late(blocks: dict, name: str, seeds: dict[int, tuple[float, int | None]]) -> None:
    """A late-start probe block's sweep rows: {seed: (validation NLL, escape step)}."""
    blocks[name] = {
        "sweep": [{"seed": s, "val_nll": v, "escape_step": e} for s, (v, e) in seeds.items()]
    }


def test_the_late_start_rule_takes_the_best_candidate_whose_uniform_escapes_with_the_arms():
    """The rule fixed before the runs: on time means uniform's escape, in every probe seed, is no
    later than each arm's plus one logging interval (10 steps); then the lowest NLL wins."""
    settings = replace(PROBE, blocks=late_blocks(LATE[:3]))
    names = [b.name for b in settings.blocks]
    assert names[:3] == ["late-w2pct_i1-lr0.001", "late-k4f80-w2pct_i1-lr0.001",
                         "late-k2f67-w2pct_i1-lr0.001"]  # fmt: skip
    assert {b.lr_seeds for b in settings.blocks} == {(200, 201), (200,)}
    blocks: dict = {}
    assert choose_late(blocks, settings) is None  # nothing before the reference finishes
    # the reference: uniform 100 steps late, the lowest NLL of all
    _late(blocks, names[0], {200: (3.50, 400), 201: (3.52, 410)})
    _late(blocks, names[1], {200: (3.55, 300)})
    _late(blocks, names[2], {200: (3.50, 300)})
    # a longer warmup: uniform within 10 steps of the later arm in both seeds (on time)
    _late(blocks, names[3], {200: (3.57, 310), 201: (3.605, 290)})
    _late(blocks, names[4], {200: (3.60, 320)})
    _late(blocks, names[5], {200: (3.60, 300)})
    # the state norm: on time but worse; its K=2 arm has not finished, so it is left out
    _late(blocks, names[6], {200: (3.70, 200), 201: (3.70, 200)})
    _late(blocks, names[7], {200: (3.80, 300)})
    late = choose_late(blocks, settings)
    by = {c["candidate"]: c for c in late["candidates"]}
    assert list(by) == ["w2pct_i1-lr0.001", "w10pct_i1-lr0.001"] and not late["whole"]
    assert not by["w2pct_i1-lr0.001"]["on_time"] and by["w10pct_i1-lr0.001"]["on_time"]
    # 10% is this three-candidate grid's longest warmup: an edge, where the grid extends first
    assert late["winner"] == "w10pct_i1-lr0.001" and late["at_edge"]
    gap = by["w10pct_i1-lr0.001"]["vs_reference"]
    assert gap["values"] == pytest.approx([3.57 / 3.50 - 1, 3.605 / 3.52 - 1])
    assert gap["lo"] < gap["mean"] < gap["hi"] and gap["n"] == 2
    # one step more (21 past the later arm's 300 in a seed) and no candidate is on time
    _late(blocks, names[3], {200: (3.57, 310), 201: (3.605, 321)})
    assert choose_late(blocks, settings)["winner"] is None
    # an arm that never left the plateau does not make uniform late
    _late(blocks, names[3], {200: (3.57, 310), 201: (3.605, 290)})
    _late(blocks, names[4], {200: (3.60, None)})
    assert choose_late(blocks, settings)["winner"] == "w10pct_i1-lr0.001"
