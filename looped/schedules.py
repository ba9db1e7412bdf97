"""Depth schedules: which loop count K the model trains at on each optimizer step.

Also `lr_at`, the learning rate at that step: the other function of the step a branch must agree
on.

    s = parse_schedule("fixed-first:k=4,frac=0.8,then=uniform:1-16", seed=0)
    s.depth(step, total_steps)          # K for this step: same on every rank, after any resume
    s.probs(step, total_steps)          # exact distribution of K at this step, {K: p}
    s.mean_depth(total_steps)           # exact run mean of K (not sampled)
    s.run_expectation(f, total_steps)   # exact sum over the run of E[f(K)], e.g. FLOPs per step
    str(s)                              # the canonical spec; parse_schedule(str(s), s.seed) == s

Grammar (one spec string for the CLI, YAML configs and notebooks; no spaces needed)::

    spec     := fixed | uniform | fixedfirst | lognormal | curriculum
    fixed    := "fixed:" INT
    uniform  := "uniform:" INT "-" INT
    fixedfirst := "fixed-first:k=" INT ",frac=" FLOAT ",then=" spec     (then= is the last key;
                                                 its spec is anything but another fixed-first)
    lognormal  := "lognormal-poisson:mean=" FLOAT ",sigma=" FLOAT ",max=" INT
    curriculum := "curriculum:start=" INT ",end=" INT ",frac=" FLOAT

Keys other than ``then=`` may come in any order; every key is required. ``str()`` writes them in
the order above, floats in Python's shortest round-trip form (``0.8``, ``8`` for ``8.0``).

=================  ==========================================  ==================================
kind               spec                                        K at step s of a T-step run
=================  ==========================================  ==================================
Fixed              ``fixed:4``                                 always k
Uniform            ``uniform:1-16``                            uniform on lo..hi, fresh each step
FixedFirst         ``fixed-first:k=4,frac=0.8,then=SPEC``      k while s < round(frac*T), then SPEC
LogNormalPoisson   ``lognormal-poisson:mean=8,sigma=0.5,       min(Poisson(rate) + 1, max), rate ~
                   max=16``                                    LogNormal(ln(mean) - sigma^2/2, sigma)
Curriculum         ``curriculum:start=1,end=16,frac=0.5``      rises start..end over the first
                                                               round(frac*T) steps, then end
=================  ==========================================  ==================================

Why K is a pure function of (seed, step). Under DDP every rank runs the same model, so every rank
must loop the same number of times on the same step, or the gradient all-reduce mixes depths (and
FSDP hangs on mismatched collectives). A resumed run must also see the K sequence it would have
seen without the interruption, or "resumed" and "uninterrupted" are different experiments. Drawing
K from a generator that is derived from (seed, step) alone, with no global RNG state, gives both
for free: no broadcast, nothing to checkpoint. The per-step draw is one 64-bit BLAKE2b hash of
(seed, step) under a fixed personalization tag, so it is the same in every process, Python
version and machine (``hash()`` of a str would not be: it is salted per process). The hash is part
of the run format: changing it changes every schedule's K sequence.

Rules that make the numbers exact:

- Fixed-first switches at ``round(frac * T)`` (Python's round, half to even): steps with index
  below it train at k, the rest draw from ``then``. Its finishing schedule runs on its own clock
  (step ``s - switch`` of ``T - switch``), which only matters for a curriculum there; its random
  draws use the absolute step, so after the switch ``fixed-first:...,then=uniform:1-16`` draws
  exactly the K that ``uniform:1-16`` draws at the same steps with the same seed.
- Curriculum: with R = round(frac * T) ramp steps and n = end - start + 1 values, step s < R
  trains at ``start + floor(n * s / R)`` (every value gets an equal share of the ramp, to within
  one step) and every step from R on trains at end. frac may be 1 (ramp over the whole run).
- Log-normal Poisson is the recurrent-depth sampler of Geiping et al. 2025; ``mean`` is the mean
  of the rate, so E[K] = mean + 1 before the cap. Its exact distribution,
  P(N = n) = E_z[Poisson(n; exp(mu + sigma z))] with z ~ N(0, 1), is integrated with the
  trapezoid rule on z in [-10, 10] (2001 points, spacing 0.01; the normal mass outside is
  1.5e-23). For a smooth integrand under a Gaussian the trapezoid rule converges exponentially;
  doubling the points moves no probability by more than 1e-14, and the tests check the mean and
  variance of the uncapped K against their closed forms (mean + 1 and
  mean + mean^2 (e^{sigma^2} - 1)) to 1e-9. K = max takes the whole tail P(N >= max - 1).
  depth() samples K by inverting this exact CDF with one uniform draw, which gives the same
  distribution as drawing a rate and then a Poisson count.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from looped.errors import UserError

# --------------------------------------------------------------------------- per-step randomness

_PERSON = b"looped.depth"  # BLAKE2b personalization: keeps these draws apart from other uses
_PERSON_MICRO = b"looped.depth.mb"  # per-micro-batch draws (micro >= 1), apart from the above


def step_bits(seed: int, step: int) -> int:
    """64 random bits that depend only on (seed, step): the per-step generator of every schedule."""
    data = seed.to_bytes(16, "little", signed=True) + step.to_bytes(16, "little", signed=True)
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=_PERSON).digest(), "little")


def draw_bits(seed: int, step: int, micro: int = 0) -> int:
    """64 random bits for micro-batch `micro` of `step`: micro-batch 0 uses the step's own bits,
    so sampling per micro-batch leaves every schedule's per-step K sequence (and every existing
    run) unchanged; the others hash (seed, step, micro) under their own personalization tag."""
    if micro == 0:
        return step_bits(seed, step)
    data = b"".join(v.to_bytes(16, "little", signed=True) for v in (seed, step, micro))
    return int.from_bytes(
        hashlib.blake2b(data, digest_size=8, person=_PERSON_MICRO).digest(), "little"
    )


def _check_step(step: int, total_steps: int) -> tuple[int, int]:
    step, total_steps = operator.index(step), operator.index(total_steps)
    if total_steps < 1:
        raise UserError(f"total_steps={total_steps} must be >= 1 (the length of the run in steps)")
    if step < 0:
        raise UserError(f"step={step} must be >= 0 (steps count from 0)")
    return step, total_steps


# --------------------------------------------------------------------------- schedules


class Schedule:
    """Base class. Subclasses are frozen dataclasses whose fields are the spec's keys plus `seed`.

    A subclass supplies three things, all on a clock (pos, total) that fixed-first may shift:
    ``_probs`` (distribution of K), ``_counts`` (expected number of steps at each K over a run) and
    ``_draw`` (K for one step, given that step's 64 random bits). The public methods check
    arguments and add the per-step bits; everything exact is derived from ``_probs``/``_counts``.
    """

    seed: int

    # --- to implement
    def _probs(self, pos: int, total: int) -> dict[int, float]:
        raise NotImplementedError

    def _counts(self, total: int) -> dict[int, float]:
        raise NotImplementedError

    def _draw(self, pos: int, total: int, bits: int) -> int:
        raise NotImplementedError

    def max_depth(self) -> int:
        """Largest K the schedule can produce (e.g. to size the model's max_depth)."""
        raise NotImplementedError

    # --- public API
    def depth(self, step: int, total_steps: int, micro: int = 0) -> int:
        """K for optimizer step `step` (0-based) of a `total_steps` run; pure in (seed, step).

        `micro` asks for micro-batch `micro`'s own draw (the trainer's `depth_per_micro`): each
        micro-batch of a step then gets an independent K from the same per-step distribution, so
        the expected cost is unchanged. Micro-batch 0 always gets the per-step K.
        """
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
        """Expected number of steps at each K over steps 0..total_steps-1 (sums to total_steps).

        Everything linear in the per-step distribution (mean K, total FLOPs) follows from this in
        O(number of depths), however long the run.
        """
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

    # inverse-CDF sampling for schedules whose K distribution does not depend on the step
    @staticmethod
    def _invert(cdf: tuple[float, ...], first: int, bits: int) -> int:
        u = (bits >> 11) * 2.0**-53
        return first + min(bisect.bisect_right(cdf, u), len(cdf) - 1)


@dataclass(frozen=True)
class Fixed(Schedule):
    """Train at one depth k throughout (the paper's fixed-depth baseline)."""

    k: int
    seed: int = 0

    def __post_init__(self) -> None:
        _check_depth("k", self.k)

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

    lo: int
    hi: int
    seed: int = 0

    def __post_init__(self) -> None:
        _check_depth("lo", self.lo)
        _check_depth("hi", self.hi)
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
class LogNormalPoisson(Schedule):
    """Recurrent-depth sampler: rate ~ LogNormal(ln(mean) - sigma^2/2, sigma), K = Poisson(rate)+1.

    `mean` is the mean of the rate (so E[K] = mean + 1 before the cap); K is capped at `max`,
    which takes the whole upper tail. See the module docstring for how the exact law is computed.
    """

    mean: float
    sigma: float
    max: int
    seed: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mean) and self.mean > 0):
            raise UserError(f"mean={_fmt(self.mean)} must be > 0 (the mean Poisson rate)")
        if not (math.isfinite(self.sigma) and 0 <= self.sigma <= 4):
            raise UserError(f"sigma={_fmt(self.sigma)} must be in [0, 4] (log-normal spread)")
        _check_depth("max", self.max)
        if self.max > MAX_TABULATED:
            raise UserError(f"max={self.max} is above {MAX_TABULATED}; cap K lower")

    def __str__(self) -> str:
        return f"lognormal-poisson:mean={_fmt(self.mean)},sigma={_fmt(self.sigma)},max={self.max}"

    def _table(self) -> tuple[float, ...]:
        return _lognormal_poisson_probs(float(self.mean), float(self.sigma), self.max)

    def _probs(self, pos: int, total: int) -> dict[int, float]:
        return {k: p for k, p in enumerate(self._table(), start=1)}

    def _counts(self, total: int) -> dict[int, float]:
        return {k: total * p for k, p in enumerate(self._table(), start=1)}

    def _draw(self, pos: int, total: int, bits: int) -> int:
        return self._invert(_cumulative(self._table()), 1, bits)

    def max_depth(self) -> int:
        return self.max


@dataclass(frozen=True)
class Curriculum(Schedule):
    """Deterministic linear ramp start..end over the first frac of the run, then end."""

    start: int
    end: int
    frac: float
    seed: int = 0

    def __post_init__(self) -> None:
        _check_depth("start", self.start)
        _check_depth("end", self.end)
        if self.start > self.end:
            raise UserError(
                f"start={self.start} > end={self.end}; a curriculum rises, so use start <= end"
            )
        if not (math.isfinite(self.frac) and 0 < self.frac <= 1):
            raise UserError(
                f"frac={_fmt(self.frac)} must be in (0, 1] (fraction of the run ramping)"
            )

    def __str__(self) -> str:
        return f"curriculum:start={self.start},end={self.end},frac={_fmt(self.frac)}"

    def _k(self, pos: int, total: int) -> int:
        ramp = round(self.frac * total)
        if pos >= ramp:
            return self.end
        return self.start + (self.end - self.start + 1) * pos // ramp

    def _probs(self, pos: int, total: int) -> dict[int, float]:
        return {self._k(pos, total): 1.0}

    def _counts(self, total: int) -> dict[int, float]:
        # value start+j holds steps ceil(j R / n) .. ceil((j+1) R / n) - 1 of the R-step ramp
        ramp, n = round(self.frac * total), self.end - self.start + 1
        counts = {
            self.start + j: float(_ceil_div((j + 1) * ramp, n) - _ceil_div(j * ramp, n))
            for j in range(n)
        }
        counts[self.end] += total - ramp
        return counts

    def _draw(self, pos: int, total: int, bits: int) -> int:
        return self._k(pos, total)

    def max_depth(self) -> int:
        return self.end


@dataclass(frozen=True)
class FixedFirst(Schedule):
    """The paper's schedule: fixed k for the first round(frac*T) steps, then `then`.

    `then` takes this schedule's seed (set here, whatever it was built with), so one seed governs
    the whole run.
    """

    k: int
    frac: float
    then: Schedule
    seed: int = 0

    def __post_init__(self) -> None:
        _check_depth("k", self.k)
        if not (math.isfinite(self.frac) and 0 < self.frac < 1):
            raise UserError(
                f"frac={_fmt(self.frac)} must be strictly between 0 and 1 "
                "(fraction of the run at fixed k; use fixed:K or the then= schedule alone instead)"
            )
        if not isinstance(self.then, Schedule) or isinstance(self.then, FixedFirst):
            raise UserError(f"then={self.then} must be a schedule other than fixed-first")
        if self.then.seed != self.seed:
            object.__setattr__(self, "then", replace(self.then, seed=self.seed))

    def __str__(self) -> str:
        return f"fixed-first:k={self.k},frac={_fmt(self.frac)},then={self.then}"

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


# --------------------------------------------------------------------------- exact log-normal law

MAX_TABULATED = 1024  # largest `max` of lognormal-poisson (its law is tabulated per K)
_Z_RANGE, _Z_POINTS = 10.0, 2001  # trapezoid grid for z ~ N(0, 1); see the module docstring


@lru_cache(maxsize=64)
def _lognormal_poisson_probs(mean: float, sigma: float, kmax: int) -> tuple[float, ...]:
    """(P(K=1), ..., P(K=kmax)) for K = min(Poisson(rate) + 1, kmax), rate log-normal."""
    mu = math.log(mean) - sigma * sigma / 2
    step = 2 * _Z_RANGE / (_Z_POINTS - 1)
    log_fact = [math.lgamma(n + 1) for n in range(kmax)]
    acc, weight_sum = [0.0] * kmax, 0.0
    for i in range(_Z_POINTS):
        z = -_Z_RANGE + i * step
        weight = math.exp(-0.5 * z * z)  # normal density up to a constant, removed below
        log_rate = mu + sigma * z
        rate = math.exp(log_rate)
        below = 0.0
        for n in range(kmax - 1):  # Poisson pmf in log space: no underflow of exp(-rate) alone
            p = math.exp(n * log_rate - rate - log_fact[n])
            acc[n] += weight * p
            below += p
        acc[kmax - 1] += weight * max(0.0, 1.0 - below)  # K = kmax takes P(N >= kmax - 1)
        weight_sum += weight
    return tuple(a / weight_sum for a in acc)


@lru_cache(maxsize=64)
def _cumulative(probs: tuple[float, ...]) -> tuple[float, ...]:
    out, total = [], 0.0
    for p in probs:
        total += p
        out.append(total)
    return tuple(out)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------- learning rate


def lr_at(step: int, total_steps: int, optim: Any) -> float:
    """Learning rate at `step`: linear warmup, then cosine to min, or warmup-stable-decay.

    WSD keeps the LR constant until the last `decay_frac` of the run, so two runs of different
    length agree on every LR before that point: that is what lets a fixed-first run branch off a
    longer fixed-K run exactly. `optim` is a ``looped.config.OptimConfig``.
    """
    peak, floor = optim.lr, optim.lr * optim.min_lr_ratio
    warm = min(optim.warmup_steps, max(total_steps - 1, 0))
    if step < warm:
        return peak * (step + 1) / warm
    if optim.lr_schedule == "cosine":
        progress = (step - warm) / max(1, total_steps - warm - 1)
        return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * min(1.0, progress)))
    if optim.lr_schedule == "wsd":
        decay_start = total_steps - max(1, round(optim.decay_frac * total_steps))
        if step < max(decay_start, warm):
            return peak
        progress = (step - decay_start + 1) / max(1, total_steps - decay_start)
        return peak - (peak - floor) * min(1.0, progress)
    raise UserError(f"optim.lr_schedule={optim.lr_schedule!r}: choose cosine or wsd")


# --------------------------------------------------------------------------- parsing

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_RANGE = re.compile(r"(\d+)-(\d+)")
KINDS = ("fixed", "uniform", "fixed-first", "lognormal-poisson", "curriculum")
_EXAMPLES = {
    "fixed": "fixed:4",
    "uniform": "uniform:1-16",
    "fixed-first": "fixed-first:k=4,frac=0.8,then=uniform:1-16",
    "lognormal-poisson": "lognormal-poisson:mean=8,sigma=0.5,max=16",
    "curriculum": "curriculum:start=1,end=16,frac=0.5",
}
_KEYS = {
    "fixed-first": ("k", "frac", "then"),
    "lognormal-poisson": ("mean", "sigma", "max"),
    "curriculum": ("start", "end", "frac"),
}


def parse_schedule(spec: str, seed: int = 0) -> Schedule:
    """Parse a schedule spec (grammar in the module docstring); UserError names the bad part."""
    if isinstance(spec, Schedule):
        return replace(spec, seed=seed)
    spec = str(spec).strip()
    try:
        return _parse(spec, operator.index(seed))
    except UserError as err:
        raise UserError(f"bad depth schedule {spec!r}: {err}") from None


def _parse(spec: str, seed: int) -> Schedule:
    kind, sep, body = spec.partition(":")
    kind, body = kind.strip(), body.strip()
    if kind not in KINDS:
        raise UserError(f"unknown kind {kind!r}; use one of {', '.join(KINDS)} (e.g. fixed:4)")
    if not sep or not body:
        raise UserError(f"{kind} needs arguments, e.g. {_EXAMPLES[kind]}")
    if kind == "fixed":
        return Fixed(_int("K", body, kind), seed=seed)
    if kind == "uniform":
        m = _RANGE.fullmatch(body)
        if not m:
            raise UserError(
                f"{body!r} is not a range LO-HI of positive integers, e.g. uniform:1-16"
            )
        return Uniform(int(m.group(1)), int(m.group(2)), seed=seed)
    args = _key_values(kind, body)
    if kind == "fixed-first":
        then_spec = args["then"]
        if then_spec.partition(":")[0].strip() == "fixed-first":
            raise UserError(f"then={then_spec} cannot itself be fixed-first")
        try:
            then = _parse(then_spec, seed)
        except UserError as err:
            raise UserError(f"then={then_spec}: {err}") from None
        return FixedFirst(
            _int("k", args["k"], kind), _float("frac", args["frac"], kind), then, seed=seed
        )
    if kind == "lognormal-poisson":
        return LogNormalPoisson(
            _float("mean", args["mean"], kind),
            _float("sigma", args["sigma"], kind),
            _int("max", args["max"], kind),
            seed=seed,
        )
    return Curriculum(
        _int("start", args["start"], kind),
        _int("end", args["end"], kind),
        _float("frac", args["frac"], kind),
        seed=seed,
    )


def _key_values(kind: str, body: str) -> dict[str, str]:
    """Split `a=1,b=2,then=SPEC` into a dict; `then=` swallows the rest, commas included."""
    keys, out = _KEYS[kind], {}
    parts = body.split(",")
    for i, part in enumerate(parts):
        key, eq, value = part.partition("=")
        key = key.strip()
        if key == "then" and eq:
            value = ",".join([value, *parts[i + 1 :]])
        if not eq or not key:
            raise UserError(f"{part.strip()!r} is not key=value; write {_EXAMPLES[kind]}")
        if key not in keys:
            raise UserError(f"unknown key {key!r} for {kind}; its keys are {', '.join(keys)}")
        if key in out:
            raise UserError(f"key {key!r} given twice")
        out[key] = value.strip()
        if key == "then":
            break
    missing = [k for k in keys if k not in out]
    if missing:
        hint = " (then= must be the last key)" if "then" in out else ""
        raise UserError(f"missing key {missing[0]!r}{hint}; write {_EXAMPLES[kind]}")
    return out


def _int(key: str, text: str, kind: str) -> int:
    if not _INT.fullmatch(text.strip()):
        raise UserError(f"{key}={text!r} is not an integer; write {_EXAMPLES[kind]}")
    return int(text)


def _float(key: str, text: str, kind: str) -> float:
    if not _FLOAT.fullmatch(text.strip()):
        raise UserError(f"{key}={text!r} is not a number; write {_EXAMPLES[kind]}")
    return float(text)


def _check_depth(name: str, k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int):
        raise UserError(f"{name}={k!r} must be an integer depth >= 1")
    if k < 1:
        raise UserError(f"{name}={k} is a depth below 1; loop counts start at 1")


def _fmt(x: float) -> str:
    """Shortest text that parses back to the same float; integral values without '.0'."""
    x = float(x)
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def parse_depths(spec: str) -> list[int]:
    """Serving depths: "1-16" -> [1..16], "1,2,4,8" -> [1, 2, 4, 8], "4" -> [4], "1-4,8" too.

    Returns the depths in ascending order; a depth listed twice is an error (likely a typo).
    """
    text = str(spec).strip()
    if not text:
        raise UserError("empty depth list; write e.g. 1-16 or 1,2,4,8")
    depths: list[int] = []
    for part in text.split(","):
        part = part.strip()
        m = _RANGE.fullmatch(part)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise UserError(f"depth range {part!r} has lo > hi; write LO-HI with LO <= HI")
            items = list(range(lo, hi + 1))
        elif _INT.fullmatch(part):
            items = [int(part)]
        else:
            raise UserError(f"depth {part!r} in {text!r} is not an integer or LO-HI range")
        for k in items:
            if k < 1:
                raise UserError(f"depth {part!r} in {text!r} is below 1; loop counts start at 1")
            if k in depths:
                raise UserError(f"depth {k} is listed twice in {text!r}")
            depths.append(k)
    return sorted(depths)
