"""A run directory has one writer: a second `looped train` (or demo, diagnose, pool run)
into a directory another live process writes is refused with one line naming the holder, before
it writes anything; a lock left by a process that died is taken over, with a line that says so."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from looped.cli import main as cli
from looped.config import load_config
from looped.runtime import checkpoint as ckpt_lib
from looped.runtime.lock import LOCK_NAME, DirectoryLocked, Holder, dir_lock
from looped.training.trainer import train

torch.set_num_threads(1)
SMALL = ["model.d_model=32", "model.n_head=2", "data.persons=12", "batch_size=4", "seq_len=64",
         "model.seq_len=64", "eval_batches=1", "eval_depths=1-2", "log_interval=1", "threads=1"]  # fmt: skip
RUN = [*SMALL, "max_steps=20", "ckpt_interval=5", "keep_last=2", "eval_interval=10"]
CLOCK = {"wall", "train_wall", "tokens_per_s", "mfu", "mem_gb"}  # wall-clock fields
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _train_cmd(run: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "looped", "train", "--config", "tiny", "--out", str(run),
            "--quiet", *RUN, *extra]  # fmt: skip


def _snapshot(root: Path) -> dict[str, str]:
    """Every file under `root` and a hash of its bytes: what "wrote nothing" means."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _wait_for(what: Callable[[], bool], proc: subprocess.Popen, limit: float = 120) -> None:
    deadline = time.time() + limit
    while not what():
        assert proc.poll() is None, f"exited {proc.returncode} first"
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def holder_of(directory: Path) -> Holder | None:
    """The holder `directory`'s lock file names (live or dead), None while it names none."""
    try:
        return Holder(**json.loads((directory / LOCK_NAME).read_text()))
    except (OSError, ValueError):
        return None


def _holds(directory: Path, proc: subprocess.Popen) -> Callable[[], bool]:
    def held() -> bool:
        holder = holder_of(directory)
        return holder is not None and holder.pid == proc.pid

    return held


def _same_run(a: Path, b: Path) -> None:
    """`a` and `b` hold the same run: the same files, and in each the same bytes, except the
    run's random id (in the weights' metadata and the state) and wall-clock times."""
    assert _snapshot(a).keys() == _snapshot(b).keys()
    assert (a / "config.yaml").read_bytes() == (b / "config.yaml").read_bytes()
    for (step_a, ckpt_a), (step_b, ckpt_b) in zip(
        ckpt_lib.list_checkpoints(a), ckpt_lib.list_checkpoints(b), strict=True
    ):
        assert step_a == step_b
        assert (ckpt_a / "config.yaml").read_bytes() == (ckpt_b / "config.yaml").read_bytes()
        with safe_open(str(ckpt_a / "model.safetensors"), "pt") as fa:
            with safe_open(str(ckpt_b / "model.safetensors"), "pt") as fb:
                assert {**fa.metadata(), "run_id": ""} == {**fb.metadata(), "run_id": ""}
                assert list(fa.keys()) == list(fb.keys())
                assert all(torch.equal(fa.get_tensor(k), fb.get_tensor(k)) for k in fa.keys())
        sa, sb = ckpt_lib.load_state(ckpt_a), ckpt_lib.load_state(ckpt_b)
        sa, sb = ({k: v for k, v in s.items() if k not in CLOCK} for s in (sa, sb))
        assert _plain({**sa, "run_id": ""}) == _plain({**sb, "run_id": ""})

    def metrics(run: Path) -> list[dict]:
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k not in CLOCK} for r in rows]

    assert metrics(a) == metrics(b)
    summary = [json.loads((run / "summary.json").read_text()) | {"wall": 0} for run in (a, b)]
    assert summary[0] == summary[1]


def _plain(value):
    """Tensors as (dtype, shape, bytes), so nested states compare bitwise with ==."""
    if isinstance(value, torch.Tensor):
        return (str(value.dtype), tuple(value.shape), value.numpy().tobytes())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return "nan" if isinstance(value, float) and value != value else value


@pytest.fixture(scope="module")
def lone(tmp_path_factory) -> Path:
    """The run as it ends when nothing else writes its directory."""
    run = tmp_path_factory.mktemp("lock") / "lone"
    train(load_config("tiny", RUN), run, quiet=True)
    return run


@pytest.mark.slow
def test_a_second_train_into_a_run_directory_is_refused_and_the_first_is_a_lone_run(tmp_path, lone):
    """The first writer is paused (SIGSTOP) while holding the lock, so the second certainly
    starts while it runs; the second (another seed) exits 2 with one line naming the directory
    and the holder, and writes nothing; the first then ends exactly as the lone run."""
    run = tmp_path / "a"
    first = subprocess.Popen(_train_cmd(run), env=ENV, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(_holds(run, first), first)
        os.kill(first.pid, signal.SIGSTOP)
        before = _snapshot(run)
        second = subprocess.run(
            _train_cmd(run, "seed=1"), env=ENV, capture_output=True, text=True, timeout=300
        )
        assert _snapshot(run) == before  # the second wrote nothing
        os.kill(first.pid, signal.SIGCONT)
        assert first.wait(timeout=300) == 0, first.stderr.read()[-2000:]
    finally:
        with suppress(OSError):
            os.kill(first.pid, signal.SIGKILL)
    err = second.stderr.strip()
    assert second.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert (
        f"looped train: error: {run} is being written by another command: PID {first.pid} on "
        f"{socket.gethostname()} (looped train, started " in err
    )
    assert not (run / LOCK_NAME).exists()  # released on a clean exit
    _same_run(run, lone)


@pytest.mark.slow
def test_a_lock_left_by_a_killed_holder_is_taken_over_and_the_resume_is_bitwise(
    tmp_path, lone, capsys
):
    """SIGKILL inside a checkpoint save (a failpoint) leaves the lock file naming the dead
    holder; `--resume` takes it over with a warning line and ends where the lone run ends."""
    run = tmp_path / "run"
    crash = [sys.executable, str(Path(__file__).parent / "crash_at.py"), "ckpt.before_rename:10"]
    killed = subprocess.run(crash + _train_cmd(run)[3:], env=ENV, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr[-2000:]
    dead = holder_of(run)
    assert dead is not None and dead.command == "looped train"

    assert cli(["train", "--config", "tiny", "--out", str(run), "--quiet", "--resume", *RUN]) == 0
    err = capsys.readouterr().err
    assert (
        f"looped train: warning: took over a stale lock on {run} left by PID {dead.pid} on "
        f"{dead.host} (looped train, started {dead.started}), which is gone" in err
    )
    assert not (run / LOCK_NAME).exists()
    _same_run(run, lone)


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups (POSIX)")
@pytest.mark.slow
def test_a_second_quick_demo_into_one_directory_is_refused(tmp_path):
    """The first demo and its workers are paused (SIGSTOP to its process group) once it holds
    the output directory; a second `looped demo --quick` there exits 2 naming it and writes
    nothing; then the first is killed with its workers (its lock dies with it)."""
    out = tmp_path / "demo"
    cmd = [sys.executable, "-m", "looped", "demo", "--quick", "--quiet", "--out", str(out)]
    first = subprocess.Popen(
        cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        _wait_for(_holds(out, first), first)
        os.killpg(first.pid, signal.SIGSTOP)
        before = _snapshot(out)
        second = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
        assert _snapshot(out) == before
    finally:
        with suppress(OSError):
            os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    err = second.stderr.strip()
    assert second.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"looped demo: error: {out} is being written by another command: PID {first.pid}" in err
    assert "(looped demo, started " in err


def test_every_writer_takes_the_lock_before_writing(tmp_path):
    """train, mark_diverged (the pool's other write), and the demo and diagnose
    output directories: each refuses a directory another writer holds, before any write."""
    from looped.studies.bios import QUICK as DEMO
    from looped.studies.demo import run_demo
    from looped.studies.diagnose import QUICK as DIAGNOSE
    from looped.studies.diagnose import run_diagnose
    from looped.studies.runner import mark_diverged

    out = tmp_path / "out"
    cfg = load_config("tiny", RUN)
    writers = {
        "train": lambda: train(cfg, out, quiet=True),
        "pool": lambda: mark_diverged(out, cfg, "why"),
        "demo": lambda: run_demo(DEMO, out, out / "figures", quiet=True),
        "diagnose": lambda: run_diagnose(DIAGNOSE, out, out / "d.json", out / "figures"),
    }
    with dir_lock(out, "the test"):  # another open file: flock refuses it even in this process
        before = _snapshot(out)
        for name, write in writers.items():
            with pytest.raises(DirectoryLocked, match=f"{out} is being written by another command: "
                               f"PID {os.getpid()} on .* \\(the test, started "):  # fmt: skip
                write()
            assert _snapshot(out) == before, name
    assert not out.exists()  # the lock made the directory, and nothing else was written there


def test_a_refused_run_leaves_no_directory_and_a_clean_exit_no_lock(tmp_path):
    run = tmp_path / "new" / "run"
    with pytest.raises(ValueError, match="does not exist"):  # refused after taking the lock
        train(load_config("tiny", RUN), run, quiet=True, init_from=str(tmp_path / "nothing"))
    assert not (tmp_path / "new").exists()  # the directories the lock made are removed again
    with dir_lock(run) as stale:
        holder = holder_of(run)
        assert stale is None and holder is not None
        assert (holder.pid, holder.host, holder.command) == (
            os.getpid(),
            socket.gethostname(),
            "looped",
        )
        (run / "kept").write_text("x")
    assert sorted(p.name for p in run.iterdir()) == ["kept"]  # no .lock after a clean exit


def test_a_stale_lock_from_another_host_is_taken_over_with_a_warning(tmp_path, capsys):
    """Where locks are not shared between hosts (NFS mounted without locking) a live holder on
    another host looks like a dead one: the line says so."""
    run = tmp_path / "run"
    run.mkdir()
    other = Holder(4242, "elsewhere", "2026-01-01 00:00:00 UTC", "looped train")
    (run / LOCK_NAME).write_text(json.dumps(other.__dict__))
    with dir_lock(run, "looped train") as stale:
        assert stale == other and holder_of(run).pid == os.getpid()
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert f"took over a stale lock on {run} left by PID 4242 on elsewhere" in err
    assert "does not share locks between hosts" in err
