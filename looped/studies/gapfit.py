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
"""

from __future__ import annotations

import math

import numpy as np

from looped.studies.stats import interval

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
        **{"seeds": sorted(planes), "cells": len(cells)},
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
