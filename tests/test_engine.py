"""The study engine: the one LR choice, the one gap (paired by seed), the table rows at equal
tokens and equal FLOPs, and the text track's equal-FLOP runs branching off uniform's."""

import math
import random

import pytest

from looped.flops import schedule_flops, tokens_per_step
from looped.paper import FIXED, RECIPE_200M, RECIPES_1B, UNIFORM
from looped.schedule_spec import parse_schedule
from looped.studies.engine import (
    choose_each,
    choose_lr,
    compare,
    paired_gap,
    paired_values,
    plan,
    text_runs,
)
from looped.studies.textsetup import prepare_documents
from looped.studies.textstudy import QUICK, flop_lengths


def test_the_lr_is_the_lowest_mean_over_the_lr_seeds_ties_to_the_smaller_and_never_diverged():
    # seed 0 alone would pick 1e-3; the mean over both picks 3e-3
    chosen = choose_lr({1e-3: [4.0, 6.0], 3e-3: [4.5, 4.5], 1e-2: [math.inf, 4.0]})
    assert chosen["lr"] == 3e-3 and chosen["edge"] is None and chosen["val"][1e-2] == math.inf
    assert choose_lr({1e-3: [4.0], 1e-2: [4.0]}) == {"lr": 1e-3, "val": {1e-3: 4.0, 1e-2: 4.0},
                                                     "edge": "low"}  # fmt: skip
    assert choose_lr({1e-3: [5.0], 1e-2: [4.0]})["edge"] == "high"
    assert choose_lr({1e-3: [math.inf]}) is None
    sweep = [
        (UNIFORM, 1e-3, 5.0),
        (UNIFORM, 3e-3, 4.5),
        (FIXED, 1e-3, 4.0),
        (FIXED, 1e-2, 4.0),  # a tie: the smaller LR wins
        (RECIPE_200M, 1e-2, math.inf),  # diverged: never the best
        (RECIPE_200M, 1e-3, 4.4),
    ]
    chosen = {s: c["lr"] for s, c in choose_each(sweep).items()}
    assert chosen == {UNIFORM: 3e-3, FIXED: 1e-3, RECIPE_200M: 1e-3}


def test_the_gap_is_paired_by_seed_and_its_interval_taken_over_log_ratios():
    mine = [{"seed": 1, "mean_nll": 4.5}, {"seed": 0, "mean_nll": 4.2}, {"seed": 7, "mean_nll": 1}]
    ref = [{"seed": 0, "mean_nll": 4.0}, {"seed": 1, "mean_nll": 5.0}]
    assert paired_values(mine, ref) == pytest.approx([4.5 / 5 - 1, 4.2 / 4 - 1])  # seed 7: none
    gap = paired_gap(mine, ref)
    logs = [math.log(4.5 / 5), math.log(4.2 / 4)]
    assert gap.mean == pytest.approx(math.expm1(sum(logs) / 2)) and gap.n == 2


def _row(schedule, seed, nll, roles, steps=10):
    return {
        "schedule": schedule, "seed": seed, "mean_nll": nll, "roles": roles, "lr": 1e-3,
        "steps": steps, "tokens": steps * 10, "flops": {UNIFORM: 100.0}.get(schedule, 60.0),
        "wall": {UNIFORM: 10.0}.get(schedule, 8.0), "depths": [1, 2], "token_nll": [nll, nll],
    }  # fmt: skip


def test_compare_pairs_seeds_exactly_at_equal_tokens_and_at_equal_flops():
    rows = [
        _row(UNIFORM, 0, 4.0, ["tokens"]),
        _row(UNIFORM, 1, 5.0, ["tokens"]),
        _row(RECIPE_200M, 0, 4.2, ["tokens"]),
        _row(RECIPE_200M, 1, 4.5, ["tokens"]),
    ]
    table = {r["schedule"]: r for r in compare(rows, "tokens", (UNIFORM, RECIPE_200M))}
    ff = table[RECIPE_200M]
    assert ff["mean_nll"]["mean"] == pytest.approx(4.35)
    # "vs uniform" is the paired gap (over log ratios), never a ratio of seed means
    assert ff["vs_uniform"] == pytest.approx(math.sqrt(1.05 * 0.9) - 1)
    assert ff["vs_uniform_by_seed"]["values"] == pytest.approx([0.05, -0.1])
    assert ff["compute_saving"] == pytest.approx(0.4) and "wall_saving" not in ff
    assert table[UNIFORM]["vs_uniform"] == pytest.approx(0.0)
    rows += [
        {**_row(UNIFORM, 0, 4.4, [f"flops:{RECIPE_200M}"], steps=6), "flops": 60.0},
        {**_row(UNIFORM, 1, 5.0, [f"flops:{RECIPE_200M}"], steps=6), "flops": 60.0},
    ]
    (eq,) = compare(rows, "flops", (UNIFORM, RECIPE_200M))
    assert eq["schedule"] == RECIPE_200M and eq["uniform_steps"] == 6
    assert eq["vs_uniform_by_seed"]["values"] == pytest.approx([4.2 / 4.4 - 1, 4.5 / 5.0 - 1])
    assert eq["compute_saving"] == pytest.approx(0.0)


def test_equal_flop_uniform_runs_spend_each_schedules_flops_and_branch_off_its_trunk(tmp_path):
    rng = random.Random(0)
    words = "the loop applies one block again so that depth costs compute".split()
    docs = [(f"d{i}.txt", " ".join(rng.choice(words) for _ in range(400))) for i in range(40)]
    prepare_documents(tmp_path / "c", docs, "bpe:300", 0.1, 0.1)
    corpus = {"path": str(tmp_path / "c"), "vocab_size": 300}
    arms = (RECIPES_1B[1], RECIPE_200M)
    cut = flop_lengths(QUICK, corpus, 40)
    # mean K per step: K=2 for 67% (4.2) < K=4 for 80% (4.9) < uniform (8.5)
    assert cut[RECIPE_200M] < cut[RECIPES_1B[1]] < 40
    grid = {UNIFORM: {1e-2: (40, *cut.values())}, arms[0]: {1e-2: (40,)}}
    runs = plan(text_runs(QUICK, corpus, [0], grid))
    for s, n in cut.items():
        (p,) = [p for p in runs.values() if p.schedule == UNIFORM and p.steps == n]
        assert runs[p.parent].steps == 40 and p.branch_step >= int(0.8 * n)
        per_step, sched = tokens_per_step(p.cfg), parse_schedule(UNIFORM)
        budget = schedule_flops(p.cfg.model, parse_schedule(s), 40, per_step, p.cfg.seq_len)
        spent = schedule_flops(p.cfg.model, sched, n, per_step, p.cfg.seq_len)
        assert (
            spent
            <= budget * (1 + 1e-12)
            < schedule_flops(p.cfg.model, sched, n + 1, per_step, p.cfg.seq_len)
        )
