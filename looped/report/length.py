"""The length study (`looped length`) as a reader sees it: tables of numbers and one figure, pure
functions of length.json's dict. The sentences around them are written by hand in the docs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from looped import paper
from looped.report import style

# display names, in the order the tables and figures show the schedules
LABELS = {paper.UNIFORM: "uniform 1..16", paper.RECIPES_1B[1]: "fixed-first K=4 (80%)",
          paper.RECIPE_200M: "fixed-first K=2 (67%)",
          paper.UNIFORM_PER_MICRO: "uniform, K per micro-batch"}  # fmt: skip


def compared(result: dict) -> list[str]:
    """The schedules set against uniform, in display order."""
    return [s for s in LABELS if any(c["schedule"] == s and "gap" in c for c in result["cells"])]


def longest(result: dict, schedule: str) -> dict | None:
    """A schedule's cell at the longest length it was judged at."""
    cells = [c for c in result["cells"] if c["schedule"] == schedule and "gap" in c]
    cells = [c for c in cells if c["gap"]["n"] > 1] or cells  # one seed has no interval
    return max(cells, key=lambda c: c["steps"]) if cells else None


def fig_gap(result: dict, path: Path) -> Path:
    """Left: each fixed-first schedule's paired gap to uniform against training tokens (seed
    mean and group-sequential 95% interval; each seed a dot; its tolerance dashed). Right: the
    same gap at every serving depth at the longest length, where the deficit sits."""
    style.use_theme()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.6))
    shown = compared(result)
    for i, s in enumerate(shown):
        _gap_line(left, [c for c in result["cells"] if c.get("gap") and c["schedule"] == s], s, i)
    left.axhline(0, color="0.3", lw=0.8)
    left.set_xscale("log", base=2)
    left.set_xlabel("training tokens (millions)")
    left.set_ylabel("NLL gap to uniform, % (+: behind)")
    left.legend(fontsize=8)
    for i, s in enumerate(shown):
        _depth_line(right, result, s, i)
    right.axhline(0, color="0.3", lw=0.8)
    right.set_xlabel("serving depth K")
    right.set_ylabel("gap at depth K, %")
    style.depth_ticks(right)
    right.legend(fontsize=8)
    return style.save(fig, path)


def _gap_line(ax: Any, mine: list[dict], s: str, i: int) -> None:
    """One schedule's gap per length; lengths whose models miss the bigram are hollow."""
    colour = style.color(s, i)
    x = np.array([c["tokens"] / 1e6 for c in mine]) * 2 ** (0.06 * (i - 1))  # side by side
    mean = np.array([100 * c["gap"]["mean"] for c in mine])
    lo = np.array([100 * c["gap"]["lo"] for c in mine])
    hi = np.array([100 * c["gap"]["hi"] for c in mine])
    ax.errorbar(
        x,
        mean,
        yerr=[mean - lo, hi - mean],
        marker="o",
        capsize=3,
        color=colour,
        label=LABELS[s],
        zorder=3,
    )
    for xi, c in zip(x, mine):
        ax.scatter(
            [xi] * c["seeds"],
            [100 * v for v in c["gap"]["values"]],
            s=7,
            color=colour,
            alpha=0.45,
            zorder=2,
        )
    quiet = [k for k, c in enumerate(mine) if c["verdict"] == "not informative at this size"]
    ax.scatter(x[quiet], mean[quiet], s=50, facecolors="white", edgecolors=colour, zorder=4)
    if s != paper.UNIFORM_PER_MICRO:  # the paper's tolerance is a claim about its recipes only
        tol = 100 * mine[0]["tolerance"]
        ax.axhline(tol, color=colour, ls="--", lw=1, label=f"its tolerance, +{tol:.1f}%")


def _depth_line(ax: Any, result: dict, s: str, i: int) -> None:
    """One schedule's per-seed gap at each serving depth, at its longest length."""
    cell = longest(result, s)
    mine = [rows_of(result, s, cell["steps"])[k] for k in cell["seed_ids"]]
    ref = [rows_of(result, paper.UNIFORM, cell["steps"])[k] for k in cell["seed_ids"]]
    gaps = [
        100 * (np.array(a["token_nll"]) / np.array(b["token_nll"]) - 1) for a, b in zip(mine, ref)
    ]
    depths = range(1, len(gaps[0]) + 1)
    style.band(ax, depths, gaps, f"{LABELS[s]}, {cell['steps']} steps", style.color(s, i))


def rows_of(result: dict, schedule: str, steps: int) -> dict[int, dict]:
    """A schedule's reported runs at one length, by seed."""
    return {
        r["seed"]: r for r in result["rows"] if r["schedule"] == schedule and r["steps"] == steps
    }


def _pct(x: float) -> str:
    return f"{100 * x:+.2f}%"


def _iv(g: dict) -> str:
    """ "+2.10% [+1.40, +2.80]": a mean with its interval, in percent."""
    return f"{_pct(g['mean'])} [{100 * g['lo']:+.2f}, {100 * g['hi']:+.2f}]"


def gap_cell(cell: dict) -> str:
    """ "+2.10% [+1.40, +2.80], n=4, worse": the paired mean gap, its interval and the verdict."""
    g = cell["gap"]
    interim = "" if cell.get("planned_look", True) else " (interim look)"
    return f"{_iv(g)}, n={g['n']}, {cell['verdict']}{interim}"


def table_rows(result: dict) -> list[str]:
    """One row per length: tokens, tokens per parameter, the shared LR, uniform's test NLL, and
    each schedule's paired gap to uniform with its interval, seeds and verdict."""
    others = compared(result)
    rows = [
        "| steps | tokens | tokens / param | LR | uniform NLL (± window SE) | "
        + " | ".join(f"{LABELS[s]} vs uniform" for s in others)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(others),
    ]
    for steps in sorted({c["steps"] for c in result["cells"]}):
        at = {c["schedule"]: c for c in result["cells"] if c["steps"] == steps}
        uni = at[paper.UNIFORM]
        rows.append(
            f"| {steps} | {uni['tokens'] / 1e6:.2f}M | {uni['tokens_per_param']:.0f} | "
            f"{uni['lr']:g} | {uni['mean_nll']:.3f} ± {uni['se_windows']:.3f} | "
            + " | ".join(gap_cell(at[s]) if s in at and "gap" in at[s] else "-" for s in others)
            + " |"
        )
    return rows


def depth_rows(result: dict) -> list[str]:
    """At each schedule's longest length: the gap at serving depths 1, 4 and 16 beside the mean
    over 1..16, each with its interval."""
    rows = [
        "| schedule | steps | mean over K=1..16 | K=1 | K=4 | K=16 |",
        "|---|---|---|---|---|---|",
    ]
    for s in compared(result):
        c = longest(result, s)
        by = c.get("gap_by_depth", {})
        cols = [_iv(by[k]) if k in by else "-" for k in ("1", "4", "16")]
        rows.append(f"| {LABELS[s]} | {c['steps']} | {gap_cell(c)} | " + " | ".join(cols) + " |")
    return rows


def trend_rows(result: dict) -> list[str]:
    """Per schedule: each seed's slope of the gap per doubling of tokens, and the 95% interval
    over seeds with the direction it supports."""
    rows = [
        "| schedule | lengths | seeds | slope per doubling of tokens [95% interval] | direction | per seed |",
        "|---|---|---|---|---|---|",
    ]
    for s in compared(result):
        t = result["trends"].get(s)
        if not t:
            continue
        per = ", ".join(f"{100 * v:+.2f}" for v in t["per_seed"].values()) or "-"
        if t["slope"] is None:
            rows.append(
                f"| {LABELS[s]} | {t['lengths']} | {len(t['per_seed'])} | - | too few | {per} |"
            )
            continue
        sl = t["slope"]
        rows.append(
            f"| {LABELS[s]} | {t['lengths']} | {sl['n']} | {_iv(sl)} | {t['direction']} | {per} |"
        )
    return rows


def tuned_rows(result: dict) -> list[str]:
    """The robustness check: each schedule at its own LR (chosen on the LR seeds) at one length."""
    tuned = result.get("tuned") or {}
    if not tuned.get("cells"):
        return ["Not run: " + result["meta"]["stopped"]["reason"] + "."]
    rows = [
        "| schedule | steps | own LR | shared LR | gap [95% interval] | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for c in tuned["cells"]:
        g = c["gap"]
        rows.append(
            f"| {LABELS[c['schedule']]} | {tuned['steps']} | {c['lr']:g} | {c['shared_lr']:g} | "
            f"{_iv(g)}, n={g['n']} | {c['verdict']} |"
        )
    return rows


def facts_rows(result: dict) -> list[str]:
    """What was run, where, and at what cost: the setup, the baselines and the stop."""
    meta, base, st = result["meta"], result["baselines"], result["meta"]["settings"]
    sp, env, first = meta["corpus"]["splits"], meta["environment"], result["rows"][0]
    sweep = result["chosen"][paper.UNIFORM]
    return [
        "| | |",
        "|---|---|",
        f"| corpus | {meta['corpus'].get('dataset', 'stdlib')}: {sp['train']['tokens'] / 1e6:.1f}M train / "
        f"{sp['val']['tokens'] / 1e3:.0f}k val / {sp['test']['tokens'] / 1e3:.0f}k test tokens, "
        f"{meta['corpus']['tokenizer']} |",
        f"| model | d={st['setup']['d_model']}, one looped layer, {first['params']:,} parameters "
        f"({first['params_non_embedding']:,} outside the embedding) |",
        f"| batch | {st['setup']['batch_size']}x{st['setup']['seq_len']} tokens per step |",
        f"| LR sweep (uniform, seeds {', '.join(map(str, st['lr_seeds']))}) | "
        + "; ".join(
            f"{n} steps: "
            + ", ".join(
                f"{float(lr):g}→{v:.3f}"
                for lr, v in sorted(c["val"].items(), key=lambda kv: float(kv[0]))
            )
            for n, c in sorted(sweep.items(), key=lambda kv: int(kv[0]))
        )
        + " |",
        f"| baselines (test windows) | unigram {base['test']['unigram']:.3f}, bigram "
        f"{base['test']['bigram']:.3f} nats/token |",
        f"| rounds | {', '.join(map(str, st['rounds']))} seeds; stopped: {meta['stopped']['reason']} |",
        f"| cost | {meta['worker_s'] / 3600:.1f} worker-hours of reported runs |",
        f"| environment | {env['machine']}, {env['dtype']}, torch {env['torch']}, Python {env['python']} |",
    ]


def section(result: dict) -> str:
    """The study's tables for docs/RESULTS.md, every number read from length.json."""
    return "\n".join(
        [
            *facts_rows(result),
            "",
            *table_rows(result),
            "",
            *depth_rows(result),
            "",
            *trend_rows(result),
            "",
            *tuned_rows(result),
        ]
    )


def length_section(result: dict) -> str:
    """The length study's tables and its figure, from length.json."""
    return section(result) + (
        "\n\n![The gap to uniform against training tokens, and by serving depth]"
        "(../figures/length_gap.png)"
    )


def _where(c: dict) -> str:
    """A gap in words: ahead, behind or level, with the verdict at the schedule's tolerance."""
    g = c["gap"]
    side = "behind" if g["mean"] > 0 else "ahead of"
    return (
        f"{LABELS[c['schedule']]} ends {abs(100 * g['mean']):.1f}% {side} uniform "
        f"(95% interval {100 * g['lo']:+.1f}% to {100 * g['hi']:+.1f}%, {g['n']} seeds: "
        f"{c['verdict']} at the paper's {100 * c['tolerance']:.1f}% tolerance"
        + ("" if c.get("planned_look", True) else ", an interim look: the round was unfinished")
        + ")"
    )


def finding(result: dict) -> str:
    """The README's finding: each fixed-first recipe at the longest length, in its regime
    (width, steps, tokens per parameter), and how its gap moved as training lengthened."""
    recipes = [s for s in compared(result) if s != paper.UNIFORM_PER_MICRO]
    if not recipes:
        return "No fixed-first schedule was compared yet."
    first = longest(result, recipes[0])
    informative = [
        c["steps"]
        for c in result["cells"]
        if "gap" in c
        and c["schedule"] in recipes
        and c["verdict"] != "not informative at this size"
    ] or [first["steps"]]
    moves = []
    for s in recipes:
        t = result["trends"].get(s) or {}
        if t.get("slope"):
            sl = t["slope"]
            moves.append(
                f"{LABELS[s].split(' (')[0]}'s gap moved {100 * sl['mean']:+.1f} points per "
                f"doubling of tokens ([{100 * sl['lo']:+.1f}, {100 * sl['hi']:+.1f}], "
                f"{t['direction']})"
            )
    missing = [LABELS[s] for s in (paper.RECIPES_1B[1], paper.RECIPE_200M) if s not in recipes]
    later = (
        f" ({', '.join(missing)}: not measured yet, {result['meta']['stopped']['reason']})"
        if missing
        else ""
    )
    return (
        f"On text, with a d={result['meta']['settings']['setup']['d_model']} model trained "
        f"{first['steps']:,} steps ({first['tokens_per_param']:.0f} tokens per parameter) at one "
        "shared learning rate, "
        + " and ".join(_where(longest(result, s)) for s in recipes)
        + (f"; from {min(informative)} steps on, " + " and ".join(moves) if moves else "")
        + later
        + "."
    )
