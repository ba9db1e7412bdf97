"""The demo grid: exact sharing plan, results and figures from one quick run, reuse on re-run,
and README sections generated from the results."""

import json
import time
from dataclasses import replace

import pytest

from looped import report
from looped.demo import FIXED, FIXED_FIRST, QUICK, UNIFORM, plan, run_demo
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
    result = run_demo(QUICK, out, out / "figures", quiet=True)
    return out, result, time.time() - t0


def test_quick_demo_writes_every_number_and_figure(quick):
    out, result, _ = quick
    saved = json.loads((out / "demo.json").read_text())
    assert saved["summary"] == json.loads(json.dumps(result["summary"]))
    names = {p.name for p in (out / "figures").glob("*.png")}
    assert {"fig1_recall_bits.png", "fig2_nll_vs_flops.png", "fig3_loss_trajectory.png",
            "fig5_depth_specialisation.png", "fig7_schedules.png", "fig8_nll_by_depth.png"} <= names  # fmt: skip
    runs = saved["runs"]
    assert {r["schedule"] for r in runs} >= {FIXED, FIXED_FIRST, UNIFORM}
    for r in runs:
        assert r["depths"] == list(range(1, 17))
        assert len(r["nll"]) == len(r["bits"]) == 16 and min(r["bits"]) >= 0
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
    out, result, first = quick
    t0 = time.time()
    again = run_demo(QUICK, out, out / "figures", quiet=True)
    assert time.time() - t0 < first / 2
    assert [r["nll"] for r in again["runs"]] == [r["nll"] for r in result["runs"]]
    assert again["meta"]["runs_trained"] == 0
    assert again["meta"]["wall_seconds"] == result["meta"]["wall_seconds"]


def test_report_renders_readme_sections_from_results(quick):
    out, _, _ = quick
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
