"""Faults injected, and survived: SIGKILL at named points inside checkpoint saves and metrics
writes (tests/crash_at.py), damaged checkpoint files, a full or read-only disk. Each ends in the
bitwise result of the uninterrupted run, or in one line that names the file and what to do."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from looped.cli import main as cli
from looped.config import load_config
from looped.runtime import checkpoint as ckpt_lib
from looped.training.trainer import train

torch.set_num_threads(1)
SMALL = ["model.d_model=32", "model.n_head=2", "data.persons=12", "batch_size=4", "seq_len=64",
         "model.seq_len=64", "eval_batches=1", "eval_depths=1-2", "log_interval=1", "threads=1"]  # fmt: skip
RUN = [*SMALL, "max_steps=20", "ckpt_interval=5", "keep_last=2", "eval_interval=10"]
CLOCK = {"wall", "train_wall", "tokens_per_s", "mfu", "mem_gb"}  # wall-clock fields


CRASH_AT = str(Path(__file__).parent / "crash_at.py")  # the failpoints, patched in


def _cmd(run: Path, *extra: str, fault: str = "") -> list[str]:
    crash = [CRASH_AT, fault] if fault else ["-m", "looped"]
    return [sys.executable, *crash, "train", "--config", "tiny", "--out", str(run), "--quiet",
            *RUN, *extra]  # fmt: skip


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(ckpt_lib.list_checkpoints(run)[-1][1] / "model.safetensors"))


def _metrics(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in CLOCK} for r in rows]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run every faulted one must reproduce."""
    run = tmp_path_factory.mktemp("faults") / "ref"
    train(load_config("tiny", RUN), run, quiet=True)
    return run


@pytest.mark.slow
def test_sigkill_at_every_failpoint_then_resume_is_bitwise_identical(tmp_path, reference):
    """Killed inside a save (weights written, state not; all written, not renamed), mid metrics
    line, after the final save, and between the two renames of the re-save that follows; each
    time `--resume` goes on, and the end is the uninterrupted run's, bit for bit."""
    run = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    faults = [
        "ckpt.after_weights:10",  # inside the save of step 10: step 5 is the newest complete
        "metrics.mid_line:13",  # half a line of step 13 on disk
        "ckpt.before_rename:15",  # step 15 fully written in .tmp-*, not renamed
        "ckpt.after_save:20",  # step 20 saved, no final evaluation or summary
        "atomic.between_renames",  # the resume re-saves step 20: killed between the renames
    ]
    for i, fault in enumerate(faults):
        resume = ["--resume"] if i else []
        proc = subprocess.run(
            _cmd(run, *resume, fault=fault), env=env, capture_output=True, text=True
        )
        assert proc.returncode == -9, (fault, proc.stderr[-2000:])
    assert (run / "checkpoints" / ".old-step_0000020").is_dir()  # the last kill's mark
    assert cli(["train", "--config", "tiny", "--out", str(run), "--quiet", "--resume", *RUN]) == 0

    a, b = _weights(reference), _weights(run)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert _metrics(run) == _metrics(reference)
    summary = {k: v for k, v in json.loads((run / "summary.json").read_text()).items()}
    expected = json.loads((reference / "summary.json").read_text())
    assert {**summary, "wall": 0} == {**expected, "wall": 0}
    assert [s for s, _ in ckpt_lib.list_checkpoints(run)] == [15, 20]
    assert not [p.name for p in (run / "checkpoints").iterdir() if p.name.startswith(".")]


def _damage(ckpt: Path, how: str, other: Path) -> str:
    """Damage checkpoint `ckpt` as `how` says; returns the file the error must name."""
    if how == "truncated":
        data = (ckpt / "model.safetensors").read_bytes()
        (ckpt / "model.safetensors").write_bytes(data[: len(data) // 2])
        return "model.safetensors"
    if how == "garbage":
        (ckpt / "model.safetensors").write_bytes(b"not safetensors at all\n" * 100)
        return "model.safetensors"
    if how == "missing":
        (ckpt / "config.yaml").unlink()
        return "config.yaml"
    # foreign: another run's state, even relabelled with this checkpoint's step
    state = torch.load(other / "checkpoints" / "step_0000010" / "state.pt", weights_only=True)
    torch.save({**state, "step": int(ckpt.name.split("_")[1])}, ckpt / "state.pt")
    return "state.pt"


@pytest.fixture(scope="module")
def other_run(tmp_path_factory) -> Path:
    """Another run with the same config: its state.pt fits the shapes, not the run."""
    run = tmp_path_factory.mktemp("faults") / "other"
    train(load_config("tiny", [*RUN, "max_steps=10", "keep_last=3"]), run, quiet=True)
    return run


@pytest.mark.parametrize("how", ["truncated", "garbage", "missing", "foreign"])
def test_a_damaged_checkpoint_is_named_and_resume_falls_back_to_the_previous_one(
    tmp_path, capsys, reference, other_run, how
):
    run = tmp_path / "r"
    shutil.copytree(reference, run)
    (run / "summary.json").unlink()  # as if killed after saving the last checkpoint
    newest = run / "checkpoints" / "step_0000020"
    name = _damage(newest, how, other_run)

    # naming it explicitly: one line with the file and the previous complete checkpoint
    argv = ["train", "--config", "tiny", "--out", str(tmp_path / "b"), "--quiet", *RUN]
    assert cli([*argv, "--branch-from", str(newest)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert (
        f"checkpoint file {newest / name}" in err
        and str(run / "checkpoints" / "step_0000015") in err
    )
    assert not (tmp_path / "b").exists()

    # --resume: a warning line, then the run goes on from step 15 to the same end, bitwise
    assert cli(["train", "--config", "tiny", "--out", str(run), "--quiet", "--resume", *RUN]) == 0
    err = capsys.readouterr().err
    assert f"warning: checkpoint file {newest / name}" in err
    a, b = _weights(reference), _weights(run)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert _metrics(run) == _metrics(reference)


def _in_tmpfs(tmp_path: Path, size: str, script: str) -> subprocess.CompletedProcess:
    """Run `script` (sh) with a tmpfs of `size` mounted at tmp_path/mnt, in a private mount
    namespace (unshare -rm: no privileges needed); skip where that cannot be made."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {mnt} && echo ok"],
        capture_output=True, text=True,
    )  # fmt: skip
    if shutil.which("unshare") is None or probe.stdout.strip() != "ok":
        pytest.skip(f"cannot mount a private tmpfs here (unshare -rm): {probe.stderr.strip()}")
    full = f"mount -t tmpfs -o size={size} tmpfs {mnt} && {script}"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", full], capture_output=True, text=True, env=env
    )


def _cmd_line(run: Path, *extra: str) -> str:
    return " ".join(f"'{a}'" for a in _cmd(run, *extra))


@pytest.mark.slow
def test_a_full_disk_stops_with_one_line_and_keeps_the_previous_checkpoint(tmp_path):
    """A 1 MB tmpfs holds two checkpoints (400 kB each), not three: the third save fails."""
    run, kept = tmp_path / "mnt" / "run", tmp_path / "kept"
    script = f"{_cmd_line(run, 'ckpt_interval=1', 'keep_last=5')}; echo rc=$?; cp -a {run} {kept}"
    proc = _in_tmpfs(tmp_path, "1m", script)
    err = proc.stderr.strip()
    assert "rc=2" in proc.stdout, (proc.stdout, err[-2000:])
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "No space left on device" in err and "--resume" in err
    done = ckpt_lib.list_checkpoints(kept)
    assert done and f"{done[-1][1]}".replace(str(kept), str(run)) in err  # names the intact one
    ckpt_lib.load_state(done[-1][1])  # whole and consistent
    from looped.eval.evaluate import load_model

    load_model(done[-1][1])
    assert not list((kept / "checkpoints").glob(".tmp-*"))


@pytest.mark.slow
def test_a_read_only_run_directory_is_one_line_and_writes_nothing(tmp_path):
    run = tmp_path / "mnt" / "run"
    proc = _in_tmpfs(tmp_path, "64k", f"mount -o remount,ro {tmp_path / 'mnt'} && {_cmd_line(run)}")
    err = proc.stderr.strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"cannot write {run}: Read-only file system" in err


class _CreatesAFile:
    """Unpickling this creates a file: what a checkpoint from a stranger can do to a loader that
    runs its pickle (`os.system` would do anything else the same way)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _plant(state_pt: Path, marker: Path, how: str) -> None:
    """Replace a state.pt by one that keeps every field but also creates `marker` when loaded."""
    state = torch.load(state_pt, weights_only=True)
    payload = {**state, "note": _CreatesAFile(marker)}
    if how == "torch.save":
        torch.save(payload, state_pt)
    else:  # a raw pickle in the newest protocol: opcodes torch.save never writes
        import pickle

        state_pt.write_bytes(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))


def test_the_planted_state_file_is_live_code(tmp_path, reference):
    """The payload the next test plants does run under a loader that trusts pickles."""
    state_pt, marker = tmp_path / "state.pt", tmp_path / "created"
    shutil.copy(reference / "checkpoints" / "step_0000020" / "state.pt", state_pt)
    _plant(state_pt, marker, "torch.save")
    torch.load(state_pt, weights_only=False)
    assert marker.exists()


@pytest.mark.parametrize("how", ["torch.save", "pickle"])
@pytest.mark.parametrize("flag", ["--resume", "--branch-from", "--init-from"])
def test_a_state_file_that_would_run_code_is_refused_and_nothing_runs(
    tmp_path, capsys, reference, flag, how
):
    """A checkpoint is data: a state.pt whose pickle would create a file is refused with one
    line naming it, on every path that loads a checkpoint; the file is never created, the run
    directory is left as it was, and `--resume` does not fall back past it."""
    run, marker = tmp_path / "r", tmp_path / "created-by-the-checkpoint"
    shutil.copytree(reference, run)
    (run / "summary.json").unlink()  # as if stopped after its last checkpoint
    newest = run / "checkpoints" / "step_0000020"
    _plant(newest / "state.pt", marker, how)
    before = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}

    out = run if flag == "--resume" else tmp_path / "b"
    argv = ["train", "--config", "tiny", "--out", str(out), "--quiet", *RUN]
    assert cli([*argv, *([flag] if flag == "--resume" else [flag, str(newest)])]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"checkpoint file {newest / 'state.pt'} is refused, nothing in it was run" in err
    if how == "torch.save":
        assert "loading it would call" in err and "open" in err
    assert not marker.exists()
    assert {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()} == before
    assert not (tmp_path / "b").exists()


def test_a_config_file_that_would_run_code_is_refused(tmp_path, reference):
    """YAML from a run directory goes through a safe loader: a python tag is an error naming
    the file, never a call."""
    from looped.eval.evaluate import load_model

    ckpt, marker = tmp_path / "ckpt", tmp_path / "created-by-the-config"
    shutil.copytree(reference / "checkpoints" / "step_0000020", ckpt)
    (ckpt / "config.yaml").write_text(f'!!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(ValueError, match=f"config file {ckpt / 'config.yaml'} is not valid YAML"):
        load_model(ckpt)
    assert not marker.exists()
