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
