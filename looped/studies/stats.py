"""Seed-paired differences, their 95% intervals, and the verdict an interval supports.

    gap = ratio_interval([0.002, -0.004, 0.008])  # per-seed relative gaps (`studies.engine`)
    verdict(gap, tolerance=0.005)       # Verdict.WITHIN / NO_WORSE / BETTER / WORSE / UNDECIDED
    seed_trends(cells)                  # per schedule: each seed's gap slope, an interval over them

Seed s of two schedules shares initialisation, data order and evaluation windows, so the
per-seed difference cancels what the runs share. Gaps are taken over log ratios; the interval
is Student's t over seeds or, when seeds come in rounds and a comparison stops once it decides,
the wider group-sequential one (`sequential_interval`). The verdict reads it against a tolerance:

    [lo, hi] inside [-tol, +tol]: WITHIN     hi < 0: BETTER     hi <= tol: NO_WORSE
    lo > tol: WORSE                          otherwise: UNDECIDED
    models that do not beat the bigram table: NOT_INFORMATIVE
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

import numpy as np

from looped.paper import TOLERANCE

# Student's t, 97.5% quantile, by degrees of freedom (a 95% two-sided interval)
T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}
# the default where no recipe is named: the paper's tighter tolerance (a recipe's own is
# `paper.tolerance(schedule)`, the one home of the tolerances)
PAPER_TOLERANCE = min(TOLERANCE.values())


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
        """As a results file holds it (JSON has lists, not tuples)."""
        return asdict(self) | {"values": list(self.values)}


def interval(values: list[float]) -> Interval:
    """Mean and 95% t-interval of paired differences."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else math.inf
    half = t975(n - 1) * sd / math.sqrt(n) if n > 1 else math.inf
    return Interval(mean, mean - half, mean + half, n, tuple(values))


def ratio_interval(values: list[float]) -> Interval:
    """The paired gap from per-seed relative gaps (ours / ref - 1), its interval taken over log
    ratios: the one gap definition, never below -100% (a plain interval can be)."""
    logs = interval([math.log1p(v) for v in values])
    back = (math.expm1(x) for x in (logs.mean, logs.lo, logs.hi))
    return Interval(*back, logs.n, tuple(values))


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


# -- seed spreads and seed-paired tables -----------------------------------------------------


def spread(values: list[float]) -> dict[str, Any]:
    """Mean, sample std, min, max and the values: how a number varies over seeds."""
    arr = np.asarray(values, dtype=float)
    std = float(arr.std(ddof=1)) if len(arr) > 1 else 0.0
    return {
        "mean": float(arr.mean()),
        "std": std,
        "min": float(arr.min()),
        "max": float(arr.max()),
        "values": [float(v) for v in arr],
    }


# -- baselines and verdicts ------------------------------------------------------------------
def worst_nll(rows: list[dict]) -> float:
    """The highest mean NLL of any seed of any schedule in these table rows, uniform's included:
    what has to beat the bigram table for the rows to mean anything."""
    return max(max(r["mean_nll"]["max"], r["uniform_nll"]["max"]) for r in rows)


def below_bigram(worst: float, baseline: dict | None) -> bool:
    """Whether the worst model's NLL beats the bigram table scored on the same windows: the one
    rule behind every text verdict (no baseline: nothing is informative)."""
    return baseline is not None and worst < baseline["bigram"]


def beats_bigram(result: dict, baseline: dict | None) -> bool:
    """Whether every reported model (each schedule's every seed, equal tokens) scores below the
    bigram table on the same windows: the condition for any verdict on this track."""
    return bool(baseline) and below_bigram(worst_nll(result["equal_tokens"]), baseline)


def trend_direction(fit: Interval) -> str:
    """Where the signed gap moves per doubling of tokens: "falling", "rising" (interval off zero)
    or "no clear trend"; the sign convention: positive gap = the schedule is behind uniform."""
    if fit.hi < 0:
        return "falling"
    if fit.lo > 0:
        return "rising"
    return "no clear trend"


# -- seeds in rounds: a group-sequential interval --------------------------------------------
@functools.lru_cache(maxsize=16)
def sequential_critical(looks: tuple[int, ...], alpha: float = 0.05, sims: int = 200_000) -> float:
    """The c such that mean ± c·sd/√n covers the true mean at every look at once with
    probability 1 - alpha (a Pocock-type repeated confidence interval): the largest |t| over
    the looks simulated under a true gap of 0, with a fixed generator (every study, one c).
    One look is the plain t interval, exactly: a simulation would only come close to it."""
    if len(set(looks)) == 1:
        return t975(looks[0] - 1)
    rng = np.random.default_rng(20261202)
    x = rng.standard_normal((sims, max(looks)))
    worst = np.zeros(sims)
    for n in looks:
        m, sd = x[:, :n].mean(1), x[:, :n].std(1, ddof=1)
        worst = np.maximum(worst, np.abs(m) * math.sqrt(n) / sd)
    return float(np.quantile(worst, 1 - alpha))


def planned_looks(rounds: tuple[int, ...] | list[int], max_seeds: int) -> list[int]:
    """The seed counts a sequential study looks at: its rounds up to its seed budget (the
    budget itself when no round fits), which fix how wide each look's interval is."""
    return [n for n in rounds if n <= max_seeds] or [max_seeds]


def sequential_interval(values: list[float], looks: tuple[int, ...]) -> Interval:
    """The group-sequential 95% interval after len(values) seeds: stopping at the first look
    that decides keeps a cell's chance of a wrong verdict at 5% over all its looks (cells are
    not corrected for their number). An unplanned look joins the looks, widening it further."""
    n = len(values)
    if n < 2:
        mean = float(np.mean(values)) if n else math.nan
        return Interval(mean, -math.inf, math.inf, n, tuple(values))
    mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    half = sequential_critical(tuple(sorted({*looks, n}))) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, tuple(values))


def sequential_ratio(values: list[float], looks: tuple[int, ...]) -> Interval:
    """`sequential_interval` over log ratios, as `ratio_interval` is for one look."""
    logs = sequential_interval([math.log1p(v) for v in values], looks)
    back = [math.expm1(x) if math.isfinite(x) else x for x in (logs.mean, logs.lo, logs.hi)]
    return Interval(*back, logs.n, tuple(values))


def seed_trends(cells: list[dict]) -> dict[str, dict]:
    """Per schedule: each seed's slope of its gap against log2(tokens) over the informative
    lengths, then a 95% t-interval over seeds (seeds are the unit, not seed x length points)."""
    out = {}
    for s in dict.fromkeys(c["schedule"] for c in cells if "gap" in c):
        mine = [c for c in cells if c["schedule"] == s and "gap" in c]
        mine = [c for c in mine if c["verdict"] != Verdict.NOT_INFORMATIVE.value]
        mine = [c for c in mine if c.get("one_pass", True)]  # repeated data: not a trend point
        per_seed: dict[int, list[tuple[float, float]]] = {}
        for c in mine:
            for seed, v in zip(c["seed_ids"], c["gap"]["values"]):
                per_seed.setdefault(seed, []).append((math.log2(c["tokens"]), v))
        need = len(mine)
        slopes = {
            seed: float(np.polyfit(*zip(*pts), 1)[0])
            for seed, pts in sorted(per_seed.items())
            if len(pts) == need and need >= 3
        }
        entry: dict[str, Any] = {"lengths": need, "per_seed": slopes, "slope": None}
        if len(slopes) >= 2:
            fit = interval(list(slopes.values()))
            entry |= {
                "slope": fit.as_dict(),
                "direction": trend_direction(fit),
            }
        out[s] = entry
    return out
