"""The demo's text track (the text study at one length, `studies.textstudy.run_text`) as tables
and figures: pure functions of demo_text.json's dict."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

import looped.studies.stats as stats
from looped import plotting
from looped.paper import UNIFORM, label, tolerance
from looped.studies.report.tables import gap_text, md_table, verdict_words

TABLE_HEAD = ["basis", "schedule", "LR", "steps", "mean NLL K=1..16 (seed mean, min-max)"]
TABLE_HEAD += ["vs uniform [95% interval]", "modeled compute saved"]
SWEEP_TITLE = "LR sweep, validation NLL (circled: chosen)"
MEAN_NLL = "mean NLL over K=1..16"


def interval_cell(row: dict) -> str:
    """A row's paired gap to uniform with its 95% interval (none from one seed)."""
    one = {"mean": row["vs_uniform_by_seed"]["mean"], "lo": math.nan, "hi": math.nan}
    return gap_text(row.get("gap") or one, digits=1)


def format_table(result: dict) -> str:
    """The end-of-run table: both comparisons, one row per schedule; "vs uniform" is the mean of
    the per-seed paired differences."""
    rows = []
    for basis, key in (("equal tokens", "equal_tokens"), ("equal FLOPs", "equal_flops")):
        for r in result[key]:
            n, steps = r["mean_nll"], f"{r['steps']}"
            if key == "equal_flops" and "uniform_steps" in r:
                steps += f" (uniform {r['uniform_steps']})"
            nll = f"{n['mean']:.3f} ({n['min']:.3f}-{n['max']:.3f})"
            gap, saved = interval_cell(r), r["compute_saving"]
            saved = "0%" if round(saved * 100) == 0 else f"{saved:.0%}"  # nothing: not "-0%"
            rows.append([basis, label(r["schedule"]), f"{r['lr']:g}", steps, nll, gap, saved])
    return md_table(TABLE_HEAD, rows)


def settings_table(result: dict, command: str) -> str:
    """What was run, one setting a row."""
    meta, s, corpus = result["meta"], result["meta"]["settings"], result["meta"]["corpus"]
    minutes = sum(r["own_wall"] for r in result["runs"]) / 60
    # the text study at one length: one LR shared by every schedule, chosen on uniform's seeds
    seeds, n = ", ".join(map(str, s["lr_seeds"])), len(s["lr_seeds"])
    chosen_on = f"uniform's validation NLL, seed{'s' * (n > 1)} {seeds}" if n else "not swept"
    rows = [
        ("command", f"`{command}`"),
        ("machine", meta["machine"]),
        ("runs", len(result["runs"])),
        ("training minutes (one core each)", f"{minutes:.0f}"),
        ("corpus", f"`{corpus['dataset']}`, {corpus['tokenizer']}"),
        ("train tokens", f"{corpus['train']:,}"),
        ("validation / test tokens", f"{corpus['val']:,} / {corpus['test']:,}"),
        ("d_model (one looped layer)", s["d_model"]),
        ("steps", s["steps"]),
        ("tokens per step", meta["tokens_per_step"]),
        ("dtype", meta["dtype"]),
        ("LRs swept", ", ".join(f"{x:g}" for x in s["lrs"])),
        ("LR chosen on", chosen_on),
        ("seeds", s["seeds"]),
        ("metric", meta["metric"]),
    ]
    return md_table(["setting", "value"], [[k, str(v)] for k, v in rows])


def baselines_table(result: dict, baseline: dict | None) -> str:
    """The count-table baselines on the same tokens beside the worst model: a verdict is given
    only where every model beats the bigram table."""
    worst = stats.worst_nll(result["equal_tokens"])
    if not baseline:
        return md_table(["bigram baseline", "worst model"], [["none computed", f"{worst:.3f}"]])
    below = "yes" if stats.below_bigram(worst, baseline) else "no"
    head = ["tokens", "unigram", "add-k bigram", "worst model", "every model below the bigram"]
    fits = [f"{baseline[k]:.3f}" for k in ("unigram", "bigram")]
    return md_table(head, [[f"{baseline['tokens']:,}", *fits, f"{worst:.3f}", below]])


def text_note(result: dict) -> list[str]:
    """Text models that lose to a bigram table say nothing about the paper's claim: say so."""
    base = result.get("baselines")
    if not base or stats.beats_bigram(result, base):
        return []
    worst = stats.worst_nll(result["equal_tokens"])
    return [
        f"(your text models score worse than a bigram count table on the same windows: worst "
        f"seed {worst:.2f} vs bigram {base['bigram']:.2f} nats/token; `looped map` trains "
        "long enough to speak to the paper's claim, docs/RESULTS.md shows its results)"
    ]


def verdict_table(result: dict) -> str:
    """Each fixed-first recipe at equal tokens (the paper's claim): its paired gap to uniform,
    the paper's tolerance and the verdict the track decided (`textstudy.text_tables`)."""
    rows = []
    for row in result["equal_tokens"]:
        if row["schedule"].startswith("fixed-first"):
            tol = tolerance(row["schedule"])
            rows.append(
                [label(row["schedule"]), interval_cell(row), f"{tol:.1%}", verdict_words(row)]
            )
    return md_table(["equal tokens", "vs uniform [95% interval]", "tolerance", "verdict"], rows)


def schedules_table(result: dict) -> str:
    """Each schedule's chosen LR, whether it lies at the edge of the sweep (its optimum may lie
    beyond), and the spread of its seeds' mean NLL (max - min, equal tokens)."""
    lrs, chosen = result["meta"]["settings"]["lrs"], result.get("chosen_lr") or {}
    spread = seed_spreads(result)
    rows = []
    for s, lr in chosen.items():
        edge = result["sweep"] and lr in (min(lrs), max(lrs))  # the smallest or largest swept
        width = f"{spread[s]:.2f}" if s in spread else "-"
        rows.append([label(s), f"{lr:g}", "yes" if edge else "no", width])
    return md_table(["schedule", "chosen LR", "at the sweep's edge", "seed spread (nats)"], rows)


def section(result: dict, command: str = "looped demo (its text track)") -> str:
    """The text-track section of docs/RESULTS.md: tables only (the prose is written by hand),
    judged against the count-table baselines the result holds."""
    tables = [settings_table(result, command), baselines_table(result, result.get("baselines"))]
    tables += [format_table(result), verdict_table(result), schedules_table(result)]
    return "\n\n".join(tables)


def seed_spreads(result: dict) -> dict[str, float]:
    """Each schedule's max - min of the mean NLL over its equal-token seeds, widest first: which
    schedule's seeds make a comparison undecided."""
    spans = {}
    for r in result["equal_tokens"]:
        nll = [x["mean_nll"] for x in _equal_token_runs(result, r["schedule"])]
        if len(nll) > 1:
            spans[r["schedule"]] = max(nll) - min(nll)
    return dict(sorted(spans.items(), key=lambda kv: -kv[1]))


def sweep_means(rows: list[dict]) -> list[tuple[float, float]]:
    """(LR, mean validation NLL over the sweep's seeds) of one schedule's sweep rows, by LR."""
    by: dict[float, list[float]] = {}
    for r in rows:
        if r.get("mean_nll") is not None:
            by.setdefault(r["lr"], []).append(r["mean_nll"])
    return sorted((lr, float(np.mean(v))) for lr, v in by.items())


def fig_loss_by_seed(result: dict, path: Path) -> Path:
    """Training loss against step (a trailing mean over 5 logged steps), one panel per schedule at
    equal tokens, one line per seed: where seeds part ways."""
    plotting.use_theme()
    rows = result["equal_tokens"]
    cols = min(2, len(rows))  # two panels a row: four side by side shrink their text unreadably
    grid = -(-len(rows) // cols)
    fig, axes = plt.subplots(
        grid, cols, figsize=(4.2 * cols, 3.0 * grid), sharey=True, sharex=True, squeeze=False
    )
    for ax in axes.flat[len(rows) :]:
        ax.set_visible(False)
    for ax, r in zip(axes.flat, rows):
        for x in sorted(_equal_token_runs(result, r["schedule"]), key=lambda x: x["seed"]):
            steps, loss = np.asarray(x["curve"], dtype=float)[:, :2].T
            w, name = min(5, len(loss)), f"seed {x['seed']}: {x['mean_nll']:.2f}"
            smooth = plotting.trailing_mean(loss, w, keep_length=False)
            color = plotting.color(f"seed {x['seed']}", x["seed"])
            ax.plot(steps[w - 1 :], smooth, lw=1.2, color=color, label=name)
        ax.set_title(f"{label(r['schedule'])}, LR {r['lr']:g}", fontsize=9)
        # the losses fall: the top right is clear
        ax.legend(fontsize=8, title="seed: mean NLL K=1..16", title_fontsize=8, loc="upper right")
    for col in range(cols):  # the lowest panel drawn in each column carries the step axis
        ax = [a for a in axes[:, col] if a.get_visible()][-1]
        ax.set_xlabel("step")
        ax.tick_params(axis="x", labelbottom=True)
    for ax in axes[:, 0]:
        ax.set_ylabel("training loss (nats/token)")
    fig.suptitle("Training loss per seed, equal tokens")
    return plotting.save(fig, path)


def fig_nll_by_depth(result: dict, path: Path) -> Path:
    """Left: held-out NLL by serving depth at equal tokens (the paper's Fig. 8). Right: mean NLL
    against modeled FLOPs, where uniform's runs cut to the others' FLOPs trace its compute curve."""
    plotting.use_theme()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    _by_depth_panel(left, result)
    _by_flops_panel(right, result)
    return plotting.save(fig, path)


def _equal_token_runs(result: dict, schedule: str) -> list[dict]:
    return [x for x in result["runs"] if "tokens" in x["roles"] and x["schedule"] == schedule]


def _by_depth_panel(ax: Any, result: dict) -> None:
    for i, r in enumerate(result["equal_tokens"]):
        nll = [x["token_nll"] for x in _equal_token_runs(result, r["schedule"])]
        color = plotting.color(r["schedule"], i)
        plotting.band(ax, r["depths"], nll, label(r["schedule"]), color, marker="o", ms=3)
    first = result["equal_tokens"][0]
    ax.set_title(f"Equal tokens ({first['steps']} steps, {first['tokens']:,} tokens)")
    ax.set_xlabel("serving depth K")
    plotting.chosen_ticks(ax.xaxis, plotting.DEPTH_TICKS)
    ax.set_ylabel("held-out token NLL (nats/token)")
    ax.legend(fontsize=8, loc="upper right")  # the curves fall from K=1 to a floor below it


def _flops_point(ax: Any, runs: list[dict], **kw: Any) -> tuple[float, float]:
    """The seed mean at the runs' mean FLOPs, with a bar over the seeds' range."""
    y = np.array([x["mean_nll"] for x in runs])
    x = float(np.mean([r["flops"] for r in runs]))
    ax.errorbar([x], [y.mean()], yerr=[[y.mean() - y.min()], [y.max() - y.mean()]], **kw)
    plotting.key(ax, "bars", plotting.SEED_RANGE)
    return x, float(y.mean())


def _by_flops_panel(ax: Any, result: dict) -> None:
    # uniform's equal-token runs and its runs cut to another schedule's FLOPs: every run with a
    # role (`textstudy` gives a run no other)
    uni = [x for x in result["runs"] if x["schedule"] == UNIFORM and x["roles"]]
    bars = {"fmt": "none", "capsize": 2, "color": plotting.color(UNIFORM, 0)}
    steps = sorted({x["steps"] for x in uni})
    curve = sorted(_flops_point(ax, [x for x in uni if x["steps"] == n], **bars) for n in steps)
    cut = f"{label(UNIFORM)} (its steps cut to each FLOP budget)"
    ax.plot(*zip(*curve, strict=True), marker="o", color=bars["color"], label=cut)
    for i, r in enumerate(result["equal_tokens"]):
        if r["schedule"] != UNIFORM:
            kw = {"color": plotting.color(r["schedule"], i), "label": label(r["schedule"])}
            runs = _equal_token_runs(result, r["schedule"])
            _flops_point(ax, runs, fmt="s", ms=7, capsize=2, **kw)
    ax.set_title("Equal modeled FLOPs")
    ax.set_xlabel("modeled training FLOPs")
    plotting.plain_ticks(ax.xaxis)
    ax.set_ylabel(MEAN_NLL)
    ax.legend(fontsize=8, loc="upper right")  # NLL falls with compute


def fig_lr_sweep(
    result: dict, path: Path, ylabel: str = MEAN_NLL, title: str = SWEEP_TITLE
) -> Path:
    """Mean NLL over serving depths against the peak LR, per schedule; the chosen LR circled."""
    plotting.use_theme()
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for i, s in enumerate(result["chosen_lr"]):  # every schedule, in the study's order
        rows = [r for r in result["sweep"] if r["schedule"] == s]
        pts = sweep_means(rows)
        if not pts:
            continue
        x, y = zip(*pts, strict=True)
        lost = sorted(r["lr"] for r in rows if r.get("mean_nll") is None)
        name = label(s) + (f" (diverged at {', '.join(f'{v:g}' for v in lost)})" if lost else "")
        best, color = result["chosen_lr"][s], plotting.color(s, i)
        ax.plot(x, y, marker="o", label=name, color=color)
        ax.scatter([best], [dict(pts)[best]], s=120, facecolors="none", edgecolors=color)
    ax.set_xscale("log")
    plotting.chosen_ticks(ax.xaxis, sorted({r["lr"] for r in result["sweep"]}))  # the LRs swept
    ax.set_xlabel("peak learning rate")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.legend(fontsize=8, ncol=3)  # under the panel: a sweep's curve may pass any corner
    return plotting.save(fig, path)


def figures(result: dict, out_dir: Path, prefix: str = "text") -> list[Path]:
    """The track's figures as OUT_DIR/PREFIX_*.png (the LR sweep's only when it ran)."""
    paths = [fig_nll_by_depth(result, out_dir / f"{prefix}_nll_by_depth.png")]
    if result["equal_tokens"] and all(r.get("curve") for r in result["runs"]):
        paths.append(fig_loss_by_seed(result, out_dir / f"{prefix}_loss_by_seed.png"))
    if result["sweep"]:
        paths.append(fig_lr_sweep(result, out_dir / f"{prefix}_lr_sweep.png"))
    return paths
