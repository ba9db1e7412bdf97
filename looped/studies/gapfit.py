"""What the map adds up to: the gap as a plane in log tokens per parameter and log parameters.

    fit = gap_fit(cells, tolerance=0.008)         # cells of one recipe, across widths and lengths
    fit["crossing"]["64"]["zero"]                  # tokens/param where d=64's gap crosses 0

For each seed s, least squares over the cells that seed has:
    gap_s(T, P) = a_s + b_s * log2(T) + c_s * log2(P)
with T the training tokens per non-embedding parameter and P the non-embedding parameters.
Intervals are Student-t over seeds (seeds are the unit; this is not a mixed model), so a
crossing or a prediction is computed per seed first, then summarised. The crossing of a level
L at width P is log2(T*) = (L - a - c log2 P) / b, defined only when every seed's b has the
same sign; otherwise the fit says that the gap does not move with length in one direction.

`escape_delays` and `delay_fit` read the map the other way, seed by seed: how far each seed-cell's
gap follows how late uniform left its early plateau (issue 52's mechanism).
"""

from __future__ import annotations

import math

import numpy as np

from looped import paper
from looped.studies.stats import interval, ratio_interval

PAPER_SCALE = 200e6  # the paper's smaller model, in parameters: an extrapolation, labelled so


def plane(points: list[tuple[float, float, float]]) -> np.ndarray | None:
    """(a, b, c) of one seed's least-squares plane; None when the points do not span both axes."""
    x = np.array([[1.0, math.log2(t), math.log2(p)] for t, p, _ in points])
    if len(points) < 4 or np.linalg.matrix_rank(x) < 3:
        return None
    return np.linalg.lstsq(x, np.array([g for *_, g in points]), rcond=None)[0]


def gap_fit(cells: list[dict], tolerance: float) -> dict:
    """The per-seed planes, their coefficients' intervals, each width's crossings of 0 and of
    `tolerance`, and the gap predicted at 200M parameters."""
    points: dict[int, list[tuple[float, float, float]]] = {}  # seed -> its cells' (T, P, gap)
    for c in cells:
        tpp, params = c["tokens_per_non_embedding_param"], c["params_non_embedding"]
        for seed, gap in zip(c["seed_ids"], c["gap"]["values"]):
            points.setdefault(seed, []).append((tpp, params, gap))
    full = max((len(p) for p in points.values()), default=0)
    planes = {s: f for s, p in points.items() if len(p) == full and (f := plane(p)) is not None}
    if len(planes) < 2:
        return {"fit": None, "why": "fewer than 2 seeds span two widths and two lengths"}
    coef = np.array(list(planes.values()))
    names = ("intercept", "per_doubling_tokens_per_param", "per_doubling_params")
    widths = {c["d_model"]: c["params_non_embedding"] for c in cells}  # d -> non-embedding params
    levels = {"zero": 0.0, "tolerance": tolerance}
    out = {
        "method": "least squares per seed, Student-t interval over seeds",
        "seeds": sorted(planes),
        "cells": len(cells),
        "fit": {n: interval(list(coef[:, i])).as_dict() for i, n in enumerate(names)},
        "crossing": {
            str(d): {k: crossing(coef, params, level) for k, level in levels.items()}
            for d, params in sorted(widths.items())
        },
    }
    top = max(c["tokens_per_non_embedding_param"] for c in cells)
    at = coef @ np.array([1.0, math.log2(top), math.log2(PAPER_SCALE)])
    out["extrapolation"] = {
        "params": PAPER_SCALE,
        "tokens_per_param": top,
        "gap": interval(list(at)).as_dict(),
        "crossing": {"zero": crossing(coef, PAPER_SCALE, 0.0)},
    }
    return out


def crossing(coef: np.ndarray, params: float, level: float) -> dict | None:
    """Tokens per parameter where each seed's plane reaches `level` at `params`, as a geometric
    mean with its interval over seeds; None when the seeds' slopes in T differ in sign."""
    b = coef[:, 1]
    if not (np.all(b > 0) or np.all(b < 0)):
        return None
    logs = (level - coef[:, 0] - coef[:, 2] * math.log2(params)) / b
    iv = interval(list(logs))
    return {"tokens_per_param": 2**iv.mean, "lo": 2**iv.lo, "hi": 2**iv.hi, "n": iv.n}


MAIN_ARMS = (paper.RECIPES_1B[1], paper.RECIPE_200M)  # K=4 (80%) and K=2 (67%): every width's


def escape_delays(result: dict, arms: tuple[str, ...] = MAIN_ARMS) -> list[dict]:
    """Each reported seed-cell of a map (one arm, one length, one seed, on one pass): the gap to
    uniform (the seed's ratio of NLLs, less 1) against how many steps after the arm uniform's
    training loss fell below the bigram table. Where uniform never escaped, the delay is at least
    the steps the arm had left (`censored`); a seed-cell where the arm never escaped is left out."""
    out, seen = [], set()
    for block in result.get("blocks", {}).values():
        by_key = {(c["schedule"], c["steps"]): c for c in block.get("cells", [])}
        for c in block.get("cells", []):
            ref = by_key.get((paper.UNIFORM, c["steps"]))
            key = (c.get("d_model"), c.get("vocab_size"), c["steps"], c["schedule"])
            skip = "gap" not in c or c["schedule"] not in arms or not ref
            if skip or not c.get("one_pass", True) or key in seen:
                continue
            seen.add(key)
            uni = dict(zip(ref["seed_ids"], zip(ref["seed_nll"], ref["escape_steps"])))
            for seed, nll, esc in zip(c["seed_ids"], c["seed_nll"], c["escape_steps"]):
                if seed not in uni or esc is None:
                    continue
                u_nll, u_esc = uni[seed]
                out.append(
                    {
                        "d_model": c.get("d_model"),
                        "vocab_size": c.get("vocab_size"),
                        "steps": c["steps"],
                        "schedule": c["schedule"],
                        "lr": c["lr"],
                        "seed": seed,
                        "gap": nll / u_nll - 1,
                        "delay": (c["steps"] if u_esc is None else u_esc) - esc,
                        "censored": u_esc is None,
                    }
                )
    return out


def delay_fit(points: list[dict]) -> dict | None:
    """How closely the gap follows uniform's delay over the seed-cells where both escaped: the
    correlation, the share of the gaps' spread it explains (r squared) and the least-squares
    slope (gap points per 100 steps). Descriptive: a cell's two arms share uniform's run, so the points are
    not independent and no interval is drawn from them."""
    both = [p for p in points if not p["censored"]]
    if len(both) < 3 or len({p["delay"] for p in both}) < 2:
        return None
    x, y = np.array([p["delay"] for p in both], float), np.array([p["gap"] for p in both])
    r = float(np.corrcoef(x, y)[0, 1])
    slope = float(np.polyfit(x, y, 1)[0])
    return {
        "n": len(both),
        "censored": len(points) - len(both),
        "r": r,
        "r2": r * r,
        "pct_per_100_steps": 1e4 * slope,
        "median_delay": float(np.median(x)),
    }


def recipe_change(old: dict, new: dict) -> list[dict]:
    """What a new recipe did to each cell the two maps share (one schedule at one length of one
    width and vocabulary; found in the old block of the same name, else in the first old block
    that has it, as a one-length block's cell is its width block's): the held-out NLL under the
    new recipe over the old, paired by seed (the interval over seeds, as a gap is), each recipe's
    LR and the schedule's escape steps in the seeds both ran."""
    out, old_blocks = [], old.get("blocks", {})

    def key(c: dict) -> tuple:
        return c.get("d_model"), c.get("vocab_size"), c["schedule"], c["steps"]

    anywhere: dict[tuple, dict] = {}
    for block in old_blocks.values():
        for c in block.get("cells", []):
            anywhere.setdefault(key(c), c)
    for name, block in new.get("blocks", {}).items():
        before = {**anywhere, **{key(c): c for c in old_blocks.get(name, {}).get("cells", [])}}
        for c in block.get("cells", []):
            if (was := before.get(key(c))) is None:
                continue
            by_seed = dict(zip(was["seed_ids"], was["seed_nll"]))
            ratios = [
                v / by_seed[s] - 1 for s, v in zip(c["seed_ids"], c["seed_nll"]) if s in by_seed
            ]
            if len(ratios) < 2:
                continue
            # the escapes of the seeds both recipes ran, as the NLL's change reads them: a new
            # round of seeds under one recipe alone would move a median with no pair behind it
            both = set(was["seed_ids"]) & set(c["seed_ids"])
            out.append(
                {
                    "block": name,
                    "schedule": c["schedule"],
                    "steps": c["steps"],
                    "d_model": c.get("d_model"),
                    "vocab_size": c.get("vocab_size"),
                    "lr": (was["lr"], c["lr"]),
                    "escape_steps": (_escapes_in(was, both), _escapes_in(c, both)),
                    "change": ratio_interval(ratios).as_dict(),
                }
            )
    return out


def _escapes_in(cell: dict, seeds: set) -> list:
    return [e for s, e in zip(cell["seed_ids"], cell["escape_steps"]) if s in seeds]


def pooled_gaps(result: dict, arms: tuple[str, ...] = MAIN_ARMS, vocab: int = 512) -> list[dict]:
    """Each arm's gap pooled per seed over every cell at `vocab` where every model beat the bigram
    table (a verdict was read; one pass): each seed's mean gap over those cells, then the interval
    over seeds. An analysis chosen after the map was read, so a reader is told so: it asks what
    the informative cells say together, where each alone is undecided."""
    out = []
    for arm in arms:
        per_seed: dict[int, list[float]] = {}
        at: set[tuple] = set()
        for block in result.get("blocks", {}).values():
            for c in block.get("cells", []):
                key = (c.get("d_model"), c["steps"])
                informative = c.get("verdict") not in (None, "not informative at this size")
                fits = c["schedule"] == arm and c.get("vocab_size") == vocab and "gap" in c
                if not (fits and informative and c.get("one_pass", True)) or key in at:
                    continue
                at.add(key)
                for seed, gap in zip(c["seed_ids"], c["gap"]["values"]):
                    per_seed.setdefault(seed, []).append(gap)
        whole = [float(np.mean(v)) for _, v in sorted(per_seed.items())]  # each over its cells
        if len(whole) > 1:
            gap = ratio_interval(whole)
            out.append({"schedule": arm, "cells": sorted(at), "gap": gap.as_dict()})
    return out
