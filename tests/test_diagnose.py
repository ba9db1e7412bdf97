"""`looped diagnose`: the variants it compares are paired fairly, and the evidence it reads is
what the trainer and the probe wrote."""

from __future__ import annotations

import json

import pytest

from looped.cli import main as cli
from looped.studies.diagnose import QUICK, VARIANTS, grad_norm_by_depth, plan, runs_of


def test_grad_norm_by_depth_is_the_median_of_the_steps_of_each_depth_after_warmup():
    metrics = [
        {"kind": "train", "step": 1, "depth": 1, "grad_norm": 100.0},  # warmup: left out
        {"kind": "train", "step": 3, "depth": 1, "grad_norm": 4.0},
        {"kind": "train", "step": 4, "depth": 2, "grad_norm": 1.0},
        {"kind": "train", "step": 5, "depth": 1, "grad_norm": 2.0},
        {"kind": "train", "step": 6, "depth": 1, "grad_norm": 3.0},
        {"kind": "eval", "step": 5, "token_nll": {}},
    ]
    assert grad_norm_by_depth(metrics, after=2) == {1: 3.0, 2: 1.0}


def test_every_variant_sees_the_same_steps_and_tokens_and_the_probed_ones_keep_checkpoints():
    runs = plan(QUICK)
    assert len(runs) == len(VARIANTS) * QUICK.seeds and not any(p.parent for p in runs.values())
    configs = [p.cfg for p in runs.values()]
    assert len({c.batch_size * c.grad_accum * c.seq_len for c in configs}) == 1
    assert {c.max_steps for c in configs} == {QUICK.steps}
    (micro,) = runs_of("per-micro", runs)
    assert micro.cfg.depth_per_micro and micro.cfg.grad_accum == 4
    assert micro.cfg.schedule == runs_of("uniform", runs)[0].cfg.schedule
    assert not runs_of("uniform", runs)[0].cfg.depth_per_micro
    saved = {v: runs_of(v, runs)[0].save_steps for v in VARIANTS}
    assert saved["uniform"] == saved["fixed"] == list(QUICK.probe_at)
    assert saved["per-micro"] == saved["no-k1"] == []


@pytest.mark.slow
def test_quick_diagnosis_writes_evidence_from_the_runs(tmp_path, capsys):
    assert cli(["diagnose", "--quick", "--steps", "6", "--out", str(tmp_path), "--quiet"]) == 0
    result = json.loads((tmp_path / "diagnose.json").read_text())
    uniform = result["variants"]["uniform"]
    assert len(uniform["nll"]) == 16 and uniform["metric"] == "fact_nll"
    assert [p["step"] for p in uniform["agreement"]] == [6]  # probe_at clipped to the run
    cos = uniform["agreement"][0]["cosine"]
    assert all(abs(cos[i][i] - 1) < 1e-5 for i in range(4))
    assert set(result["variants"]["no-k1"]["grad_norm_by_depth"]) <= {str(k) for k in range(2, 17)}
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == [
        "diagnose_agreement.png", "diagnose_grad_norms.png", "diagnose_nll_by_depth.png",
    ]  # fmt: skip
    assert "uniform 2..16" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["--steps", "0"], ["--seeds", "-1"], ["--reference", "--quick"]])
def test_bad_input_is_one_line_and_exit_2(args, capsys):
    assert cli(["diagnose", *args]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_gap_closed_is_the_share_of_the_uniform_to_fixed_difference():
    from looped.studies.report.diagnose import closed_share, seed_shares

    v = {
        "uniform": {"mean_nll": 3.0, "seed_mean_nll": [3.0]},
        "fixed-first": {"mean_nll": 1.0, "seed_mean_nll": [1.0]},
        "x": {"mean_nll": 2.5, "seed_mean_nll": [2.5]},
    }
    assert closed_share(v, "x") == pytest.approx(0.25)
    v["x"]["mean_nll"] = 3.5  # worse than uniform: a negative share, kept as it is
    assert closed_share(v, "x") == pytest.approx(-0.25)
    # with seeds, each seed's share against its own uniform and fixed-first runs
    v = {
        "uniform": {"mean_nll": 3.5, "seed_mean_nll": [3.0, 4.0]},
        "fixed-first": {"mean_nll": 1.5, "seed_mean_nll": [1.0, 2.0]},
        "x": {"mean_nll": 2.5, "seed_mean_nll": [2.5, 2.5]},
    }
    assert closed_share(v, "x") == pytest.approx(0.5)
    assert seed_shares(v, "x") == pytest.approx([0.25, 0.75])
