"""The text evidence's foundations: leak-free splits, count-table baselines (exact values on a
hand-made sequence), paired intervals, each verdict from a constructed case, and the length
study's planner sharing prefixes exactly."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from looped import paper
from looped.data.splits import assign_splits, near_duplicate_keys
from looped.data.text import load_tokenizer
from looped.errors import UserError
from looped.eval.baselines import K_GRID, NgramBaseline, choose_k
from looped.studies import stats
from looped.studies.stats import Verdict
from looped.studies.textsetup import prepare_documents


# -- splits ------------------------------------------------------------------------------------
def family(i: int) -> str:
    """A code-page-table-like document: 30 shared lines and one line of its own."""
    shared = "\n".join(
        f"    0x{j:04x}: 'character number {j} of the shared table'," for j in range(30)
    )
    return f"# codec number {i} with its own distinctive header line\n{shared}\n"


def unique(i: int) -> str:
    return "\n".join(
        f"def function_{i}_{j}(argument_{j}): return argument_{j} * {i}" for j in range(20)
    )


def test_near_duplicates_form_one_cluster_and_unrelated_documents_stay_apart():
    docs = [unique(0), family(1), unique(2), family(3), family(4), unique(5)]
    keys = near_duplicate_keys(docs)
    assert keys[1] == keys[3] == keys[4] == 1
    assert [keys[i] for i in (0, 2, 5)] == [0, 2, 5]


def test_a_cluster_never_straddles_splits():
    docs = [family(i) for i in range(40)] + [unique(i) for i in range(200)]
    names = [f"doc{i}.py" for i in range(len(docs))]
    splits = assign_splits(near_duplicate_keys(docs), 0.1, 0.1, names)
    assert len({splits[i] for i in range(40)}) == 1
    assert {"train", "val", "test"} <= set(splits)  # the unique ones spread over all three


def test_splits_follow_names_not_order():
    docs = [unique(i) for i in range(50)]
    names = [f"m{i}.py" for i in range(50)]
    forward = dict(zip(names, assign_splits(near_duplicate_keys(docs), 0.2, 0.2, names)))
    rev = list(reversed(docs)), list(reversed(names))
    backward = dict(zip(rev[1], assign_splits(near_duplicate_keys(rev[0]), 0.2, 0.2, rev[1])))
    assert forward == backward


def test_prepared_corpus_holds_disjoint_splits_and_a_tokenizer_fit_on_train_alone(tmp_path: Path):
    # the held-out documents (known in advance: the split is a function of the names) repeat a
    # word found nowhere in train; a BPE fit on everything would merge it into one token
    names = [f"m{i}.py" for i in range(120)]
    splits = assign_splits(list(range(120)), 0.2, 0.2, names)
    named = [(n, ("zyxwvq " * 300 if s != "train" else "") + unique(i))
             for i, (n, s) in enumerate(zip(names, splits))]  # fmt: skip
    meta = prepare_documents(tmp_path / "c", named, "bpe:300", 0.2, 0.2)
    val, test = meta["held_out_documents"]["val"], meta["held_out_documents"]["test"]
    assert set(val).isdisjoint(test) and val and test
    assert set(val) == {n for n, s in zip(names, splits) if s == "val"}
    assert len(load_tokenizer(tmp_path / "c").encode(" zyxwvq")) > 2
    everything = prepare_documents(
        tmp_path / "all", [(n, "zyxwvq " * 300) for n in names], "bpe:300", 0.2, 0.2
    )
    assert len(load_tokenizer(tmp_path / "all").encode(" zyxwvq")) == 1 and everything


# -- baselines ---------------------------------------------------------------------------------
def test_unigram_and_bigram_nll_exact_on_a_hand_made_sequence():
    # train: 0 1 0 1 0 2 -> unigram counts (3, 2, 1); pairs 01 x2, 10 x2, 02 x1
    table = NgramBaseline.fit(np.array([0, 1, 0, 1, 0, 2]), vocab_size=3, k=1.0)
    x, y = torch.tensor([[0, 1]]), torch.tensor([[1, 0]])
    got = table.nll([(x, y)])
    p_uni = [(2 + 1) / (6 + 3), (3 + 1) / (6 + 3)]  # p(1), p(0)
    p_bi = [(2 + 1) / (3 + 3), (2 + 1) / (2 + 3)]  # p(1|0): c(0)=3 pairs from 0; p(0|1): c(1)=2
    assert got["unigram"] == pytest.approx(-sum(map(math.log, p_uni)) / 2)
    assert got["bigram"] == pytest.approx(-sum(map(math.log, p_bi)) / 2)


def test_choose_k_picks_the_lowest_validation_nll():
    rng = np.random.default_rng(0)
    seq = rng.integers(0, 8, 5000)
    table = NgramBaseline.fit(seq, 8)
    val = [(torch.tensor(seq[:100][None]), torch.tensor(seq[1:101][None]))]
    k = choose_k(table, val)
    scores = {}
    for g in K_GRID:
        table.k = g
        scores[g] = table.nll(val)["bigram"]
    assert k == min(scores, key=scores.get)


# -- intervals and verdicts --------------------------------------------------------------------
def test_interval_is_students_t_over_the_paired_differences():
    iv = stats.interval([0.01, 0.02, 0.03])
    half = 4.303 * 0.01 / math.sqrt(3)
    assert (iv.mean, iv.lo, iv.hi) == pytest.approx((0.02, 0.02 - half, 0.02 + half))


def test_the_gap_is_relative_seed_by_seed_its_interval_over_log_ratios():
    """The gap the tables show: (ours - uniform) / uniform per seed; the mean and interval are
    taken over log ratios, so a gap never reads below -100%, and at a single look the
    group-sequential interval is the t interval."""
    ours, ref = [2.2, 3.1, 1.9], [2.0, 3.0, 2.0]
    gaps = [a / b - 1 for a, b in zip(ours, ref)]
    iv = stats.ratio_interval(gaps)
    logs = stats.interval([math.log(a / b) for a, b in zip(ours, ref)])
    assert (iv.mean, iv.lo, iv.hi) == pytest.approx(
        tuple(math.expm1(x) for x in (logs.mean, logs.lo, logs.hi))
    )
    assert iv.values == tuple(gaps) and iv.lo < iv.mean < iv.hi
    wide = stats.ratio_interval([-0.9, 0.5, -0.5])
    assert stats.interval([-0.9, 0.5, -0.5]).lo < -1 < wide.lo
    once = stats.sequential_ratio(gaps, (3,))
    assert (once.lo, once.hi) == pytest.approx((iv.lo, iv.hi), rel=0.02)


@pytest.mark.parametrize(
    "lo, hi, expected",
    [
        (-0.004, 0.004, Verdict.WITHIN),
        (-0.05, -0.01, Verdict.BETTER),
        (-0.05, 0.004, Verdict.NO_WORSE),
        (0.01, 0.05, Verdict.WORSE),
        (-0.01, 0.02, Verdict.UNDECIDED),
        (0.001, 0.02, Verdict.UNDECIDED),
    ],
)
def test_each_verdict_from_a_constructed_interval(lo, hi, expected):
    gap = stats.Interval((lo + hi) / 2, lo, hi, 3, ())
    assert stats.verdict(gap, tolerance=0.005) is expected
    assert stats.verdict(gap, informative=False) is Verdict.NOT_INFORMATIVE


# -- the planner -------------------------------------------------------------------------------
def test_shorter_runs_branch_off_the_longest_where_they_agree(tmp_path: Path):
    from looped.studies.engine import plan, text_runs
    from looped.studies.textstudy import QUICK

    named = [(f"m{i}.py", unique(i)) for i in range(80)]
    prepare_documents(tmp_path / "c", named, "bpe:300", 0.1, 0.1)
    corpus = {"path": str(tmp_path / "c"), "vocab_size": 300}
    lengths = tuple(QUICK.lengths)
    runs = plan(text_runs(QUICK, corpus, [0], {s: {1e-2: lengths} for s in QUICK.schedules}))
    longest = max(QUICK.lengths)
    for p in runs.values():
        if p.steps == longest:
            assert p.parent is None
            continue
        assert p.parent is not None and 0 < p.branch_step < p.steps
        k, frac = paper.fixed_phase(p.schedule) if "fixed-first" in p.schedule else (0, 0.8)
        # the shared prefix runs to the short run's switch (fixed-first) or decay (uniform)
        assert p.branch_step >= int(frac * p.steps)
        assert p.branch_step in runs[p.parent].save_steps
    micro = [p for p in runs.values() if p.cfg.depth_per_micro]
    assert micro and all(p.cfg.grad_accum == 4 for p in micro)


def test_an_edge_choice_extends_the_sweep_on_that_side_at_that_length_only():
    from looped.studies.engine import extended

    grid = {"a": dict.fromkeys((1e-3, 3e-3, 1e-2), (30, 60)), "b": {1e-3: (30,), 3e-3: (30,)}}
    chosen = {"a": {30: {"lr": 1e-2, "edge": "high"}, 60: {"lr": 3e-3, "edge": None}},
              "b": {30: {"lr": 1e-3, "edge": "low"}}}  # fmt: skip
    wider = extended(grid, chosen)
    assert wider["a"][3e-2] == (30,) and set(wider["a"]) == {1e-3, 3e-3, 1e-2, 3e-2}
    assert wider["b"][3.33e-4] == (30,)
    assert extended(grid, {"a": {30: {"lr": 3e-3, "edge": None}}}) == grid


def test_a_streamed_corpus_with_a_test_split_fits_its_tokenizer_on_train_documents_alone(
    tmp_path: Path,
):
    import json

    from looped.data.splits import split_of
    from looped.data.text import prepare_text

    held = [
        t for i in range(200) if split_of(t := "zyxwvq " * 300 + unique(i), 0.2, 0.2) != "train"
    ]
    train = [t for i in range(200, 400) if split_of(t := unique(i), 0.2, 0.2) == "train"]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in held + train))
    meta = prepare_text(tmp_path / "c", dataset=str(tmp_path / "d.jsonl"), tokenizer="bpe:300",
                        val_frac=0.2, test_frac=0.2)  # fmt: skip
    assert {"train", "val", "test"} == set(meta["splits"])
    assert meta["splits"]["train"]["docs"] == len(train)
    assert meta["splits"]["val"]["docs"] + meta["splits"]["test"]["docs"] == len(held)
    assert len(load_tokenizer(tmp_path / "c").encode(" zyxwvq")) > 2


def test_the_demo_says_when_its_text_models_lose_to_the_bigram_and_points_to_the_study():
    from looped.studies.report.bios import text_note

    result = {"equal_tokens": [{"mean_nll": {"max": 5.0}, "uniform_nll": {"max": 5.2}}],
              "baselines": {"bigram": 4.0}}  # fmt: skip
    note = text_note(result)
    assert len(note) == 1 and "5.20 vs bigram 4.00" in note[0] and "looped map" in note[0]
    result["baselines"]["bigram"] = 5.5
    assert text_note(result) == []


def test_a_greedy_continuation_follows_the_argmax_at_its_own_depth():
    from tokenizers import Tokenizer

    from looped.data.text import HFTokenizer
    from looped.model import LoopedConfig, LoopedTransformer
    from looped.studies.report.samples import section
    from looped.studies.samples import continue_greedy

    tok = HFTokenizer(
        Tokenizer.from_file(str(Path(__file__).parent / "fixtures/tokenizer.json")), "t"
    )
    torch.manual_seed(0)
    model = LoopedTransformer(LoopedConfig(vocab_size=512, d_model=32, n_head=2, seq_len=64)).eval()
    ids = tok.encode("def f(x):")
    for depth in (1, 4):
        logits, _ = model(torch.tensor([ids]), depth=depth)
        first = int(logits[0, -1].argmax())
        if first != tok.eos_id:
            assert continue_greedy(model, tok, "def f(x):", depth, 1) == tok.decode([first])
    two = continue_greedy(model, tok, "def f(x):", 2, 5)
    assert isinstance(two, str)
    shown = section({"prompts": ["a\nb"], "depths": [1], "models": {
        "m": {"test_nll": {"1": 3.14159}, "samples": {"1": ["x\ny"]}}}})  # fmt: skip
    assert "Prompt `a⏎b`" in shown and "K=1  (NLL 3.14)  x⏎y" in shown


def _synthetic_study() -> dict:
    """A block's entry of map.json, with made-up numbers: 4 lengths, 4 seeds."""
    from looped.paper import TOLERANCE
    from looped.studies.engine import SCHEDULES
    from looped.studies.stats import seed_trends
    from looped.studies.textstudy import sequential_cells

    rows = []
    for i, steps in enumerate((30, 60, 120, 240)):
        for j, s in enumerate(SCHEDULES):
            for seed in range(4):
                nll = 5.0 - 0.5 * i + 0.02 * j + 0.01 * seed * (j + 1)
                rows.append({"schedule": s, "label": paper.label(s), "steps": steps, "seed": seed,
                             "lr": 3e-3, "tokens": steps * 4096, "params": 86_000,
                             "params_non_embedding": 53_000, "mean_nll": nll, "se": 0.01,
                             "token_nll": [nll + 0.1 * (16 - k) / 16 for k in range(16)]})  # fmt: skip
    cells = sequential_cells(rows, 4.2, SCHEDULES, (4, 8), TOLERANCE)
    return {"cells": cells, "rows": rows, "trends": seed_trends(cells),
            "baselines": {"test": {"bigram": 4.2, "unigram": 5.3}}}  # fmt: skip


def test_the_cells_judge_only_what_beats_the_bigram():
    study = _synthetic_study()
    informative = {c["steps"]: c.get("verdict") for c in study["cells"] if "gap" in c}
    assert informative[30] == informative[60] == Verdict.NOT_INFORMATIVE.value  # 5.0, 4.5 > 4.2
    assert informative[240] != Verdict.NOT_INFORMATIVE.value
    assert all(t["lengths"] == 2 and t["slope"] is None for t in study["trends"].values())


def test_a_length_added_after_the_trunks_ran_branches_at_a_checkpoint_they_hold(tmp_path: Path):
    from looped.studies.engine import plan, text_runs
    from looped.studies.textstudy import QUICK

    named = [(f"m{i}.py", unique(i)) for i in range(80)]
    prepare_documents(tmp_path / "c", named, "bpe:300", 0.1, 0.1)
    corpus = {"path": str(tmp_path / "c"), "vocab_size": 300}
    base = {paper.UNIFORM: {1e-2: (16, 64)}}
    first = plan(text_runs(QUICK, corpus, [0], base))
    trunk = next(p for p in first.values() if p.steps == 64)
    runs_dir = tmp_path / "runs"
    for step in [*trunk.save_steps, 64]:  # the trunk as it finished: its checkpoints
        ckpt = runs_dir / trunk.name / "checkpoints" / f"step_{step:07d}"
        ckpt.mkdir(parents=True)
        (ckpt / "model.safetensors").write_bytes(b"")
        (ckpt / "state.pt").write_bytes(b"")
    (runs_dir / trunk.name / "summary.json").write_text("{}")
    longer = {paper.UNIFORM: {1e-2: (16, 48, 64)}}
    later = plan(text_runs(QUICK, corpus, [0], longer), runs_dir=runs_dir)
    added = next(p for p in later.values() if p.steps == 48)
    assert added.branch_step == trunk.save_steps[0]  # the 16-step run's checkpoint
    again = next(p for p in later.values() if p.steps == 64)
    assert sorted(again.save_steps) == sorted(trunk.save_steps)  # nothing to retrain
    fresh = plan(text_runs(QUICK, corpus, [0], longer))
    assert next(p for p in fresh.values() if p.steps == 48).branch_step > 13


@pytest.mark.slow
def test_samples_continue_a_map_blocks_models_at_every_serving_depth(
    tmp_path: Path, stdlib_corpus: str, monkeypatch: pytest.MonkeyPatch
):
    """`looped samples` reads the block's chosen LRs, trains the fixed K=4 twin beside its
    models (once: a second call reuses it) and continues every prompt at every depth."""

    from looped.studies import samples

    monkeypatch.setattr(samples, "TOKENS", 3)  # each token is a forward per prompt and depth
    from looped.studies.engine import name_of
    from looped.studies.runner import Planned, execute
    from looped.studies.textsetup import ensure_corpus, run_config
    from looped.studies.textstudy import QUICK

    settings = replace(QUICK, setup=replace(QUICK.setup, d_model=16), lengths=(4, 6))
    corpus = ensure_corpus(settings.setup, tmp_path, stdlib_corpus)
    ff, uni = paper.RECIPE_200M, paper.UNIFORM
    study = {"shared_lr": {"6": 1e-2}}
    specs = [
        Planned(
            name_of(s, 1e-2, 0, 6),
            run_config(settings.setup, corpus, schedule=s, lr=1e-2, seed=0, steps=6),
            s,
            6,
        )
        for s in (ff, uni)
    ]
    execute(specs, tmp_path / "runs", 2, False, True)
    first = samples.sample_all(study, tmp_path, settings, corpus)
    assert sorted(first["models"]) == sorted(["fixed K=4", paper.label(ff), paper.label(uni)])
    assert first["tokens"] == 3
    for model in first["models"].values():
        assert sorted(model["test_nll"]) == sorted(str(k) for k in samples.DEPTHS)
        assert all(len(model["samples"][str(k)]) == len(samples.PROMPTS) for k in samples.DEPTHS)
    twin = tmp_path / "runs" / first["models"]["fixed K=4"]["run"] / "summary.json"
    before = twin.stat().st_mtime_ns
    assert samples.sample_all(study, tmp_path, settings, corpus) == first  # greedy, twin reused
    assert twin.stat().st_mtime_ns == before


@pytest.mark.slow
def test_trends_come_out_in_the_tables_order_whatever_the_string_hash():
    """A results file is byte for byte the same from the same runs: the trends follow the
    table's schedule order, not the order of a set (which changes with PYTHONHASHSEED)."""
    import json
    import os
    import subprocess
    import sys

    schedules = ["uniform per micro", "fixed-first K=2", "fixed-first K=4", "another"]
    cells = [
        {"schedule": s, "tokens": 2**n, "verdict": "undecided", "seed_ids": [0, 1],
         "gap": {"values": [n * i, -i]}}
        for n in (10, 11, 12)
        for i, s in enumerate(schedules)
    ]  # fmt: skip
    code = (
        "import json, sys; from looped.studies.stats import seed_trends; "
        "print(json.dumps(list(seed_trends(json.loads(sys.argv[1])))))"
    )
    orders = {
        subprocess.run(
            [sys.executable, "-c", code, json.dumps(cells)],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(4)
    }
    assert [json.loads(o) for o in orders] == [schedules]


def test_resuming_from_a_study_trained_in_another_dtype_is_refused_in_one_line(tmp_path: Path):
    """Rows from another dtype never match a run here, so resuming would silently retrain every
    one: refused in one line naming --dtype; in the same dtype each scored row is reused."""
    import json

    from looped.errors import UserError
    from looped.studies.textstudy import CORPUS_KEYS, rows_of

    corpus = {"tokenizer": "bpe:512", "vocab_size": 512, "splits": {}, "dataset": "stdlib"}
    old = {"meta": {"corpus": {k: corpus[k] for k in CORPUS_KEYS if k in corpus},
                    "environment": {"dtype": "fp32"}},
           "rows": [{"run": "uniform_lr0.003_s0_n120"}], "sweep": [{"run": "uniform_lr0.01_s100_n120"}]}  # fmt: skip
    path = tmp_path / "map.json"
    path.write_text(json.dumps(old))
    assert set(rows_of(json.loads(path.read_text()), str(path), corpus, "fp32")) == {
        "uniform_lr0.003_s0_n120", "uniform_lr0.01_s100_n120",
    }  # fmt: skip
    with pytest.raises(
        UserError,
        match="trained in fp32 and this study trains in bf16; collect it on a machine that trains in fp32",
    ):
        rows_of(json.loads(path.read_text()), str(path), corpus, "bf16")


def test_map_refuses_a_bad_resume_file_in_one_line_before_any_corpus_is_built(tmp_path: Path):
    """A list, broken JSON, a file with no blocks, or a block measured on another corpus: each
    refused by `looped map` in one line, before the corpus would be tokenized (minutes)."""
    import json
    import subprocess
    import sys

    from looped.studies.map import MapSettings, check_resume

    committed = json.loads((Path(__file__).parents[1] / "results" / "map.json").read_text())
    other = json.loads(json.dumps(committed))
    other["blocks"]["d32"]["meta"]["corpus"]["dataset"] = "stdlib"
    files = {
        "list.json": ("[1, 2]", "holds a JSON list"),
        "broken.json": ("{\n", "is not valid JSON"),
        "empty.json": ("{}", "holds no map blocks"),
        "other.json": (json.dumps(other), "block d32 was measured on stdlib"),
    }
    for name, (text, said) in files.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(UserError, match=said):
            check_resume(MapSettings(resume_from=str(tmp_path / name)))
    check_resume(MapSettings(resume_from="results/map.json"))  # the committed file passes
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "looped", "map", "--out", str(out), "--resume-from"]
    proc = subprocess.run(cmd + [str(tmp_path / "other.json")], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not out.exists() or not any(out.glob("corpus-*"))  # nothing was tokenized


def test_the_own_lr_check_gives_no_verdict_where_a_model_misses_the_bigram():
    """The robustness cell is judged like the main cells: a model above the bigram table's NLL
    on either side leaves it "not informative", whatever its interval says."""
    from looped.studies.textstudy import tuned_cells  # as the tests above: the study's module

    arm = paper.RECIPE_200M
    rows = [
        {
            "schedule": s,
            "label": paper.label(s),
            "lr": lr,
            "seed": seed,
            "mean_nll": nll + seed / 1e3,
        }
        for seed in range(4)
        for s, lr, nll in ((paper.UNIFORM, 3e-3, 3.50), (arm, 1e-2, 3.60))
    ]
    own, tol = {arm: 1e-2}, {arm: paper.tolerance(arm)}
    (judged,) = tuned_cells(rows, own, tol, bigram=4.0)
    assert judged["verdict"] == "worse" and judged["shared_lr"] == 3e-3
    (missed,) = tuned_cells(rows, own, tol, bigram=3.55)  # the arm's models miss it
    assert missed["verdict"] == "not informative at this size"
