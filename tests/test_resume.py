"""A run directory is one run: `--resume` continues the same run or refuses with one line and
writes nothing; the number of processes is part of the check unless `global_batch` makes the
data independent of it."""

from __future__ import annotations

import hashlib

import pytest
import torch

from looped.cli import main as cli
from looped.config import RESUMABLE, differences, flatten, load_config
from looped.data.batching import train_generator
from looped.data.bios import BiosConfig, generate
from looped.runtime import checkpoint as ckpt_lib
from looped.schedule_spec import parse_schedule
from looped.training.lineage import check_branch
from looped.training.trainer import train

torch.set_num_threads(1)
SMALL = ["model.d_model=32", "model.n_head=2", "data.persons=12", "batch_size=4", "seq_len=64",
         "model.seq_len=64", "eval_batches=1", "eval_depths=1-2", "log_interval=1", "threads=1",
         "max_steps=3", "eval_interval=0", "ckpt_interval=2"]  # fmt: skip


def _snapshot(run) -> dict[str, str]:
    """Every file of the run directory and a hash of its bytes: what "nothing written" means."""
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file()
    }


def _set_world_size(run, world: int) -> None:
    """As if the checkpoint had been written by `world` processes under torchrun."""
    ckpt = ckpt_lib.list_checkpoints(run)[-1][1]
    state = torch.load(ckpt / "state.pt", weights_only=True)
    state["world_size"] = world
    torch.save(state, ckpt / "state.pt")


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A run stopped at its step-2 checkpoint (of 3): the final checkpoint and summary removed."""
    import shutil

    run = tmp_path_factory.mktemp("resume") / "r"
    train(load_config("tiny", SMALL), run, quiet=True)
    shutil.rmtree(run / "checkpoints" / "step_0000003")
    (run / "summary.json").unlink()
    return run


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "bios12"
    generate(BiosConfig(n_persons=12)).save(path)
    return path


@pytest.mark.parametrize(
    "override, said",
    [
        ("seed=1", "seed=0, this config says seed=1"),
        ("optim.lr=1e-4", "optim.lr=0.003, this config says optim.lr=0.0001"),
        ("schedule=fixed:2", "schedule=fixed-first:k=4,frac=0.8,then=uniform:1-16, this config"),
        ("model.d_model=64", "model.d_model=32, this config says model.d_model=64"),
        ("data.path=CORPUS", "data.path=, this config says data.path="),
        ("dtype=bf16", "dtype=fp32, this config says dtype=bf16"),
        ("eval_depths=1-3", "eval_depths=1-2, this config says eval_depths=1-3"),
        ("WORLD", "world_size=2, this config says world_size=1"),
    ],
)
def test_resume_with_a_changed_field_exits_2_with_one_line_and_writes_nothing(
    stopped_run, corpus, capsys, override, said
):
    before = _snapshot(stopped_run)
    extra = [override.replace("CORPUS", str(corpus))]
    if override == "WORLD":
        _set_world_size(stopped_run, 2)
        before, extra = _snapshot(stopped_run), []
    try:
        argv = ["train", "--config", "tiny", "--out", str(stopped_run), "--quiet", "--resume"]
        code = cli([*argv, *SMALL, *extra])
        after = _snapshot(stopped_run)
    finally:
        if override == "WORLD":
            _set_world_size(stopped_run, 1)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"cannot resume {stopped_run}: it was trained with {said}" in err
    assert "resume with the same config" in err
    assert after == before
    if override == "WORLD":
        assert "on 2 processes" in err


def test_the_error_counts_the_other_differences(stopped_run, capsys):
    argv = ["train", "--config", "tiny", "--out", str(stopped_run), "--quiet", "--resume"]
    assert cli([*argv, *SMALL, "optim.lr=1e-4", "seed=1"]) == 2
    assert "(and 1 more: seed 0 -> 1)" in capsys.readouterr().err


def test_resume_may_change_the_listed_fields_only(tmp_path, stopped_run):
    # a copy, so the other tests keep their stopped run
    import shutil

    run = tmp_path / "r"
    shutil.copytree(stopped_run, run)
    allowed = ["eval_interval=1", "log_interval=2", "keep_last=3", "ckpt_interval=1", "threads=2"]
    summary = train(load_config("tiny", [*SMALL, *allowed]), run, quiet=True, resume=True)
    assert summary["steps"] == 3
    # every listed name is a real field, and nothing else is exempt
    base = load_config("tiny", SMALL)
    assert set(RESUMABLE) <= set(flatten(base))
    changed = load_config("tiny", [*SMALL, *allowed, "seed=3"])
    assert [k for k, _, _ in differences(base, changed)] == ["seed"]


def test_a_step_draws_the_same_sequences_on_one_process_or_two():
    """With global_batch, the union over ranks of a step's micro-batches does not depend on the
    world size (global 8 = 1 process x 4 micro-batches of 2 = 2 processes x 2 micro-batches);
    without it, rank 1 draws batches no single process draws."""
    tokens = torch.arange(1000)

    def draw(world: int, accum: int, global_batch: int) -> list[list[int]]:
        rows = []
        for rank in range(world):
            for micro in range(accum):
                g = train_generator(7, 5, micro, rank, accum, global_batch)
                starts = torch.randint(0, 900, (2,), generator=g)
                rows += [tokens[s : s + 4].tolist() for s in starts.tolist()]
        return sorted(rows)

    assert draw(1, 4, 8) == draw(2, 2, 8) == draw(4, 1, 8)
    assert draw(1, 4, 0) != draw(2, 2, 0)
    # one process draws what it always drew: (seed, step, micro, rank=0)
    from looped.data.batching import batch_generator

    a = torch.randint(0, 99, (3,), generator=train_generator(7, 5, 2, 0, 4, 8))
    b = torch.randint(0, 99, (3,), generator=batch_generator(7, 5, 2, 0))
    assert torch.equal(a, b)


BRANCH = [*SMALL, "schedule=fixed:4", "optim.lr_schedule=wsd", "optim.warmup_steps=1"]


@pytest.fixture(scope="module")
def parent_ckpt(tmp_path_factory):
    """A 10-step fixed:4 run (global_batch 8 on one process: 2 micro-batches) and its step-4
    checkpoint, the branch point of the tests below."""
    parent = tmp_path_factory.mktemp("branch") / "p"
    cfg = load_config("tiny", [*BRANCH, "global_batch=8", "max_steps=10"])
    train(cfg, parent, quiet=True, save_steps=(4,))
    ckpt = parent / "checkpoints" / "step_0000004"
    return ckpt, ckpt_lib.load_state(ckpt)


def test_branch_on_another_world_size_needs_global_batch(parent_ckpt):
    ckpt, state = parent_ckpt
    state = {**state, "world_size": 2}  # as if trained on 2 processes
    child = load_config("tiny", [*BRANCH, "global_batch=8", "max_steps=8"])
    child.grad_accum = 2  # what resolve_batch sets on one process (1 on two)
    check_branch(child, _schedule(child), 8, ckpt, state, world=1)  # same data: allowed
    child = load_config("tiny", [*BRANCH, "max_steps=8"])  # no global_batch: other batches
    with pytest.raises(ValueError) as err:
        check_branch(child, _schedule(child), 8, ckpt, state, world=1)
    msg = str(err.value)
    assert "global_batch 8 -> 0" in msg and "world_size 2 -> 1" in msg
    assert "branch on 2 processes, or set global_batch in both runs" in msg


@pytest.mark.parametrize(
    "overrides, said, fix",
    [
        (  # the peak LR: every LR before the branch step differs
            ["optim.lr=1e-3"],
            "optim.lr=0.003, this config says optim.lr=0.001;",
            "use --init-from",
        ),
        (  # another model: each differing field is named, the first in full
            ["model.n_block=2", "model.max_depth=8", "seed=1"],
            "model.n_block=1, this config says model.n_block=2 (and 2 more: "
            "model.max_depth 16 -> 8, seed 0 -> 1);",
            "use --init-from",
        ),
        (  # another depth before the branch step: the first such step and both depths
            ["schedule=fixed:2"],
            "K(step 0)=4, this config says K(step 0)=2;",
            "branch from a checkpoint at or before step 0",
        ),
        (  # a run so short that its WSD decay starts before the branch step
            ["max_steps=4"],
            "lr(step 3)=0.003, this config says lr(step 3)=0.000299",
            "branch from a checkpoint at or before step 3",
        ),
    ],
)
def test_a_refused_branch_names_what_differs_and_the_fix(parent_ckpt, overrides, said, fix):
    ckpt, state = parent_ckpt
    child = load_config("tiny", [*BRANCH, "global_batch=8", "max_steps=10", *overrides])
    child.grad_accum = 2  # as resolve_batch sets it on one process
    with pytest.raises(ValueError) as err:
        check_branch(child, _schedule(child), child.max_steps, ckpt, state, world=1)
    msg = str(err.value)
    assert len(msg.splitlines()) == 1
    assert msg.startswith(f"cannot branch from {ckpt}: it was trained with {said}"), msg
    assert fix in msg


def _schedule(cfg):
    return parse_schedule(cfg.schedule, cfg.seed)


def test_a_refused_branch_exits_2_with_one_line_and_writes_nothing(parent_ckpt, tmp_path, capsys):
    ckpt, _ = parent_ckpt
    out = tmp_path / "child"
    argv = ["train", "--config", "tiny", "--out", str(out), "--quiet", "--branch-from", str(ckpt)]
    code = cli([*argv, *BRANCH, "global_batch=8", "max_steps=10", "optim.lr=1e-3", "seed=2"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "optim.lr=0.003, this config says optim.lr=0.001 (and 1 more: seed 0 -> 2)" in err
    assert not out.exists()


@pytest.mark.parametrize("before", [{"wall": 100.0, "train_wall": 90.0}, {}])
def test_a_resumed_runs_seconds_go_on_from_its_checkpoint(tmp_path, stopped_run, before):
    """A run stopped after 100 s (90 training) and resumed reports its whole time, not the last
    sitting's: the summary (the runner's "finished" line) and the train records' seconds that a
    study's wall-clock rows read. A checkpoint written before the clocks were kept starts at 0."""
    import json
    import shutil

    run = tmp_path / "r"
    shutil.copytree(stopped_run, run)
    ckpt = ckpt_lib.list_checkpoints(run)[-1][1]
    state = torch.load(ckpt / "state.pt", weights_only=True)
    for key in ("wall", "train_wall"):
        state.pop(key)
    torch.save(state | before, ckpt / "state.pt")
    train(load_config("tiny", SMALL), run, resume=True, quiet=True)
    summary = json.loads((run / "summary.json").read_text())
    last = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last = [m for m in last if m["kind"] == "train"][-1]
    if before:
        assert 100.0 <= summary["wall"] < 160.0
        assert 90.0 <= last["train_wall"] < last["wall"] < 160.0
    else:
        assert summary["wall"] < 60.0 and last["train_wall"] < 60.0
