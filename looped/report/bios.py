"""The bios track (the demo's synthetic biographies) as a reader sees it.

The paper's figures,
the summary tables, the comparison with the committed reference, and each of the paper's claims
with the verdict its numbers give. Pure functions of demo.json's dict.

Lines are seed means; bands span the min and max across seeds.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import seaborn as sns

import looped.eval.stats as stats
from looped import paper
from looped.paper import (
    FIXED_FIRST,
    MAIN_SCHEDULES,
    UNIFORM,
)
from looped.report import style
from looped.report.claims import findings
from looped.report.probe import plot_benefit
from looped.report.prose import aside
from looped.report.text import fig_lr_sweep

SMOOTHING = 9  # steps in the trailing mean of a plotted training loss


# -- figures ---------------------------------------------------------------------------------
def by_label(runs: list[dict], **match: Any) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        if all(r.get(k) == v for k, v in match.items()):
            out[r["label"]].append(r)
    return out


def nll(row: dict) -> list[float]:
    """The NLL a figure plots: fact NLL where the run has it (bios data, the demo), token NLL
    otherwise (text runs, `looped plot --runs`)."""
    return row["fact_nll"] if "fact_nll" in row else row["token_nll"]


def nll_label(result: dict, short: bool = False) -> str:
    label = result.get("meta", {}).get("nll_label", "token NLL (nats/token)")
    # "fact NLL (nats per fact, held-out templates)" -> "fact NLL (nats per fact)": an axis
    # label must fit the panel's height
    return label.split(" (")[0] if short else label.split(",")[0] + (")" if "," in label else "")


def main_runs(result: dict) -> list[dict]:
    return [r for r in result["runs"] if "main" in r["group"]]


def at_full_budget(result: dict, **match: Any) -> dict[str, list[dict]]:
    """The main grid's runs at its largest budget, grouped by schedule label."""
    runs = main_runs(result)
    return by_label(runs, budget=max(r["budget"] for r in runs), **match)


def fig1_recall(result: dict, path: Path) -> Path:
    """Recalled bits per person across serving depths, one panel per budget (paper Fig. 1)."""
    runs = main_runs(result)
    budgets = sorted({r["budget"] for r in runs})
    fig, axes = plt.subplots(
        1, len(budgets), figsize=(3.4 * len(budgets), 3.6), sharey=True, squeeze=False
    )
    for ax, budget in zip(axes[0], budgets):
        for i, (label, group) in enumerate(by_label(runs, budget=budget).items()):
            style.schedule_band(ax, group[0]["depths"], [r["bits"] for r in group], label, i)
        ax.set_title(f"{budget:.0%} of the full FLOP budget")
        ax.set_xlabel("serving depth K")
    axes[0][0].set_ylabel("recalled bits per person")
    axes[0][-1].legend(fontsize=9, loc="lower right")
    fig.suptitle("Recall across serving depths at matched training compute", y=1.0)
    return style.save(fig, path)


def fig2_nll_vs_flops(result: dict, path: Path) -> Path:
    """Left: mean serving-depth NLL against modeled FLOPs; right: NLL minus uniform (Fig. 2)."""
    runs = main_runs(result)
    top = max(r["budget"] for r in runs)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (label, group) in enumerate(by_label(runs).items()):  # main grid only, no catch-up
        budgets = sorted({r["budget"] for r in group})
        xs = [np.mean([r["flops"] for r in group if r["budget"] == b]) for b in budgets]
        ys = [[np.mean(nll(r)) for r in group if r["budget"] == b] for b in budgets]
        left.plot(
            xs,
            [np.mean(y) for y in ys],
            marker=style.marker(label, i),
            color=style.color(label, i),
            label=label,
            **style.dashes(label),
        )
        left.vlines(
            xs, [min(y) for y in ys], [max(y) for y in ys], color=style.color(label, i), alpha=0.5
        )
    left.set_xscale("log")
    left.set_yscale("log")
    left.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    left.set_xlabel("modeled training FLOPs")
    left.set_ylabel(f"mean {nll_label(result, True)} over depths 1..16")
    left.set_title("Serving quality against training compute")
    left.legend(fontsize=8)
    full = by_label(runs, budget=top)
    uniform = full.get(paper.label(UNIFORM))
    if uniform:
        base = np.mean([nll(r) for r in uniform], axis=0)
        for i, (label, group) in enumerate(full.items()):
            if label == paper.label(UNIFORM):
                continue
            style.schedule_band(
                right, group[0]["depths"], [np.asarray(nll(r)) - base for r in group], label, i
            )
        right.axhline(0, color="k", lw=0.8)
        right.set_xlabel("serving depth K")
        right.set_ylabel(f"{nll_label(result, True)} minus uniform's\n(above 0: worse)")
        right.set_title(f"Against uniform, {top:.0%} of the budget")
        right.legend(fontsize=8)
    else:  # no uniform run to compare against (`looped plot --runs` on other schedules)
        right.remove()
    return style.save(fig, path)


def fig3_loss(result: dict, path: Path) -> Path:
    """Training loss over steps with the switch marked, full and terminal (paper Fig. 3)."""
    full = at_full_budget(result, seed=0)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    switch = None
    for i, (label, group) in enumerate(full.items()):
        curve = np.asarray(group[0]["curve"], dtype=float)
        smoothed = style.trailing_mean(curve[:, 1], SMOOTHING)
        for ax in (left, right):
            ax.plot(
                curve[:, 0],
                smoothed,
                color=style.color(label, i),
                label=label,
                lw=1.2,
                **style.dashes(label),
            )
        if group[0].get("switch_step"):
            switch = group[0]["switch_step"]
            tail = curve[:, 0] >= switch * 0.9
            right.set_xlim(curve[tail, 0].min(), curve[:, 0].max())
            right.set_ylim(0, max(smoothed[tail].max() * 1.1, 0.05))
    for ax, title in ((left, "full run"), (right, "terminal phase")):
        if switch:
            ax.axvline(switch, color="k", ls="--", lw=0.8, label="switch to uniform")
        ax.set_xlabel("optimizer step")
        ax.set_title(f"Training NLL, {title}")
    left.set_yscale("log")
    left.set_ylabel("training loss (nats/token, smoothed)")
    left.legend(fontsize=8)
    return style.save(fig, path)


def fig5_specialisation(result: dict, path: Path) -> Path:
    """Recall across serving depths for fixed K=1,2,4,8, normalised by each peak (Fig. 5)."""
    runs = sorted(
        (r for r in result["runs"] if "depth" in r["group"]),
        key=lambda r: int(r["schedule"].split(":")[1]),
    )
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    colors = sns.color_palette("viridis", len(runs))
    for i, (color, r) in enumerate(zip(colors, runs)):
        k = int(r["schedule"].split(":")[1])
        bits = np.asarray(r["bits"])
        marker = ("o", "s", "^", "D", "v", "P")[i % 6]  # models that recall nothing coincide
        left.plot(
            r["depths"],
            bits / max(bits.max(), 1e-9),
            marker=marker,
            ms=3,
            color=color,
            label=f"trained at K={k}",
        )
        left.axvline(k, color=color, ls=":", lw=0.8)
        right.plot(r["depths"], nll(r), marker=marker, ms=3, color=color, label=f"trained at K={k}")
    left.set_ylabel("recall / peak recall")
    left.set_title("Recall, normalised by each model's peak")
    right.set_yscale("log")
    right.set_ylabel(nll_label(result))
    right.set_title("NLL across serving depths")
    for ax in (left, right):
        ax.set_xlabel("serving depth K")
        ax.legend(fontsize=8)
    return style.save(fig, path)


def fig7_schedules(result: dict, path: Path) -> Path:
    """The depth each step trains at: uniform vs fixed-first (paper Fig. 7)."""
    full = at_full_budget(result, seed=0)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
    for ax, label in zip(axes, (paper.label(UNIFORM), paper.label(FIXED_FIRST))):
        if label not in full:
            continue
        curve = np.asarray(full[label][0]["curve"], dtype=float)
        ax.scatter(curve[:, 0], curve[:, 2], s=2, color=style.color(label), alpha=0.6)
        if full[label][0].get("switch_step"):
            ax.axvline(full[label][0]["switch_step"], color="k", ls="--", lw=0.8)
        ax.set_title(label)
        ax.set_xlabel("optimizer step")
    axes[0].set_ylabel("training depth K")
    return style.save(fig, path)


def fig8_nll_by_depth(result: dict, path: Path) -> Path:
    """Next-token NLL across serving depths with seed bands: full range and K>=4 (Fig. 8)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (label, group) in enumerate(at_full_budget(result).items()):
        depths = group[0]["depths"]
        style.schedule_band(left, depths, [nll(r) for r in group], label, i)
        keep = [j for j, k in enumerate(depths) if k >= 4]
        style.schedule_band(
            right, [depths[j] for j in keep], [[nll(r)[j] for j in keep] for r in group], label, i
        )
    left.set_yscale("log")
    left.set_title("All serving depths")
    right.set_title("K = 4..16")
    for ax in (left, right):
        ax.set_xlabel("serving depth K")
        ax.set_ylabel(nll_label(result))
    left.legend(fontsize=8)
    return style.save(fig, path)


def fig_finish(result: dict, path: Path) -> Path:
    """Fixed-first before its switch and after its uniform finish, beside uniform (seed 0)."""
    full = at_full_budget(result, seed=0)
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ff = full.get(paper.label(FIXED_FIRST), [])
    if ff and ff[0].get("pre_switch"):
        r, pre = ff[0], ff[0]["pre_switch"]
        color = style.color(FIXED_FIRST)
        ax.plot(
            pre["depths"],
            nll(pre),
            "o--",
            color=color,
            alpha=0.6,
            ms=3,
            label=f"fixed-first, before the switch (step {r['switch_step']})",
        )
        ax.plot(
            r["depths"],
            nll(r),
            "o-",
            color=color,
            ms=3,
            label=f"fixed-first, after the finish (step {r['steps']})",
        )
    for r in full.get(paper.label(UNIFORM), [])[:1]:
        ax.plot(
            r["depths"],
            nll(r),
            "s:",
            color=style.color(UNIFORM),
            ms=3,
            label=f"{paper.label(UNIFORM)}, end (step {r['steps']})",
        )
    ax.axvline(4, color="k", ls=":", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("serving depth K")
    ax.set_ylabel(nll_label(result))
    ax.set_title("What the finishing phase does (seed 0, full budget)")
    ax.legend(fontsize=8)
    return style.save(fig, path)


def fig_two_hop(result: dict, path: Path) -> Path:
    """Two-hop recall (employer -> city) across serving depths: where extra loops can matter."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for i, (label, group) in enumerate(at_full_budget(result).items()):
        if "two_hop_acc" in group[0]:
            style.schedule_band(ax, group[0]["depths"], [r["two_hop_acc"] for r in group], label, i)
    for r in (r for r in result["runs"] if r["group"] == "depth" and "two_hop_acc" in r):
        ax.plot(r["depths"], r["two_hop_acc"], ls=":", lw=1, label=r["label"])
    ax.set_xlabel("serving depth K")
    ax.set_ylabel("two-hop exact-match accuracy")
    ax.set_title("Two-hop recall across serving depths")
    ax.legend(fontsize=7)
    return style.save(fig, path)


def paper_figures(result: dict, out_dir: str | Path) -> list[Path]:
    """Every demo figure into out_dir; returns the paths written."""
    style.use_theme()
    out = Path(out_dir)
    has_bits = all("bits" in r for r in result["runs"])
    paths = [
        fig2_nll_vs_flops(result, out / "fig2_nll_vs_flops.png"),
        fig3_loss(result, out / "fig3_loss_trajectory.png"),
        fig7_schedules(result, out / "fig7_schedules.png"),
        fig8_nll_by_depth(result, out / "fig8_nll_by_depth.png"),
    ]
    if has_bits:
        paths.insert(0, fig1_recall(result, out / "fig1_recall_bits.png"))
        if any("depth" in r["group"] for r in result["runs"]):
            paths.append(fig5_specialisation(result, out / "fig5_depth_specialisation.png"))
        if any(r.get("pre_switch") for r in result["runs"]):
            paths.append(fig_finish(result, out / "finishing_phase.png"))
        if any("two_hop_acc" in r for r in result["runs"]):
            paths.append(fig_two_hop(result, out / "two_hop_recall.png"))
    return paths


# -- tables -----------------------------------------------------------------------------------
def format_summary(table: list[dict]) -> str:
    """A summary table as markdown: seed means, the seed range of the mean fact NLL and the
    per-seed range of the difference from uniform (paired by seed)."""
    lines = [
        "| schedule | LR | steps | compute vs uniform | wall-clock vs uniform | mean fact NLL K=1..16 (seed range) | vs uniform | per-seed range | bits/person K=1 | K=4 | K=8 | K=16 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        bits = [f"{r['bits'].get(str(k), float('nan')):.1f}" for k in (1, 4, 8, 16)]
        n, v = r.get("fact_nll"), r.get("vs_uniform_by_seed")
        nll = f"{r['mean_fact_nll']:.3f}" + (f" ({n['min']:.3f}-{n['max']:.3f})" if n else "")
        per_seed = f"{v['min']:+.1%} to {v['max']:+.1%}" if v else "-"
        lr = f"{r['lr']:g}" if r.get("lr") else "-"
        lines.append(
            f"| {r['label']} | {lr} | {r['steps']} | {r['compute_vs_uniform']:.2f}x | {r['wall_vs_uniform']:.2f}x | {nll} | {paired_mean(r):+.1%} | {per_seed} | "
            + " | ".join(bits)
            + " |"
        )
    return "\n".join(lines)


def paired_mean(row: dict) -> float:
    """A row's gap to uniform as every table and verdict states it: paired by seed
    (`stats.ratio_interval`), or the ratio of seed means where there is no pairing."""
    v = row.get("vs_uniform_by_seed")
    if v and len(v.get("values", [])) > 1:
        return stats.ratio_interval(v["values"]).mean
    return row["fact_nll_vs_uniform"]


COMPARED = (  # (summary key, label, format of a value, format of a difference)
    ("steps", "steps", "{:.0f}", "{:+.0f}"),
    ("compute_vs_uniform", "compute vs uniform", "{:.2f}x", "{:+.2f}"),
    ("wall_vs_uniform", "wall-clock vs uniform", "{:.2f}x", "{:+.2f}"),
    ("mean_fact_nll", "mean fact NLL K=1..16", "{:.3f}", "{:+.3f}"),
    ("fact_nll_vs_uniform", "fact NLL vs uniform", "{:+.1%}", "{:+.1%}"),
    ("bits.1", "bits/person K=1", "{:.1f}", "{:+.1f}"),
    ("bits.4", "bits/person K=4", "{:.1f}", "{:+.1f}"),
    ("bits.8", "bits/person K=8", "{:.1f}", "{:+.1f}"),
    ("bits.16", "bits/person K=16", "{:.1f}", "{:+.1f}"),
)


def _summary_cell(row: dict, key: str) -> float:
    if key.startswith("bits."):
        return float(row.get("bits", {}).get(key.split(".")[1], float("nan")))
    return float(row.get(key, float("nan")))


def compare_summaries(yours: list[dict], reference: list[dict]) -> str:
    """Your full-budget table beside the reference's: one row per schedule and measure, with
    yours minus the reference's in the last column."""
    lines = [
        "| schedule | measure | yours | reference | difference |",
        "|---|---|---:|---:|---:|",
    ]
    ref = {r["schedule"]: r for r in reference}
    for row in yours:
        other = ref.get(row["schedule"])
        for key, label, fmt, diff_fmt in COMPARED:
            a = _summary_cell(row, key)
            b = _summary_cell(other, key) if other else float("nan")
            lines.append(
                f"| {row['label']} | {label} | {fmt.format(a)} | "
                + (f"{fmt.format(b)} | {diff_fmt.format(a - b)} |" if other else "- | - |")
            )
    return "\n".join(lines)


def compare_text(yours: dict, reference: dict) -> str:
    """Your text track beside the reference's: per basis and schedule, the seed-mean NLL and
    its difference from uniform, with yours minus the reference's."""
    lines = [
        "| basis | schedule | measure | yours | reference | difference |",
        "|---|---|---|---:|---:|---:|",
    ]
    for basis, key in (("equal tokens", "equal_tokens"), ("equal FLOPs", "equal_flops")):
        ref = {r["schedule"]: r for r in reference.get(key, [])}
        for row in yours.get(key, []):
            other = ref.get(row["schedule"])
            cells = (
                (
                    "mean NLL K=1..16",
                    row["mean_nll"]["mean"],
                    other["mean_nll"]["mean"] if other else None,
                    "{:.3f}",
                    "{:+.3f}",
                ),
                (
                    "vs uniform",
                    row["vs_uniform"],
                    other["vs_uniform"] if other else None,
                    "{:+.1%}",
                    "{:+.1%}",
                ),
            )
            for measure, a, b, fmt, diff in cells:
                theirs = f"{fmt.format(b)} | {diff.format(a - b)}" if b is not None else "- | -"
                lines.append(
                    f"| {basis} | {row['label']} | {measure} | {fmt.format(a)} | {theirs} |"
                )
    return "\n".join(lines)


def text_note(result: dict) -> list[str]:
    """What the text track can say at the demo's budget: when its models lose to a bigram
    table on the same windows, nothing about the paper's claim, and where the answer is."""
    base = result.get("baselines")
    if not base or stats.beats_bigram(result, base):
        return []
    worst = stats.worst_nll(result["equal_tokens"])
    return [
        f"(your text models score worse than a bigram count table on the same windows: worst "
        f"seed {worst:.2f} vs bigram {base['bigram']:.2f} nats/token. At the demo's budget the "
        "text track cannot speak to the paper's claim; `looped length` trains long enough to, "
        "and docs/RESULTS.md shows its committed results.)"
    ]


def changed_settings(yours: dict, reference: dict) -> list[str]:
    """Settings that differ and bear on the full-budget table; the number of workers and the
    optional catch-up runs (not in the table) do not."""
    ignored = {"workers", "catch_up", "sweep", "sweep_lrs", "text", "probe", "depth_ks"}
    yours, reference = json.loads(json.dumps(yours)), json.loads(json.dumps(reference))
    return [
        k
        for k in sorted(set(yours) | set(reference))
        if k not in ignored and yours.get(k) != reference.get(k)
    ]


def figures(result: dict, out: Path) -> list[Path]:
    """The bios figures, the LR sweep's (with --sweep) and Fig. 4."""
    paths = paper_figures(result, out)
    if result["sweep"]:
        view = {
            "meta": {"settings": {"schedules": list(MAIN_SCHEDULES)}},
            "sweep": result["sweep"],
            "chosen_lr": result["chosen_lr"],
        }
        paths.append(
            fig_lr_sweep(
                view,
                out / "demo_lr_sweep.png",
                "mean fact NLL, K=1..16",
                "Bios LR sweep (seed 0, full FLOP budget; circled: chosen)",
            )
        )
    if result["update_benefit"]:
        ints = [
            dict(r, benefit={int(k): v for k, v in r["benefit"].items()})
            for r in result["update_benefit"]
        ]
        paths.append(plot_benefit(ints, out / "fig4_update_benefit.png"))
    return paths


# -- the README section -----------------------------------------------------------------------
def section(result: dict) -> str:
    meta = result["meta"]
    s = meta["settings"]
    lines = [
        f"Measured by `looped demo{' --sweep' if s.get('sweep') else ''}"
        f"{' --full' if s.get('depth_ks') else ''}` on {meta['machine']} in "
        f"{meta['wall_seconds'] / 60:.1f} minutes"
        + aside(
            (f"{k} {v / 60:.1f} min" for k, v in (meta.get("phase_seconds") or {}).items()),
            after="; runs that overlapped other work read slower)",
        )
        + ": "
        f"{len(result['runs'])} runs, {s['seeds']} seeds, a {meta['params'] / 1e6:.2f}M-parameter model "
        f"(d={meta['model']['d_model']}, {meta['model']['n_block']} looped layer) on {meta['persons']} synthetic "
        f"persons, batch {meta['batch_size']}x{meta['seq_len']} tokens, {meta['dtype']}; full budget "
        f"{meta['full_budget_flops']:.3g} modeled FLOPs"
        + (
            f" (the optional `--catch-up` runs took {meta['catchup_seconds'] / 60:.1f} more minutes)"
            if meta.get("catchup_seconds")
            else ""
        )
        + ". Each schedule at "
        + (
            "its best LR of the sweep ("
            + ", ".join(f"{x:g}" for x in s["sweep_lrs"])
            + ", seed 0, full budget): "
            if result.get("sweep")
            else "its LR: "
        )
        + ", ".join(f"{paper.label(k)} {v:g}" for k, v in result.get("chosen_lr", {}).items())
        + ".",
        "",
        "Equal FLOPs (every schedule at the full modeled-FLOP budget; seed means, the range of "
        "the mean fact NLL over seeds and of the difference from uniform paired by seed):",
        "",
        format_summary(result["summary"]),
        "",
    ]
    if result.get("summary_tokens"):
        lines += [
            "Equal tokens (the paper's framing: fixed K=4 and fixed-first take uniform's "
            "full-budget steps, so they see the same data and spend less compute):",
            "",
            format_summary(result["summary_tokens"]),
            "",
        ]
    lines += [f"- {f}" for f in findings(result)]
    return "\n".join(lines)


def comparison(
    result: dict,
    reference: dict,
    paths: tuple[Path, Path],
    figures: Path,
    text_pair: tuple[dict, dict] | None = None,
) -> str:
    """Your demo's table beside the reference's (`paths`: yours, the reference's), what differs
    in how they were made, the text tracks side by side (`text_pair`: yours, the reference's),
    and where your figures are: what `looped demo` prints at its end."""
    text = [
        f"\nYour demo ({paths[0]}) beside the reference ({paths[1]}, measured on "
        f"{reference['meta']['machine']}), full budget, seed means:",
        compare_summaries(result["summary"], reference["summary"]),
    ]
    ours, theirs = result["meta"].get("dtype"), reference["meta"].get("dtype")
    if ours != theirs:
        text.append(
            f"(you trained in {ours}, the reference in {theirs}: dtype=auto picks bf16 only "
            "where the CPU has a bf16 path, so expect small differences from rounding)"
        )
    differ = changed_settings(result["meta"]["settings"], reference["meta"]["settings"])
    if differ:
        text.append(
            f"(your {', '.join(differ)} differ from the reference's: the differences show the "
            "change, not a reproduction check)"
        )
    if text_pair is not None:
        yours, theirs = text_pair
        text += [
            "\nYour text track beside the reference's, seed means:",
            compare_text(yours, theirs),
            *text_note(yours),
        ]
        if "test" not in theirs["meta"]["corpus"] and "test" in yours["meta"]["corpus"]:
            text.append(
                "(the reference's text track was measured on the older train/val split, scored "
                "on the windows that chose its LRs; yours on test windows of the leak-free "
                "split: the differences show that change, not a reproduction check)"
            )
    text.append(
        f"Your figures: {figures}/ (the reference's: figures/). "
        f"README sections from your numbers: looped report --results {paths[0]}"
    )
    return "\n".join(text)
