"""The text track (`looped fidelity`): runs paired at equal tokens and equal modeled FLOPs, each
schedule at its own best LR, the whole track end to end on a tiny local corpus, bad input."""

import contextlib
import io
import json
import random
from dataclasses import replace

import pytest

from looped import cli
from looped.eval.stats import best_lrs
from looped.experiments import fidelity
from looped.experiments.fidelity import QUICK, Plan, compare, plan_comparison, plan_sweep
from looped.experiments.textsetup import TextSetup
from looped.flops import flops_per_token, schedule_flops, tokens_per_step
from looped.paper import FIXED, RECIPE_200M, RECIPES_1B, UNIFORM
from looped.report.text import seed_spreads
from looped.schedule_spec import parse_schedule

WORDS = (
    "the loop applies one block again and again so that depth costs compute but no parameters "
    "while a fixed schedule trains at one count and a uniform schedule draws a new count each step"
).split()


def _write_corpus(directory, n_files=12, words=700):
    """A few KB of word salad in .txt files: enough for a small BPE and a val split."""
    rng = random.Random(0)
    directory.mkdir()
    for i in range(n_files):
        text = " ".join(rng.choice(WORDS) for _ in range(words))
        (directory / f"doc{i:02d}.txt").write_text(text + "\n")
    return directory


TOY = replace(
    QUICK, setup=TextSetup("bpe:300", 16, 2, 4, 32, 1, val_batches=1, test_batches=1),
    steps=6, seeds=2, lrs=(1e-3, 1e-2), workers=2,
)  # fmt: skip
CORPUS = {"path": "unused-by-planning", "vocab_size": 300}


def _plan(best=None, **changes):
    plan = Plan(replace(TOY, **changes), CORPUS)
    plan_sweep(plan)
    if best is not None:
        plan_comparison(plan, best)
    return plan


def _best():
    return {UNIFORM: 1e-2, RECIPE_200M: 1e-3, RECIPES_1B[1]: 1e-2, FIXED: 1e-3}


def test_sweep_covers_every_schedule_lr_and_sweep_seed_at_equal_steps():
    plan = _plan()
    runs = list(plan.runs.values())
    assert {(p.spec.schedule, p.lr) for p in runs} == {
        (s, lr) for s in TOY.schedules for lr in TOY.lrs
    }
    assert {p.spec.seed for p in runs} == set(range(TOY.sweep_seeds))
    assert len(runs) == len(TOY.schedules) * len(TOY.lrs) * TOY.sweep_seeds
    assert {p.spec.steps for p in runs} == {TOY.steps}
    assert all(p.cfg.optim.lr == p.lr and p.cfg.schedule == p.spec.schedule for p in runs)


def test_best_lr_is_chosen_on_the_mean_validation_nll_over_sweep_seeds():
    # seed 0 alone would pick 1e-3; the mean over both seeds picks 3e-3; test NLL is ignored
    sweep = [
        {"schedule": UNIFORM, "lr": 1e-3, "seed": 0, "val_mean_nll": 4.0, "mean_nll": 0.0},
        {"schedule": UNIFORM, "lr": 1e-3, "seed": 1, "val_mean_nll": 6.0, "mean_nll": 0.0},
        {"schedule": UNIFORM, "lr": 3e-3, "seed": 0, "val_mean_nll": 4.5, "mean_nll": 9.0},
        {"schedule": UNIFORM, "lr": 3e-3, "seed": 1, "val_mean_nll": 4.5, "mean_nll": 9.0},
    ]
    assert best_lrs(sweep) == {UNIFORM: 3e-3}


def test_best_lr_is_the_lowest_mean_nll_per_schedule():
    sweep = [
        {"schedule": UNIFORM, "lr": 1e-3, "mean_nll": 5.0},
        {"schedule": UNIFORM, "lr": 3e-3, "mean_nll": 4.5},
        {"schedule": UNIFORM, "lr": 1e-2, "mean_nll": 4.7},
        {"schedule": FIXED, "lr": 1e-3, "mean_nll": 4.0},
        {"schedule": FIXED, "lr": 3e-3, "mean_nll": 4.2},
        {"schedule": FIXED, "lr": 1e-2, "mean_nll": 4.0},  # a tie: the smaller LR wins
        {"schedule": RECIPE_200M, "lr": 1e-2, "mean_nll": 3.9},
        {"schedule": RECIPE_200M, "lr": 1e-3, "mean_nll": 4.4},
    ]
    assert best_lrs(sweep) == {UNIFORM: 3e-3, FIXED: 1e-3, RECIPE_200M: 1e-2}


@pytest.mark.slow
def test_comparison_uses_each_schedules_own_best_lr_for_every_seed():
    best = _best()
    plan = _plan(best)
    runs = [p for p in plan.runs.values() if "tokens" in p.roles]
    assert {(p.spec.schedule, p.spec.seed) for p in runs} == {
        (s, seed) for s in TOY.schedules for seed in range(TOY.seeds)
    }
    for p in runs:
        assert p.lr == best[p.spec.schedule] == p.cfg.optim.lr
    # equal FLOPs: uniform, at its own best LR, once per other schedule and seed
    flops = [p for p in plan.runs.values() if any(r.startswith("flops:") for r in p.roles)]
    assert {(r, p.spec.seed) for p in flops for r in p.roles} == {
        (f"flops:{s}", seed) for s in TOY.schedules if s != UNIFORM for seed in range(TOY.seeds)
    }
    assert all(p.spec.schedule == UNIFORM and p.lr == best[UNIFORM] for p in flops)
    # the sweep's seed-0 run at the best LR is reused, not trained twice
    shared = [p for p in plan.runs.values() if {"sweep", "tokens"} <= p.roles]
    assert {p.spec.schedule for p in shared} == set(TOY.schedules)


def test_equal_token_runs_share_steps_and_tokens():
    plan = _plan(_best())
    runs = [p for p in plan.runs.values() if "tokens" in p.roles]
    assert {p.spec.steps for p in runs} == {TOY.steps}
    assert {p.spec.steps * tokens_per_step(p.cfg) for p in runs} == {
        TOY.steps * TOY.setup.batch_size * TOY.setup.seq_len
    }


def test_equal_flop_uniform_runs_spend_each_schedules_flops_and_branch_at_their_decay():
    from looped.config import lr_at

    plan = _plan(_best(), steps=40)
    tokens = {p.spec.name: p for p in plan.runs.values() if "tokens" in p.roles}
    steps = {}
    pairs = [(r.removeprefix("flops:"), p) for p in plan.runs.values() for r in p.roles
             if r.startswith("flops:")]  # fmt: skip
    assert len(pairs) == 3 * TOY.seeds
    for other, p in pairs:
        (target,) = [
            t for t in tokens.values() if t.spec.schedule == other and t.spec.seed == p.spec.seed
        ]
        cfg, sched = p.cfg, parse_schedule(UNIFORM, p.spec.seed)
        n = tokens_per_step(cfg)
        budget = schedule_flops(target.cfg.model, parse_schedule(other), 40, n, cfg.seq_len)
        spent = schedule_flops(cfg.model, sched, p.spec.steps, n, cfg.seq_len)
        one_more = schedule_flops(cfg.model, sched, p.spec.steps + 1, n, cfg.seq_len)
        assert spent <= budget * (1 + 1e-12) < one_more
        assert budget - spent < n * flops_per_token(cfg.model, 16, cfg.seq_len)
        # a branch of uniform's 40-step run, up to where its own LR starts to decay
        parent = plan.runs[p.spec.parent]
        assert parent.spec.schedule == UNIFORM and parent.spec.steps == 40
        assert parent.spec.seed == p.spec.seed and p.spec.branch_step in parent.spec.save_steps
        at = p.spec.branch_step
        assert lr_at(at - 1, p.spec.steps, cfg.optim) == lr_at(at - 1, 40, parent.cfg.optim)
        assert lr_at(at, p.spec.steps, cfg.optim) != lr_at(at, 40, parent.cfg.optim)
        steps[other] = p.spec.steps
    # mean K per step: fixed 4 <= K=2 for 67% (4.2) < K=4 for 80% (4.9) < uniform (8.5), so
    # uniform gets the fewest steps at fixed K=4's FLOPs
    assert steps[FIXED] <= steps[RECIPE_200M] < steps[RECIPES_1B[1]] < 40


def test_compare_pairs_seeds_exactly():
    def row(schedule, seed, nll, roles, steps=10, d=16):
        return {
            "schedule": schedule, "seed": seed, "mean_nll": nll, "roles": roles, "lr": 1e-3,
            "steps": steps, "tokens": steps * 10, "flops": {UNIFORM: 100.0}.get(schedule, 60.0),
            "wall": {UNIFORM: 10.0}.get(schedule, 8.0), "depths": [1, 2],
            "token_nll": [nll, nll], "d_model": d, "params": 1000 * d,
        }  # fmt: skip

    rows = [
        row(UNIFORM, 0, 4.0, ["tokens"]),
        row(UNIFORM, 1, 5.0, ["tokens"]),
        row(RECIPE_200M, 0, 4.2, ["tokens"]),
        row(RECIPE_200M, 1, 4.5, ["tokens"]),
    ]
    table = {r["schedule"]: r for r in compare(rows, "tokens", (UNIFORM, RECIPE_200M))}
    ff = table[RECIPE_200M]
    assert ff["mean_nll"]["mean"] == pytest.approx(4.35)
    # "vs uniform" is the mean of the paired per-seed differences, never a ratio of seed means
    assert ff["vs_uniform"] == pytest.approx((0.05 - 0.1) / 2)
    assert ff["vs_uniform_by_seed"]["values"] == pytest.approx([0.05, -0.1])
    assert ff["compute_saving"] == pytest.approx(0.4)
    assert ff["wall_saving"] == pytest.approx(0.2)
    assert table[UNIFORM]["vs_uniform"] == 0.0
    # equal FLOPs: the schedule against uniform trained on its FLOPs, seed by seed
    rows += [
        {**row(UNIFORM, 0, 4.4, [f"flops:{RECIPE_200M}"], steps=6), "flops": 60.0},
        {**row(UNIFORM, 1, 5.0, [f"flops:{RECIPE_200M}"], steps=6), "flops": 60.0},
    ]
    (eq,) = compare(rows, "flops", (UNIFORM, RECIPE_200M))
    assert eq["schedule"] == RECIPE_200M and eq["uniform_steps"] == 6
    assert eq["vs_uniform_by_seed"]["values"] == pytest.approx([4.2 / 4.4 - 1, 4.5 / 5.0 - 1])
    assert eq["compute_saving"] == pytest.approx(0.0)


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("fidelity")
    corpus = _write_corpus(root / "texts", n_files=24)
    out = root / "out"
    argv = [
        "fidelity", "--dataset", str(corpus), "--tokenizer", "bpe:300", "--out", str(out),
        "--quick", "--held-out", "0.25", "--steps", "6", "--d-model", "16", "--batch-size", "4", "--seeds", "2",
        "--lrs", "1e-3,1e-2", "seq_len=32", "model.seq_len=32", "optim.warmup_steps=1", "eval_batches=1",
    ]  # fmt: skip
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = cli.main(argv)
    return out, rc, stdout.getvalue() + stderr.getvalue(), argv


@pytest.mark.slow
def test_text_track_end_to_end_writes_json_figures_and_table(toy_run):
    out, rc, text, _ = toy_run
    assert rc == 0, text
    result = json.loads((out / "fidelity.json").read_text())
    assert {p.name for p in (out / "figures").iterdir()} == {
        "fidelity_nll_by_depth.png", "fidelity_lr_sweep.png", "fidelity_loss_by_seed.png",
    }  # fmt: skip
    assert len(result["sweep"]) == 4 * 2 * 2  # schedules x LRs x sweep seeds
    # LRs are chosen on validation windows, numbers reported on test windows beside baselines
    assert result["baselines"]["windows"] == "test" and result["meta"]["corpus"]["test"] > 0
    assert result["baselines"]["bigram"] < result["baselines"]["unigram"]
    reported = [r for r in result["runs"] if set(r["roles"]) - {"sweep"}]
    assert reported and all(r["se_windows"] > 0 for r in reported)
    assert all(r["mean_nll"] != r["val_mean_nll"] for r in reported)
    for run in result["runs"]:
        # the training curve covers the whole run, a branch's parent's steps included
        steps = [step for step, _, _ in run["curve"]]
        assert steps == sorted(set(steps)) and steps[-1] == run["steps"] and steps[0] <= 5
        assert run["depths"] == list(range(1, 17))
        assert len(run["token_nll"]) == 16 and all(v > 0 for v in run["token_nll"])
        assert run["wall"] > 0 and run["flops"] > 0 and run["tokens"] == run["steps"] * 4 * 32
    for key, expected in (
        ("equal_tokens", set(fidelity.SCHEDULES)),
        ("equal_flops", set(fidelity.SCHEDULES) - {UNIFORM}),  # each against uniform
    ):
        table = {r["schedule"]: r for r in result[key]}
        assert set(table) == expected
        assert all(r["seeds"] == 2 and r["lr"] == result["chosen_lr"][s] for s, r in table.items())
    tokens = {r["schedule"]: r for r in result["equal_tokens"]}
    assert tokens[RECIPE_200M]["compute_saving"] > 0 and tokens[UNIFORM]["compute_saving"] == 0
    flops = {r["schedule"]: r for r in result["equal_flops"]}
    # uniform gets at most the other schedule's FLOPs (whole steps): it never spends more
    assert all(
        r["compute_saving"] <= 1e-9 and r["uniform_steps"] < r["steps"] for r in flops.values()
    )
    # one width (the comparison's), these keys and phases only
    assert {r["d_model"] for r in result["runs"]} == {16}
    assert set(result) == {
        "meta", "runs", "sweep", "baselines", "chosen_lr", "equal_tokens", "equal_flops",
    }  # fmt: skip
    assert set(result["meta"]["phase_seconds"]) == {"corpus", "sweep", "comparison"}
    # off a terminal: one plain line per trained run, and the table at the end
    n_runs = len(result["runs"])
    assert text.count("finished ") == n_runs
    assert "| equal tokens | uniform 1..16 |" in text and "| equal FLOPs |" in text


@pytest.mark.slow
def test_rerun_reuses_the_corpus_and_every_finished_run(toy_run):
    out, rc, _, argv = toy_run
    assert rc == 0
    first = json.loads((out / "fidelity.json").read_text())["meta"]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
        assert cli.main(argv) == 0
    assert "finished " not in stdout.getvalue() and "tokenizing" not in stdout.getvalue()
    again = json.loads((out / "fidelity.json").read_text())["meta"]
    assert first["runs_trained"] > 0 and again["runs_trained"] == 0
    # nothing trained: the record keeps the times of the invocation that trained
    assert (again["wall_seconds"], again["phase_seconds"]) == (
        first["wall_seconds"],
        first["phase_seconds"],
    )


@pytest.mark.parametrize(
    "args, says",
    [
        (["--seeds", "0"], "--seeds 0 must be >= 1"),
        (["--lrs", "1e-3,fast"], "--lrs '1e-3,fast'"),
        (["--lrs", "1e-3,-1"], "positive learning rates"),
        (["--max-docs", "0"], "--max-docs 0 must be >= 1"),
        (["--dataset", "/nonexistent/texts"], "does not exist"),
        (["model.d_model=-5"], "must be positive"),
        (["--workers", "0"], "--workers 0 must be >= 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, says, tmp_path, capsys):
    rc = cli.main(["fidelity", "--quick", "--out", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_seed_spreads_name_the_schedule_whose_seeds_disagree_most():
    def run(schedule: str, nll: float) -> dict:
        return {"schedule": schedule, "roles": ["tokens"], "mean_nll": nll}

    result = {
        "equal_tokens": [{"schedule": UNIFORM}, {"schedule": RECIPE_200M}],
        "runs": [run(UNIFORM, 4.95), run(UNIFORM, 5.99), run(UNIFORM, 4.95),
                 run(RECIPE_200M, 5.03), run(RECIPE_200M, 5.29), run(RECIPE_200M, 5.01),
                 {"schedule": UNIFORM, "roles": ["sweep"], "mean_nll": 9.0}],  # not a seed
    }  # fmt: skip
    spans = seed_spreads(result)
    assert list(spans) == [UNIFORM, RECIPE_200M]
    assert spans[UNIFORM] == pytest.approx(1.04) and spans[RECIPE_200M] == pytest.approx(0.28)


def test_results_hold_the_settings_flat_as_before():
    """FidelitySettings holds a TextSetup; its results file keeps the flat record it always had."""
    r = fidelity.record(QUICK)
    assert list(r) == [
        "dataset", "subset", "max_docs", "tokenizer", "preset", "d_model", "n_head", "steps",
        "batch_size", "seq_len", "warmup_steps", "eval_batches", "seeds", "sweep_seeds",
        "held_out", "lrs", "chosen_lr", "schedules", "workers", "overrides",
    ]  # fmt: skip
    assert (r["tokenizer"], r["d_model"], r["eval_batches"], r["held_out"]) == (
        "bpe:512",
        32,
        2,
        0.05,
    )
