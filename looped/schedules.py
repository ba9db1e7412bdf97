"""Depth schedules: the loop count K each optimizer step trains at. The paper's three are here:
fixed, uniform, and fixed-first (fixed K for a fraction of the run, then another schedule).

    s = parse_schedule("fixed-first:k=4,frac=0.8,then=uniform:1-16", seed=0)  # schedule_spec
    s.depth(step, total_steps)     # K: the same on every rank and after any resume
    s.probs(step, total_steps)     # its exact distribution {K: p}
    s.mean_depth(total_steps)      # the exact run mean of K (not sampled)

K is a pure function of (seed, step) by a BLAKE2b hash (part of the run format), so DDP ranks
and resumed runs agree with nothing to broadcast. Others: `schedules_more`, `schedule_spec`.
"""

from __future__ import annotations

import hashlib
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import ClassVar

from looped.errors import UserError


class Schedule:
    """Base class: frozen dataclasses whose fields are the spec's keys plus `seed`. A subclass
    supplies, on a clock (pos, total) that fixed-first may shift, ``_probs(pos, total)`` (the law
    of K), ``_counts(total)`` (expected steps at each K) and ``_draw(pos, total, bits)`` (K given
    the step's 64 random bits); the public methods check arguments and add the bits."""

    kind: ClassVar[str]  # the spec's name of the schedule, before the ':'
    seed: int

    def __str__(self) -> str:
        """The canonical spec, `kind:key=value,...` in field order (`schedule_spec`)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "seed"}
        args = (f"{k}={fmt_number(v) if isinstance(v, float) else v}" for k, v in values.items())
        return f"{self.kind}:{','.join(args)}"

    def max_depth(self) -> int:
        """Largest K the schedule can produce (e.g. to size the model's max_depth)."""
        raise NotImplementedError

    def depth(self, step: int, total_steps: int, micro: int = 0) -> int:
        """K for optimizer step `step` (0-based) of a `total_steps` run; pure in (seed, step).
        `micro` > 0 gives that micro-batch its own draw (`depth_per_micro`)."""
        step, total_steps = _check_step(step, total_steps)
        micro = operator.index(micro)
        if micro < 0:
            raise UserError(f"micro={micro} must be >= 0 (micro-batches count from 0)")
        return self._draw(step, total_steps, draw_bits(self.seed, step, micro))

    def probs(self, step: int, total_steps: int) -> dict[int, float]:
        """Exact distribution {K: probability} of K at this step; sums to 1."""
        step, total_steps = _check_step(step, total_steps)
        return self._probs(step, total_steps)

    def expected_depth(self, step: int, total_steps: int) -> float:
        return sum(k * p for k, p in self.probs(step, total_steps).items())

    def step_counts(self, total_steps: int) -> dict[int, float]:
        """Expected steps at each K over the run (sums to total_steps), in O(depths)."""
        _, total_steps = _check_step(0, total_steps)
        return self._counts(total_steps)

    def run_expectation(self, fn: Callable[[int], float], total_steps: int) -> float:
        """Exact sum over steps 0..total_steps-1 of E[fn(K_step)], e.g. fn = FLOPs at depth K."""
        return sum(n * float(fn(k)) for k, n in self.step_counts(total_steps).items() if n)

    def mean_depth(self, total_steps: int) -> float:
        """Exact mean of K over the run."""
        return self.run_expectation(lambda k: k, total_steps) / total_steps

    def switch_step(self, total_steps: int) -> int | None:
        """First step of fixed-first's finishing phase; None for schedules without one."""
        return None


@dataclass(frozen=True)
class Fixed(Schedule):
    """Train at one depth k throughout (the paper's fixed-depth baseline)."""

    kind = "fixed"
    k: int
    seed: int = 0

    def __post_init__(self) -> None:
        check_depth_value("k", self.k)

    def __str__(self) -> str:
        return f"fixed:{self.k}"

    def _probs(self, pos: int, total: int) -> dict[int, float]:
        return {self.k: 1.0}

    def _counts(self, total: int) -> dict[int, float]:
        return {self.k: float(total)}

    def _draw(self, pos: int, total: int, bits: int) -> int:
        return self.k

    def max_depth(self) -> int:
        return self.k


@dataclass(frozen=True)
class Uniform(Schedule):
    """K uniform on lo..hi (inclusive), drawn afresh every step (the paper's uniform baseline)."""

    kind = "uniform"
    lo: int
    hi: int
    seed: int = 0

    def __post_init__(self) -> None:
        check_depth_value("lo", self.lo)
        check_depth_value("hi", self.hi)
        if self.lo > self.hi:
            raise UserError(f"range {self.lo}-{self.hi} has lo > hi; write uniform:LO-HI, LO <= HI")

    def __str__(self) -> str:
        return f"uniform:{self.lo}-{self.hi}"

    def _probs(self, pos: int, total: int) -> dict[int, float]:
        n = self.hi - self.lo + 1
        return {k: 1.0 / n for k in range(self.lo, self.hi + 1)}

    def _counts(self, total: int) -> dict[int, float]:
        n = self.hi - self.lo + 1
        return {k: total / n for k in range(self.lo, self.hi + 1)}

    def _draw(self, pos: int, total: int, bits: int) -> int:
        # multiply-shift maps 64 bits onto n values; bias below n / 2^64
        return self.lo + ((bits * (self.hi - self.lo + 1)) >> 64)

    def max_depth(self) -> int:
        return self.hi


@dataclass(frozen=True)
class FixedFirst(Schedule):
    """The paper's schedule: fixed k for steps below round(frac*T), then `then`, on its own clock
    (s - switch of T - switch) but with the absolute step's bits: the K `then` alone draws."""

    kind = "fixed-first"
    k: int
    frac: float
    then: Schedule
    seed: int = 0

    def __post_init__(self) -> None:
        check_depth_value("k", self.k)
        if not (math.isfinite(self.frac) and 0 < self.frac < 1):
            raise UserError(
                f"frac={fmt_number(self.frac)} must be strictly between 0 and 1 "
                "(fraction of the run at fixed k; use fixed:K or the then= schedule alone instead)"
            )
        if not isinstance(self.then, Schedule) or isinstance(self.then, FixedFirst):
            raise UserError(f"then={self.then} must be a schedule other than fixed-first")
        if self.then.seed != self.seed:
            object.__setattr__(self, "then", replace(self.then, seed=self.seed))

    def switch_step(self, total_steps: int) -> int | None:
        _, total_steps = _check_step(0, total_steps)
        return round(self.frac * total_steps)

    def _probs(self, pos: int, total: int) -> dict[int, float]:
        switch = round(self.frac * total)
        if pos < switch:
            return {self.k: 1.0}
        return self.then._probs(pos - switch, total - switch)

    def _counts(self, total: int) -> dict[int, float]:
        switch = round(self.frac * total)
        counts = dict(self.then._counts(total - switch)) if total > switch else {}
        counts[self.k] = counts.get(self.k, 0.0) + switch
        return dict(sorted(counts.items()))

    def _draw(self, pos: int, total: int, bits: int) -> int:
        switch = round(self.frac * total)
        if pos < switch:
            return self.k
        return self.then._draw(pos - switch, total - switch, bits)

    def max_depth(self) -> int:
        return max(self.k, self.then.max_depth())


# -- per-step randomness ----------------------------------------------------------------------
_PERSON = b"looped.depth"  # BLAKE2b personalization: keeps these draws apart from other uses
_PERSON_MICRO = b"looped.depth.mb"  # per-micro-batch draws (micro >= 1), apart from the above


def draw_bits(seed: int, step: int, micro: int = 0) -> int:
    """64 random bits that depend only on (seed, step, micro), the same in every process (a str's
    ``hash()`` is salted per process). Micro-batch 0 hashes (seed, step) alone: the step's K."""
    values, person = ((seed, step), _PERSON) if micro == 0 else ((seed, step, micro), _PERSON_MICRO)
    data = b"".join(v.to_bytes(16, "little", signed=True) for v in values)
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=person).digest(), "little")


def _check_step(step: int, total_steps: int) -> tuple[int, int]:
    step, total_steps = operator.index(step), operator.index(total_steps)
    if total_steps < 1:
        raise UserError(f"total_steps={total_steps} must be >= 1 (the length of the run in steps)")
    if step < 0:
        raise UserError(f"step={step} must be >= 0 (steps count from 0)")
    return step, total_steps


def check_depth_value(name: str, k: int) -> None:
    """A schedule's depth field must be an int >= 1."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise UserError(f"{name}={k!r} must be an integer depth >= 1")
    if k < 1:
        raise UserError(f"{name}={k} is a depth below 1; loop counts start at 1")


def fmt_number(x: float) -> str:
    """Shortest text that parses back to the same float; integral values without '.0'."""
    x = float(x)
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)
