"""The length study (`looped length`) as a reader sees it: the gap to uniform per training
length with its interval and verdict, the trend per doubling of tokens, and the gap figure. Pure
functions of length.json's dict; the schedules' display names live here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

import looped.eval.stats as stats
from looped import paper
from looped.report import style

# display names, in the order the tables and figures show the schedules
LABELS = {paper.UNIFORM: "uniform 1..16", paper.UNIFORM_PER_MICRO: "uniform, K per micro-batch",
          paper.RECIPE_200M: "fixed-first K=2 (67%)", paper.RECIPES_1B[1]: "fixed-first K=4 (80%)"}  # fmt: skip


def fig_gap(result: dict, path: Path) -> Path:
    """One panel per schedule: its signed gap to uniform (seed mean with the 95% interval, each
    seed a small dot) against training tokens, the paper's tolerance shaded; and a last panel
    with every schedule's test NLL beside the bigram table's."""
    style.use_theme()
    table = result["cells"]
    compared = [s for s in LABELS if any(c["schedule"] == s and "gap" in c for c in table)]
    fig, axes = plt.subplots(1, len(compared) + 1, figsize=(4.0 * (len(compared) + 1), 3.6))
    for ax, s in zip(axes, compared):
        _gap_panel(ax, [c for c in table if c["schedule"] == s])
        ax.set_title(f"{LABELS[s]} vs uniform", fontsize=9)
    _nll_panel(axes[-1], table, result["baselines"]["test"]["bigram"])
    for a in axes[: len(compared)]:  # headroom above the intervals for the shared key
        lo, hi = a.get_ylim()
        a.set_ylim(lo, hi + 0.5 * (hi - lo))
    axes[0].legend(fontsize=7, loc="upper left")  # the gap panels share one key
    return style.save(fig, path)


def _gap_panel(ax: Any, mine: list[dict]) -> None:
    """One schedule's gap to uniform per length: seeds as dots, the mean with its interval,
    hollow where the models do not beat the bigram table."""
    x = np.array([c["tokens"] for c in mine], dtype=float)
    mean = np.array([100 * c["gap"]["mean"] for c in mine])
    lo = np.array([100 * c["gap"]["lo"] for c in mine])
    hi = np.array([100 * c["gap"]["hi"] for c in mine])
    tol = 100 * stats.PAPER_TOLERANCE
    ax.axhspan(-tol, tol, color="0.85", label="the paper's 0.5% tolerance")
    ax.axhline(0, color="0.4", lw=0.8)
    for c in mine:
        seeds = [100 * v for v in c["gap"]["values"]]
        ax.scatter([c["tokens"]] * len(seeds), seeds, s=9, color="0.55", zorder=2)
    ax.errorbar(
        x,
        mean,
        yerr=[mean - lo, hi - mean],
        marker="o",
        capsize=3,
        color="#1b9e77",
        zorder=3,
        label="seed mean, 95% interval",
    )
    quiet = [i for i, c in enumerate(mine) if c["verdict"] == stats.Verdict.NOT_INFORMATIVE.value]
    if quiet:  # lengths whose models do not all beat the bigram table: no verdict there
        hollow = {"s": 60, "facecolors": "white", "edgecolors": "#1b9e77", "zorder": 4}
        ax.scatter(x[quiet], mean[quiet], label="models above the bigram: no verdict", **hollow)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("training tokens")
    ax.set_ylabel("gap in mean NLL, % (+: behind)")


def _nll_panel(ax: Any, table: list[dict], bigram: float) -> None:
    """Every schedule's test NLL per length beside the bigram table's."""
    for i, s in enumerate(LABELS):
        mine = [c for c in table if c["schedule"] == s]
        xy = [c["tokens"] for c in mine], [c["mean_nll"] for c in mine]
        ax.plot(*xy, label=LABELS[s], marker="osD^"[i], color=style.color(LABELS[s], i))
    ax.axhline(bigram, color="k", ls="--", lw=1, label="bigram table")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("training tokens")
    ax.set_ylabel("test NLL, mean over K=1..16")
    ax.legend(fontsize=7)


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def gap_cell(cell: dict) -> str:
    """ "+2.1% [-0.4, +4.6], worse": the paired mean gap, its 95% interval and the verdict."""
    g = cell["gap"]
    return f"{_pct(g['mean'])} [{100 * g['lo']:+.1f}, {100 * g['hi']:+.1f}], {cell['verdict']}"


def table_rows(result: dict) -> list[str]:
    """One row per training length: tokens, tokens per parameter, uniform's NLL, each other
    schedule's paired gap to uniform with its interval and verdict."""
    others = [s for s in LABELS if s != paper.UNIFORM]
    rows = [
        "| steps | tokens | tokens / param | uniform NLL (± window SE) | "
        + " | ".join(f"{LABELS[s]} vs uniform" for s in others)
        + " |",
        "|---|---|---|---|" + "---|" * len(others),
    ]
    for steps in sorted({c["steps"] for c in result["cells"]}):
        at = {c["schedule"]: c for c in result["cells"] if c["steps"] == steps}
        uni = at[paper.UNIFORM]
        rows.append(
            f"| {steps} | {uni['tokens'] / 1e6:.2f}M | {uni['tokens_per_param']:.1f} | "
            f"{uni['mean_nll']:.3f} ± {uni['se_windows']:.3f} | "
            + " | ".join(gap_cell(at[s]) if s in at and "gap" in at[s] else "-" for s in others)
            + " |"
        )
    return rows


def trend_lines(result: dict) -> list[str]:
    """Per schedule, the slope of its signed gap per doubling of tokens, and where it points."""
    lines = []
    for s in LABELS:
        t = result["trends"].get(s)
        if not t:
            continue
        if t["slope"] is None:
            lines.append(f"- {LABELS[s]}: fewer than two informative lengths, no trend read.")
            continue
        sl = t["slope"]
        lines.append(
            f"- {LABELS[s]}: the gap moves {_pct(sl['mean'])} per doubling of tokens "
            f"(95% interval {100 * sl['lo']:+.1f} to {100 * sl['hi']:+.1f} points) over "
            f"{t['lengths']} informative lengths: {t['direction']}."
        )
    return lines


def trend_summary(result: dict) -> str:
    """The trends in one sentence, for the first screen: each schedule's slope per doubling of
    tokens with its interval, and where it points."""
    parts = []
    for s in LABELS:
        t = result["trends"].get(s)
        if t and t["slope"] is not None:
            sl = t["slope"]
            parts.append(
                f"{LABELS[s]} {_pct(sl['mean'])} [{100 * sl['lo']:+.1f}, "
                f"{100 * sl['hi']:+.1f}] ({t['direction']})"
            )
        elif t:
            parts.append(f"{LABELS[s]}: too few informative lengths")
    return "; ".join(parts)


def section(result: dict) -> str:
    """The study's README section, every number read from length.json."""
    meta, base = result["meta"], result["baselines"]
    st = meta["settings"]
    sp = meta["corpus"]["splits"]
    first = result["rows"][0]
    lines = [
        f"Measured by `looped length` on {meta['machine']} ({len(result['rows'])} reported runs; "
        "finished runs are reused, so a rerun trains only what is missing): the standard "
        "library's source, split by "
        f"near-duplicate family into {sp['train']['tokens'] / 1e6:.1f}M train / "
        f"{sp['val']['tokens'] / 1e3:.0f}k validation / {sp['test']['tokens'] / 1e3:.0f}k test "
        f"tokens ({meta['corpus']['tokenizer']}, fit on train alone); d={st['setup']['d_model']}, "
        f"one looped layer, {first['params']:,} parameters ({first['params_non_embedding']:,} "
        f"outside the embedding), {st['setup']['batch_size']}x{st['setup']['seq_len']} tokens "
        f"per step. Every schedule at every LR of {', '.join(f'{x:g}' for x in st['lrs'])}; each "
        f"(schedule, length) takes the LR with the lowest validation NLL over {st['sweep_seeds']} "
        f"seeds, then {st['seeds']} seeds are scored on {meta['test_tokens']:,} test tokens. "
        "Metric: mean NLL over serving depths K=1..16. Gap: paired per seed, relative to "
        "uniform (+ = behind uniform), with its 95% t-interval and the verdict it supports at "
        f"the paper's {stats.PAPER_TOLERANCE:.1%} tolerance.",
        "",
        f"Baselines on the same test windows: unigram {base['test']['unigram']:.3f}, add-k "
        f"bigram {base['test']['bigram']:.3f} nats/token (fit on train, k={base['k']:g} chosen "
        "on validation). A length whose models do not all beat the bigram gets no verdict.",
        "",
        *table_rows(result),
        "",
        *trend_lines(result),
        *edge_lines(result),
    ]
    return "\n".join(lines)


def edge_lines(result: dict) -> list[str]:
    """A line naming each (schedule, length) whose chosen LR lies at the edge of the sweep."""
    edges = [
        f"{LABELS[s]} at {n} steps"
        for s, by in result["chosen"].items()
        for n, c in by.items()
        if c["edge"]
    ]
    if not edges:
        return []
    return [
        f"- The chosen LR lies at the edge of the sweep for {', '.join(edges)}: the optimum "
        "may lie beyond it."
    ]


def length_section(result: dict) -> str:
    """The length study's section and its figure, from length.json."""
    return section(result) + (
        "\n\n![The signed gap to uniform against training tokens](../figures/length_gap.png)"
    )
