"""The demo grid: exact sharing plan, results and figures from one quick run, reuse on re-run,
and README sections generated from the results."""

import contextlib
import io
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from looped import demo, report
from looped.demo import FIXED, FIXED_FIRST, QUICK, UNIFORM, plan, run_demo
from looped.errors import UserError
from looped.schedules import parse_schedule
from looped.train import lr_at


def test_plan_shares_only_exact_prefixes():
    specs, configs = plan(replace(QUICK, seeds=1))
    by = {s.name: s for s in specs}
    ff = by["fixed_first_b100_s0"]
    assert by[ff.parent].schedule == FIXED and by[ff.parent].budget == 1.0
    assert ff.branch_step == parse_schedule(FIXED_FIRST).switch_step(ff.steps)
    assert by[by["uniform_b045_s0"].parent].schedule == UNIFORM
    for s in specs:
        if s.parent:
            parent = by[s.parent]
            assert s.branch_step in parent.save_steps
            child_cfg, parent_cfg = configs[s.name], configs[s.parent]
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


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    t0 = time.time()
    stdout, stderr = io.StringIO(), io.StringIO()  # not terminals: progress as plain lines
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        result = run_demo(QUICK, out, out / "figures")
    return out, result, time.time() - t0, stdout.getvalue() + stderr.getvalue()


def test_progress_off_a_terminal_is_one_plain_line_per_run(quick):
    """In a log file or CI: no tqdm redraws or escape codes, one line per finished run with
    its name, steps, wall time and final loss."""
    _, result, _, output = quick
    assert "\r" not in output and "\x1b" not in output
    finished = [line for line in output.splitlines() if line.startswith("finished ")]
    assert len(finished) == result["meta"]["runs_trained"] == len(result["runs"])
    by_name = {r["name"]: r for r in result["runs"]}
    for line in finished:
        name, rest = line.removeprefix("finished ").split(": ")
        steps = int(rest.split(" steps")[0])
        assert steps == by_name[name]["steps"] and "s, final loss " in rest


def test_quick_demo_writes_every_number_and_figure(quick):
    out, result, _, _ = quick
    saved = json.loads((out / "demo.json").read_text())
    assert saved["summary"] == json.loads(json.dumps(result["summary"]))
    names = {p.name for p in (out / "figures").glob("*.png")}
    assert {"fig1_recall_bits.png", "fig2_nll_vs_flops.png", "fig3_loss_trajectory.png",
            "fig5_depth_specialisation.png", "fig7_schedules.png", "fig8_nll_by_depth.png"} <= names  # fmt: skip
    runs = saved["runs"]
    assert {r["schedule"] for r in runs} >= {FIXED, FIXED_FIRST, UNIFORM}
    for r in runs:
        assert r["depths"] == list(range(1, 17))
        assert len(r["fact_nll"]) == len(r["bits"]) == 16 and min(r["bits"]) >= 0
        assert r["flops"] <= r["budget"] * saved["meta"]["full_budget_flops"] * (1 + 1e-9)
        steps = [c[0] for c in r["curve"]]
        assert steps == list(
            range(1, r["steps"] + 1)
        )  # a branch's curve includes its parent's prefix
    ff = [r for r in runs if r["schedule"] == FIXED_FIRST]
    assert all(r["pre_switch"] for r in ff)
    assert all(r["switch_step"] == r["branch_step"] for r in ff if r["parent"])
    assert [row["schedule"] for row in saved["summary"]] == [FIXED, FIXED_FIRST, UNIFORM]
    assert saved["summary"][2]["compute_vs_uniform"] == 1.0


def test_rerun_reuses_finished_runs(quick):
    out, result, first, _ = quick
    t0 = time.time()
    again = run_demo(QUICK, out, out / "figures", quiet=True)
    assert time.time() - t0 < first / 2
    assert [r["fact_nll"] for r in again["runs"]] == [r["fact_nll"] for r in result["runs"]]
    assert again["meta"]["runs_trained"] == 0
    assert again["meta"]["wall_seconds"] == result["meta"]["wall_seconds"]


def test_report_renders_readme_sections_from_results(quick):
    out, _, _, _ = quick
    result = json.loads((out / "demo.json").read_text())
    text = report.demo_section(result)
    assert "| fixed-first (80%) |" in text and "Fixed K=4 degrades away from K=4" in text
    readme = "intro\n<!-- demo:begin -->\nSTALE-TEXT\n<!-- demo:end -->\nrest\n"
    (out / "results").mkdir(exist_ok=True)
    (out / "results" / "demo.json").write_text((out / "demo.json").read_text())
    rendered = report.render(readme, out)
    assert rendered.startswith("intro\n<!-- demo:begin -->\n") and rendered.endswith(
        "<!-- demo:end -->\nrest\n"
    )
    assert "STALE-TEXT" not in rendered and text.strip() in rendered


def test_catch_up_adds_longer_uniform_runs_without_touching_the_grid():
    base, _ = plan(replace(QUICK, seeds=1))
    more, _ = plan(replace(QUICK, seeds=1, catch_up=(2.0, 3.0)))
    extra = {s.name: s for s in more if s.group == "catchup"}
    assert sorted(extra) == ["uniform_b200_s0", "uniform_b300_s0"]
    assert (
        extra["uniform_b200_s0"].parent == "uniform_b300_s0"
        and extra["uniform_b300_s0"].parent is None
    )
    assert extra["uniform_b300_s0"].steps > extra["uniform_b200_s0"].steps
    grid = [(s.name, s.steps, s.parent, s.branch_step) for s in more if s.group != "catchup"]
    assert grid == [(s.name, s.steps, s.parent, s.branch_step) for s in base]


def test_compare_summaries_puts_yours_beside_the_reference_with_the_difference():
    row = {"schedule": UNIFORM, "label": "uniform 1..16", "steps": 243, "compute_vs_uniform": 1.0,
           "wall_vs_uniform": 1.0, "mean_fact_nll": 3.0, "fact_nll_vs_uniform": 0.0,
           "bits": {"1": 7.0, "4": 8.0, "8": 9.0, "16": 10.0}}  # fmt: skip
    mine = {**row, "steps": 250, "mean_fact_nll": 2.5, "bits": {**row["bits"], "16": 9.5}}
    lines = demo.compare_summaries([mine], [row]).splitlines()
    assert len(lines) == 2 + len(demo.COMPARED)
    assert "| uniform 1..16 | steps | 250 | 243 | +7 |" in lines
    assert "| uniform 1..16 | mean fact NLL K=1..16 | 2.500 | 3.000 | -0.500 |" in lines
    assert "| uniform 1..16 | bits/person K=16 | 9.5 | 10.0 | -0.5 |" in lines
    # a schedule the reference lacks is shown without a difference
    missing = demo.compare_summaries([{**mine, "schedule": FIXED, "label": "fixed K=4"}], [row])
    assert "| fixed K=4 | steps | 250 | - | - |" in missing


def _paths(monkeypatch, argv: list[str]) -> tuple[Path, Path]:
    seen = {}
    monkeypatch.setattr(
        demo, "run_demo", lambda settings, out, figures, **kw: seen.update(out=out, fig=figures)
    )
    assert demo.main(argv) == 0
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
        demo.main(["--reference", "--quick"])


def test_demo_ends_with_its_table_beside_the_reference(quick, monkeypatch, tmp_path):
    out, result, _, _ = quick
    reference = tmp_path / "results" / "demo.json"
    reference.parent.mkdir()
    reference.write_text((out / "demo.json").read_text())
    monkeypatch.chdir(tmp_path)
    text = demo._comparison(result, out, out / "figures")
    assert f"Your figures: {out / 'figures'}/" in text
    assert "| fixed-first (80%) | steps |" in text
    diffs = [line.rsplit("|", 2)[1].strip() for line in text.splitlines() if line.count("|") == 6]
    assert diffs[2:] and all(d.lstrip("+-").strip("0.%") == "" for d in diffs[2:])  # yours = ref
    # the reference itself is not compared with itself
    assert demo._comparison(result, Path("results"), Path("figures")) == ""


def test_report_renders_the_readme_from_a_chosen_results_file(quick, tmp_path):
    out, result, _, _ = quick
    (tmp_path / "README.md").write_text("<!-- demo:begin -->\nold\n<!-- demo:end -->\n")
    assert report.main(["--root", str(tmp_path), "--results", str(out / "demo.json")]) == 0
    assert report.demo_section(result).strip() in (tmp_path / "README.md").read_text()
    with pytest.raises(UserError, match="no such file"):
        report.main(["--root", str(tmp_path), "--results", str(tmp_path / "nothing.json")])


def test_the_comparison_names_only_settings_that_change_the_table():
    from looped.demo import _settings_that_change_the_table

    ref = {"seeds": 2, "catch_up": [2.0, 3.0], "workers": 2, "overrides": []}
    assert _settings_that_change_the_table(dict(ref, catch_up=[], workers=4), ref) == []
    assert _settings_that_change_the_table(dict(ref, seeds=1, overrides=["x=1"]), ref) == [
        "overrides", "seeds",
    ]  # fmt: skip
