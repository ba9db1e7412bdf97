"""The map (`looped map`) as one figure and tables of numbers, pure functions of map.json's dict:
the gap to uniform against tokens per parameter, one curve per width, for each recipe."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from looped import paper, plotting
from looped.paper import label
from looped.studies.gapfit import gap_fit, pooled_gaps
from looped.studies.report.block import (
    RECIPES,
    TREND_HEAD,
    depth_cells,
    gap_cell,
    gap_keys,
    gap_marks,
    trend_row,
    verdict_of,
)
from looped.studies.report.tables import bounds, gap_text, md_table, verdict_words
from looped.studies.stats import Verdict, interval

WIDTH_COLOURS = {16: "#bdbdbd", 32: "#9ecae1", 64: "#3182bd", 128: "#08519c", 256: "#54278f"}


def cells(result: dict, vocab: int | None = 512) -> list[dict]:
    """Every judged cell of every block, tagged with its block (`vocab` None: every tokenizer);
    a cell present in several blocks (they share runs) is kept once."""
    seen, out = set(), []
    for name, block in result.get("blocks", {}).items():
        for c in block.get("cells", []):
            key = (c.get("d_model"), c.get("vocab_size"), c["steps"], c["schedule"])
            if "gap" not in c or key in seen or (vocab and c.get("vocab_size") != vocab):
                continue
            seen.add(key)
            out.append(c | {"block": name})
    return out


def fig_map(result: dict, path: Path, recipe: str = "w10_i1") -> Path:
    """One panel per fixed-first recipe, under the training recipe `recipe`: each width's paired
    gap (seed mean, 95% interval) against training tokens per non-embedding parameter, a line per
    width with the 512-token BPE and a lone diamond per cell with another vocabulary (the prose
    reads those cells too, and a figure that left them out would not show what it claims);
    hollow where the models miss the bigram table (no verdict), crossed where a cell is past one
    pass (never reported); the tolerance dashed."""
    plotting.use_theme()
    fig, axes = plt.subplots(1, len(RECIPES), figsize=(9.0, 4.2), sharey=True)
    every = cells(result)
    wider = [c for c in cells(result, vocab=None) if c.get("vocab_size") != 512]
    shown = _shown(every)
    drawn: list[tuple[Any, np.ndarray, list[dict], str, float]] = []  # for the edge marks
    for ax, s in zip(axes, RECIPES):
        mine = [c for c in every if c["schedule"] == s]
        widths = sorted({c["d_model"] for c in every})
        for d in (w for w in widths if any(c["d_model"] == w for c in mine)):
            width = sorted((c for c in mine if c["d_model"] == d), key=_tpp)
            # side by side, so that one width's interval never hides another's at a length
            nudge = 2 ** (0.12 * (widths.index(d) - (len(widths) - 1) / 2))
            x = np.array([_tpp(c) for c in width]) * nudge
            faint = {} if d in shown else {"alpha": 0.45, "lw": 1}
            gap_marks(ax, x, width, WIDTH_COLOURS.get(d, "#333333"), **faint)
            drawn.append((ax, x, width, WIDTH_COLOURS.get(d, "#333333"), faint.get("alpha", 1)))
        drawn += _diamonds(ax, [c for c in wider if c["schedule"] == s], widths)
        tol = 100 * paper.tolerance(s)
        ax.axhline(tol, color="0.35", ls="--", lw=1, label="the recipe's tolerance")
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_xscale("log", base=2)
        # ticks at the planned lengths only (matched across widths, so a handful), in whole
        # tokens per parameter: log-axis defaults crowd "30 40 50" between two of them
        plotting.chosen_ticks(ax.xaxis, sorted({round(_tpp(c)) for c in every}))
        ax.set_title(f"{label(s)} vs uniform 1..16 (+: behind)", fontsize=10)
        ax.set_xlabel("training tokens per non-embedding parameter")
    axes[0].set_ylabel("NLL gap to uniform, %")
    axes[0].set_ylim(*_y_range(every + wider))
    off = [_off_panel(*width) for width in drawn]
    keys = _key(every, shown, any(off))
    vocabs = " and ".join(f"{v:,}" for v in sorted({c["vocab_size"] for c in wider}))
    if wider:
        said = f"diamond: a {vocabs}-token BPE (colour: width)"
        keys.insert(-1, Line2D([], [], ls="", marker="D", ms=5, color="0.3", label=said))
    long = any(len(k.get_label()) > 40 for k in keys)  # an interim look names its arms' seeds
    fig.legend(handles=keys, fontsize=8, ncol=2 if long else 3)
    # the vocabulary and recipe on the figure itself: a reader of the image alone sees no prose
    said = f"lines: 512-token BPE, diamonds: {vocabs}-token BPE" if wider else ""
    title = f"Training recipe {recipe}; {said or '512-token BPE cells only'}"
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    return plotting.save(fig, path)


def _diamonds(ax: Any, cells: list[dict], widths: list[int]) -> list[tuple]:
    """Cells of another vocabulary than the curves', a lone diamond each just right of its width's
    own mark at that length (no line: they are not on the curve's axis of growth); each as the
    edge marks take it."""
    drawn = []
    for c in cells:
        at = widths.index(c["d_model"]) if c["d_model"] in widths else 0
        x = np.array([_tpp(c) * 2 ** (0.12 * (at - (len(widths) - 1) / 2) + 0.09)])
        colour = WIDTH_COLOURS.get(c["d_model"], "#333333")
        gap_marks(ax, x, [c], colour, marker="D", ls="none", ms=5)
        drawn.append((ax, x, [c], colour, 1))
    return drawn


def _reported(c: dict) -> bool:
    return c.get("one_pass", True) and c["verdict"] != Verdict.NOT_INFORMATIVE


def _shown(every: list[dict]) -> set[int]:
    """The widths with a reported cell (one pass, models that beat the bigram); the others are
    drawn faint, so that their wide intervals neither hide nor flatten the ones that decide."""
    return {c["d_model"] for c in every if _reported(c)} or {c["d_model"] for c in every}


def _deciding(c: dict) -> bool:
    """A cell read at its planned look with a verdict: only these set the panel's scale."""
    return _reported(c) and c.get("planned_look", True)


def _y_range(every: list[dict]) -> tuple[float, float]:
    """Room for every mean, 0, the tolerance and the deciding cells' intervals; an unreported
    or interim cell's interval may run off the panel (marked there; its table row gives it)."""
    ends = [100 * max(paper.tolerance(s) for s in RECIPES), 0.0]
    for c in every:
        ends += [100 * c["gap"][k] for k in (("lo", "mean", "hi") if _deciding(c) else ("mean",))]
    lo, hi = min(ends), max(ends)
    pad = 0.12 * (hi - lo or 1.0)
    return lo - pad, hi + pad


def _tpp(c: dict) -> float:
    return c["tokens_per_non_embedding_param"]


def _at(c: dict) -> tuple[int, int, int]:
    """Where a cell sits: width, vocabulary and length (one arm's, or uniform's there)."""
    return c["d_model"], c["vocab_size"], c["steps"]


def _off_panel(ax: Any, x: np.ndarray, cells: list[dict], colour: str, alpha: float) -> bool:
    """A triangle on the panel's edge where an interval runs off it (an interim or unreported
    cell's: the deciding ones set the range), placed again whenever the range changes; whether
    any runs off now."""
    ends = [(x[k], 100 * c["gap"][e]) for k, c in enumerate(cells) for e in ("lo", "hi")]
    # y in the panel's own fraction: 1 is the top edge, 0 the bottom, whatever the range
    edge = {"s": 28, "color": colour, "alpha": alpha, "clip_on": False, "zorder": 6}
    edge["transform"] = ax.get_xaxis_transform()
    ups, downs = (ax.scatter([], [], marker=m, **edge) for m in ("^", "v"))

    def place(_: Any = None) -> None:
        lo, hi = ax.get_ylim()
        ups.set_offsets(np.array([(xi, 1.0) for xi, y in ends if y > hi]).reshape(-1, 2))
        downs.set_offsets(np.array([(xi, 0.0) for xi, y in ends if y < lo]).reshape(-1, 2))

    place()
    ax.callbacks.connect("ylim_changed", place)
    return len(ups.get_offsets()) + len(downs.get_offsets()) > 0


def _interim(every: list[dict], d: int) -> str:
    """ "K=2 (67%) has 2 seeds so far": the arms of width `d` read at an interim look, by name,
    each with its own seed count (another arm of the same width may have all of its seeds)."""
    arms: dict[str, int] = {}
    for c in every:
        if c["d_model"] == d and not c.get("planned_look", True):
            n = c["gap"]["n"]
            arms[c["schedule"]] = min(n, arms.get(c["schedule"], n))
    short = {s: label(s).removeprefix("fixed-first ") for s in arms}
    # in the panels' order
    return "; ".join(f"{short[s]} has {arms[s]} seeds so far" for s in RECIPES if s in arms)


def _key(every: list[dict], shown: set[int], off_panel: bool = False) -> list[Line2D]:
    """The legend: one entry per width (faint: no cell with a verdict; an arm still in its seed
    rounds named with its seeds so far), then what a hollow, a crossed point and an edge
    triangle mean."""

    def said(d: int) -> str:
        if d not in shown:
            return f"d={d}: no verdict (a model misses the bigram table)"
        return f"d={d}, interim look: {arms}" if (arms := _interim(every, d)) else f"d={d}"

    handles = []
    for d in sorted({c["d_model"] for c in every}):
        look = {"color": WIDTH_COLOURS.get(d, "#333333"), "alpha": 1 if d in shown else 0.45}
        handles.append(Line2D([], [], marker="o", label=said(d), **look))
    tolerance = Line2D([], [], color="0.35", ls="--", label="the recipe's tolerance")
    edge = "interval runs off the panel (its row has it)"
    off = [Line2D([], [], ls="", marker="^", color="0.3", label=edge)] if off_panel else []
    return [*handles, *gap_keys(every), *off, tolerance]


def recipe_text(setup: dict, steps: int) -> str:
    """A run's recipe as a row gives it: its warmup in steps (and the share of the run it was set
    as) and the block applications its residual init counts: "10, i1", "13 (2%), i16"."""
    frac, loops = setup.get("warmup_frac", 0.0), setup.get("init_loops", 1)
    if frac:  # `config.warmup_steps`: that share of the run, at least one step
        return f"{max(1, round(frac * steps))} ({frac:.0%}), i{loops}"
    return f"{setup.get('warmup_steps', 10)}, i{loops}"


def cell_text(c: dict) -> str:
    """ "d=64, BPE-512, 1,044 steps": where a cell sits, in one table column."""
    return f"d={c['d_model']}, BPE-{c['vocab_size']}, {c['steps']:,} steps"


def map_rows(result: dict) -> str:
    """One row per (width, vocabulary, length, arm): the cell, its length in tokens per
    non-embedding parameter, its recipe and LR, the paired gap and both plateau escapes."""
    head = ["cell", "tokens/ param", "warmup, init", "LR", "arm"]
    head += ["gap to uniform [95% interval], n, verdict", "plateau escape (uniform / arm)"]
    rows = []
    uni = {_at(c): c for c in _uniform(result)}
    for c in sorted(cells(result, vocab=None), key=lambda c: (*_at(c), c["schedule"])):
        verdict = gap_cell(c) if c.get("one_pass", True) else "past one pass: not reported"
        if c["verdict"] == Verdict.NOT_INFORMATIVE.value and c.get("one_pass", True):
            verdict = f"{gap_text(c['gap'])}, n={c['gap']['n']}, {_said(result, c)}"  # why
        u = uni.get(_at(c), {})
        escapes = f"{escape_text(u.get('escape_steps'))} / {escape_text(c.get('escape_steps'))}"
        setup = result["blocks"][c["block"]].get("meta", {}).get("settings", {}).get("setup", {})
        rows.append([cell_text(c), f"{_tpp(c):.0f}", recipe_text(setup, c["steps"])])
        rows[-1] += [f"{c['lr']:g}", label(c["schedule"]), verdict, escapes]
    return md_table(head, rows)


def finding(result: dict) -> str:
    """The README's finding: each width (BPE-512) at its longest one-pass length with two or more
    seeds, and also at the longest length every width reached (matched in tokens per parameter:
    widths compared at one length, not each at its own); then, at that matched length, the other
    vocabularies the 2x2 ran, so the first screen shows what width alone and vocabulary alone do.
    Each recipe's gap and verdict; a width the study plans but has not run says so."""
    tol = {arm: f"tolerance {100 * paper.tolerance(arm):.1f}%" for arm in RECIPES}
    head = ["regime"] + [f"{label(arm)} vs uniform [95%] ({tol[arm]})" for arm in RECIPES]
    planned = {b["d_model"] for b in result.get("meta", {}).get("settings", {}).get("blocks", [])}
    every = [c for c in cells(result, vocab=None) if c.get("one_pass", True) and c["gap"]["n"] > 1]
    every = [c for c in every if c["schedule"] in RECIPES]
    mine = [c for c in every if c.get("vocab_size") == 512]
    longest: dict[int, dict] = {}  # the width's longest cell, by tokens/param
    for c in mine:
        longest[c["d_model"]] = max(c, longest.get(c["d_model"], c), key=_tpp)
    matched = round(min(map(_tpp, longest.values()))) if longest else None
    rows = []
    for d in sorted(planned | set(longest)):
        if d not in longest:
            rows.append([f"d={d}", *["not yet run"] * len(RECIPES)])
            continue
        at = [c for c in mine if c["d_model"] == d]
        shown = {longest[d]["steps"]} | {c["steps"] for c in at if round(_tpp(c)) == matched}
        rows += [
            _finding_row(result, [c for c in at if c["steps"] == steps]) for steps in sorted(shown)
        ]
    other = [c for c in every if c.get("vocab_size") != 512 and round(_tpp(c)) == matched]
    for key in sorted({_at(c) for c in other}):
        rows.append(_finding_row(result, [c for c in other if _at(c) == key]))
    return md_table(head, rows)


def _finding_row(result: dict, at: list[dict]) -> list[str]:
    """One regime of the finding (one width, vocabulary and length): each recipe's gap."""
    by_arm = {c["schedule"]: c for c in at}
    c = at[0]
    regime = f"d={c['d_model']}, BPE-{c['vocab_size']}, {c['steps']:,} steps, "
    regime += f"{_tpp(c):.0f} tokens/non-emb. param"
    gaps = [
        f"{gap_text(by_arm[a]['gap'])}, {by_arm[a]['gap']['n']} seeds: {_said(result, by_arm[a])}"
        if a in by_arm
        else "not yet run"  # this arm has no pair at this length yet
        for a in RECIPES
    ]
    return [regime, *gaps]


def _said(result: dict, c: dict) -> str:
    """The cell's verdict; where it has none, why, in plain words: whose models stayed above the
    bigram table (a verdict needs every reported model of both arms below it)."""
    if c["verdict"] != Verdict.NOT_INFORMATIVE.value:
        return verdict_of(c)
    block = result["blocks"][c["block"]]
    bigram = block["baselines"]["test"]["bigram"]
    uni = next(
        u for u in block["cells"] if u["schedule"] == paper.UNIFORM and u["steps"] == c["steps"]
    )
    missed = [
        (who, sum(v >= bigram for v in x["seed_nll"]), len(x["seed_nll"]))
        for who, x in (("uniform", uni), ("fixed-first", c))
    ]
    if all(m == n for _, m, n in missed):
        return "no verdict: no model beat the bigram table"
    return "no verdict: " + ", ".join(
        f"{who} missed the bigram table in {m} of {n} seeds" for who, m, n in missed if m
    )


def escape_text(escapes: list | None) -> str:
    """Seeds' escape steps as "median (min-max)"; "never" counts seeds that stayed above."""
    if not escapes:
        return "-"
    hit = [e for e in escapes if e is not None]
    never = len(escapes) - len(hit)
    text = f"{int(np.median(hit))} ({min(hit)}-{max(hit)})" if hit else ""
    return (text + (f", {never} never" if never else "")).strip(", ") or "never"


def fit_cells(result: dict, schedule: str) -> list[dict]:
    """The cells a fit or a headline may use: this recipe's, informative and within one pass."""
    informative = [c for c in cells(result) if c["verdict"] != Verdict.NOT_INFORMATIVE.value]
    return [c for c in informative if c["schedule"] == schedule and c.get("one_pass", True)]


TWO_BY_TWO_WIDTHS = (64, 128)  # the vocabulary 2x2's widths (studies.map's d64/d128 blocks)


def two_by_two(result: dict, tpp: float = 40) -> str:
    """Width x vocabulary at one length: each arm's gap, so a reader sees which factor moves it."""
    at = [c for c in cells(result, vocab=None) if round(_tpp(c)) == tpp]
    rows = []
    for arm in RECIPES:
        for d in TWO_BY_TWO_WIDTHS:
            mine = {c["vocab_size"]: c for c in at if (c["d_model"], c["schedule"]) == (d, arm)}
            gaps = [gap_cell(mine[v]) if v in mine else "not yet run" for v in (512, 4096)]
            rows.append([label(arm), d, *gaps])
    head = ["arm", "d", "BPE-512: gap [95% interval], n, verdict", "BPE-4096: gap, n, verdict"]
    return md_table(head, rows)


def fit_section(result: dict) -> str:
    """Per recipe: the per-seed plane's coefficients, each width's crossings and the labelled
    extrapolation to 200M parameters; or why the cells do not support a fit."""
    rows = []
    for arm in RECIPES:
        mine = fit_cells(result, arm)
        none = {"fit": None, "why": "no reported cell yet"}
        fit = gap_fit(mine, mine[0]["tolerance"]) if mine else none
        if fit["fit"] is None:
            rows.append([label(arm), "no fit: " + fit["why"], "-", "-", "-"])
            continue
        f, ext = fit["fit"], fit["extrapolation"]
        # a width still in its seed rounds: the fit is read at an interim look, as its cells are
        interim = ", interim look" if any(not c.get("planned_look", True) for c in mine) else ""
        fitted = _slope(f["per_doubling_tokens_per_param"], "tokens/param") + ", "
        fitted += _slope(f["per_doubling_params"], "parameters") + ", "
        rows.append([label(arm), f"{fitted}{len(fit['seeds'])} seeds{interim}"])
        measured = {}  # d -> the fitted lengths' (shortest, longest) tokens per parameter
        for c in mine:
            t, (a, b) = _tpp(c), measured.get(c["d_model"], (math.inf, 0.0))
            measured[c["d_model"]] = (min(a, t), max(b, t))
        rows[-1] += [_crossings(fit["crossing"], measured), _extrapolated(ext, mine)]
        rows[-1] += [_crossing(ext["crossing"]["zero"])]
    head = ["recipe", "fit (per seed, interval over seeds)"]
    head += ["crossings by width (non-emb. tokens/param)"]
    head += ["EXTRAPOLATION to 200M parameters: gap [95% interval]", "EXTRAPOLATION: crosses 0 at"]
    return md_table(head, rows)


def _slope(g: dict, per: str) -> str:
    """A fitted slope with its interval, "undetermined" where the interval spans 0: then not
    even its sign is known, and the point estimate is no effect to read."""
    spans = g["lo"] < 0 < g["hi"]
    return f"{gap_text(g)} per doubling of {per}" + (" (undetermined)" if spans else "")


def _extrapolated(ext: dict, cells: list[dict]) -> str:
    """The gap the fit predicts at 200M parameters, never as a point value alone: where its
    interval is wider than the largest gap it extrapolates from (a fitted cell's seed mean), the
    interval says nothing those gaps do not, so it is written "uninformative", without a point."""
    g, at = ext["gap"], f"at {ext['tokens_per_param']:.0f} tokens/param"
    largest = max(abs(c["gap"].get("mean", float(np.mean(c["gap"]["values"])))) for c in cells)
    if g["hi"] - g["lo"] > largest:
        wide = bounds(g["lo"], g["hi"], unit="%")
        return f"uninformative: {wide} {at}, wider than any gap fitted (at most {largest:.2%})"
    return f"{gap_text(g)} {at}"


def _crossings(by_width: dict, measured: dict[int, tuple[float, float]] | None = None) -> str:
    """Each width's two crossings, or one phrase when no width has any (said once, not four
    times over); `measured`: each width's fitted lengths, outside which a crossing is an
    extrapolation and gets no point value."""
    if all(c["zero"] is None and c["tolerance"] is None for c in by_width.values()):
        return _crossing(None)
    span = measured or {}

    def level(name: str, c: dict | None, d: str) -> str:
        text = _crossing(c, span.get(int(d)))
        return f"{name} at {text}" if text[0].isdigit() else f"{name}: {text}"

    return "; ".join(
        f"d={d}: {level('0', c['zero'], d)}, {level('tolerance', c['tolerance'], d)}"
        for d, c in by_width.items()
    )


def _crossing(c: dict | None, span: tuple[float, float] | None = None) -> str:
    """Where a level is crossed, in tokens per parameter with its interval. An interval wider
    than a thousandfold does not locate the crossing and is not dressed up as a number (its
    ends, often dozens of decades apart, would only look like one); a crossing outside the
    lengths fitted (`span`) is an extrapolation, given by its interval alone."""
    if c is None:
        return "no crossing (seeds' slopes differ in sign)"
    if c["hi"] > 1000 * c["lo"]:
        return "not located (interval over a thousandfold)"
    iv = bounds(c["lo"], c["hi"], ".3g", 1)
    if span and not span[0] <= c["tokens_per_param"] <= span[1]:
        below = c["tokens_per_param"] < span[0]
        side = f"below the lengths fitted (from {span[0]:.0f})"
        side = side if below else f"above the lengths fitted (up to {span[1]:.0f})"
        return f"point {side}; interval {iv}"
    return f"{c['tokens_per_param']:.3g} {iv}"


def frontier_section(result: dict) -> str:
    """The frontier block: each fixed-first fraction's modeled saving, its mean NLL over K=1..16
    (95% interval over seeds) and its gap to uniform with the verdict at its tolerance."""
    if not (block := _frontier(result)):
        return md_table(["frontier"], [["not yet run"]])
    saved = block.get("modeled_saving", {})
    rows = []
    for c in sorted(block["cells"], key=lambda c: (c["steps"], c["schedule"] != paper.UNIFORM)):
        nll = interval(c["seed_nll"]) if len(c["seed_nll"]) > 1 else None
        nll_text = f"{c['mean_nll']:.3f}"
        nll_text = f"{nll.mean:.3f} {bounds(nll.lo, nll.hi, '.3f', 1)}" if nll else nll_text
        s = saved.get(c["schedule"], {}).get(str(c["steps"]))
        gap = gap_cell(c) if "gap" in c else "-"
        saved_text = "-" if s is None else f"{s:.1%}"
        rows.append([label(c["schedule"]), c["steps"], saved_text, nll_text, gap])
    head = ["schedule", "steps", "modeled compute saved", "mean NLL over K=1..16 [95%]"]
    return md_table(head + ["gap to uniform [95% interval], n, verdict"], rows)


def cost_section(result: dict) -> str:
    """Modeled savings of the study's own models beside the wall-clock saving of whole runs (per-
    depth step times weighted by the seeds' exact draws), at the precision its repeats allow."""
    rows = []
    for home, entry in result.get("wallclock", {}).items():
        for key, s in entry["savings"].items():
            rows.append([home, key, f"{s['modeled']:.1%}", _spread(s["wall"]), entry["machine"]])
    head = ["model", "arm @ steps", "modeled compute saved"]
    head += ["wall-clock saved, mean (range over repeats)", "machine"]
    return md_table(head, rows) if rows else md_table(["costs"], [["not yet timed"]])


def _spread(w: dict) -> str:
    """A saving at no more precision than its range over repeats: whole percent when the range
    is a percent or wider, one decimal when it is narrower."""
    digits = 0 if w["max"] - w["min"] >= 0.01 else 1
    f = f"{{:.{digits}%}}"
    return f"{f.format(w['mean'])} ({f.format(w['min'])}-{f.format(w['max'])}, {w['reps']} repeats)"


def own_lr(result: dict) -> str:
    """The robustness check of each width that ran it: every arm at its own LR (chosen on the
    LR seed at the longest length) against uniform at the shared one."""
    head = ["d", "steps", "arm", "own LR", "shared LR", "gap to uniform [95% interval], n, verdict"]
    rows = []
    for block in result.get("blocks", {}).values():
        tuned = block.get("tuned") or {}
        d = block["meta"]["settings"]["setup"]["d_model"]
        for c in tuned.get("cells", []):
            gap = f"{gap_text(c['gap'])}, n={c['gap']['n']}"
            rows.append([d, tuned["steps"], label(c["schedule"]), f"{c['lr']:g}"])
            rows[-1] += [f"{c['shared_lr']:g}", f"{gap}, {verdict_words(c)}"]
    return md_table(head, rows or [["-"] * 5 + ["not yet run"]])


def trends(result: dict) -> str:
    """Per width and tokenizer, each recipe's per-seed slope of the gap against log2 tokens over
    the lengths with a verdict, and the interval over seeds (the length study's rule)."""
    rows = []
    for name, block in result.get("blocks", {}).items():
        setup = block["meta"]["settings"]["setup"]
        if not name.startswith("d"):  # the frontier, micro and own-LR blocks have one length
            continue
        at = [setup["d_model"], int(setup["tokenizer"].removeprefix("bpe:"))]
        found = block.get("trends") or {}
        for s in RECIPES:
            rows.append([*at, label(s), *(trend_row(found[s]) if s in found else ["not yet run"])])
    rows = [r + ["-"] * (len(TREND_HEAD) + 3 - len(r)) for r in rows]
    return md_table(["d", "vocab", "arm", *TREND_HEAD], rows)


def section(result: dict) -> str:
    """RESULTS' map section: every cell, the trends, the 2x2, then the own-LR check."""
    return "\n\n".join((map_rows(result), trends(result), two_by_two(result), own_lr(result)))


def _frontier(result: dict) -> dict | None:
    """The frontier block: d=64's, else the first of another width (`--quick`'s d=16)."""
    blocks = result.get("blocks", {})
    frontiers = [b for n, b in blocks.items() if n.startswith("frontier")]
    return blocks.get("frontier-d64") or next(iter(frontiers), None)


def _nll_bars(ax: Any, x: list[float], cells: list[dict], **kw: Any) -> np.ndarray:
    """Cells' mean NLL over K=1..16 at `x`: the seed mean and its 95% interval over seeds."""
    ivs = [interval(c["seed_nll"]) for c in cells]
    y = np.array([i.mean for i in ivs])
    ax.errorbar(x, y, yerr=[y - [i.lo for i in ivs], [i.hi for i in ivs] - y], capsize=3, **kw)
    return y


def fig_frontier(result: dict, path: Path) -> Path:
    """The paper's Fig. 2 (left) at the map's scale: mean NLL over K=1..16 (seed mean, 95%
    interval over seeds) against modeled compute, uniform's = 1; one line per fixed K, its
    switch fractions marked along it."""
    plotting.use_theme()
    block = _frontier(result)
    saved = block.get("modeled_saving", {})
    steps = max(c["steps"] for c in block["cells"])
    at = {c["schedule"]: c for c in block["cells"] if c["steps"] == steps}
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    uniform = {"color": paper.color_of(paper.UNIFORM), "label": label(paper.UNIFORM)}
    _nll_bars(ax, [1.0], [at[paper.UNIFORM]], marker="o", ls="", **uniform)
    for k, recipe in ((2, paper.RECIPE_200M), (4, paper.RECIPES_1B[1])):
        colour = paper.color_of(recipe)
        arms = sorted(
            (s for s in at if s.startswith(f"fixed-first:k={k},") and s in saved),
            key=lambda s: paper.fixed_phase(s)[1],
        )
        if not arms:
            continue
        x = [1 - saved[s][str(steps)] for s in arms]
        line = {"marker": "s", "color": colour, "label": f"fixed-first K={k}"}
        y = _nll_bars(ax, x, [at[s] for s in arms], **line)
        most = max(len(c["seed_nll"]) for c in at.values())
        beside = {"textcoords": "offset points", "xytext": (6, 6), "fontsize": 10, "color": colour}
        for xi, yi, s in zip(x, y, arms):
            n = len(at[s]["seed_nll"])  # an interim point says so: fewer seeds than the rest
            note = f"{paper.fixed_phase(s)[1]:.0%}" + (f", n={n}" if n < most else "")
            ax.annotate(note, (xi, yi), **beside)
    ax.set_xlabel("modeled training compute, uniform 1..16 = 1")
    ax.set_ylabel("test NLL, mean over K=1..16")
    ax.set_title(f"d={at[paper.UNIFORM].get('d_model')}, {steps} steps", fontsize=10)
    ax.legend(fontsize=9, loc="upper right")  # uniform alone at compute 1, below the top
    plotting.key(ax, "bars", "95% interval over seeds")
    return plotting.save(fig, path)


def figures(result: dict, out: Path, stem: str = "map") -> list[Path]:
    """The map's figures, named STEM_gap.png and STEM_frontier.png: the gap by width and length
    once a cell has paired seeds (a block still in its LR sweep has none), and the frontier
    where it has run."""
    recipe = "w10_i1" if stem == "map" else stem.removeprefix("map-")  # map.json: the first
    paths = [fig_map(result, out / f"{stem}_gap.png", recipe)] if cells(result) else []
    if _frontier(result):
        paths.append(fig_frontier(result, out / f"{stem}_frontier.png"))
    return paths


def pooled_section(result: dict) -> str:
    """The informative BPE-512 cells read together, per seed, labelled as chosen after the fact."""
    found = pooled_gaps(result)
    if not found:
        return "No two cells with a verdict to pool yet."
    where = ", ".join(f"d={d} at {n:,}" for d, n in found[0]["cells"])
    parts = []
    for p in found:
        g, tol = p["gap"], paper.tolerance(p["schedule"])
        if g["lo"] > tol:
            said = f"behind past its {tol:.1%} tolerance"
        elif g["lo"] > 0:
            said = f"behind (the interval clears zero), not shown past its {tol:.1%} tolerance"
        else:
            said = f"undetermined against zero and its {tol:.1%} tolerance"
        parts.append(f"{label(p['schedule'])} {gap_text(g)}, {said}")
    lead = f"Pooled after the fact, each seed's gap averaged over the {len(found[0]['cells'])}"
    lead += f" BPE-512 cells where every model beat the bigram table ({where} steps;"
    lead += f" {found[0]['gap']['n']} seeds): "
    return lead + "; ".join(parts) + "."


def finding_under(own: dict, rerun: dict, recipe: str) -> str:
    """The README's finding under a rerun recipe, the first recipe's beside it in each cell: every
    rerun length with a verdict, and each width and vocabulary at its longest, so that a cell
    with no verdict at any length takes one row, not one per length."""
    every = [c for c in cells(rerun, vocab=None) if c.get("one_pass", True) and c["gap"]["n"] > 1]
    every = [c for c in every if c["schedule"] in RECIPES]
    old = {(*_at(c), c["schedule"]): c for c in cells(own, vocab=None)}
    longest: dict[tuple[int, int], int] = {}
    for c in every:
        longest[_at(c)[:2]] = max(c["steps"], longest.get(_at(c)[:2], 0))
    keep = {_at(c) for c in every if _reported(c) or c["steps"] == longest[_at(c)[:2]]}
    uni = {_at(c): c for c in _uniform(rerun)}
    old_uni = {_at(c): c for c in _uniform(own)}
    head = ["cell"] + [f"{label(arm)} vs uniform [95%]" for arm in RECIPES]
    head += ["uniform's escape step, median (range)"]
    rows = []
    for key in sorted(keep, key=lambda k: (k[1], k[0], k[2])):
        here = {c["schedule"]: c for c in every if _at(c) == key}
        then = {a: old[(*key, a)] for a in RECIPES if (*key, a) in old}
        c, o = next(iter(here.values())), next(iter(then.values()), None)
        cell = f"d={key[0]}, BPE-{key[1]}, {key[2]:,} steps, {_tpp(c):.0f} tokens/non-emb. param"
        cell += f"; {c['gap']['n']} seeds, LR {c['lr']:g}"
        cell += f"; first recipe: {o['gap']['n']} seeds, LR {o['lr']:g}" if o else ""
        row = [cell]
        for a in RECIPES:
            new = f"{gap_text(here[a]['gap'])}, {_said(rerun, here[a])}" if a in here else "not run"
            if a in then:
                brief = verdict_words(then[a])  # a missing verdict's reason: the map's table
                brief = "no verdict" if brief == Verdict.NOT_INFORMATIVE.value else brief
                new += f"; first recipe: {gap_text(then[a]['gap'])}, {brief}"
            row.append(new)
        escapes = escape_text(uni.get(key, {}).get("escape_steps"))
        if key in old_uni:
            escapes += f"; first recipe: {escape_text(old_uni[key].get('escape_steps'))}"
        rows.append([*row, escapes])
    lead = f"Under `{recipe}`, each cell beside itself under the first recipe (`w10_i1`):"
    return lead + "\n\n" + md_table(head, rows)


def depth_rows(result: dict, recipe: str) -> str:
    """Each arm of each cell with a verdict: its gap at serving depths 1, 4 and 16 beside the
    mean over 1..16 that the verdict reads. The paper's claim is about every depth a model may
    be served at, so a mean that hides a large gap at one depth should not go unseen."""
    every = [c for c in cells(result, vocab=None) if c["schedule"] in RECIPES and _reported(c)]
    head = ["cell", "arm", "mean over K=1..16 [95%], verdict"]
    head += [f"at K={k} [95%]" for k in ("1", "4", "16")]
    rows = []
    for c in sorted(
        every, key=lambda c: (c["vocab_size"], c["d_model"], c["steps"], c["schedule"])
    ):
        mean = f"{gap_text(c['gap'])}, {verdict_words(c)}"
        rows.append([cell_text(c), label(c["schedule"]), mean, *depth_cells(c)])
    if not rows:
        return f"No cell under `{recipe}` has a verdict yet."
    lead = f"Under `{recipe}`, each cell with a verdict at serving depths 1, 4 and 16 (each"
    lead += " interval over seeds as the mean's, not widened for reading three depths):"
    return lead + "\n\n" + md_table(head, rows)


def _uniform(result: dict) -> list[dict]:
    blocks = result.get("blocks", {}).values()
    return [c for b in blocks for c in b.get("cells", []) if c["schedule"] == paper.UNIFORM]


# a verdict in words a newcomer needs no glossary for (the headline figure's, the README's)
PLAIN = {
    "worse": "past tolerance",
    "undecided, behind": "behind",
    "undecided": "unclear",
    "better": "ahead",
    "within tolerance": "level",
    "no worse than tolerance": "not past tolerance",
}


def headline_rows(result: dict) -> list[dict]:
    """The headline's rows: each cell with a verdict (BPE-512 first), then the BPE-512 cells
    pooled after the fact: its place ("at"; None: pooled), how late uniform starts there (the
    median of its escape step less the arms', seed by seed), and each arm's gap with "said", the
    verdict in plain words."""
    every = [c for c in cells(result, vocab=None) if c["schedule"] in RECIPES and _reported(c)]
    uni = {_at(c): c["escape_steps"] for c in _uniform(result)}
    out = []
    for at in sorted({_at(c) for c in every}, key=lambda k: (k[1], k[0], k[2])):
        arms = [c for c in every if _at(c) == at]
        late = [u - a for c in arms for u, a in zip(uni[at], c["escape_steps"])]
        gaps = {c["schedule"]: c["gap"] | {"said": PLAIN[verdict_words(c)]} for c in arms}
        out.append({"at": at, "late": float(np.median(late)), "gaps": gaps})
    pooled = {p["schedule"]: p["gap"] for p in pooled_gaps(result)}
    for s, g in pooled.items():
        tol, lo = paper.tolerance(s), g["lo"]
        g["said"] = PLAIN["worse" if lo > tol else "undecided, behind" if lo > 0 else "undecided"]
    last = max((k for k, r in enumerate(out) if r["at"][1] == 512), default=None)
    if pooled and last is not None:
        out.insert(last + 1, {"at": None, "late": None, "gaps": pooled})
    return out


def _row_label(row: dict) -> str:
    if row["at"] is None:
        n = max(g["n"] for g in row["gaps"].values())
        return f"the rows above, pooled\nafter the fact ({n} seeds)"
    d, v, steps = row["at"]
    vocab = "" if v == 512 else f", vocab. {v:,}"
    return f"d={d}{vocab}, {steps:,} steps\nuniform starts {row['late']:.0f} steps late"


def fig_headline(result: dict, path: Path) -> Path:
    """The README's first figure: each cell with a verdict, one row, an arm a panel, its gap to
    uniform with the 95% interval and its verdict in plain words; the pooled row hollow."""
    plotting.use_theme()
    rows = headline_rows(result)
    fig, axes = plt.subplots(1, len(RECIPES), figsize=(9.0, 0.5 * len(rows) + 1.2), sharey=True)
    for ax, s in zip(axes, RECIPES):
        right = max(100 * r["gaps"][s]["hi"] for r in rows if s in r["gaps"]) + 0.4
        for y, row in enumerate(rows):
            if (g := row["gaps"].get(s)) is not None:
                m, lo, hi = (100 * g[k] for k in ("mean", "lo", "hi"))
                mark = {"fmt": "D", "mfc": "white"} if row["at"] is None else {"fmt": "o"}
                ax.errorbar([m], [y], xerr=[[m - lo], [hi - m]], color="0.15", capsize=3, **mark)
                ax.text(right, y, g["said"], va="center", fontsize=9)
        ax.axvline(0, color="0.3", lw=0.8)
        ax.axvline(100 * paper.tolerance(s), color="0.45", ls="--", lw=1, label="tolerance")
        ax.set_title(f"{label(s)} vs uniform 1..16", fontsize=10)
        ax.set_xlabel("gap, % (+: fixed-first behind)")
        lo = min(100 * r["gaps"][s]["lo"] for r in rows if s in r["gaps"])
        ax.set_xlim(min(lo, 0) - 0.4, right + 3.0)
    axes[0].set_yticks(range(len(rows)), list(map(_row_label, rows)), fontsize=9)
    axes[0].invert_yaxis()
    plotting.key(axes[0], "bars", "95% interval over seeds")
    fig.suptitle(
        "Held-out loss of fixed-first over uniform's, by cell", fontsize=10, x=0.01, ha="left"
    )
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize=9, ncol=2)
    return plotting.save(fig, path)
