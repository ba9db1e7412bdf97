"""A text block's tables (`studies.textstudy`: one width, tokenizer and corpus at its lengths),
pure functions of its entry in map.json: each length's cells, the gap by serving depth, the
per-seed trends and the own-LR check. `report.map` lays the blocks out."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.lines import Line2D

from looped import paper, plotting
from looped.paper import label
from looped.studies.report.tables import gap_text, md_table, verdict_words
from looped.studies.stats import Verdict

MISSES = "a model misses the bigram table: no verdict"  # the key of a hollow (unjudged) cell
RECIPES = (paper.RECIPES_1B[1], paper.RECIPE_200M)  # the text recipes judged, in order


def compared(result: dict) -> list[str]:
    """The schedules set against uniform, in the study's order."""
    return list(dict.fromkeys(c["schedule"] for c in result["cells"] if "gap" in c))


def longest(result: dict, schedule: str) -> dict | None:
    """A schedule's cell at the longest length it was judged at."""
    cells = [c for c in result["cells"] if c["schedule"] == schedule and "gap" in c]
    cells = [c for c in cells if c["gap"]["n"] > 1] or cells  # one seed has no interval
    cells = [c for c in cells if c.get("one_pass", True)] or cells  # repeated data: not reported
    return max(cells, key=lambda c: c["steps"]) if cells else None


def gap_keys(cells: list[dict]) -> list[Line2D]:
    """Legend entries for the marks `gap_marks` adds where the cells have them: a hollow cell
    (its models miss the bigram: no verdict), a crossed one (past one pass: not reported)."""
    judged = [c for c in cells if "gap" in c]
    keys = []
    if any(c["verdict"] == Verdict.NOT_INFORMATIVE for c in judged):
        keys.append(Line2D([], [], ls="", marker="o", mfc="white", mec="0.3", label=MISSES))
    if any(not c.get("one_pass", True) for c in judged):
        past = "past one pass: not reported"
        keys.append(Line2D([], [], ls="", marker="x", color="black", label=past))
    return keys


def gap_marks(
    ax: Any, x: np.ndarray, cells: list[dict], colour: Any, marker: str = "o", **kw: Any
) -> None:
    """Cells' paired gap to uniform at `x` (seed mean, 95% interval, in %); hollow where the
    models miss the bigram (no verdict), crossed where a cell is past one pass (not reported)."""
    mean, lo, hi = (np.array([100 * c["gap"][k] for c in cells]) for k in ("mean", "lo", "hi"))
    ax.errorbar(x, mean, yerr=[mean - lo, hi - mean], marker=marker, capsize=3, color=colour, **kw)
    plotting.key(ax, "bars", "95% interval over seeds")
    quiet = [k for k, c in enumerate(cells) if c["verdict"] == Verdict.NOT_INFORMATIVE]
    hollow = {"s": 50, "marker": marker, "facecolors": "white", "edgecolors": colour, "zorder": 4}
    ax.scatter(x[quiet], mean[quiet], **hollow)
    past = [k for k, c in enumerate(cells) if not c.get("one_pass", True)]
    ax.scatter(x[past], mean[past], s=60, marker="x", color="black", zorder=5)


def verdict_of(cell: dict) -> str:
    """The cell's verdict, marked when read at an unplanned (interim) look."""
    return verdict_words(cell) + ("" if cell.get("planned_look", True) else " (interim look)")


def gap_cell(cell: dict) -> str:
    """ "+2.10% [+1.40, +2.80], n=4, worse": the paired mean gap, its interval and the verdict;
    a cell past one pass over its data has no verdict; one whose seeds trained on a CPU and a
    GPU says so."""
    if not cell.get("one_pass", True):
        return f"{gap_text(cell['gap'])}, n={cell['gap']['n']}, past one pass: not reported"
    # a GPU loan's seeds beside the CPU's: each pair is one seed's, but the reader should know
    devices = cell.get("devices", [])
    mixed = f" (seeds trained on {' and '.join(devices)})" if len(devices) > 1 else ""
    return f"{gap_text(cell['gap'])}, n={cell['gap']['n']}, {verdict_of(cell)}{mixed}"


def table_rows(result: dict) -> str:
    """One row per length: tokens, tokens per parameter, the shared LR, uniform's test NLL, and
    each schedule's paired gap to uniform with its interval, seeds and verdict."""
    others = compared(result)
    head = ["steps", "tokens", "tokens / non-emb. param", "epochs", "LR"]
    head += ["uniform NLL (± window SE)"] + [f"{label(s)} vs uniform" for s in others]
    rows = []
    for steps in sorted({c["steps"] for c in result["cells"]}):
        at = {c["schedule"]: c for c in result["cells"] if c["steps"] == steps}
        u = at[paper.UNIFORM]
        gaps = [gap_cell(at[s]) if s in at and "gap" in at[s] else "-" for s in others]
        nll = f"{u['mean_nll']:.3f} ± {u['se_windows']:.3f}"
        passes = f"{u['epochs']:.2f}" if u.get("epochs") is not None else "-"
        size = [steps, f"{u['tokens'] / 1e6:.2f}M", f"{u['tokens_per_non_embedding_param']:.0f}"]
        rows.append([*size, passes, f"{u['lr']:g}", nll, *gaps])
    return md_table(head, rows)


def depth_rows(result: dict) -> str:
    """At each schedule's longest length: the gap at serving depths 1, 4 and 16 beside the mean
    over 1..16, each with its interval."""
    rows = []
    for s in compared(result):
        c = longest(result, s)
        rows.append([label(s), c["steps"], gap_cell(c), *depth_cells(c)])
    return md_table(["schedule", "steps", "mean over K=1..16", "K=1", "K=4", "K=16"], rows)


def depth_cells(cell: dict) -> list[str]:
    """The cell's gap at serving depths 1, 4 and 16, each with its interval ("-" where unread)."""
    by = cell.get("gap_by_depth", {})
    return [gap_text(by[k]) if k in by else "-" for k in ("1", "4", "16")]


def trend_rows(result: dict) -> str:
    """Per schedule: each seed's slope of the gap per doubling of tokens, and the 95% interval
    over seeds with the direction it supports."""
    rows = [[label(s), *trend_row(t)] for s in compared(result) if (t := result["trends"].get(s))]
    return md_table(["schedule", *TREND_HEAD], rows)


TREND_HEAD = ["lengths", "seeds", "slope per doubling of tokens [95% interval]", "direction"]
TREND_HEAD += ["per seed"]


def trend_row(t: dict) -> list:
    """One schedule's trend: informative lengths, seeds, the slope's interval over seeds, the
    direction it supports and each seed's slope (in points of gap per doubling)."""
    per = ", ".join(f"{100 * v:+.2f}" for v in t["per_seed"].values()) or "-"
    sl = t["slope"]
    # no slope: say which is missing (two lengths give every seed a line, never a trend to test)
    few = "too few lengths (a trend needs 3)" if t["lengths"] < 3 else "too few seeds"
    few = few if t["lengths"] else "no length with a verdict"
    fit = [sl["n"], gap_text(sl), t["direction"]] if sl else [len(t["per_seed"]) or "-", "-", few]
    return [t["lengths"], *fit, per]
