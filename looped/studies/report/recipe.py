"""The recipe probe (`looped map --probe`) as one table and one figure, pure functions of
recipe.json's dict: per cell and recipe, uniform's escape step (the first logged step whose
training loss is below the bigram table) and validation NLL at each LR, seed by seed."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from looped import plotting
from looped.config import OptimConfig, warmup_of
from looped.paper import label, tolerance
from looped.studies.gapfit import MAIN_ARMS, delay_fit, escape_delays, recipe_change
from looped.studies.recipe import parse_recipe
from looped.studies.report.map import escape_text
from looped.studies.report.tables import gap_text, md_table


def probe_rows(result: dict) -> list[tuple[str, str, dict]]:
    """(cell, recipe, block) for every probe block of uniform's that has finished runs, in the
    probe's order (the own-recipe check's blocks, "own-...", are `own_section`'s)."""
    out = []
    for name, block in result["blocks"].items():
        if block.get("sweep") and name.startswith("probe-"):
            cell, recipe = name.removeprefix("probe-").rsplit("-w", 1)
            out.append((cell, "w" + recipe, block))
    # a cell's rows together, cells in the order they first appear (later factors join the end)
    order = list(dict.fromkeys(c for c, _, _ in out))
    return sorted(out, key=lambda row: order.index(row[0]))


def _escapes(rows: list[dict]) -> str:
    """ "240, never": each seed's escape step, in seed order."""
    steps = [r["escape_step"] for r in sorted(rows, key=lambda r: r["seed"])]
    return ", ".join("never" if s is None else str(s) for s in steps)


def _lr_rows(block: dict, *first: str) -> list[list]:
    """A probe block's rows, one per LR: FIRST, its steps, the LR, each seed's escape step and
    the mean validation NLL over the seeds."""
    rows = []
    for lr in sorted({r["lr"] for r in block["sweep"]}):
        mine = [r for r in block["sweep"] if r["lr"] == lr]
        val = f"{np.mean([r['val_nll'] for r in mine]):.3f}"
        rows.append([*first, mine[0]["steps"], f"{lr:g}", _escapes(mine), val])
    return rows


def recipe_section(result: dict) -> str:
    """Each cell x recipe x LR: the escape steps and mean validation NLL over the LR seeds, then
    the recipe the probe chose and each recipe's excess over the best at the complete cells."""
    head = ["cell", "recipe", "steps", "LR", "escape step (each seed)", "val NLL (seed mean)"]
    rows = [r for cell, recipe, b in probe_rows(result) for r in _lr_rows(b, cell, recipe)]
    chosen = result.get("chosen_recipe")
    if not chosen:
        return md_table(head, rows) + "\n\nNo cell has every recipe finished: nothing chosen yet."
    scores = {r: (r, v) for r, v in chosen["excess"].items()}
    # a recipe some cells left out: scored at every cell where another recipe it equals there
    # ran (the same warmup steps and init); else its excess where it ran, so labelled
    at, late = chosen.get("dropped_cells", {}), []
    for r, v in chosen.get("dropped", {}).items():
        if twins := _twins(result, r, chosen["cells"], at.get(r, [])):
            said = ", ".join(f"at {c} it trains as {q}" for c, q in twins.items())
            scores[r] = (f"{r} ({said})", _excess(result, r, chosen, twins))
        else:
            late.append([f"{r} ({', '.join(at.get(r, ['some cells']))} only)", f"{100 * v:+.2f}%"])
    ranked = sorted(scores.values(), key=lambda x: x[1])
    excess = [[r, f"{100 * v:+.2f}%"] for r, v in ranked] + late
    cells = ", ".join(chosen["cells"])
    best = md_table([f"recipe (best LR, cells {cells})", "val NLL over the best"], excess)
    return md_table(head, rows) + "\n\n" + best


def _best(result: dict, cell: str, recipe: str) -> float | None:
    """A probe block's best LR's mean validation NLL over its LR seeds; None until its whole sweep
    (every LR on every LR seed, where the file records them) has finished, as the chooser reads."""
    rows = result["blocks"].get(f"probe-{cell}-{recipe}", {}).get("sweep", [])
    settings = result.get("meta", {}).get("settings", {})
    if not rows or len(rows) < len(settings.get("lrs", ())) * len(settings.get("lr_seeds", ())):
        return None
    by_lr: dict[float, list[float]] = {}
    for r in rows:
        by_lr.setdefault(r["lr"], []).append(r["val_nll"])
    return min(map(np.mean, by_lr.values()))


def _twins(result: dict, recipe: str, cells: list[str], ran: list[str]) -> dict[str, str]:
    """For each cell `recipe` skipped, a recipe that ran there with the same configuration (at
    522 steps, 2% of the run is 10 warmup steps): {cell: that recipe}; {} where a cell has none."""
    warmup, loops, _ = parse_recipe(recipe)
    twins = {}
    for cell in (c for c in cells if c not in ran):
        # its length from its own blocks ("d64" must not read d64-40's)
        steps = next((b["sweep"][0]["steps"] for c, _, b in probe_rows(result) if c == cell), 0)
        same = [
            q
            for c, q, _ in probe_rows(result)
            if c == cell
            and parse_recipe(q)[1] == loops
            and _warmup(parse_recipe(q)[0], steps) == _warmup(warmup, steps)
            and _best(result, cell, q) is not None
        ]
        if not same:
            return {}
        twins[cell] = same[0]
    return twins


def _warmup(warmup: float, steps: int) -> int:
    """A recipe's warmup in steps at a run of `steps`, as training resolves it."""
    frac = warmup if warmup < 1 else 0.0
    return warmup_of(OptimConfig(warmup_frac=frac, warmup_steps=int(warmup)), steps)


def _excess(result: dict, recipe: str, chosen: dict, twins: dict[str, str]) -> float:
    """`recipe`'s mean excess over the best recipe in contention at each cell, read through its
    twin where it did not run: the score `choose_recipe` gives the recipes in contention."""
    out = []
    for cell in chosen["cells"]:
        mine = _best(result, cell, twins.get(cell, recipe))
        out.append(mine / min(_best(result, cell, q) for q in chosen["excess"]) - 1)
    return float(np.mean(out))


def own_section(result: dict) -> str:
    """The own-recipe check: each fixed-first arm alone at one cell under every recipe still in
    contention; its runs, then how far the shared recipe leaves the arm from its own best."""
    head = ["arm", "recipe", "steps", "LR", "escape step (each seed)", "val NLL (seed mean)"]
    rows = []
    for name, block in result["blocks"].items():
        if name.startswith("own-") and block.get("sweep"):
            arm, recipe = block["sweep"][0]["schedule"], "w" + name.rsplit("-w", 1)[1]
            rows += _lr_rows(block, label(arm), recipe)
    if not rows:
        return "The own-recipe check has not run yet (`looped map --probe --blocks own-...`)."
    checks = result.get("own_recipes") or []
    summary = []
    for c in checks:
        split = f"{100 * c['seed_spread']:.2f}%" if "seed_spread" in c else "-"
        said = [f"{100 * c['excess']:+.2f}%", split, f"{100 * tolerance(c['schedule']):.1f}%"]
        summary.append([label(c["schedule"]), c["best"], c["shared"], *said])
    head2 = ["arm", "its own best recipe", "shared recipe", "shared over own best"]
    head2 += ["widest seed split", "tolerance"]
    tail = md_table(head2, summary) if summary else "No arm has every recipe finished yet."
    return md_table(head, rows) + "\n\n" + tail


def fig_escape(result: dict, path: Path) -> Path:
    """One panel per cell: each recipe's escape steps (a dot per seed and LR, the LR by colour);
    a run that never escaped sits on the dashed line at its last step."""
    plotting.use_theme()
    found = probe_rows(result)
    cells = list(dict.fromkeys(c for c, _, _ in found))
    lrs = sorted({r["lr"] for _, _, b in found for r in b["sweep"]})
    # two panels a row, so that a recipe's name stays legible at a page's width
    cols = min(2, len(cells))
    rows = -(-len(cells) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.flat[len(cells) :]:
        ax.set_visible(False)
    for ax, cell in zip(axes.flat, cells):
        mine = [(recipe, b) for c, recipe, b in found if c == cell]
        steps = mine[0][1]["sweep"][0]["steps"]
        for j, lr in enumerate(lrs):
            for x, (_, b) in enumerate(mine):
                runs = [r for r in b["sweep"] if r["lr"] == lr]
                ys = [steps if r["escape_step"] is None else r["escape_step"] for r in runs]
                xs = x + 0.15 * (j - (len(lrs) - 1) / 2) + np.linspace(-0.04, 0.04, len(ys))
                label = f"LR {lr:g}" if x == 0 else None
                ax.scatter(xs, ys, s=18, color=plotting.color("", j), label=label, zorder=3)
        ax.axhline(steps, color="0.3", ls="--", lw=0.8, label="never escaped (the run's end)")
        ax.set_xticks(range(len(mine)), [r for r, _ in mine], rotation=30, fontsize=8)
        ax.set(title=f"{cell} ({steps:,} steps)", ylabel="escape step", ylim=(0, steps * 1.08))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, ncol=len(labels))
    return plotting.save(fig, path)


def fig_escape_delay(maps: dict[str, dict], path: Path) -> Path:
    """Each reported seed-cell's gap to uniform against uniform's escape delay (steps after the
    arm's escape), a colour per recipe and a mark per arm; hollow where uniform never escaped (the
    delay is at least the steps the arm had left). The key gives each recipe's r over the rest."""
    plotting.use_theme()
    fig, ax = plt.subplots(figsize=(7.2, 5.6))
    marks = dict(zip(MAIN_ARMS, "os"))
    key = []
    for i, (name, result) in enumerate(maps.items()):
        points, colour = escape_delays(result), plotting.color(name, i)
        fit = delay_fit(points)
        said = f", r = {fit['r']:.2f} over {fit['n']}" if fit else ""
        key.append(Line2D([], [], ls="", marker="o", color=colour, label=f"{name}{said}"))
        for arm, hollow in ((a, h) for a in MAIN_ARMS for h in (False, True)):
            mine = [p for p in points if p["schedule"] == arm and p["censored"] == hollow]
            face = "none" if hollow else colour
            xs, ys = [p["delay"] for p in mine], [100 * p["gap"] for p in mine]
            ax.scatter(xs, ys, s=22, marker=marks[arm], facecolors=face, edgecolors=colour)
    key += [Line2D([], [], ls="", marker=marks[a], color="0.35", label=label(a)) for a in MAIN_ARMS]
    never = "uniform never escaped: delay at least"
    key.append(Line2D([], [], ls="", marker="o", mfc="none", color="0.35", label=never))
    ax.axhline(0, color="0.3", lw=0.8)
    ax.axvline(0, color="0.6", lw=0.8, ls=":")
    ax.set_xlabel("uniform's escape delay: its escape step minus the arm's (steps)")
    ax.set_ylabel("NLL gap to uniform, % (+: behind)")
    # below the panel: every corner holds some recipe's points once three recipes are drawn
    ax.legend(handles=key, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    return plotting.save(fig, path)


def delay_section(maps: dict[str, dict]) -> str:
    """Per recipe: how much of the seed-cells' gaps uniform's escape delay accounts for."""
    head = ["recipe", "seed-cells (both escaped)", "uniform never escaped", "median delay (steps)"]
    head += ["r", "share of the gaps' spread (r²)", "gap per 100 steps of delay"]
    rows = []
    for name, result in maps.items():
        if fit := delay_fit(escape_delays(result)):
            said = [f"{fit['median_delay']:.0f}", f"{fit['r']:+.2f}", f"{100 * fit['r2']:.0f}%"]
            per = f"{fit['pct_per_100_steps']:+.2f} points"
            rows.append([name, fit["n"], fit["censored"], *said, per])
    return md_table(head, rows) if rows else "No map under a recipe has paired seed-cells yet."


def change_section(old: dict, new: dict, recipe: str) -> str:
    """Each cell both maps ran: its held-out NLL under RECIPE over the map's own recipe, paired by
    seed, beside each recipe's LR and those seeds' escape steps (median (range), never)."""
    head = ["d", "vocab", "steps", "schedule", "LR (own → new)", f"NLL, {recipe} over own [95%]"]
    head += ["escape (own / new)"]
    rows = [
        [
            c["d_model"],
            c["vocab_size"],
            c["steps"],
            label(c["schedule"]),
            f"{c['lr'][0]:g} → {c['lr'][1]:g}",
            f"{gap_text(c['change'])}, n={c['change']['n']}",
            " / ".join(escape_text(e) for e in c["escape_steps"]),
        ]
        for c in recipe_change(old, new)
    ]
    return md_table(head, rows) if rows else f"No cell has run under {recipe} yet."
