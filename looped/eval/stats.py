"""Seed-paired differences, their 95% intervals, and the verdict an interval supports.

    gap = paired_gap(ours=[5.01, 4.98, 5.03], ref=[5.00, 5.02, 4.99])  # relative, per seed
    verdict(gap, tolerance=0.005)       # Verdict.WITHIN / NO_WORSE / BETTER / WORSE / UNDECIDED

A schedule comparison is a paired design: seed s of fixed-first and seed s of uniform share the
initialisation, the data order and the evaluation windows, so the per-seed difference cancels
what the two runs share. Gaps are taken over log ratios (`ratio_interval`), and the interval is
Student's t over the seeds; when seeds come in rounds and a comparison stops once it decides
(the length study), the interval is the wider group-sequential one (`sequential_interval`),
which keeps the chance of a wrong verdict at 5% over all the rounds.

The verdict reads the interval against the paper's tolerance (fixed-first within 0.5% of uniform):

    [lo, hi] inside [-tol, +tol]   WITHIN      equivalent at the paper's tolerance
    hi < 0                         BETTER      fixed-first lower NLL, beyond doubt
    hi <= tol                      NO_WORSE    not worse than the tolerance (the paper's claim)
    lo > tol                       WORSE       worse by more than the tolerance
    otherwise                      UNDECIDED   the interval straddles a boundary

A comparison whose models do not beat the bigram baseline gets NOT_INFORMATIVE, never one of
the above (`eval.baselines`).

Below the interval arithmetic: the numbers every study derives from its result rows (seed
spreads, seed-paired tables, LR choices, trends). They live here, not in the studies, because
the report layer renders them from results files and may not import the studies.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

import numpy as np

from looped import paper

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


def ratio_interval(values: list[float]) -> Interval:
    """The paired gap of one NLL to another, from per-seed relative gaps (ours / ref - 1): the
    mean and 95% interval taken over log ratios, then turned back into relative gaps. The one
    definition every table, verdict and sentence uses; it never goes below -100%, which no NLL
    ratio can reach (a plain interval over large relative gaps can)."""
    logs = interval([math.log1p(v) for v in values])
    return Interval(
        math.expm1(logs.mean), math.expm1(logs.lo), math.expm1(logs.hi), logs.n, tuple(values)
    )


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
    return (
        f"{verdict.value}: 95% interval {gap.lo:+.1%} to {gap.hi:+.1%} over {gap.n} paired "
        f"seeds, {why}"
    )


# -- seed spreads and seed-paired tables -----------------------------------------------------


def spread(values: list[float]) -> dict[str, Any]:
    """Mean, sample std, min, max and the values: how a number varies over seeds."""
    arr = np.asarray(values, dtype=float)
    return {
        "mean": float(arr.mean()),
        "std": float(arr.std(ddof=1)) if len(arr) > 1 else 0.0,
        "min": float(arr.min()),
        "max": float(arr.max()),
        "values": [float(v) for v in arr],
    }


def compare_row(schedule: str, runs: list[dict], uni: dict[int, dict]) -> dict:
    """One table row of the text track: `runs` (one per seed) against `uni`, uniform's runs by
    seed, each seed's NLL divided by that of uniform's run of the same seed."""
    nll = spread([r["mean_nll"] for r in runs])
    u_nll = float(np.mean([u["mean_nll"] for u in uni.values()]))
    paired = [r["mean_nll"] / uni[r["seed"]]["mean_nll"] - 1 for r in runs if r["seed"] in uni]
    flops, u_flops = (
        np.mean([r["flops"] for r in runs]),
        np.mean([u["flops"] for u in uni.values()]),
    )
    wall, u_wall = np.mean([r["wall"] for r in runs]), np.mean([u["wall"] for u in uni.values()])
    return {
        "schedule": schedule,
        "label": paper.label(schedule),
        "lr": runs[0]["lr"],
        "seeds": len(runs),
        "steps": runs[0]["steps"],
        "tokens": runs[0]["tokens"],
        "flops": float(flops),
        "mean_nll": nll,
        "vs_uniform": float(np.mean(paired)) if paired else nll["mean"] / u_nll - 1,
        "vs_uniform_by_seed": spread(paired),
        "compute_saving": float(1 - flops / u_flops),
        "wall_saving": float(1 - wall / u_wall),
        "depths": runs[0]["depths"],
        "token_nll": np.mean([r["token_nll"] for r in runs], axis=0).tolist(),
        "uniform_steps": next(iter(uni.values()))["steps"],
        "uniform_nll": spread([u["mean_nll"] for u in uni.values()]),
    }


def by_seed(rows: list[dict], role: str, schedule: str) -> list[dict]:
    """The rows of one schedule that serve `role`, in seed order."""
    return sorted(
        (r for r in rows if role in r["roles"] and r["schedule"] == schedule),
        key=lambda r: r["seed"],
    )


def compare(rows: list[dict], role: str, schedules: tuple[str, ...]) -> list[dict]:
    """One row per schedule, its seeds against uniform's. `role` "tokens": every schedule at the
    same steps (uniform's row is the reference, 0%). "flops": each other schedule against uniform
    trained on that schedule's modeled FLOPs (fewer steps); compute saved is then ~0 and the
    difference is what the schedule buys at equal compute.

    Each row: mean NLL over K=1..16 (seed mean, std, min, max), the relative difference from
    uniform (of the seed means, and paired per seed), the modeled compute and measured wall-clock
    saved, and the NLL at each serving depth (seed mean)."""
    table = []
    for s in schedules:
        runs = by_seed(rows, "tokens", s)
        if not runs or (role == "flops" and s == paper.UNIFORM):
            continue
        partner = by_seed(rows, "tokens" if role == "tokens" else f"flops:{s}", paper.UNIFORM)
        if partner:
            table.append(compare_row(s, runs, {u["seed"]: u for u in partner}))
    return table


def seed_spreads(result: dict) -> dict[str, float]:
    """Each schedule's max - min of the mean NLL over its equal-token seeds, widest first: which
    schedule's seeds make a comparison undecided."""
    spans = {}
    for r in result["equal_tokens"]:
        nll = [
            x["mean_nll"]
            for x in result["runs"]
            if "tokens" in x["roles"] and x["schedule"] == r["schedule"]
        ]
        if len(nll) > 1:
            spans[r["schedule"]] = max(nll) - min(nll)
    return dict(sorted(spans.items(), key=lambda kv: -kv[1]))


def main_at(rows: list[dict], schedule: str, budget: float) -> list[dict]:
    """The bios grid's main runs of one schedule at one budget, in seed order."""
    return sorted(
        (
            r
            for r in rows
            if r["schedule"] == schedule and r["budget"] == budget and "main" in r["group"]
        ),
        key=lambda r: r["seed"],
    )


def bios_summary(rows: list[dict], budget: float, tokens: bool = False) -> list[dict]:
    """The bios track's table, seed means against uniform's full-budget runs. Equal FLOPs
    (default): every main schedule at `budget`. `tokens`: fixed K=4 and fixed-first at uniform's
    steps (group "tokens"), the paper's framing. Each row carries the seed spread of its mean
    fact NLL and of its difference from uniform paired seed by seed."""
    uni = main_at(rows, paper.UNIFORM, budget)
    if not uni:
        return []
    seeds = {r["seed"]: r for r in uni}
    table = []
    for schedule in paper.MAIN_SCHEDULES:
        if tokens and schedule != paper.UNIFORM:
            runs = sorted(
                (r for r in rows if r["schedule"] == schedule and "tokens" in r["group"]),
                key=lambda r: r["seed"],
            )
        else:
            runs = main_at(rows, schedule, budget)
        if not runs:
            continue
        depths = runs[0]["depths"]
        bits = np.mean([r["bits"] for r in runs], axis=0) if "bits" in runs[0] else None
        nll = spread([float(np.mean(r["fact_nll"])) for r in runs])
        u_nll = float(np.mean([np.mean(r["fact_nll"]) for r in uni]))
        paired = [
            float(np.mean(r["fact_nll"]) / np.mean(seeds[r["seed"]]["fact_nll"]) - 1)
            for r in runs
            if r["seed"] in seeds
        ]
        table.append(
            {
                "schedule": schedule,
                "label": paper.label(schedule),
                "seeds": len(runs),
                "steps": runs[0]["steps"],
                "lr": runs[0].get("lr"),
                "compute_vs_uniform": float(
                    np.mean([r["flops"] for r in runs]) / np.mean([r["flops"] for r in uni])
                ),
                "wall_vs_uniform": float(
                    np.mean([r["wall"] for r in runs]) / np.mean([r["wall"] for r in uni])
                ),
                "mean_fact_nll": nll["mean"],
                "fact_nll_vs_uniform": nll["mean"] / u_nll - 1,
                "fact_nll": nll,
                "vs_uniform_by_seed": spread(paired),
                "bits": {
                    str(k): float(bits[depths.index(k)])
                    for k in (1, 4, 8, 16)
                    if bits is not None and k in depths
                },
            }
        )
    return table


# -- learning-rate choice --------------------------------------------------------------------
def best_lrs(sweep: list[dict]) -> dict[str, float]:
    """Each schedule's LR with the lowest validation NLL (mean over serving depths, then over
    the sweep's seeds; ties: the smaller LR). Test windows never choose anything."""
    by: dict[tuple[str, float], list[float]] = {}
    for r in sweep:
        by.setdefault((r["schedule"], r["lr"]), []).append(r.get("val_mean_nll", r["mean_nll"]))
    best: dict[str, tuple[float, float]] = {}
    for (schedule, lr), vals in sorted(by.items(), key=lambda kv: kv[0][1]):
        if schedule not in best or np.mean(vals) < best[schedule][0]:
            best[schedule] = (float(np.mean(vals)), lr)
    return {s: lr for s, (_, lr) in best.items()}


def sweep_means(rows: list[dict]) -> list[tuple[float, float]]:
    """(LR, mean validation NLL over the sweep's seeds) of one schedule's sweep rows, by LR."""
    by: dict[float, list[float]] = {}
    for r in rows:
        if r.get("mean_nll") is not None:
            by.setdefault(r["lr"], []).append(r["mean_nll"])
    return sorted((lr, float(np.mean(v))) for lr, v in by.items())


def at_edge(chosen: dict[str, float], lrs: tuple[float, ...] | list[float]) -> list[str]:
    """The schedules whose chosen LR is the smallest or largest swept: their optimum may lie
    beyond the sweep."""
    return [s for s, lr in chosen.items() if lr in (min(lrs), max(lrs))]


def choose_lrs(table: dict[tuple[str, int], dict[float, list[float]]]) -> dict:
    """Per schedule and length, from each LR's validation NLLs over the sweep's seeds (infinite
    for a diverged run): the LR with the lowest mean (ties: the smaller LR), every LR's mean, and
    whether the choice sits at an edge of the LRs tried ("low" or "high"; None inside)."""
    out: dict[str, dict[int, dict]] = {}
    for (schedule, steps), by_lr in table.items():
        means = {lr: float(np.mean(v)) for lr, v in by_lr.items()}
        finite = {lr: m for lr, m in means.items() if math.isfinite(m)}
        best = min(sorted(finite), key=lambda lr: finite[lr])
        edge = "low" if best == min(means) else "high" if best == max(means) else None
        out.setdefault(schedule, {})[steps] = {"lr": best, "val": means, "edge": edge}
    return out


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


def gap_verdict(gap: dict, tolerance: float, informative: bool = True) -> tuple[Verdict, str]:
    """(verdict, sentence) for "fixed-first is no worse than uniform, within `tolerance`", read
    from the 95% interval of the per-seed paired gaps (`ratio_interval`; negative: fixed-first
    better).
    `informative` False (its models do not beat a bigram table) gives no verdict at all."""
    iv = ratio_interval(gap["values"]) if len(gap.get("values", [])) > 1 else None
    if iv is None:  # one seed: no interval, so nothing can be decided
        iv = Interval(gap["mean"], -math.inf, math.inf, 1, (gap["mean"],))
    found = verdict(iv, tolerance, informative)
    return found, describe(found, iv, tolerance)


# -- the length study: trends ---------------------------------------------------------------
def trend_direction(fit: Interval) -> str:
    """Where the signed gap moves per doubling of tokens: "falling", "rising" (interval off zero)
    or "no clear trend"; the sign convention: positive gap = the schedule is behind uniform."""
    if fit.hi < 0:
        return "falling"
    if fit.lo > 0:
        return "rising"
    return "no clear trend"


# -- the diagnosis: how much of a gap an intervention closes ---------------------------------
def seed_shares(v: dict, variant: str) -> list[float]:
    """The share of the uniform-to-fixed-first gap a variant closes, seed by seed."""
    u, f, x = (v[k]["seed_mean_nll"] for k in ("uniform", "fixed-first", variant))
    return [(a - c) / (a - b) for a, b, c in zip(u, f, x, strict=True) if abs(a - b) > 1e-12]


def closed_share(v: dict, variant: str) -> float:
    """The share of the uniform-to-fixed-first gap (seed-mean NLL) a variant closes; 0 when
    the two end level."""
    u, f = v["uniform"]["mean_nll"], v["fixed-first"]["mean_nll"]
    return (u - v[variant]["mean_nll"]) / (u - f) if abs(u - f) > 1e-12 else 0.0


# -- seeds in rounds: a group-sequential interval --------------------------------------------
@functools.lru_cache(maxsize=16)
def sequential_critical(looks: tuple[int, ...], alpha: float = 0.05, sims: int = 200_000) -> float:
    """The constant c such that mean ± c·sd/√n covers the true mean at every look at once with
    probability 1 - alpha, for normal per-seed values of unknown spread looked at after
    `looks` seeds (a Pocock-type repeated confidence interval). Found by simulating the
    largest |t| over the looks under a true gap of 0 (the t statistic's law does not depend on
    the gap or the spread), with a fixed generator, so every study gets the same c."""
    rng = np.random.default_rng(20261202)
    x = rng.standard_normal((sims, max(looks)))
    worst = np.zeros(sims)
    for n in looks:
        m, sd = x[:, :n].mean(1), x[:, :n].std(1, ddof=1)
        worst = np.maximum(worst, np.abs(m) * math.sqrt(n) / sd)
    return float(np.quantile(worst, 1 - alpha))


def sequential_interval(values: list[float], looks: tuple[int, ...]) -> Interval:
    """The group-sequential 95% interval of paired differences after len(values) seeds: wider
    than the one-look t-interval, so that stopping a cell at the first look whose interval
    decides keeps that cell's chance of a wrong verdict at 5% or less over all its looks (per
    cell: the study's several cells are not corrected for their number). A look outside the
    plan (a round collected unfinished) joins the looks, which widens its interval further."""
    n = len(values)
    if n < 2:
        return Interval(
            float(np.mean(values)) if n else math.nan, -math.inf, math.inf, n, tuple(values)
        )
    mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    half = sequential_critical(tuple(sorted({*looks, n}))) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, tuple(values))


def _cell_base(mine: list[dict], bigram: float) -> dict:
    first = mine[0]
    return {
        "steps": first["steps"],
        "schedule": first["schedule"],
        "label": first["label"],
        "lr": first["lr"],
        "tokens": first["tokens"],
        "seeds": len(mine),
        "seed_ids": [r["seed"] for r in mine],
        "mean_nll": float(np.mean([r["mean_nll"] for r in mine])),
        "seed_nll": [r["mean_nll"] for r in mine],
        "se_windows": float(np.mean([r["se"] for r in mine])),
        "tokens_per_param": first["tokens"] / first["params"],
        "tokens_per_non_embedding_param": first["tokens"] / first["params_non_embedding"],
        "beats_bigram": bool(max(r["mean_nll"] for r in mine) < bigram),
    }


DEPTHS_SHOWN = (1, 4, 16)  # the per-depth gaps beside the mean: a mean can hide opposite moves


def keeps_going(found: Verdict) -> bool:
    """Whether a cell takes the next round of seeds: undecided, or "no worse" (more seeds may
    narrow it to "within"; a study that ends there reports "no worse")."""
    return found in (Verdict.UNDECIDED, Verdict.NO_WORSE)


def judged_cell(
    mine: list[dict], uni: list[dict], bigram: float, looks: tuple[int, ...], tol: float
) -> dict:
    """One schedule at one length against uniform's runs of the same seeds: the paired gap
    with its group-sequential interval, the verdict at `tol`, the gap at K=1, 4 and 16, and
    whether the cell stays open for the next round (undecided or "no worse", and its models
    beat the bigram)."""
    by_seed = {r["seed"]: r for r in uni}
    mine = [r for r in mine if r["seed"] in by_seed]
    ref = [by_seed[r["seed"]] for r in mine]
    cell = _cell_base(mine, bigram)
    gap = sequential_ratio([a["mean_nll"] / b["mean_nll"] - 1 for a, b in zip(mine, ref)], looks)
    informative = cell["beats_bigram"] and max(r["mean_nll"] for r in ref) < bigram
    found = verdict(gap, tol, informative) if gap.n > 1 or not informative else Verdict.UNDECIDED
    by_depth = {
        str(k): sequential_ratio(
            [a["token_nll"][k - 1] / b["token_nll"][k - 1] - 1 for a, b in zip(mine, ref)], looks
        ).as_dict()
        for k in DEPTHS_SHOWN
        if len(mine[0]["token_nll"]) >= k
    }
    return cell | {
        "gap": gap.as_dict(),
        "tolerance": tol,
        "verdict": found.value,
        "planned_look": gap.n in looks,  # False: an interim look (a round collected unfinished)
        "open": keeps_going(found),
        "gap_by_depth": by_depth,
    }


def sequential_ratio(values: list[float], looks: tuple[int, ...]) -> Interval:
    """`sequential_interval` over log ratios, turned back into relative gaps (as
    `ratio_interval` does for one look): the one gap definition, with the rounds' interval."""
    logs = sequential_interval([math.log1p(v) for v in values], looks)
    back = [math.expm1(x) if math.isfinite(x) else x for x in (logs.mean, logs.lo, logs.hi)]
    return Interval(*back, logs.n, tuple(values))


def sequential_cells(
    rows: list[dict],
    bigram: float,
    schedules: tuple[str, ...],
    looks: tuple[int, ...],
    tolerance: dict[str, float],
    previous: list[dict] = (),
) -> list[dict]:
    """Per length: uniform's cell, then each other schedule's judged cell. A cell decided at an
    earlier look keeps that look's verdict (its seeds stopped there); an open one is judged
    again on every seed it now has."""
    done = {(c["schedule"], c["steps"]): c for c in previous if not c.get("open", True)}
    out = []
    for steps in sorted({r["steps"] for r in rows}):
        at = {s: [r for r in rows if r["steps"] == steps and r["schedule"] == s] for s in schedules}
        uni = at.get(paper.UNIFORM, [])
        if not uni:
            continue
        out.append(_cell_base(uni, bigram))
        for s in schedules:
            if s == paper.UNIFORM or not at[s]:
                continue
            paired = {r["seed"] for r in uni} & {r["seed"] for r in at[s]}
            if (s, steps) in done or paired:  # no common seed yet (one side unfinished): no cell
                out.append(
                    done.get((s, steps)) or judged_cell(at[s], uni, bigram, looks, tolerance[s])
                )
    return out


def seed_trends(cells: list[dict]) -> dict[str, dict]:
    """Per schedule: each seed's least-squares slope of its gap against log2(tokens) over the
    informative lengths that seed has, then the 95% t-interval over seeds. A trend is read
    only where that interval excludes zero; seeds are the unit, not seed x length points."""
    out = {}
    for s in dict.fromkeys(c["schedule"] for c in cells if "gap" in c):
        mine = [c for c in cells if c["schedule"] == s and "gap" in c]
        mine = [c for c in mine if c["verdict"] != Verdict.NOT_INFORMATIVE.value]
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
            entry |= {"slope": fit.as_dict(), "direction": trend_direction(fit)}
        out[s] = entry
    return out


def tuned_cells(rows: list[dict], own: dict[str, float], tolerance: dict[str, float]) -> list[dict]:
    """The robustness check: each schedule at its own LR against uniform at the shared LR, the
    same seeds, a plain 95% t-interval (one look)."""
    uni = [r for r in rows if r["schedule"] == paper.UNIFORM]
    out = []
    for s, lr in own.items():
        mine = [r for r in rows if r["schedule"] == s and r["lr"] == lr]
        by_seed = {r["seed"]: r for r in uni}
        pairs = [(r, by_seed[r["seed"]]) for r in mine if r["seed"] in by_seed]
        if len(pairs) < 2:
            continue
        gap = ratio_interval([a["mean_nll"] / b["mean_nll"] - 1 for a, b in pairs])
        out.append(
            {
                "schedule": s,
                "label": mine[0]["label"],
                "lr": lr,
                "shared_lr": pairs[0][1]["lr"],
                "gap": gap.as_dict(),
                "verdict": verdict(gap, tolerance[s]).value,
            }
        )
    return out
