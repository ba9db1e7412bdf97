"""The trainer: checkpoints that survive crashes, bitwise resume, exact branching, matched
budgets, clear one-line errors, and DDP ranks that agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from looped.cli import main as cli
from looped.config import load_config, lr_at
from looped.flops import flops_per_token, schedule_flops
from looped.runtime import checkpoint as ckpt_lib
from looped.schedule_spec import parse_schedule
from looped.training.run import total_steps_for
from looped.training.trainer import train

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
SMALL = [
    "model.d_model=32",
    "model.n_head=2",
    "data.persons=12",
    "batch_size=4",
    "seq_len=64",
    "model.seq_len=64",
    "eval_batches=1",
    "eval_depths=1-4",
    "log_interval=1",
    "threads=1",
]


def small(*extra: str):
    return load_config("tiny", SMALL + list(extra))


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(ckpt_lib.list_checkpoints(run)[-1][1] / "model.safetensors"))


def records(run: Path, kind: str = "train") -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["kind"] == kind]


def test_train_writes_metrics_checkpoints_and_config(tmp_path):
    run = tmp_path / "r"
    summary = train(
        small("max_steps=12", "ckpt_interval=4", "keep_last=2", "eval_interval=6"), run, quiet=True
    )
    assert summary["steps"] == 12  # and where it trained, which a study's rows read:
    assert summary["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    # and on a CPU which kernels, without which a rerun elsewhere cannot be read as the same
    cpu = None if torch.cuda.is_available() else torch.backends.cpu.get_cpu_capability()
    assert json.loads((run / "summary.json").read_text()).get("cpu_kernels") == cpu
    steps = [s for s, _ in ckpt_lib.list_checkpoints(run)]
    assert steps == [8, 12]  # kept the last two of 4, 8, 12
    rows = records(run)
    assert [r["step"] for r in rows] == list(range(1, 13))
    assert {"loss", "depth", "lr", "tokens", "flops", "wall", "tokens_per_s", "mfu"} <= rows[
        0
    ].keys()
    sched = parse_schedule(small().schedule)
    assert [r["depth"] for r in rows] == [sched.depth(s, 12) for s in range(12)]
    evals = records(run, "eval")
    assert [e["step"] for e in evals] == [6, 12]
    assert set(evals[-1]["token_nll"]) == {"1", "2", "3", "4"}
    assert "recall" in evals[-1]
    assert load_config(str(run / "config.yaml")).schedule == small().schedule
    # cumulative modeled FLOPs equal the FLOP model's total for the depths actually run
    cfg = load_config(str(run / "config.yaml"))
    spent = 0.0
    for r in rows:
        spent += flops_per_token(cfg.model, r["depth"], 64) * 4 * 64
        assert r["flops"] == pytest.approx(spent, rel=1e-12)


def test_training_reduces_loss(tmp_path):
    run = tmp_path / "r"
    train(small("max_steps=40", "schedule=fixed:2", "optim.warmup_steps=5"), run, quiet=True)
    losses = [r["loss"] for r in records(run)]
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5


def test_lr_schedules():
    cfg = small("optim.warmup_steps=10", "optim.lr=1.0", "optim.min_lr_ratio=0.1").optim
    assert lr_at(0, 100, cfg) == pytest.approx(0.1)
    assert lr_at(9, 100, cfg) == pytest.approx(1.0)
    assert lr_at(99, 100, cfg) == pytest.approx(0.1)
    cfg.lr_schedule, cfg.decay_frac = "wsd", 0.2
    assert [lr_at(s, 100, cfg) for s in (10, 50, 79)] == [1.0, 1.0, 1.0]
    assert lr_at(99, 100, cfg) == pytest.approx(0.1)
    # runs of different length agree before the shorter one's decay
    assert all(lr_at(s, 100, cfg) == lr_at(s, 1000, cfg) for s in range(80))


def _train_cmd(run: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "looped",
        "train",
        "--config",
        "tiny",
        "--out",
        str(run),
        "--quiet",
        *SMALL,
        *extra,
    ]


def test_interrupted_checkpoint_write_keeps_the_previous_one(tmp_path, monkeypatch):
    run = tmp_path / "r"
    train(small("max_steps=4", "eval_interval=0"), run, quiet=True)
    before = weights(run)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt_lib, "save_file", crash)
    with pytest.raises(
        ValueError,
        match=r"cannot write checkpoint .*step_0000099: disk full.*step_0000004 is intact",
    ):
        ckpt_lib.save_checkpoint(run, 99, before, {"step": 99}, "")
    assert [s for s, _ in ckpt_lib.list_checkpoints(run)] == [4]
    assert not list((run / "checkpoints").glob(".tmp-*"))
    after = weights(run)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_branch_off_fixed_phase_equals_training_from_scratch(tmp_path):
    """fixed-first (K=4 then uniform) == fixed:4 run branched at the switch, bitwise (WSD LR)."""
    common = [
        "optim.lr_schedule=wsd",
        "optim.decay_frac=0.2",
        "optim.warmup_steps=3",
        "eval_interval=0",
        "eval_depths=1-2",
    ]
    ff = "schedule=fixed-first:k=4,frac=0.8,then=uniform:1-16"
    scratch = tmp_path / "scratch"
    train(small("max_steps=20", ff, *common), scratch, quiet=True)
    parent = tmp_path / "k4"
    train(small("max_steps=30", "schedule=fixed:4", *common), parent, quiet=True, save_steps=(16,))
    branch = tmp_path / "branch"
    branch_ckpt = parent / "checkpoints" / "step_0000016"
    train(small("max_steps=20", ff, *common), branch, quiet=True, branch_from=str(branch_ckpt))
    a, b = weights(scratch), weights(branch)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((branch / "lineage.json").read_text())["parent_step"] == 16
    # a branch that would not be exact is refused
    with pytest.raises(ValueError, match=r"K\(step 0\)=4, this config says K\(step 0\)="):
        train(
            small("max_steps=20", "schedule=uniform:1-16", *common),
            tmp_path / "bad",
            quiet=True,
            branch_from=str(branch_ckpt),
        )


def test_matched_budgets_spend_the_same_modeled_flops():
    cfg = small("budget_flops=2e10")
    spent = {}
    for spec in ["fixed:4", "fixed-first:k=4,frac=0.8,then=uniform:1-16", "uniform:1-16"]:
        cfg.schedule = spec
        steps = total_steps_for(cfg)
        sched = parse_schedule(spec)
        spent[spec] = schedule_flops(cfg.model, sched, steps, 4 * 64, 64)
        assert spent[spec] <= 2e10 < schedule_flops(cfg.model, sched, steps + 1, 4 * 64, 64)
    assert total_steps_for(small("budget_flops=2e10", "schedule=fixed:4")) > total_steps_for(
        small("budget_flops=2e10", "schedule=uniform:1-16")
    )


def test_nan_loss_stops_with_clear_error_and_keeps_last_checkpoint(tmp_path, monkeypatch):
    from looped.model import LoopedTransformer

    run = tmp_path / "r"
    original = LoopedTransformer.forward
    calls = {"n": 0}

    def flaky(self, *args, **kwargs):
        logits, loss = original(self, *args, **kwargs)
        calls["n"] += 1
        return logits, loss * float("nan") if calls["n"] > 6 else loss

    monkeypatch.setattr(LoopedTransformer, "forward", flaky)
    with pytest.raises(ValueError, match=r"loss became nan at step 6.*step_0000005"):
        train(small("max_steps=20", "ckpt_interval=5", "eval_interval=0"), run, quiet=True)
    assert [s for s, _ in ckpt_lib.list_checkpoints(run)] == [5]


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.nope=1", "unknown config key 'model.nope'"),
        ("batch_size=many", "batch_size"),
        ("schedule=fixed:0", "fixed:0"),
        ("schedule=fixed-first:k=4,frac=1.5,then=uniform:1-16", "frac"),
        ("budget_flops=10", "below one step"),
        ("data.path=/nonexistent/corpus", "/nonexistent/corpus"),
        ("max_steps=0", "stop criterion"),
        ("log_interval=0", "log_interval=0"),
    ],
)
def test_bad_config_exits_2_with_one_line(tmp_path, capsys, override, message):
    code = cli(
        ["train", "--config", "tiny", "--out", str(tmp_path / "r"), "--quiet", *SMALL, override]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


@pytest.mark.slow
def test_cli_errors_have_no_traceback_in_a_real_process(tmp_path):
    proc = subprocess.run(
        _train_cmd(tmp_path / "r", "schedule=bogus:3"), capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "bogus" in proc.stderr


def test_init_from_another_architecture_is_refused(tmp_path, capsys):
    run = tmp_path / "r"
    train(small("max_steps=2", "eval_interval=0"), run, quiet=True)
    code = cli(
        [
            "train",
            "--config",
            "tiny",
            "--out",
            str(tmp_path / "b"),
            "--quiet",
            "--init-from",
            str(run),
            *SMALL,
            "model.d_model=64",
        ]
    )
    assert code == 2 and "another architecture" in capsys.readouterr().err


def test_existing_run_needs_resume(tmp_path, capsys):
    run = tmp_path / "r"
    train(small("max_steps=2", "eval_interval=0"), run, quiet=True)
    assert (
        cli(["train", "--config", "tiny", "--out", str(run), "--quiet", *SMALL, "max_steps=2"]) == 2
    )
    assert "--resume" in capsys.readouterr().err


def test_eval_cli_prints_per_depth_json(tmp_path, capsys):
    run = tmp_path / "r"
    train(small("max_steps=3", "eval_interval=0"), run, quiet=True)
    capsys.readouterr()
    assert cli(["eval", "--run", str(run), "--depths", "1-3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["depths"] == [1, 2, 3] and set(out["token_nll"]) == {"1", "2", "3"}
    assert all(out["recall"][k]["bits_per_person"] >= 0 for k in ("1", "2", "3"))


def _torchrun(out: Path, mode: str) -> list[dict]:
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        str(ROOT / "tests" / "ddp_worker.py"), str(out), mode,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [torch.load(out / f"rank{r}.pt") for r in (0, 1)]


@pytest.mark.slow
def test_two_gloo_ranks_agree_ddp_and_fsdp2_match(tmp_path):
    """DDP: both ranks run the same depths and end with identical weights, which are the ones
    saved. FSDP2: the same depths, and the gathered weights match DDP's (same global batch)."""
    ddp = _torchrun(tmp_path / "ddp", "ddp")
    assert ddp[0]["depths"] == ddp[1]["depths"] and len(set(ddp[0]["depths"])) > 1
    for k in ddp[0]["weights"]:
        assert torch.equal(ddp[0]["weights"][k], ddp[1]["weights"][k]), k
    saved = weights(tmp_path / "ddp" / "run")
    assert all(torch.equal(saved[k], ddp[0]["weights"][k]) for k in saved)

    fsdp = _torchrun(tmp_path / "fsdp", "fsdp")
    assert fsdp[0]["depths"] == fsdp[1]["depths"] == ddp[0]["depths"]
    sharded = weights(tmp_path / "fsdp" / "run")
    assert sharded.keys() == saved.keys()
    for k in saved:
        torch.testing.assert_close(sharded[k], saved[k], rtol=1e-4, atol=1e-5, msg=k)


@pytest.mark.slow
def test_ddp_with_a_prelude_that_truncated_backprop_leaves_without_gradient(tmp_path):
    """bptt=1, injection none, one prelude layer: at depth > 1 the prelude and the untied
    embedding get no gradient; DDP fails at the next reduction unless it looks for unused
    parameters, which runtime.distributed.may_leave_unused asks for."""
    ranks = _torchrun(tmp_path / "bptt", "bptt")
    assert ranks[0]["depths"] == ranks[1]["depths"] and max(ranks[0]["depths"]) > 1
    for k in ranks[0]["weights"]:
        assert torch.equal(ranks[0]["weights"][k], ranks[1]["weights"][k]), k


def test_tensorboard_without_the_package_is_one_clear_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if not installed
    code = cli(
        [
            "train",
            "--config",
            "tiny",
            "--out",
            str(tmp_path / "r"),
            "--quiet",
            *SMALL,
            "max_steps=2",
            "tensorboard=true",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "pip install -e '.[tensorboard]'" in err


def test_resume_of_a_finished_run_changes_nothing(tmp_path):
    run = tmp_path / "r"
    first = train(small("max_steps=3", "eval_interval=0"), run, quiet=True)
    lines = (run / "metrics.jsonl").read_text()
    again = train(small("max_steps=3", "eval_interval=0"), run, quiet=True, resume=True)
    assert again == json.loads(json.dumps(first)) and (run / "metrics.jsonl").read_text() == lines


def test_branch_from_beyond_the_end_is_refused(tmp_path):
    parent = tmp_path / "p"
    train(
        small("max_steps=8", "schedule=fixed:4", "optim.lr_schedule=wsd", "eval_interval=0"),
        parent,
        quiet=True,
        save_steps=(6,),
    )
    with pytest.raises(ValueError, match="past this run"):
        train(
            small("max_steps=4", "schedule=fixed:4", "optim.lr_schedule=wsd"),
            tmp_path / "c",
            quiet=True,
            branch_from=str(parent / "checkpoints" / "step_0000006"),
        )


def test_crash_between_the_renames_of_a_resave_recovers_the_old_checkpoint(tmp_path):
    run = tmp_path / "r"
    train(small("max_steps=2", "eval_interval=0"), run, quiet=True)
    root = run / "checkpoints"
    (root / "step_0000002").rename(root / ".old-step_0000002")  # as if killed mid re-save
    assert [s for s, _ in ckpt_lib.list_checkpoints(run)] == [2]
    assert not list(root.glob(".old-*"))


def test_logged_gradient_norm_is_the_pre_clip_norm_of_the_first_step(tmp_path):
    """metrics.jsonl's grad_norm at step 1 is exactly the norm of the gradient that the initial
    model gets on step 0's batch at step 0's depth, before clipping (clip far below it)."""
    from looped.data.batching import build_source, train_generator
    from looped.model import LoopedTransformer

    cfg = small("max_steps=2", "eval_interval=0", "optim.grad_clip=1e-3", "schedule=uniform:1-4")
    train(cfg, tmp_path / "r", quiet=True)
    rows = records(tmp_path / "r")
    assert all(r["grad_norm"] > 1e-3 for r in rows)  # logged before clipping
    run_cfg = load_config(str(tmp_path / "r" / "config.yaml"))
    torch.manual_seed(run_cfg.seed)
    model = LoopedTransformer(run_cfg.model)
    source = build_source(run_cfg.data)
    gen = train_generator(run_cfg.seed, 0, 0, 0, run_cfg.grad_accum, run_cfg.global_batch)
    x, y = source.train.sample_batch(run_cfg.batch_size, run_cfg.seq_len, gen)
    _, loss = model(x, depth=rows[0]["depth"], targets=y)
    loss.backward()
    norm = torch.sqrt(
        sum((p.grad.double() ** 2).sum() for p in model.parameters() if p.grad is not None)
    )
    assert rows[0]["grad_norm"] == pytest.approx(float(norm), rel=1e-5)


def test_depth_per_micro_batch_draws_each_micro_batch_its_own_depth(tmp_path):
    """With depth_per_micro, micro-batch m of step s trains at schedule.depth(s, T, micro=m), the
    record lists them, and the modeled FLOPs add up micro-batch by micro-batch."""
    cfg = small("max_steps=6", "eval_interval=0", "grad_accum=3", "depth_per_micro=true",
                "schedule=uniform:1-4")  # fmt: skip
    train(cfg, tmp_path / "r", quiet=True)
    rows = records(tmp_path / "r")
    sched = parse_schedule(cfg.schedule, cfg.seed)
    assert [r["depths"] for r in rows] == [
        [sched.depth(s, 6, micro=m) for m in range(3)] for s in range(6)
    ]
    assert [r["depth"] for r in rows] == [sched.depth(s, 6) for s in range(6)]
    assert any(len(set(r["depths"])) > 1 for r in rows)  # not one K per step in disguise
    run_cfg = load_config(str(tmp_path / "r" / "config.yaml"))
    spent = 0.0
    for r in rows:
        spent += sum(flops_per_token(run_cfg.model, k, 64) * 4 * 64 for k in r["depths"])
        assert r["flops"] == pytest.approx(spent, rel=1e-12)
