"""The text study's statistics: the group-sequential stopping rule on simulated studies with a
known gap, per-seed trends on a constructed case, and the per-micro-batch arm's shared data."""

from __future__ import annotations

import numpy as np
import pytest

from looped import paper
from looped.studies import stats
from looped.studies.stats import Verdict, seed_trends
from looped.studies.textstudy import keeps_going, sequential_cells

LOOKS = (4, 8, 12, 16)
TOL = 0.008  # fixed-first K=4's tolerance


def simulate(true_gap: float, spread: float, studies: int, seed: int) -> dict[str, float]:
    """Run `studies` sequential studies: add seeds in rounds, stop at the first look whose
    group-sequential interval decides; the share of studies ending at each verdict."""
    rng = np.random.default_rng(seed)
    ends: dict[str, int] = {}
    for _ in range(studies):
        gaps = rng.normal(true_gap, spread, max(LOOKS))
        for n in LOOKS:
            found = stats.verdict(stats.sequential_interval(list(gaps[:n]), LOOKS), TOL)
            if not keeps_going(found):
                break
        ends[found.value] = ends.get(found.value, 0) + 1
    return {k: v / studies for k, v in ends.items()}


def test_the_critical_value_is_wider_than_one_looks_and_covers_every_look_at_once():
    c = stats.sequential_critical(LOOKS)
    assert c > stats.t975(3)  # wider than even the first look's own t-interval
    # coverage of every look at once, checked on fresh simulations (not the ones that chose c)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((20_000, 16))
    miss = np.zeros(len(x), bool)
    for n in LOOKS:
        t = x[:, :n].mean(1) * np.sqrt(n) / x[:, :n].std(1, ddof=1)
        miss |= np.abs(t) > c
    assert abs(miss.mean() - 0.05) < 0.006


def test_one_planned_look_is_the_plain_t_interval_exactly():
    """A study capped at its first round (`--max-seeds 4`) looks once; its cells and the own-LR
    check on the same runs once quoted intervals a simulation's error apart."""
    vals = [0.012, 0.031, 0.018, 0.024]
    one = stats.sequential_interval(vals, (4,))
    half = stats.t975(3) * np.std(vals, ddof=1) / 2
    assert (one.lo, one.hi) == (np.mean(vals) - half, np.mean(vals) + half)
    assert stats.sequential_critical((4,)) == stats.t975(3) < stats.sequential_critical((2, 4))


@pytest.mark.parametrize(("spread", "power"), [(0.003, 0.95), (0.006, 0.85)])
def test_a_true_gap_of_zero_is_called_within_and_wrongly_called_worse_at_most_5_percent(
    spread, power
):
    """Per-seed spreads of 0.3 and 0.6 points (the study's seeds agree to about 0.4)."""
    ends = simulate(0.0, spread, 2000, seed=1)
    wrong = ends.get(Verdict.WORSE.value, 0) + ends.get(Verdict.BETTER.value, 0)
    assert wrong <= 0.05
    assert ends.get(Verdict.WITHIN.value, 0) >= power  # within 16 seeds


@pytest.mark.parametrize("spread", [0.003, 0.006])
def test_a_true_gap_of_2_percent_is_called_worse_and_never_within(spread):
    ends = simulate(0.02, spread, 2000, seed=2)
    wrong = sum(ends.get(v.value, 0) for v in (Verdict.WITHIN, Verdict.NO_WORSE, Verdict.BETTER))
    assert wrong <= 0.05
    assert ends.get(Verdict.WORSE.value, 0) >= 0.95


def test_the_interval_narrows_as_seeds_are_added():
    vals = list(np.random.default_rng(3).normal(0.01, 0.004, 16))
    widths = [stats.sequential_interval(vals[:n], LOOKS) for n in LOOKS]
    assert all(a.hi - a.lo > b.hi - b.lo for a, b in zip(widths, widths[1:]))


def _cells(slopes: dict[int, float], lengths=(10, 11, 12, 13)) -> list[dict]:
    """Constructed cells: seed s's gap is 0.01 + slopes[s] x (log2(tokens) - 10)."""
    return [
        {"schedule": "ff", "tokens": 2**n, "verdict": "undecided", "seed_ids": list(slopes),
         "gap": {"values": [0.01 + b * (n - 10) for b in slopes.values()]}}
        for n in lengths
    ]  # fmt: skip


def test_per_seed_trends_fit_each_seed_then_an_interval_over_seeds():
    rising = seed_trends(_cells({0: 0.010, 1: 0.012, 2: 0.011, 3: 0.013}))["ff"]
    assert rising["per_seed"] == pytest.approx({0: 0.010, 1: 0.012, 2: 0.011, 3: 0.013})
    assert rising["slope"]["mean"] == pytest.approx(0.0115) and rising["direction"] == "rising"
    # opposite moves in different seeds: no trend is claimed, however many points there are
    mixed = seed_trends(_cells({0: 0.01, 1: -0.012, 2: 0.011, 3: -0.009}))["ff"]
    assert mixed["direction"] == "no clear trend"
    # a seed missing a length is left out of the fit rather than fitted on fewer points
    cells = _cells({0: 0.01, 1: 0.012, 2: 0.011})
    cells[0] = {**cells[0], "seed_ids": [0, 1], "gap": {"values": cells[0]["gap"]["values"][:2]}}
    assert sorted(seed_trends(cells)["ff"]["per_seed"]) == [0, 1]


def _row(schedule: str, seed: int, nll: float, steps: int = 100) -> dict:
    return {"schedule": schedule, "label": schedule, "steps": steps, "seed": seed, "lr": 3e-3,
            "tokens": steps * 4096, "params": 1000, "params_non_embedding": 500,
            "mean_nll": nll, "se": 0.01, "token_nll": [nll] * 16}  # fmt: skip


def test_a_decided_cell_keeps_its_verdict_and_an_open_one_is_judged_on_every_seed():
    ff, uni = paper.RECIPES_1B[1], paper.UNIFORM
    tol = {ff: TOL}
    rows = [_row(uni, s, 3.0) for s in range(8)] + [_row(ff, s, 3.3 + 0.001 * s) for s in range(4)]
    first = sequential_cells(rows, 4.0, (uni, ff), LOOKS, tol)
    cell = next(c for c in first if c["schedule"] == ff)
    assert cell["verdict"] == Verdict.WORSE.value and not cell["open"] and cell["planned_look"]
    assert set(cell["gap_by_depth"]) == {"1", "4", "16"}
    more = rows + [_row(ff, s, 3.0) for s in range(4, 8)]  # later seeds would not change it
    again = sequential_cells(more, 4.0, (uni, ff), LOOKS, tol, first)
    assert next(c for c in again if c["schedule"] == ff) == cell
    above = sequential_cells(rows, 3.1, (uni, ff), LOOKS, tol)  # 3.3 > bigram 3.1
    shut = next(c for c in above if c["schedule"] == ff)
    assert shut["verdict"] == Verdict.NOT_INFORMATIVE.value and not shut["open"]


def test_the_per_micro_batch_arm_trains_on_exactly_its_partners_sequences(tmp_path):
    """K per micro-batch (4 x 8 sequences, split_step_batch) sees the 32 sequences that K per
    step draws at every step: the two arms differ only in which depth a sequence gets."""
    import torch

    from looped.studies.textsetup import TextSetup, prepare_documents, run_config
    from looped.training.trainer import micro_batches

    docs = [(f"m{i}.py", f"def f{i}(x):\n    return x * {i} + {i * i}\n" * 20) for i in range(40)]
    prepare_documents(tmp_path / "c", docs, "bpe:300", 0.1, 0.1)
    corpus = {"path": str(tmp_path / "c"), "vocab_size": 300}
    setup = TextSetup(batch_size=32, seq_len=16)
    one = run_config(setup, corpus, schedule=paper.UNIFORM, lr=1e-3, seed=3, steps=5)
    four = run_config(setup, corpus, schedule=paper.UNIFORM, lr=1e-3, seed=3, steps=5,
                      extra=("grad_accum=4", "split_step_batch=true", "batch_size=8"))  # fmt: skip

    class Run:  # what micro_batches reads of a run
        def __init__(self, cfg):
            from looped.data.batching import build_source
            from looped.runtime.distributed import Dist

            self.cfg, self.source, self.dist = cfg, build_source(cfg.data), Dist("cpu")

    for step in (0, 4):
        ((x1, y1),) = micro_batches(Run(one), step)
        parts = list(micro_batches(Run(four), step))
        assert len(parts) == 4 and all(len(x) == 8 for x, _ in parts)
        assert torch.equal(torch.cat([x for x, _ in parts]), x1)
        assert torch.equal(torch.cat([y for _, y in parts]), y1)


@pytest.mark.slow
def test_the_text_study_runs_on_a_users_corpus_and_never_reports_an_lr_seed(tmp_path):
    """`looped map --quick --corpus FILE` on one block: the user's .jsonl split and tokenized
    here, the shared LR chosen by the LR seeds alone, every schedule at that LR, and no reported
    row from a seed that chose it. (Resuming without training: tests/test_map_study.py.)"""
    import json

    from looped.cli import main as cli

    lines = [json.dumps({"text": f"def g{i}(a, b):\n    return a * {i} - b // {i + 1}\n" * 8})
             for i in range(120)]  # fmt: skip
    (tmp_path / "mine.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "study"
    assert cli(["map", "--quick", "--out", str(out), "--workers", "2", "--blocks", "d16",
                "--corpus", str(tmp_path / "mine.jsonl"), "--max-seeds", "2"]) == 0  # fmt: skip
    block = json.loads((out / "map.json").read_text())["blocks"]["d16"]
    assert block["meta"]["corpus"]["dataset"].endswith("mine.jsonl")
    lr_seeds = set(block["meta"]["settings"]["lr_seeds"])
    assert block["rows"] and not lr_seeds & {r["seed"] for r in block["rows"]}
    shared = block["shared_lr"]
    assert all(r["lr"] == shared[str(r["steps"])] for r in block["rows"])
    assert set(block["chosen"]) == {paper.UNIFORM}  # only uniform's sweep chooses the LR
    assert {"dtype", "torch", "python"} <= set(block["meta"]["environment"])


def test_the_planned_looks_are_the_rounds_within_the_seed_budget():
    """--max-seeds cuts the rounds a study looks at, which sets each look's interval width."""
    from looped.studies.stats import planned_looks

    assert planned_looks((4, 8, 12, 16), 16) == [4, 8, 12, 16]
    assert planned_looks((4, 8, 12, 16), 10) == [4, 8]
    assert planned_looks((4, 8, 12, 16), 4) == [4]
    assert planned_looks((4, 8), 3) == [3]  # no round fits: the budget is the one look
