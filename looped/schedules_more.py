"""Depth schedules the paper does not use: log-normal Poisson and curriculum.

- Log-normal Poisson (Geiping et al. 2025): K = min(Poisson(rate) + 1, max), rate ~
  LogNormal(ln(mean) - sigma^2/2, sigma). Its exact law is integrated by the trapezoid rule on
  z in [-10, 10] (the tests check the moments to 1e-9); depth() inverts its CDF.
- Curriculum: step s < R = round(frac * T) trains at start + floor(n * s / R), n = end - start
  + 1; every later step at end.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

from looped.errors import UserError
from looped.schedules import Schedule, check_depth_value, fmt_number

MAX_TABULATED = 1024  # largest `max` of lognormal-poisson (its law is tabulated per K)
_Z_RANGE, _Z_POINTS = 10.0, 2001  # trapezoid grid for z ~ N(0, 1)


@dataclass(frozen=True)
class LogNormalPoisson(Schedule):
    """Recurrent-depth sampler: K = Poisson(rate) + 1, capped at `max` (takes the tail)."""

    kind = "lognormal-poisson"
    mean: float
    sigma: float
    max: int
    seed: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mean) and self.mean > 0):
            raise UserError(f"mean={fmt_number(self.mean)} must be > 0 (the mean Poisson rate)")
        if not (math.isfinite(self.sigma) and 0 <= self.sigma <= 4):
            raise UserError(f"sigma={fmt_number(self.sigma)} must be in [0, 4] (log-normal spread)")
        check_depth_value("max", self.max)
        if self.max > MAX_TABULATED:
            raise UserError(f"max={self.max} is above {MAX_TABULATED}; cap K lower")

    def _table(self) -> tuple[float, ...]:
        return _lognormal_poisson_probs(float(self.mean), float(self.sigma), self.max)

    def _probs(self, pos: int, total: int) -> dict[int, float]:
        return {k: p for k, p in enumerate(self._table(), start=1)}

    def _counts(self, total: int) -> dict[int, float]:
        return {k: total * p for k, p in enumerate(self._table(), start=1)}

    def _draw(self, pos: int, total: int, bits: int) -> int:
        cdf = _cumulative(self._table())
        u = (bits >> 11) * 2.0**-53  # inverse-CDF sampling with one uniform draw
        return 1 + min(bisect.bisect_right(cdf, u), len(cdf) - 1)

    def max_depth(self) -> int:
        return self.max


@dataclass(frozen=True)
class Curriculum(Schedule):
    """Deterministic linear ramp start..end over the first frac of the run, then end."""

    kind = "curriculum"
    start: int
    end: int
    frac: float
    seed: int = 0

    def __post_init__(self) -> None:
        check_depth_value("start", self.start)
        check_depth_value("end", self.end)
        if self.start > self.end:
            raise UserError(
                f"start={self.start} > end={self.end}; a curriculum rises, so use start <= end"
            )
        if not (math.isfinite(self.frac) and 0 < self.frac <= 1):
            raise UserError(
                f"frac={fmt_number(self.frac)} must be in (0, 1] (fraction of the run ramping)"
            )

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
    return tuple(itertools.accumulate(probs))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)
