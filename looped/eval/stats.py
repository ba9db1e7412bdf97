"""Seed-paired differences, their 95% intervals, and the verdict an interval supports.

    gap = paired_gap(ours=[5.01, 4.98, 5.03], ref=[5.00, 5.02, 4.99])  # relative, per seed
    verdict(gap, tolerance=0.005)       # Verdict.WITHIN / NO_WORSE / BETTER / WORSE / UNDECIDED

A schedule comparison is a paired design: seed s of fixed-first and seed s of uniform share the
initialisation, the data order and the evaluation windows, so the per-seed difference cancels
what the two runs share. The interval is Student's t over those differences; with 3 seeds its
half-width is 4.3 standard errors, which is why a 2% mean gap over 3 seeds often decides nothing.

The verdict reads the interval against the paper's tolerance (fixed-first within 0.5% of uniform):

    [lo, hi] inside [-tol, +tol]   WITHIN      equivalent at the paper's tolerance
    hi < 0                         BETTER      fixed-first lower NLL, beyond doubt
    hi <= tol                      NO_WORSE    not worse than the tolerance (the paper's claim)
    lo > tol                       WORSE       worse by more than the tolerance
    otherwise                      UNDECIDED   the interval straddles a boundary

A comparison whose models do not beat the bigram baseline gets NOT_INFORMATIVE, never one of
the above (`eval.baselines`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import Enum

# Student's t, 97.5% quantile, by degrees of freedom (a 95% two-sided interval)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}  # fmt: skip
PAPER_TOLERANCE = 0.005  # the paper: fixed-first's mean NLL within 0.5% of uniform 1..16


class Verdict(str, Enum):
    WITHIN = "within tolerance"
    BETTER = "better"
    NO_WORSE = "no worse than tolerance"
    WORSE = "worse"
    UNDECIDED = "undecided"
    NOT_INFORMATIVE = "not informative at this size"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


def t975(df: int) -> float:
    """The t quantile for `df` degrees of freedom (the nearest tabled df at or below it)."""
    if df < 1:
        raise ValueError("an interval needs at least two paired values")
    return T975[max(d for d in T975 if d <= df)] if df <= 30 else 1.96


@dataclass(frozen=True)
class Interval:
    mean: float  # mean of the paired differences
    lo: float  # 95% interval, lower end
    hi: float  # 95% interval, upper end
    n: int  # number of pairs (seeds)
    values: tuple[float, ...]  # the differences themselves, seed by seed

    def as_dict(self) -> dict:
        return asdict(self)


def interval(values: list[float]) -> Interval:
    """Mean and 95% t-interval of paired differences."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else math.inf
    half = t975(n - 1) * sd / math.sqrt(n) if n > 1 else math.inf
    return Interval(mean, mean - half, mean + half, n, tuple(values))


def paired_gap(ours: list[float], ref: list[float]) -> Interval:
    """Relative gap (ours - ref) / ref per seed (positive: ours has the higher NLL), with its
    interval; the one definition of "vs uniform" the tables and verdicts share."""
    if len(ours) != len(ref):
        raise ValueError(f"{len(ours)} seeds against {len(ref)}: a paired gap needs the same seeds")
    return interval([(a - b) / b for a, b in zip(ours, ref)])


def verdict(gap: Interval, tolerance: float = PAPER_TOLERANCE, informative: bool = True) -> Verdict:
    """What the interval says about "ours is no worse than ref, within `tolerance`"."""
    if not informative:
        return Verdict.NOT_INFORMATIVE
    if -tolerance <= gap.lo and gap.hi <= tolerance:
        return Verdict.WITHIN
    if gap.hi < 0:
        return Verdict.BETTER
    if gap.hi <= tolerance:
        return Verdict.NO_WORSE
    if gap.lo > tolerance:
        return Verdict.WORSE
    return Verdict.UNDECIDED


def slope(xs: list[float], ys: list[float]) -> Interval:
    """Least-squares slope of ys on xs with its 95% interval (t with n-2 df): a trend is read
    from the signed values, so a gap that changes sign still counts as moving."""
    n = len(xs)
    if n < 3:
        raise ValueError("a slope with an interval needs at least three points")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    resid = sum((y - my - b * (x - mx)) ** 2 for x, y in zip(xs, ys))
    se = math.sqrt(resid / (n - 2) / sxx)
    half = t975(n - 2) * se
    return Interval(b, b - half, b + half, n, ())


WHY = {
    Verdict.WITHIN: "inside ±{tol}",
    Verdict.BETTER: "wholly below zero: fixed-first has the lower NLL",
    Verdict.NO_WORSE: "its upper end within +{tol}",
    Verdict.WORSE: "wholly above +{tol}",
    Verdict.UNDECIDED: "it straddles 0 or ±{tol}; more seeds would narrow it",
}


def describe(verdict: Verdict, gap: Interval, tolerance: float = PAPER_TOLERANCE) -> str:
    """The verdict in words, with the interval it was read from."""
    if verdict is Verdict.NOT_INFORMATIVE:
        return f"{verdict.value}: its models score worse than a bigram count table"
    if gap.n < 2:
        return f"{verdict.value}: one seed, no interval"
    why = WHY[verdict].format(tol=f"{tolerance:.1%}")
    return (f"{verdict.value}: 95% interval {gap.lo:+.1%} to {gap.hi:+.1%} over {gap.n} paired "
            f"seeds, {why}")  # fmt: skip
