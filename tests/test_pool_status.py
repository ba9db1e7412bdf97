"""What a study in a log file says about how far it is: runs done, the share of the modeled work
and the time left, counting only the work this sitting has to do."""

import queue
from dataclasses import replace
from pathlib import Path

import pytest

from looped.runtime.checkpoint import checkpoint_dir
from looped.studies import runner
from looped.studies.bios import QUICK, plan


def _pair() -> tuple[runner.Planned, runner.Planned]:
    """Fixed K=4 and the fixed-first run that branches off it (planned, not trained)."""
    specs = plan(replace(QUICK, seeds=1, probe=False)).values()
    root = next(s for s in specs if s.schedule == "fixed:4" and s.budget == 1.0)
    child = next(s for s in specs if s.parent == root.name)
    return root, child


def _bars(
    tmp_path: Path, resumed_at: int = 0
) -> tuple[runner._Bars, runner.Planned, runner.Planned]:
    root, child = _pair()
    if resumed_at:  # what an earlier sitting leaves: a complete checkpoint
        ckpt = checkpoint_dir(tmp_path / root.name, resumed_at)
        ckpt.mkdir(parents=True)
        (ckpt / "model.safetensors").touch()
        (ckpt / "state.pt").touch()
    return runner._Bars({root.name: root, child.name: child}, True, tmp_path), root, child


def _reach(bars: runner._Bars, name: str, step: int) -> None:
    messages = queue.Queue()
    messages.put((name, step, step, 3.0, 4))
    bars.drain(messages)


def test_a_resumed_run_counts_only_the_steps_it_has_left_and_the_estimate_follows_the_rate(
    tmp_path,
):
    half = _pair()[0].steps // 2
    bars, root, child = _bars(tmp_path, resumed_at=half)
    assert child.branch_step > 0
    assert bars.seen == {root.name: half, child.name: child.branch_step}
    root_left = bars.costs[root.name] / 1e9 * (root.steps - half) / root.steps
    child_gf = bars.costs[child.name] / 1e9  # its own steps only: after its branch point
    assert sum(bars.left.values()) == pytest.approx(root_left + child_gf)
    assert bars.status() == "0/2 runs, 0% of the modeled work"  # no estimate before any work
    _reach(bars, root.name, root.steps)
    bars.close(root.name)
    assert bars.done == pytest.approx(root_left)
    frac = root_left / (root_left + child_gf)
    bars.t0 -= 600  # ten minutes for that share: the rest at the same rate
    left = round(10 * (1 - frac) / frac)
    assert (
        bars.status() == f"1/2 runs, {100 * frac:.0f}% of the modeled work, about {left} min left"
    )
    own = child.steps - child.branch_step
    _reach(bars, child.name, child.branch_step + own // 2)
    assert bars.done - root_left == pytest.approx(child_gf * (own // 2) / own)
    bars.close(child.name)
    assert bars.status() == "2/2 runs, 100% of the modeled work"  # done: no estimate


def test_a_diverged_run_and_its_children_leave_nothing_to_wait_for(tmp_path):
    bars, root, child = _bars(tmp_path)
    _reach(bars, root.name, 3)  # its loss left the finite numbers at step 3
    bars.close(root.name)
    bars.close(child.name)  # marked diverged too: it cannot branch off its parent
    assert bars.status() == "2/2 runs, 100% of the modeled work"


def test_every_run_resumed_at_its_last_step_reads_done_not_minus_zero(tmp_path):
    bars, root, _ = _bars(tmp_path, resumed_at=_pair()[0].steps)
    alone = runner._Bars({root.name: root}, True, tmp_path)  # killed before its summary
    assert sum(alone.left.values()) == 0
    assert alone.status() == "0/1 runs, 100% of the modeled work"
    said = [runner._left(s) for s in (20, 720, 15000)]
    assert said == ["under a minute left", "about 12 min left", "about 4 h 10 min left"]


def test_a_run_sized_by_its_budget_is_checkpointed_a_tenth_of_its_steps_apart(monkeypatch):
    """A bios run's length comes from its FLOP budget (max_steps 0): the pool must space its
    safety checkpoints by the planned steps, not save one at every step."""
    root, _ = _pair()
    assert root.cfg.max_steps == 0 and root.cfg.ckpt_interval == 0 and root.steps >= 20
    seen = {}
    monkeypatch.setattr(runner, "train", lambda cfg, *a, **kw: seen.setdefault("cfg", cfg))
    runner._run_one(root, "/nonexistent/run", None)
    assert seen["cfg"].ckpt_interval == root.steps // runner.SAFE_CHECKPOINTS
