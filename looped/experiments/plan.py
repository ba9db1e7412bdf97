"""One planner for every study: runs that share a prefix train it once.

Two runs of the same seed, batch and LR agree exactly until their schedules or LRs part (a
shorter run's decay, a fixed-first switch; `training.lineage.branch_point`), so up to there one
can branch off the other's checkpoint.

    planner = Planner()
    long = planner.add(RunSpec("long", UNIFORM, seed=0), cfg_long)
    short = planner.add(RunSpec("short", UNIFORM, seed=0), cfg_short, parents=[long.name])
    specs, configs = planner.specs()       # runner.execute's arguments
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from looped.config import TrainConfig
from looped.experiments.runner import RunSpec
from looped.runtime.checkpoint import list_checkpoints
from looped.training.lineage import branch_point
from looped.training.run import total_steps_for

Spec = TypeVar("Spec", bound=RunSpec)


class Planner:
    """The runs planned so far (one per name) and their configs, in the order added."""

    def __init__(self) -> None:
        self.runs: dict[str, RunSpec] = {}
        self.configs: dict[str, TrainConfig] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.runs

    def add(
        self,
        spec: Spec,
        cfg: TrainConfig,
        parents: Iterable[str] = (),
        enough: Callable[[int, int], bool] = lambda shared, steps: shared > 0,
        runs_dir: Path | None = None,
    ) -> Spec:
        """Plan `spec` (a name planned before returns that run). It branches off the one of
        `parents` it shares the most steps with, if `enough(shared, steps)`; with `runs_dir`, a
        finished parent is not retrained: the branch starts at its latest checkpoint in time."""
        if spec.name in self.runs:
            return self.runs[spec.name]  # type: ignore[return-value]
        if not spec.steps:
            spec.steps = total_steps_for(cfg)  # the trainer's own derivation
        self.runs[spec.name], self.configs[spec.name] = spec, cfg
        shared = [
            (self._shared(spec, cfg, self.runs[p], runs_dir), -i, self.runs[p])
            for i, p in enumerate(parents)
            if p != spec.name
        ]
        at, _, parent = max(shared, default=(0, 0, None), key=lambda t: t[:2])
        if parent is not None and enough(at, spec.steps):
            self.branch(spec, parent, at)
        return spec

    def _shared(
        self, spec: RunSpec, cfg: TrainConfig, parent: RunSpec, runs_dir: Path | None
    ) -> int:
        """The step `spec` can branch off `parent` at (0: none)."""
        at = branch_point(cfg, spec.steps, self.configs[parent.name], parent.steps)
        done = runs_dir is not None and (runs_dir / parent.name / "summary.json").is_file()
        held = [s for s, _ in list_checkpoints(runs_dir / parent.name)] if done else []
        if held and at not in held:
            at = max((s for s in held if s <= at), default=0)
        return at

    @staticmethod
    def branch(spec: RunSpec, parent: RunSpec, at: int) -> None:
        """Make `spec` continue `parent`'s checkpoint at step `at` (which the parent then keeps)."""
        spec.parent, spec.branch_step = parent.name, at
        if at not in parent.save_steps:
            parent.save_steps.append(at)

    def specs(
        self, names: Iterable[str] | None = None
    ) -> tuple[list[RunSpec], dict[str, TrainConfig]]:
        """runner.execute's arguments for the runs named (all by default), in planned order."""
        keep = set(self.runs) if names is None else set(names)
        chosen = [s for n, s in self.runs.items() if n in keep]
        return chosen, {s.name: self.configs[s.name] for s in chosen}
