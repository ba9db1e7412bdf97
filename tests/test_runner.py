"""The worker pool: a sweep run whose loss diverges is a result (its children too), not a crash;
any other run's divergence still stops everything with one line."""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from looped.errors import UserError
from looped.runtime.checkpoint import checkpoint_dir, list_checkpoints
from looped.studies import runner
from looped.studies.bios import QUICK, collect, plan
from looped.studies.results import diverged
from looped.studies.runner import Planned, execute

pytestmark = pytest.mark.slow  # every test trains runs in worker processes


def _pair(lr: float) -> list[Planned]:
    """Fixed K=4 at the full budget and the fixed-first run that branches off it, at `lr`."""
    settings = replace(QUICK, seeds=1, lr=dict.fromkeys(QUICK.lr, lr), probe=False)
    keep = [s for s in plan(settings).values() if s.budget == 1.0 and s.schedule in ("fixed:4",) or
            (s.parent and s.budget == 1.0 and s.schedule.startswith("fixed-first"))]  # fmt: skip
    for s in keep:
        s.save_steps = [x for x in s.save_steps if any(k.branch_step == x for k in keep)]
    return keep


def test_a_diverged_sweep_run_and_its_children_are_results(tmp_path: Path):
    specs = _pair(1e4)  # far too high: the loss leaves the finite numbers at once
    assert [s.parent is not None for s in specs] == [False, True]
    for s in specs:
        s.may_diverge = True
    assert execute(specs, tmp_path, 1, fresh=False, quiet=True) == 2
    assert all(diverged(tmp_path / s.name) for s in specs)
    assert collect(specs, tmp_path) == []  # no numbers from them
    # a second time nothing is retrained: a diverged sweep run is a finished result
    assert execute(specs, tmp_path, 1, fresh=False, quiet=True) == 0


def test_a_diverged_grid_run_still_stops_with_one_line(tmp_path: Path):
    specs = _pair(1e4)
    with pytest.raises(UserError, match="loss became"):
        execute(specs[:1], tmp_path, 1, fresh=False, quiet=True)


def test_an_interrupted_run_resumes_from_its_checkpoint_and_ends_bitwise_the_same(tmp_path):
    """A study stopped mid-run (a kill, a session's end) goes on from the run's newest checkpoint
    instead of training it again from step 0, and ends where the uninterrupted run ended. A run
    whose children need no checkpoint still leaves them: the pool checkpoints every run every
    tenth of its steps, and its config on disk still counts as the planned one."""
    (root,) = [s for s in _pair(0.01) if s.parent is None]
    root.save_steps = []
    # keep the periodic checkpoint before the last: a kill would have found it the newest
    root.cfg = replace(root.cfg, keep_last=2)
    assert root.cfg.ckpt_interval == 0
    assert execute([root], tmp_path, 1, fresh=False, quiet=True) == 1
    run_dir, last = tmp_path / root.name, checkpoint_dir(tmp_path / root.name, root.steps)
    whole = load_file(last / "model.safetensors")
    # what a kill after a periodic checkpoint leaves: no summary, no final checkpoint
    (run_dir / "summary.json").unlink()
    shutil.rmtree(last)
    (mid, kept_dir), *_ = list_checkpoints(run_dir)[::-1]
    assert 0 < mid < root.steps
    kept = kept_dir.stat().st_mtime_ns
    assert execute([root], tmp_path, 1, fresh=False, quiet=True) == 1
    assert checkpoint_dir(run_dir, mid).stat().st_mtime_ns == kept  # continued, not retrained
    again = load_file(last / "model.safetensors")
    assert again.keys() == whole.keys()
    assert all(torch.equal(again[k], whole[k]) for k in whole)
    assert execute([root], tmp_path, 1, fresh=False, quiet=True) == 0  # finished: reused
    # another config under the same name is not resumed: it trains from step 0
    (run_dir / "summary.json").unlink()
    other = replace(root, cfg=replace(root.cfg, seed=root.cfg.seed + 1))
    assert execute([other], tmp_path, 1, fresh=False, quiet=True) == 1
    assert not checkpoint_dir(run_dir, mid).exists() or (
        checkpoint_dir(run_dir, mid).stat().st_mtime_ns != kept
    )


class _StoppedPool:
    """A pool whose every run comes back as a worker stopped by a signal returns it."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def submit(self, fn, *args) -> Future:
        done = Future()
        done.set_result({"stopped": 3})
        return done

    def shutdown(self, *args, **kwargs) -> None:
        pass


def test_a_run_stopped_by_a_signal_ends_the_study_with_one_line(tmp_path, monkeypatch):
    """Its checkpoint is saved and it is not finished: nothing may branch off it or count it
    done; the study stops and says how to go on."""
    monkeypatch.setattr(runner, "ProcessPoolExecutor", _StoppedPool)
    (root,) = [s for s in _pair(0.01) if s.parent is None]
    with pytest.raises(UserError, match=r"stopped at step 3 .*run the same command again"):
        execute([root], tmp_path, 1, fresh=False, quiet=True)


def _descendants(pid: int) -> set[int]:
    """Every process under `pid`: the workers are children of the pool's fork server, not of
    the demo itself."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
    found, new = set(), {pid}
    while new:
        new = {p for p, parent in parents.items() if parent in new} - found
        found |= new
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _script(out: Path, failing: bool) -> str:
    """A demo in a subprocess: one run far longer than a test waits, and, if `failing`, a second
    run on the other worker whose loss diverges (an error, not a sweep result)."""
    return f"""
import sys
from dataclasses import replace
from pathlib import Path
from looped.studies.bios import QUICK, plan
from looped.errors import UserError
from looped.studies.runner import execute
runs = plan(replace(QUICK, seeds=1, probe=False))
long, bad = [s for s in runs.values() if s.parent is None][:2]
for s in (long, bad):
    s.save_steps = []
long.cfg.budget_frac, long.cfg.max_steps, long.steps = 0.0, 100000, 100000
bad.cfg.optim.lr = 1e4
try:
    execute([long, bad] if {failing} else [long], Path({str(out)!r}), 2, False, True)
except UserError as err:
    print(err)
    sys.exit(2)
"""


def _watch(demo: subprocess.Popen, until: Callable[[], bool], limit: float) -> set[int]:
    """The demo's child processes seen until `until()` holds (asserted within `limit` s)."""
    seen: set[int] = set()
    deadline = time.time() + limit
    while not until():
        assert time.time() < deadline
        seen.update(_descendants(demo.pid))
        time.sleep(0.1)
    return seen


def _reap(workers: set[int], limit: float = 30) -> list[bytes]:
    """Wait up to `limit` s for the workers to end; the command lines of those still alive."""
    deadline = time.time() + limit
    while any(_alive(p) for p in workers) and time.time() < deadline:
        time.sleep(0.2)
    return [Path(f"/proc/{p}/cmdline").read_bytes()[:200] for p in workers if _alive(p)]


def _kill(demo: subprocess.Popen, workers: set[int]) -> None:
    """Never leave a test's worker training on, whatever failed."""
    if demo.poll() is None:
        demo.kill()
    for pid in workers:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc (Linux)")
def test_workers_stop_when_the_demo_is_killed(tmp_path: Path):
    """A killed `looped demo` must not leave workers training on as orphans, holding the cores
    (and a run directory) that the next demo needs."""
    demo = subprocess.Popen([sys.executable, "-c", _script(tmp_path, failing=False)])
    workers: set[int] = set()
    try:  # until the long run is training
        workers = _watch(demo, lambda: bool(list(tmp_path.glob("*/metrics.jsonl"))), 120)
        workers.update(_descendants(demo.pid))
        assert workers
        os.kill(demo.pid, signal.SIGKILL)
        assert not _reap(workers)  # the demo not yet reaped: a zombie whose pid still exists
        demo.wait()
    finally:
        _kill(demo, workers)


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc (Linux)")
def test_a_failed_run_ends_the_demo_without_waiting_for_the_others(tmp_path: Path):
    """One run's error (here a diverged loss) ends the demo with its one line at once, not after
    the other worker's run, and that worker does not train on."""
    demo = subprocess.Popen(
        [sys.executable, "-c", _script(tmp_path, failing=True)], stdout=subprocess.PIPE, text=True
    )
    workers: set[int] = set()
    try:
        workers = _watch(demo, lambda: demo.poll() is not None, 120)
        assert demo.returncode == 2 and "loss became" in demo.stdout.read()
        assert not _reap(workers)
    finally:
        _kill(demo, workers)


def test_a_later_pools_workers_start_where_the_parent_is_now(tmp_path: Path, monkeypatch):
    """The workers fork from a server started with the first pool; a later pool's workers still
    see the parent's directory and environment of that moment, as spawned ones would."""
    first, _ = runner.worker_pool(1)
    with first:
        assert first.submit(os.getcwd).result() == os.getcwd()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOOPED_POOL_PROBE", "here")
    later, _ = runner.worker_pool(1)
    with later:
        assert later.submit(os.getcwd).result() == str(tmp_path)
        assert later.submit(os.getenv, "LOOPED_POOL_PROBE").result() == "here"


def test_after_a_source_edit_the_workers_are_spawned_with_the_new_code(monkeypatch):
    """A notebook kernel lives on while the package is edited: once the sources (or a variable
    torch reads at import) differ from what the fork server imported, pools spawn their
    workers, which import the code as it is now."""
    runner.worker_pool(1)[0].shutdown()  # the first pool fixes what the server imports
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/elsewhere")  # torch.compile sets it itself
    assert runner._pool_context().get_start_method() == "forkserver"
    with monkeypatch.context() as m:
        m.setenv("ATEN_CPU_CAPABILITY", "none")  # read when torch loads: the server has another
        assert runner._pool_context().get_start_method() == "spawn"
    with monkeypatch.context() as m:  # read when the server imports torch._dynamo's config
        m.setenv("TORCHDYNAMO_CACHE_SIZE_LIMIT", "3")
        assert runner._pool_context().get_start_method() == "spawn"
    sources, env = runner._fingerprint()
    monkeypatch.setattr(runner, "_fingerprint", lambda: (sources[1:], env))
    assert runner._pool_context().get_start_method() == "spawn"
