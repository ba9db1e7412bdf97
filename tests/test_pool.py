"""The worker pool: a sweep run whose loss diverges is a result (its children too), not a crash;
any other run's divergence still stops everything with one line."""

from dataclasses import replace
from pathlib import Path

import pytest

from looped.demo import QUICK, collect, plan
from looped.errors import UserError
from looped.pool import RunSpec, diverged, execute


def _pair(lr: float) -> tuple[list[RunSpec], dict]:
    """Fixed K=4 at the full budget and the fixed-first run that branches off it, at `lr`."""
    settings = replace(QUICK, seeds=1, lr=dict.fromkeys(QUICK.lr, lr), probe=False)
    specs, configs = plan(settings)
    keep = [s for s in specs if s.budget == 1.0 and s.schedule in ("fixed:4",) or
            (s.parent and s.budget == 1.0 and s.schedule.startswith("fixed-first"))]  # fmt: skip
    for s in keep:
        s.save_steps = [x for x in s.save_steps if any(k.branch_step == x for k in keep)]
    return keep, {s.name: configs[s.name] for s in keep}


def test_a_diverged_sweep_run_and_its_children_are_results(tmp_path: Path):
    specs, configs = _pair(1e4)  # far too high: the loss leaves the finite numbers at once
    assert [s.parent is not None for s in specs] == [False, True]
    for s in specs:
        s.may_diverge = True
    assert execute(specs, configs, tmp_path, 1, fresh=False, quiet=True) == 2
    assert all(diverged(tmp_path / s.name) for s in specs)
    assert collect(specs, tmp_path, configs) == []  # no numbers from them
    # a second time nothing is retrained: a diverged sweep run is a finished result
    assert execute(specs, configs, tmp_path, 1, fresh=False, quiet=True) == 0


def test_a_diverged_grid_run_still_stops_with_one_line(tmp_path: Path):
    specs, configs = _pair(1e4)
    with pytest.raises(UserError, match="loss became"):
        execute(specs[:1], configs, tmp_path, 1, fresh=False, quiet=True)


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc (Linux)")
def test_workers_stop_when_the_demo_is_killed(tmp_path: Path):
    """A killed `looped demo` must not leave workers training on as orphans, holding the cores
    (and a run directory) that the next demo needs."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = f"""
from dataclasses import replace
from pathlib import Path
from looped.demo import QUICK, plan
from looped.pool import execute
specs, configs = plan(replace(QUICK, seeds=1, probe=False))
spec = next(s for s in specs if s.parent is None)
spec.save_steps, configs[spec.name].max_steps = [], 100000  # far longer than the test waits
configs[spec.name].budget_frac = 0.0
spec.steps = 100000
execute([spec], configs, Path({str(tmp_path)!r}), 1, fresh=False, quiet=True)
"""
    demo = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.time() + 120
        while not list(tmp_path.glob("*/metrics.jsonl")):  # the worker is training
            assert demo.poll() is None and time.time() < deadline
            time.sleep(0.2)
        workers = _children(demo.pid)
        assert workers
        os.kill(demo.pid, signal.SIGKILL)
        demo.wait()
        deadline = time.time() + 30
        while any(_alive(p) for p in workers) and time.time() < deadline:
            time.sleep(0.2)
        left = [Path(f"/proc/{p}/cmdline").read_bytes()[:200] for p in workers if _alive(p)]
        assert not left
    finally:
        if demo.poll() is None:
            demo.kill()
