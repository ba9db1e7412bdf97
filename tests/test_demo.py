"""The demo grid: exact sharing plan, results and figures from one quick run, reuse on re-run,
and README sections generated from the results."""

import contextlib
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from looped.config import lr_at
from looped.errors import UserError
from looped.paper import FIXED, FIXED_FIRST, UNIFORM
from looped.schedule_spec import parse_schedule
from looped.studies import bios, demo
from looped.studies.bios import QUICK, plan
from looped.studies.commands import demo as demo_command
from looped.studies.commands import report as report_command
from looped.studies.demo import run_demo
from looped.studies.engine import name_of
from looped.studies.report import bios as bios_report
from looped.studies.report import render


def named(schedule: str, budget: float, seed: int = 0, lr: float = bios.BIOS_LR[UNIFORM]) -> str:
    """A bios run's name (`engine.name_of`): at a budget, or at `steps` given as an int."""
    if isinstance(budget, int):
        return name_of(schedule, lr, seed, steps=budget)
    return name_of(schedule, lr, seed, budget=budget)


def test_plan_shares_only_exact_prefixes():
    by = plan(replace(QUICK, seeds=1))
    specs = list(by.values())
    ff = by[named(FIXED_FIRST, 1.0)]
    assert by[ff.parent].schedule == FIXED and by[ff.parent].budget == 1.0
    assert ff.branch_step == parse_schedule(FIXED_FIRST).switch_step(ff.steps)
    assert by[by[named(UNIFORM, 0.45)].parent].schedule == UNIFORM
    for s in specs:
        if s.parent:
            parent = by[s.parent]
            assert s.branch_step in parent.save_steps
            child_cfg, parent_cfg = s.cfg, parent.cfg
            for step in range(s.branch_step):  # the shared prefix is truly shared
                assert lr_at(step, s.steps, child_cfg.optim) == lr_at(
                    step, parent.steps, parent_cfg.optim
                )
                a = parse_schedule(s.schedule, s.seed).depth(step, s.steps)
                assert a == parse_schedule(parent.schedule, parent.seed).depth(step, parent.steps)
    # matched budgets: fixed K=4 gets more steps than fixed-first, which gets more than uniform
    steps = {s.schedule: s.steps for s in specs if s.budget == 1.0 and s.group.startswith("main")}
    assert steps[FIXED] > steps[FIXED_FIRST] > steps[UNIFORM]
    assert sorted({s.schedule for s in specs if "depth" in s.group}) == [
        "fixed:1",
        "fixed:2",
        "fixed:4",
        "fixed:8",
    ]
    # equal tokens: fixed-first and fixed K=4 at uniform's full-budget steps (the same tokens)
    tokens = [s for s in specs if s.group == "tokens"]
    assert sorted(s.schedule for s in tokens) == sorted([FIXED, FIXED_FIRST])
    assert {s.steps for s in tokens} == {by[named(UNIFORM, 1.0)].steps}
    assert {s.cfg.batch_size for s in tokens} == {by[named(UNIFORM, 1.0)].cfg.batch_size}


def test_the_plain_grid_is_the_full_grid_without_the_depth_runs():
    """`looped demo` leaves out fixed K=1, 2, 8 (Fig. 5), which `--full` (the reference) adds;
    every other run is the reference's run with the same config, parent and checkpoints, so a
    plain demo reproduces the reference's tables exactly and reuses its runs."""
    from looped.config import to_yaml

    assert bios.DemoSettings().depth_ks == ()
    full = plan(replace(QUICK, depth_ks=bios.FULL_DEPTH_KS))
    full_specs, plain_specs = list(full.values()), list(plan(replace(QUICK, depth_ks=())).values())
    assert {s.schedule for s in full_specs} - {s.schedule for s in plain_specs} == {
        "fixed:1",
        "fixed:2",
        "fixed:8",
    }
    assert not any("depth" in s.group for s in plain_specs)
    for s in plain_specs:
        other = full[s.name]
        assert to_yaml(s.cfg) == to_yaml(other.cfg)
        assert (s.parent, s.branch_step, s.steps) == (other.parent, other.branch_step, other.steps)
        assert s.save_steps == other.save_steps and s.eval_steps == other.eval_steps


def test_runs_at_different_lrs_never_share_a_prefix():
    """Each schedule at its own LR: fixed-first can no longer branch off fixed K=4, so its
    full-budget run is trained from scratch and its shorter runs branch off that one."""
    lrs = {FIXED: 1e-2, FIXED_FIRST: 3e-3, UNIFORM: 1e-3}
    by = plan(replace(QUICK, seeds=2, lr=lrs))
    for s in by.values():
        assert s.cfg.optim.lr == lrs.get(s.schedule, lrs[FIXED])
        if s.parent:
            assert by[s.parent].lr == s.lr and by[s.parent].seed == s.seed
    ff = by[named(FIXED_FIRST, 1.0, 1, 3e-3)]
    assert ff.parent is None
    assert by[named(FIXED_FIRST, 0.45, 1, 3e-3)].parent == ff.name
    tok = by[named(FIXED_FIRST, by[named(UNIFORM, 1.0, 1, 1e-3)].steps, 1, 3e-3)]
    assert tok.group == "tokens" and tok.parent == ff.name


@pytest.mark.slow
def test_the_sweep_at_the_chosen_lrs_is_the_grids_seed_0():
    """Whatever LRs the sweep picks, the grid's seed-0 runs at them are the sweep's runs with
    the same config and checkpoints: reused, never trained twice; every branch still finds its
    parent's checkpoint at the same LR."""
    from looped.config import to_yaml

    swept = bios.sweep_plan(QUICK)
    sweep = {
        n: (s.parent, s.branch_step, list(s.save_steps), to_yaml(s.cfg)) for n, s in swept.items()
    }
    chosen = {FIXED: 1e-2, FIXED_FIRST: 3e-3, UNIFORM: 1e-3}  # any mix of the sweep's LRs
    alone = plan(replace(QUICK, lr=chosen))  # the grid as it would be without the sweep
    by = plan(replace(QUICK, lr=chosen), dict(swept))
    seed0 = [s for s in by.values() if s.seed == 0 and s.group in ("main", "main+depth", "tokens")]
    assert seed0 and all(s.name in sweep for s in seed0)
    for s in seed0:
        assert to_yaml(alone[s.name].cfg) == sweep[s.name][3]
        assert (s.parent, s.branch_step, s.save_steps) == sweep[s.name][:3]
    assert set(alone) <= set(by) and {s.group for s in by.values() if s.name not in alone} == {
        "sweep"
    }
    for s in by.values():
        if s.parent:
            assert s.branch_step in by[s.parent].save_steps and by[s.parent].lr == s.lr
    # fixed-first at 3e-3 keeps branching off the swept fixed K=4 run at 3e-3
    assert by[named(FIXED_FIRST, 1.0, lr=3e-3)].parent == named(FIXED, 1.0, lr=3e-3)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    stdout, stderr = io.StringIO(), io.StringIO()  # not terminals: progress as plain lines
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        result = run_demo(QUICK, out, out / "figures", text=demo.QUICK_TEXT)
    return out, result, stdout.getvalue() + stderr.getvalue()


@pytest.mark.slow
def test_progress_off_a_terminal_is_one_plain_line_per_run(quick):
    """In a log file or CI: no tqdm redraws or escape codes, one line per finished run with
    its name, steps, wall time and final loss."""
    _, result, output = quick
    assert "\r" not in output and "\x1b" not in output
    by_name = {r["name"]: r for r in result["runs"]}
    finished = [line for line in output.splitlines() if line.startswith("finished ")]
    bios = [line for line in finished if line.removeprefix("finished ").split(":")[0] in by_name]
    assert len(bios) == result["meta"]["runs_trained"] == len(result["runs"])
    text = json.loads((quick[0] / "demo_text.json").read_text())
    assert len(finished) - len(bios) == len(text["runs"])  # the text track's runs
    for line in bios:
        name, rest = line.removeprefix("finished ").split(": ")
        steps = int(rest.split(" steps")[0])
        assert steps == by_name[name]["steps"] and "s, final loss " in rest


@pytest.mark.slow
def test_quick_demo_writes_every_number_and_figure(quick):
    out, result, _ = quick
    saved = json.loads((out / "demo.json").read_text())
    assert saved["summary"] == json.loads(json.dumps(result["summary"]))
    names = {p.name for p in (out / "figures").glob("*.png")}
    assert {"fig1_recall_bits.png", "fig2_nll_vs_flops.png", "fig3_loss_trajectory.png",
            "fig4_update_benefit.png", "fig5_depth_specialisation.png", "fig7_schedules.png",
            "fig8_nll_by_depth.png", "text_nll_by_depth.png"} <= names  # fmt: skip
    assert set(saved["meta"]["phase_seconds"]) == {"bios", "text", "probe", "figures"}
    assert saved["meta"]["wall_seconds"] >= sum(saved["meta"]["phase_seconds"].values()) - 1e-6
    # both tracks, every seed; the text track's equal-token rows share steps and tokens
    runs = saved["runs"]
    text = json.loads((out / "demo_text.json").read_text())
    assert {r["seed"] for r in text["runs"]} == set(range(QUICK.text_seeds))
    assert len({(r["steps"], r["tokens"]) for r in text["equal_tokens"]}) == 1
    assert {r["schedule"] for r in text["equal_flops"]} == set(demo.TEXT.schedules[1:])
    # without --sweep the text track trains at the shared LR: no sweep, no sweep figure
    assert text["sweep"] == [] and set(text["chosen_lr"].values()) == {demo.TEXT_LR}
    assert "text_lr_sweep.png" not in names
    # equal tokens on the bios track: the same steps as uniform, fewer modeled FLOPs
    tok = {r["schedule"]: r for r in saved["summary_tokens"]}
    assert len({r["steps"] for r in tok.values()}) == 1 and tok[UNIFORM]["compute_vs_uniform"] == 1
    assert tok[FIXED_FIRST]["compute_vs_uniform"] < 1 and tok[FIXED_FIRST]["seeds"] == QUICK.seeds
    # Fig. 4 at each checkpoint where a fixed-first run switches, every serving depth
    assert [b["step"] for b in saved["update_benefit"]] == sorted(
        {r["switch_step"] for r in runs if r["schedule"] == FIXED_FIRST and r["seed"] == 0
         and "main" in r["group"]})  # fmt: skip
    assert all(
        sorted(map(int, b["benefit"])) == list(range(1, 17)) for b in saved["update_benefit"]
    )
    runs = saved["runs"]
    assert {r["schedule"] for r in runs} >= {FIXED, FIXED_FIRST, UNIFORM}
    for r in runs:
        assert r["depths"] == list(range(1, 17))
        assert len(r["fact_nll"]) == len(r["bits"]) == 16 and min(r["bits"]) >= 0
        if "main" in r["group"]:
            assert r["flops"] <= r["budget"] * saved["meta"]["full_budget_flops"] * (1 + 1e-9)
        steps = [c[0] for c in r["curve"]]
        assert steps == list(
            range(1, r["steps"] + 1)
        )  # a branch's curve includes its parent's prefix
    ff = [r for r in runs if r["schedule"] == FIXED_FIRST and "main" in r["group"]]
    assert all(r["pre_switch"] for r in ff)
    assert all(r["switch_step"] == r["branch_step"] for r in ff if r["parent"])
    assert [row["schedule"] for row in saved["summary"]] == [FIXED, FIXED_FIRST, UNIFORM]
    assert saved["summary"][2]["compute_vs_uniform"] == 1.0


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its modification time (ns) and size."""
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
def test_rerun_reuses_finished_runs(quick):
    """A second invocation trains nothing: every run directory is left as it was (no metrics,
    checkpoint or summary rewritten), and the numbers are the first invocation's."""
    out, result, _ = quick
    before = _files(out / "runs")
    assert all(f"{r['name']}/summary.json" in before for r in result["runs"])
    again = run_demo(QUICK, out, out / "figures", quiet=True)
    assert _files(out / "runs") == before
    assert [r["fact_nll"] for r in again["runs"]] == [r["fact_nll"] for r in result["runs"]]
    assert again["meta"]["runs_trained"] == 0
    # nothing was trained, so the record keeps the times of the invocation that trained
    for key in ("wall_seconds", "phase_seconds"):
        assert again["meta"][key] == result["meta"][key]


@pytest.mark.slow
def test_report_renders_readme_sections_from_results(quick):
    out, _, _ = quick
    result = json.loads((out / "demo.json").read_text())
    text = bios_report.section(result)
    assert "| fixed-first K=4 (80%) |" in text and "| fixed K=4 | fact NLL |" in text
    readme = "intro\n<!-- demo:begin -->\nSTALE-TEXT\n<!-- demo:end -->\nrest\n"
    (out / "results").mkdir(exist_ok=True)
    (out / "results" / "demo.json").write_text((out / "demo.json").read_text())
    rendered = render.render(readme, out)
    assert rendered.startswith("intro\n<!-- demo:begin -->\n") and rendered.endswith(
        "<!-- demo:end -->\nrest\n"
    )
    assert "STALE-TEXT" not in rendered and text.strip() in rendered


def test_catch_up_adds_longer_uniform_runs_without_touching_the_grid():
    base = list(plan(replace(QUICK, seeds=1)).values())
    more = list(plan(replace(QUICK, seeds=1, catch_up=(2.0, 3.0))).values())
    extra = {s.name: s for s in more if s.group == "catchup"}
    assert sorted(extra) == [named(UNIFORM, 2.0), named(UNIFORM, 3.0)]
    # both continue uniform's full-budget run from where its LR starts to decay
    top = next(s for s in more if s.name == named(UNIFORM, 1.0))
    assert {s.parent for s in extra.values()} == {top.name}
    assert {s.branch_step for s in extra.values()} <= set(top.save_steps)
    assert extra[named(UNIFORM, 3.0)].steps > extra[named(UNIFORM, 2.0)].steps
    grid = [(s.name, s.steps, s.parent, s.branch_step) for s in more if s.group != "catchup"]
    assert grid == [(s.name, s.steps, s.parent, s.branch_step) for s in base]
    assert all(s.parent is None or s.parent in {b.name for b in base} for s in base)


def test_compare_summaries_puts_yours_beside_the_reference_with_the_difference():
    row = {"schedule": UNIFORM, "label": "uniform 1..16", "steps": 243, "compute_vs_uniform": 1.0,
           "wall_vs_uniform": 1.0, "mean_fact_nll": 3.0, "fact_nll_vs_uniform": 0.0,
           "bits": {"1": 7.0, "4": 8.0, "8": 9.0, "16": 10.0}}  # fmt: skip
    mine = {**row, "steps": 250, "mean_fact_nll": 2.5, "bits": {**row["bits"], "16": 9.5}}
    lines = bios_report.compare_summaries([mine], [row]).splitlines()
    assert len(lines) == 2 + len(bios_report.COMPARED)
    assert "| uniform 1..16 | steps | 250 | 243 | +7 |" in lines
    assert "| uniform 1..16 | mean fact NLL K=1..16 | 2.500 | 3.000 | -0.500 |" in lines
    assert "| uniform 1..16 | bits/person K=16 | 9.5 | 10.0 | -0.5 |" in lines
    # a schedule the reference lacks is shown without a difference
    missing = bios_report.compare_summaries(
        [{**mine, "schedule": FIXED, "label": "fixed K=4"}], [row]
    )
    assert "| fixed K=4 | steps | 250 | - | - |" in missing


def _paths(monkeypatch, argv: list[str]) -> tuple[Path, Path]:
    seen = {}
    monkeypatch.setattr(
        demo_command,
        "run_demo",
        lambda settings, out, figures, **kw: seen.update(out=out, fig=figures),
    )
    assert demo_command.main(argv) == 0
    return seen["out"], seen["fig"]


def test_a_plain_demo_writes_no_tracked_file(monkeypatch):
    """`make demo` must leave the committed reference alone, so `make test` passes after it."""
    assert _paths(monkeypatch, []) == (Path("runs/demo"), Path("runs/demo/figures"))
    assert _paths(monkeypatch, ["--quick"]) == (
        Path("runs/demo-quick"),
        Path("runs/demo-quick/figures"),
    )
    assert _paths(monkeypatch, ["--reference"]) == (Path("results"), Path("figures"))
    with pytest.raises(UserError, match="--reference"):
        demo_command.main(["--reference", "--quick"])


@pytest.mark.slow
def test_demo_ends_with_its_table_beside_the_reference(quick, monkeypatch, tmp_path):
    out, result, _ = quick
    reference = tmp_path / "results" / "demo.json"
    reference.parent.mkdir()
    reference.write_text((out / "demo.json").read_text())
    (reference.parent / "demo_text.json").write_text((out / "demo_text.json").read_text())
    monkeypatch.chdir(tmp_path)
    text = demo._comparison(result, out, out / "figures")
    assert f"Your figures: {out / 'figures'}/" in text
    assert "| fixed-first K=4 (80%) | steps |" in text
    assert "| equal tokens | fixed-first K=2 (67%) | mean NLL K=1..16 |" in text  # the text track
    assert "| equal FLOPs | fixed-first K=4 (80%) | vs uniform |" in text
    assert "| - | - |" not in text  # every row found its reference row
    diffs = [line.rsplit("|", 2)[1].strip() for line in text.splitlines()
             if line.count("|") in (6, 7) and not line.startswith(("| schedule", "| basis", "|---"))]  # fmt: skip
    assert len(diffs) > 30 and all(d.lstrip("+-").strip("0.%") == "" for d in diffs)  # yours = ref
    # the reference itself is not compared with itself
    assert demo._comparison(result, Path("results"), Path("figures")) == ""


@pytest.mark.slow
def test_report_renders_the_readme_from_a_chosen_results_file(quick, tmp_path):
    out, result, _ = quick
    (tmp_path / "README.md").write_text("<!-- demo:begin -->\nold\n<!-- demo:end -->\n")
    argv = ["--root", str(tmp_path), "--results", str(out / "demo.json")]
    assert report_command.main(argv) == 0
    assert bios_report.section(result).strip() in (tmp_path / "README.md").read_text()
    with pytest.raises(UserError, match="no such file"):
        report_command.main(["--root", str(tmp_path), "--results", str(tmp_path / "nothing.json")])


def test_the_comparison_names_only_settings_that_change_the_table():
    ref = {"seeds": 2, "catch_up": [2.0, 3.0], "workers": 2, "overrides": []}
    assert bios_report.changed_settings(dict(ref, catch_up=[], workers=4), ref) == []
    assert bios_report.changed_settings(dict(ref, seeds=1, overrides=["x=1"]), ref) == [
        "overrides", "seeds",
    ]  # fmt: skip


def test_the_demos_default_lrs_are_what_the_reference_sweeps_chose():
    """A plain demo uses fixed LRs; they must be the committed sweeps' choices, for both tracks."""
    root = Path(__file__).resolve().parents[1] / "results"
    grid = json.loads((root / "demo.json").read_text())
    text = json.loads((root / "demo_text.json").read_text())
    assert grid["sweep"] and text["sweep"]  # the reference ran both sweeps
    assert bios.BIOS_LR == grid["chosen_lr"]
    assert set(text["chosen_lr"].values()) == {demo.TEXT_LR}


def test_the_demo_and_its_reference_train_under_the_recipe_the_probe_chose():
    """Both tracks share one recipe, the probe's choice for uniform when their reference was made
    (where the probe has moved on since, RESULTS says so); on bios its warmup share is of the
    full budget, so every run of the grid warms up alike."""
    from looped.studies.recipe import parse_recipe, recipe_overrides
    from looped.studies.textsetup import DEMO_RECIPE

    root = Path(__file__).resolve().parents[1] / "results"
    chosen = json.loads((root / "recipe.json").read_text())["chosen_recipe"]["recipe"]
    if DEMO_RECIPE != chosen:  # the probe moved on since the reference: RESULTS must say so
        said = (root.parent / "docs/RESULTS.md").read_text().split("### What the recipe changed")[1]
        said = said.split("\n## ")[0]
        assert f"`{DEMO_RECIPE}`" in said and f"`{chosen}`" in said and "regenerat" in said
    warmup, loops, _ = parse_recipe(DEMO_RECIPE)  # (warmup, init loops, state norm)
    settings = bios.DemoSettings()
    assert settings.overrides == recipe_overrides(DEMO_RECIPE)
    runs = [bios.base_config(settings, 0, s, b) for s in (FIXED, UNIFORM) for b in (0.15, 1.0)]
    assert {(c.optim.warmup_steps, c.optim.warmup_frac, c.model.init_loops) for c in runs} == {
        (round(warmup * runs[0].max_steps), 0.0, loops)
    }
    setup = demo.TEXT.setup  # the text track likewise: its share of the track's length
    steps = round(warmup * demo.TEXT_STEPS)
    assert (setup.warmup_steps, setup.warmup_frac, setup.init_loops) == (steps, 0.0, loops)
    grid = json.loads((root / "demo.json").read_text())["meta"]["settings"]
    text = json.loads((root / "demo_text.json").read_text())["meta"]["settings"]
    assert grid["overrides"] == recipe_overrides(DEMO_RECIPE)
    assert (text["warmup_steps"], text["warmup_frac"], text["init_loops"]) == (steps, 0.0, loops)


@pytest.mark.slow
def test_time_to_records_each_phase_of_the_run(quick, tmp_path):
    out = quick[0]
    timing_file = tmp_path / "timing.json"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        argv = ["--quick", "--out", str(out), "--time-to", str(timing_file)]
        assert demo_command.main(argv) == 0
    (timing,) = json.loads(timing_file.read_text())["timings"]
    assert timing["command"] == f"looped demo --quick --out {out}"  # its own path left out
    assert set(timing["phase_seconds"]) == {"bios", "text", "probe", "figures"}
    saved = json.loads((out / "demo.json").read_text())["meta"]
    assert timing["wall_seconds"] == saved["wall_seconds"]  # a rerun keeps the trained times
    text = json.loads((out / "demo_text.json").read_text())
    assert timing["text_runs"] == len(text["runs"])
    assert timing["settings"] == {"seeds": 2, "text_seeds": 2, "workers": 2}
    assert timing["calibration_step_s"] > 0  # a later demo's first line scales by it


TIMED = {"wall_seconds": 600.0, "machine": "Ref CPU", "dtype": "bf16", "command": "looped demo",
         "phase_seconds": {"bios": 300.0, "text": 240.0, "probe": 10.0, "figures": 5.0},
         "settings": {"seeds": 3, "text_seeds": 3, "workers": 2}, "calibration_step_s": 0.2}  # fmt: skip


def test_the_estimate_scales_each_phase_by_its_seeds_and_the_machines_step():
    """Exact small cases: the same machine and settings give the reference's phases back; a
    twice-slower step doubles them; one text seed of three keeps a third of the text phase."""
    same = replace(QUICK, seeds=3, text_seeds=3, workers=2)
    assert demo.estimate_seconds(same, 0.2, TIMED) == pytest.approx(555.0)
    assert demo.estimate_seconds(same, 0.4, TIMED) == pytest.approx(1110.0)
    assert demo.estimate_seconds(replace(same, text_seeds=1), 0.2, TIMED) == pytest.approx(395.0)
    assert demo.estimate_seconds(replace(same, text=False), 0.2, TIMED) == pytest.approx(315.0)
    assert demo.estimate_seconds(replace(same, seeds=2), 0.2, TIMED) == pytest.approx(455.0)
    assert demo.estimate_seconds(replace(same, workers=1), 0.2, TIMED) == pytest.approx(1110.0)


def test_the_first_line_says_how_long_on_this_machine(tmp_path):
    path = tmp_path / "demo_time.json"
    path.write_text(json.dumps(TIMED))
    settings = replace(bios.DemoSettings(), workers=2)  # the demo's own model and defaults
    line = demo.expected_time(settings, 0.2, path=path)
    assert line.startswith("looped demo: about 7 minutes on this machine (")  # 395 s
    assert "a timed run of 10 minutes on Ref CPU (bf16)" in line and "--seeds" not in line
    assert "calibration step 1.00x as fast here" in line
    slow = demo.expected_time(settings, 0.8, path=path)  # 1580 s: over budget, a way out named
    assert "about 26 minutes" in slow and "(--seeds 2: about 20 minutes)" in slow
    assert "plus the LR sweeps" in demo.expected_time(replace(settings, sweep=True), 0.2, path=path)
    assert "smoke test" in demo.expected_time(settings, 0.2, quick=True, path=path)
    missing = demo.expected_time(settings, 0.2, path=tmp_path / "none.json")
    assert missing.startswith("looped demo: one training step takes 0.20s here")


def test_each_timed_demo_keeps_its_row_and_the_first_line_scales_from_its_own_dtype(tmp_path):
    """`--time-to` keeps one row per command, machine and dtype: a rerun replaces its own row,
    an fp32 run sits beside the bf16 one, and a demo in fp32 scales from the fp32 row."""
    path = tmp_path / "demo_time.json"
    path.write_text(json.dumps(TIMED))  # a file from before rows: read as one row
    meta = {k: TIMED[k] for k in ("machine", "dtype", "wall_seconds", "phase_seconds")}
    settings = replace(bios.DemoSettings(), text=False)

    def timed(dtype: str, wall: float, command: str = "looped demo") -> None:
        result = {"meta": dict(meta, dtype=dtype, wall_seconds=wall, runs_trained=3)}
        demo.write_timing(result, settings, tmp_path, command, 0.3, path)

    timed("bf16", 500.0)
    timed("fp32", 700.0, "looped demo dtype=fp32")
    timed("bf16", 400.0)  # replaces the first bf16 row of the same command
    rows = render.timed_demos(json.loads(path.read_text()))
    assert [(r["command"], r["dtype"], r["wall_seconds"]) for r in rows] == [
        ("looped demo dtype=fp32", "fp32", 700.0), ("looped demo", "bf16", 400.0),
    ]  # fmt: skip
    assert demo._closest(json.loads(path.read_text()), "bf16")["wall_seconds"] == 400.0
    assert demo._closest(json.loads(path.read_text()), "fp32")["wall_seconds"] == 700.0
    table = render.timing_section(json.loads(path.read_text()))
    assert (
        table.count("\n") == 3 and "| `looped demo dtype=fp32` | Ref CPU | fp32 | 11.7 |" in table
    )


def test_calibration_times_one_thread_and_leaves_the_thread_count_alone():
    import torch

    threads = torch.get_num_threads()
    step = demo.calibrate(QUICK, steps=1)
    assert 0 < step < 5 and torch.get_num_threads() == threads


@pytest.mark.slow
def test_your_text_track_is_compared_at_your_seeds(quick):
    """A one-seed text track is set beside the reference's same seed, not its seed mean."""
    out = quick[0]
    text = json.loads((out / "demo_text.json").read_text())
    assert {r["seed"] for r in text["runs"]} == {0, 1}
    cut = demo._at_seeds(text, {0})
    assert {r["seed"] for r in cut["runs"]} == {0}
    for key in ("equal_tokens", "equal_flops"):
        assert cut[key] and all(row["seeds"] == 1 for row in cut[key])
    uniform_0 = next(r for r in text["runs"] if r["schedule"] == UNIFORM and "tokens" in r["roles"]
                     and r["seed"] == 0)  # fmt: skip
    row = cut["equal_tokens"][0]
    assert row["schedule"] == UNIFORM and row["mean_nll"]["mean"] == uniform_0["mean_nll"]
    assert demo._at_seeds(text, {0, 1})["equal_tokens"] == text["equal_tokens"]


def test_text_seeds_default_to_one_and_the_reference_runs_three():
    parse = demo_command._parser().parse_args
    assert demo_command._settings(parse([])).text_seeds == 1
    assert demo_command._settings(parse(["--reference"])).text_seeds == 3
    assert demo_command._settings(parse(["--text-seeds", "2"])).text_seeds == 2
    with pytest.raises(UserError, match="--text-seeds 0 must be >= 1"):
        demo_command._settings(parse(["--text-seeds", "0"]))
