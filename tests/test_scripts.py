"""The GPU launch scripts, exercised on this CPU machine as far as a CPU allows."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_gpu_smoke_exits_cleanly_without_a_gpu():
    proc = subprocess.run(
        ["bash", "scripts/gpu_smoke.sh"], cwd=ROOT, capture_output=True, text=True, env=ENV
    )
    assert proc.returncode == 0 and "no CUDA GPU" in proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_gpu_length_exits_cleanly_without_a_gpu():
    proc = subprocess.run(
        ["bash", "scripts/gpu_length.sh"], cwd=ROOT, capture_output=True, text=True, env=ENV
    )
    assert proc.returncode == 0 and "no CUDA GPU" in proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_gpu_loan_exits_cleanly_without_a_gpu_and_writes_only_under_results(tmp_path):
    """The loan's one command, on a machine without a GPU: one line, exit 0, nothing trained and
    nothing written into the repo (its results go to RESULTS, the device tool's $OUT)."""
    before = subprocess.run(["git", "status", "--short"], cwd=ROOT, capture_output=True, text=True)
    proc = subprocess.run(
        ["bash", "scripts/gpu_loan.sh"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**ENV, "RESULTS": str(tmp_path / "back")},
    )
    said = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and len(said) == 1 and "no CUDA GPU" in said[0]
    after = subprocess.run(["git", "status", "--short"], cwd=ROOT, capture_output=True, text=True)
    assert after.stdout == before.stdout and not any((tmp_path / "back").iterdir())


def test_launch_without_arguments_prints_usage():
    proc = subprocess.run(
        ["bash", "scripts/launch.sh"], cwd=ROOT, capture_output=True, text=True, env=ENV
    )
    assert proc.returncode == 2 and "launch.sh PRESET SCHEDULE OUT" in proc.stdout


@pytest.mark.slow
def test_launch_runs_torchrun_with_the_schedule(tmp_path):
    out = tmp_path / "run"
    args = ["model.d_model=32", "model.n_head=2", "data.persons=8", "batch_size=4", "seq_len=64",
            "model.seq_len=64", "max_steps=3", "log_interval=1", "eval_depths=1-2", "eval_batches=1", "device=cpu"]  # fmt: skip
    proc = subprocess.run(
        ["bash", "scripts/launch.sh", "tiny", "fixed:2", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**ENV, "NPROC": "1"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "saving" in proc.stdout  # the FLOP table printed before the run
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["depth"] for r in rows if r["kind"] == "train"] == [2, 2, 2]


def _side(root: Path, run_id: str, wall: float, weight: float = 1.0) -> Path:
    """A study output directory as a training run leaves it (weights, state, metrics, results)."""
    from safetensors.torch import save_file

    ckpt = root / "runs" / "r" / "checkpoints" / "step_0000002"
    ckpt.mkdir(parents=True)
    w = {"w": torch.full((2, 3), weight)}
    save_file(w, ckpt / "model.safetensors", metadata={"run_id": run_id, "step": "2"})
    state = {"step": 2, "run_id": run_id, "optimizer": {"state": {0: {"exp_avg": w["w"] * 0.5}}}}
    torch.save(state, ckpt / "state.pt")
    (ckpt / "config.yaml").write_text(f"data:\n  path: {root}/corpus\nseed: 0\n")
    (root / "runs" / "r" / "metrics.jsonl").write_text(
        json.dumps({"kind": "train", "step": 2, "loss": 3.5, "wall": wall, "tokens_per_s": 9e3})
        + "\n"
    )
    (root / "demo.json").write_text(json.dumps({"meta": {"wall_seconds": wall}, "nll": [3.5]}))
    return root


def test_same_runs_tells_the_same_runs_from_different_ones(tmp_path: Path):
    """The refactor check: equal when only timing, run ids and the directory differ; a changed
    weight is named, exit 1."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("same_runs", ROOT / "scripts" / "same_runs.py")
    same_runs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(same_runs)
    a = _side(tmp_path / "a", "1f" * 16, wall=1.0)
    b = _side(tmp_path / "b", "2e" * 16, wall=7.0)
    assert same_runs.main([str(a), str(b)]) == 0
    c = _side(tmp_path / "c", "3d" * 16, wall=1.0, weight=1.0 + 2**-20)
    n, problems = same_runs.compare(a, c)
    assert n == 5 and problems == [
        "differs: runs/r/checkpoints/step_0000002/model.safetensors",
        "differs: runs/r/checkpoints/step_0000002/state.pt",
    ]
    assert same_runs.main([str(a), str(c)]) == 1


def test_kernel_paths_finds_the_first_step_whose_loss_parts_bitwise(tmp_path: Path):
    """The first step both runs logged whose losses differ in any bit (not the first step one
    of them logged), none for equal runs; a third level is refused in one line, exit 2."""
    import importlib.util

    path = ROOT / "scripts" / "kernel_paths.py"
    spec = importlib.util.spec_from_file_location("kernel_paths", path)
    kp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kp)
    rows = [{"kind": "train", "step": s, "loss": 2.0} for s in (5, 10, 15)]
    rows += [{"kind": "eval", "step": 10, "loss": 9.0}]
    (tmp_path / "metrics.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n")
    a = kp.train_losses(tmp_path / "metrics.jsonl")
    assert a == {5: 2.0, 10: 2.0, 15: 2.0} and kp.first_difference(a, dict(a)) is None
    b = {10: 2.0, 15: 2.0 + 2**-50, 20: 1.0}
    assert kp.first_difference(a, b) == 15
    assert kp.main(["--levels", "default,avx2,avx512"]) == 2


@pytest.mark.slow
def test_branch_check_finds_a_branched_run_bitwise_equal_to_its_from_scratch_twin(tmp_path):
    """scripts/branch_check.py at toy size, on a small local corpus: the trunk stops at the
    branch point, the branch resumes from it with its own decay, and its weights equal a
    from-scratch run's bit for bit (rc 0); a mismatch would print the difference, rc 1."""
    docs = tmp_path / "docs.jsonl"
    lib = Path(json.__file__).parents[1] / "email"  # ~0.5 MB of source: tokenized in seconds
    lines = [line for p in sorted(lib.glob("*.py")) for line in p.read_text().splitlines()]
    chunks = ["\n".join(lines[i : i + 40]) for i in range(0, len(lines), 40)]  # ~300 documents
    docs.write_text("".join(json.dumps({"text": c}) + "\n" for c in chunks))
    args = [
        "--quick",
        "--steps",
        "8",
        "--trunk",
        "16",
        "--corpus",
        str(docs),
        "--out",
        str(tmp_path / "w"),
    ]
    done = subprocess.run(
        [sys.executable, "scripts/branch_check.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=ENV,
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert "8 steps branched at 6 off 16" in done.stdout and "bitwise equal" in done.stdout
    assert "stopped at step 7" in done.stderr  # the trunk: the branch point and the step a stop
    # request arrives in (the flag is read, and agreed across ranks, within the next step)


@pytest.mark.slow
def test_pool_start_times_both_kinds_of_pool_in_one_run():
    """The script behind USAGE's pool timings: it starts each kind of pool and prints each
    time and their ratio (the ratio itself depends on the machine; no number is asserted)."""
    proc = subprocess.run(
        [sys.executable, "scripts/pool_start.py", "--workers", "1", "--reps", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for label in (
        "spawned pool:",
        "fork-server pool, the first:",
        "fork-server pool, every later:",
    ):
        row = next(line for line in lines if line.startswith(label))
        assert float(row.removeprefix(label).split()[0]) > 0
    assert lines[-1].startswith("spawned / later fork-server:") and lines[-1].endswith("x")
