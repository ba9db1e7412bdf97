"""The length study (`looped length`) as tables of numbers and one figure, pure functions of
length.json's dict; the sentences around them are written by hand in the docs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from looped import paper, plotting
from looped.paper import label
from looped.studies.report.tables import md_table
from looped.studies.stats import Verdict, planned_looks

MISSES = "a model misses the bigram: no verdict"  # the key of a hollow (unjudged) cell
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


def fig_gap(result: dict, path: Path) -> Path:
    """Left: each schedule's paired gap to uniform against training tokens (seed mean,
    group-sequential 95% interval, each seed a dot, its tolerance dashed). Right: the gap at
    every serving depth at the longest length, where the deficit sits."""
    plotting.use_theme()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 4.0))
    for i, s in enumerate(compared(result)):
        _gap_line(left, [c for c in result["cells"] if c.get("gap") and c["schedule"] == s], s, i)
        _depth_line(right, result, s, i)
    left.set_xscale("log", base=2)
    plotting.plain_ticks(left.xaxis, subs=(1, 2, 5))
    left.set_xlabel("training tokens (millions)")
    left.set_ylabel("gap to uniform, % (+: behind)")
    right.set_xlabel("serving depth K")
    plotting.chosen_ticks(right.xaxis, plotting.DEPTH_TICKS)
    right.set_ylabel("gap at depth K, %")
    for ax in (left, right):
        ax.axhline(0, color="0.3", lw=0.8)
    handles, _ = left.get_legend_handles_labels()
    one_seed = Line2D([], [], marker="o", ms=3, alpha=0.45, color="0.4", ls="", label="one seed")
    keys = [*handles, one_seed, *gap_keys(result["cells"])]
    left.legend(handles=keys, fontsize=8, loc="lower right")  # the gap grows with tokens
    right.legend(fontsize=8, loc="upper right")  # the deficit sits at the shallow depths
    return plotting.save(fig, path)


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


def _gap_line(ax: Any, mine: list[dict], s: str, i: int) -> None:
    """One schedule's gap per length, each seed a dot, its tolerance dashed."""
    colour = plotting.color(s, i)
    x = np.array([c["tokens"] / 1e6 for c in mine]) * 2 ** (0.06 * (i - 1))  # side by side
    gap_marks(ax, x, mine, colour, label=label(s), zorder=3)
    for xi, c in zip(x, mine):
        seeds = [100 * v for v in c["gap"]["values"]]
        ax.scatter([xi] * c["seeds"], seeds, s=7, color=colour, alpha=0.45, zorder=2)
    if s != paper.UNIFORM_PER_MICRO:  # the paper's tolerance is a claim about its recipes only
        tol = 100 * mine[0]["tolerance"]
        ax.axhline(
            tol, color=colour, ls="--", lw=1, label="its tolerance (its colour)" if i == 0 else None
        )


def gap_marks(ax: Any, x: np.ndarray, cells: list[dict], colour: Any, **kw: Any) -> None:
    """Cells' paired gap to uniform at `x` (seed mean, 95% interval, in %); hollow where the
    models miss the bigram (no verdict), crossed where a cell is past one pass (not reported)."""
    mean, lo, hi = (np.array([100 * c["gap"][k] for c in cells]) for k in ("mean", "lo", "hi"))
    ax.errorbar(x, mean, yerr=[mean - lo, hi - mean], marker="o", capsize=3, color=colour, **kw)
    plotting.key(ax, "bars", "95% interval over seeds")
    quiet = [k for k, c in enumerate(cells) if c["verdict"] == Verdict.NOT_INFORMATIVE]
    ax.scatter(x[quiet], mean[quiet], s=50, facecolors="white", edgecolors=colour, zorder=4)
    past = [k for k, c in enumerate(cells) if not c.get("one_pass", True)]
    ax.scatter(x[past], mean[past], s=60, marker="x", color="black", zorder=5)


def _depth_line(ax: Any, result: dict, s: str, i: int) -> None:
    """One schedule's per-seed gap at each serving depth, at its longest length."""
    cell = longest(result, s)
    rows = [r for r in result["rows"] if r["steps"] == cell["steps"]]
    nll = {(r["schedule"], r["seed"]): np.array(r["token_nll"]) for r in rows}
    gaps = [100 * (nll[s, k] / nll[paper.UNIFORM, k] - 1) for k in cell["seed_ids"]]
    depths = range(1, len(gaps[0]) + 1)
    plotting.band(ax, depths, gaps, f"{label(s)}, {cell['steps']} steps", plotting.color(s, i))


def percent_iv(g: dict) -> str:
    """ "+2.10% [+1.40, +2.80]": a mean with its interval, in percent; one seed has none."""
    if not (math.isfinite(g["lo"]) and math.isfinite(g["hi"])):
        return f"{100 * g['mean']:+.2f}% [no interval from one seed]"
    return f"{100 * g['mean']:+.2f}% [{100 * g['lo']:+.2f}, {100 * g['hi']:+.2f}]"


def verdict_of(cell: dict) -> str:
    """The cell's verdict, marked when read at an unplanned (interim) look."""
    return cell["verdict"] + ("" if cell.get("planned_look", True) else " (interim look)")


def gap_cell(cell: dict) -> str:
    """ "+2.10% [+1.40, +2.80], n=4, worse": the paired mean gap, its interval and the verdict;
    a cell past one pass over its data has no verdict; one whose seeds trained on a CPU and a
    GPU says so."""
    if not cell.get("one_pass", True):
        return f"{percent_iv(cell['gap'])}, n={cell['gap']['n']}, past one pass: not reported"
    # a GPU loan's seeds beside the CPU's: each pair is one seed's, but the reader should know
    mixed = (
        f" (seeds trained on {' and '.join(d)})" if len(d := cell.get("devices", [])) > 1 else ""
    )
    return f"{percent_iv(cell['gap'])}, n={cell['gap']['n']}, {verdict_of(cell)}{mixed}"


def table_rows(result: dict) -> str:
    """One row per length: tokens, tokens per parameter, the shared LR, uniform's test NLL, and
    each schedule's paired gap to uniform with its interval, seeds and verdict."""
    others = compared(result)
    head = ["steps", "tokens", "tokens / param", "epochs", "LR", "uniform NLL (± window SE)"]
    rows = []
    for steps in sorted({c["steps"] for c in result["cells"]}):
        at = {c["schedule"]: c for c in result["cells"] if c["steps"] == steps}
        u = at[paper.UNIFORM]
        gaps = [gap_cell(at[s]) if s in at and "gap" in at[s] else "-" for s in others]
        nll = f"{u['mean_nll']:.3f} ± {u['se_windows']:.3f}"
        passes = f"{u['epochs']:.2f}" if u.get("epochs") is not None else "-"
        row = [
            steps,
            f"{u['tokens'] / 1e6:.2f}M",
            f"{u['tokens_per_param']:.0f}",
            passes,
            f"{u['lr']:g}",
        ]
        rows.append([*row, nll, *gaps])
    return md_table(head + [f"{label(s)} vs uniform" for s in others], rows)


def depth_rows(result: dict) -> str:
    """At each schedule's longest length: the gap at serving depths 1, 4 and 16 beside the mean
    over 1..16, each with its interval."""
    rows = []
    for s in compared(result):
        c = longest(result, s)
        by = c.get("gap_by_depth", {})
        rows.append(
            [label(s), c["steps"], gap_cell(c)]
            + [percent_iv(by[k]) if k in by else "-" for k in ("1", "4", "16")]
        )
    return md_table(["schedule", "steps", "mean over K=1..16", "K=1", "K=4", "K=16"], rows)


def trend_rows(result: dict) -> str:
    """Per schedule: each seed's slope of the gap per doubling of tokens, and the 95% interval
    over seeds with the direction it supports."""
    rows = [[label(s), *trend_row(t)] for s in compared(result) if (t := result["trends"].get(s))]
    return md_table(["schedule", *TREND_HEAD], rows)


TREND_HEAD = [
    "lengths",
    "seeds",
    "slope per doubling of tokens [95% interval]",
    "direction",
    "per seed",
]


def trend_row(t: dict) -> list:
    """One schedule's trend: informative lengths, seeds, the slope's interval over seeds, the
    direction it supports and each seed's slope (in points of gap per doubling)."""
    per = ", ".join(f"{100 * v:+.2f}" for v in t["per_seed"].values()) or "-"
    sl = t["slope"]
    # no slope: say which is missing (two lengths give every seed a line, never a trend to test)
    few = "too few lengths (a trend needs 3)" if t["lengths"] < 3 else "too few seeds"
    few = few if t["lengths"] else "no length with a verdict"
    fit = [sl["n"], percent_iv(sl), t["direction"]] if sl else [len(t["per_seed"]) or "-", "-", few]
    return [t["lengths"], *fit, per]


def tuned_rows(result: dict) -> str:
    """The robustness check: each schedule at its own LR (chosen on the LR seeds) at one length."""
    tuned = result.get("tuned") or {}
    head = ["schedule", "steps", "own LR", "shared LR", "gap [95% interval]", "verdict"]
    if not tuned.get("cells"):
        return md_table(head, [["-"] * 5 + ["not run: " + result["meta"]["stopped"]["reason"]]])
    rows = []
    for c in tuned["cells"]:
        lrs, gap = (
            [f"{c['lr']:g}", f"{c['shared_lr']:g}"],
            f"{percent_iv(c['gap'])}, n={c['gap']['n']}",
        )
        rows.append([label(c["schedule"]), tuned["steps"], *lrs, gap, c["verdict"]])
    return md_table(head, rows)


def facts_rows(result: dict) -> str:
    """What was run, where, and at what cost: the setup, the baselines and the stop."""
    num = lambda kv: float(kv[0])  # noqa: E731  (JSON keys: LRs and lengths as strings)
    meta, base, st = result["meta"], result["baselines"]["test"], result["meta"]["settings"]
    sp, env, first = meta["corpus"]["splits"], meta["environment"], result["rows"][0]
    sweep = "; ".join(
        f"{n} steps: "
        + ", ".join(f"{float(lr):g}→{v:.3f}" for lr, v in sorted(c["val"].items(), key=num))
        for n, c in sorted(result["chosen"][paper.UNIFORM].items(), key=num)
    )
    tok = {k: sp[k]["tokens"] for k in ("train", "val", "test")}
    planned = planned_looks(st["rounds"], st["max_seeds"])
    facts = {
        "corpus": f"{meta['corpus'].get('dataset', 'stdlib')}: {tok['train'] / 1e6:.1f}M train / "
        f"{tok['val'] / 1e3:.0f}k val / {tok['test'] / 1e3:.0f}k test tokens, "
        f"{meta['corpus']['tokenizer']}",
        "model": f"d={st['setup']['d_model']}, one looped layer, {first['params']:,} parameters "
        f"({first['params_non_embedding']:,} outside the embedding)",
        "batch": f"{st['setup']['batch_size']}x{st['setup']['seq_len']} tokens per step",
        f"LR sweep (uniform, LR seed{'s' * (len(st['lr_seeds']) > 1)} "
        f"{', '.join(map(str, st['lr_seeds']))})": sweep,
        "baselines (test windows)": f"unigram {base['unigram']:.3f}, bigram "
        f"{base['bigram']:.3f} nats/token",
        "rounds": f"{', '.join(map(str, planned))} seeds (--max-seeds {st['max_seeds']}); "
        f"stopped: {meta['stopped']['reason']}",
        "cost": f"{meta['worker_s'] / 3600:.1f} worker-hours of reported runs",
        "environment": f"{env['machine']}, {env['dtype']}, torch {env['torch']}, "
        f"Python {env['python']}",
    }
    return md_table(["", ""], list(facts.items()))


def length_section(result: dict) -> str:
    """The study's tables and its figure for docs/RESULTS.md, every number from length.json."""
    parts = (facts_rows, table_rows, depth_rows, trend_rows, tuned_rows)
    return "\n\n".join(part(result) for part in parts) + (
        "\n\n![The gap to uniform against training tokens, and by serving depth]"
        "(../figures/length_gap.png)"
    )
