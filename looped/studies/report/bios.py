"""The bios track (the demo's synthetic biographies) as a reader sees it: the paper's figures
(lines are seed means, bands the min-max across seeds), its tables, and the demo's comparison
with the committed reference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from looped import paper, plotting
from looped.paper import FIXED, FIXED_FIRST, MAIN_SCHEDULES, UNIFORM, fixed_depth
from looped.studies.report.probe import plot_benefit
from looped.studies.report.tables import gap_text, md_table, verdict_words
from looped.studies.report.text import fig_lr_sweep, text_note

SMOOTHING = 9  # steps in the trailing mean of a plotted training loss


def by_label(runs: list[dict], **match: Any) -> dict[str, list[dict]]:
    """Runs grouped by schedule label from `paper.SHOWN` (older results files hold older labels)."""
    out: dict[str, list[dict]] = {}
    for r in runs:
        if all(r.get(k) == v for k, v in match.items()):
            out.setdefault(paper.label(r["schedule"]), []).append(r)
    return out


def nll(row: dict) -> list[float]:
    """The NLL a figure plots: fact NLL where the run has it (bios), token NLL otherwise."""
    return row["fact_nll"] if "fact_nll" in row else row["token_nll"]


def nll_label(result: dict, short: bool = False) -> str:
    label = result.get("meta", {}).get("nll_label", "token NLL (nats/token)")
    # "fact NLL (nats per fact, held-out templates)" -> "fact NLL (nats per fact)": an axis
    # label must fit the panel's height
    return label.split(" (")[0] if short else label.split(",")[0] + (")" if "," in label else "")


def depth_runs(result: dict) -> list[dict]:
    """The depth-specialisation runs (Fig. 5), by training depth."""
    runs = (r for r in result["runs"] if "depth" in r["group"])
    return sorted(runs, key=lambda r: fixed_depth(r["schedule"]))


def main_runs(result: dict) -> list[dict]:
    return [r for r in result["runs"] if "main" in r["group"]]


def at_full_budget(result: dict, **match: Any) -> dict[str, list[dict]]:
    """The main grid's runs at its largest budget, grouped by schedule label."""
    runs = main_runs(result)
    return by_label(runs, budget=max(r["budget"] for r in runs), **match)


def _depth_axis(ax: Any, ylabel: str | None = None) -> None:
    """Serving depth along x, ticked at the depths a reader looks up (and y's label, if any)."""
    ax.set_xlabel("serving depth K")
    plotting.chosen_ticks(ax.xaxis, plotting.DEPTH_TICKS)
    if ylabel:
        ax.set_ylabel(ylabel)


def _bands(ax: Any, groups: dict, value: Any, shown: Any = None, least: int = 1) -> None:
    """A seed band of `value(run)` at depths >= `least` per schedule that is `shown(label, run)`,
    in the schedule's own colour and marker (small markers: one per serving depth)."""
    for i, (label, group) in enumerate(groups.items()):
        if shown is None or shown(label, group[0]):
            keep = [j for j, k in enumerate(group[0]["depths"]) if k >= least]
            ys = [[value(r)[j] for j in keep] for r in group]
            depths, marker = [group[0]["depths"][j] for j in keep], plotting.marker(label, i)
            plotting.band(ax, depths, ys, label, plotting.color(label, i), marker=marker, ms=3)


def fig1_recall(result: dict, path: Path) -> Path:
    """Recalled bits per person across serving depths, one panel per budget (paper Fig. 1)."""
    runs = main_runs(result)
    budgets = sorted({r["budget"] for r in runs})
    fig, axes = plt.subplots(
        1, len(budgets), figsize=(3.4 * len(budgets), 3.6), sharey=True, squeeze=False
    )
    for ax, budget in zip(axes[0], budgets):
        _bands(ax, by_label(runs, budget=budget), lambda r: r["bits"])
        ax.set_title(f"{budget:.0%} of the full FLOP budget")
        _depth_axis(ax)
    axes[0][0].set_ylabel("recalled bits per person")
    fig.legend(*axes[0][-1].get_legend_handles_labels(), fontsize=9, ncol=3)  # under the panels
    fig.suptitle("Recall across serving depths at matched training compute")
    return plotting.save(fig, path)


def fig2_nll_vs_flops(result: dict, path: Path) -> Path:
    """Left: mean serving-depth NLL against modeled FLOPs; right: NLL minus uniform (Fig. 2)."""
    runs = main_runs(result)
    top = max(r["budget"] for r in runs)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (label, group) in enumerate(by_label(runs).items()):  # main grid only, no catch-up
        budgets = sorted({r["budget"] for r in group})
        xs = [np.mean([r["flops"] for r in group if r["budget"] == b]) for b in budgets]
        ys = [[np.mean(nll(r)) for r in group if r["budget"] == b] for b in budgets]
        color = plotting.color(label, i)
        kw = {"marker": plotting.marker(label, i), "color": color, "label": label}
        left.plot(xs, [np.mean(y) for y in ys], **kw, **plotting.dashes(label))
        if any(len(y) > 1 for y in ys):  # one seed draws no bar, so it gets no key
            left.vlines(xs, [min(y) for y in ys], [max(y) for y in ys], color=color, alpha=0.5)
            plotting.key(left, "bars", plotting.SEED_RANGE)
    left.set(xscale="log", yscale="log", xlabel="modeled training FLOPs")
    plotting.plain_ticks(left.xaxis, subs=(1, 2, 5))
    plotting.plain_ticks(left.yaxis, subs=(1, 2, 5))
    left.set_ylabel(f"mean {nll_label(result, True)} over depths 1..16")
    left.set_title("Serving quality against training compute")
    left.legend(fontsize=8, loc="lower left")  # NLL falls as compute grows
    full = by_label(runs, budget=top)
    uniform_label = paper.label(UNIFORM)
    if uniform := full.get(uniform_label):
        base = np.mean([nll(r) for r in uniform], axis=0)
        _bands(right, full, lambda r: np.asarray(nll(r)) - base, lambda s, _: s != uniform_label)
        right.axhline(0, color="k", lw=0.8)
        _depth_axis(right, f"{nll_label(result, True)} minus uniform's\n(above 0: worse)")
        # the panel's runs (the demo's all matched on a budget)
        matched = all(r.get("matched_budget", True) for g in full.values() for r in g)
        budget = f"{top:.0%} of the budget" if matched else "equal steps"
        right.set_title(f"Against uniform, {budget}")
        right.legend(fontsize=8, loc="upper center")  # the gaps rise at both ends, if at all
    else:  # no uniform run to compare against (`looped plot --runs` on other schedules)
        right.remove()
    return plotting.save(fig, path)


def _trunk(full: dict, label: str, switch: int) -> str | None:
    """The run whose training curve a fixed-first run follows exactly until its switch (the
    run it branched from): drawn twice, the two would read as one curve."""
    curve = np.asarray(full[label][0]["curve"], dtype=float)
    before = curve[curve[:, 0] < switch]
    for other, group in full.items():
        theirs = np.asarray(group[0]["curve"], dtype=float)[: len(before)]
        if other != label and len(before) and np.array_equal(theirs[:, :2], before[:, :2]):
            return other
    return None


def fig3_loss(result: dict, path: Path) -> Path:
    """Training loss over steps with the switch marked, full and terminal (paper Fig. 3)."""
    full = at_full_budget(result, seed=0)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    switch = next((g[0]["switch_step"] for g in full.values() if g[0].get("switch_step")), None)
    for i, (label, group) in enumerate(full.items()):
        curve = np.asarray(group[0]["curve"], dtype=float)
        smoothed = plotting.trailing_mean(curve[:, 1], SMOOTHING)
        kw = dict(color=plotting.color(label, i), label=label, lw=1.2, **plotting.dashes(label))
        shown = np.ones(len(curve), dtype=bool)
        if group[0].get("switch_step") and (trunk := _trunk(full, label, switch)):
            shown = curve[:, 0] >= switch - 1  # from the step before, so the curve attaches
            kw["label"] = f"{label}\n({trunk} until the switch)"
        left.plot(curve[shown, 0], smoothed[shown], **kw)
        if switch and curve[-1, 0] >= switch:  # a run that ends before the switch is not shown
            right.plot(curve[shown, 0], smoothed[shown], **kw)
        if group[0].get("switch_step"):
            tail = curve[:, 0] >= switch * 0.9
            right.set_xlim(curve[tail, 0].min(), curve[:, 0].max())
            right.set_ylim(0, max(smoothed[tail].max() * 1.1, 0.05))
    for ax, title in ((left, "full run"), (right, "terminal phase")):
        if switch:
            ax.axvline(switch, color="k", ls="--", lw=0.8, label="switch to uniform")
        ax.set_xlabel("optimizer step")
        ax.set_title(f"Training NLL, {title}")
    left.set(yscale="log", ylabel="training loss (nats/token, smoothed)")
    plotting.plain_ticks(left.yaxis, subs=(1, 2, 3, 5, 7))
    fig.legend(*left.get_legend_handles_labels(), fontsize=8, ncol=4)  # under the panels
    return plotting.save(fig, path)


def fig5_specialisation(result: dict, path: Path) -> Path:
    """Recall across serving depths for fixed K=1,2,4,8, normalised by each peak (Fig. 5)."""
    runs = depth_runs(result)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    colors = sns.color_palette("viridis", len(runs))
    for i, (color, r) in enumerate(zip(colors, runs)):
        k = fixed_depth(r["schedule"])
        bits = np.asarray(r["bits"])
        marker = ("o", "s", "^", "D", "v", "P")[i % 6]  # models that recall nothing coincide
        kw = {"marker": marker, "ms": 3, "color": color, "label": f"trained at K={k}"}
        left.plot(r["depths"], bits / max(bits.max(), 1e-9), **kw)
        trained = "dotted: each model's training depth" if i == 0 else None
        left.axvline(k, color=color, ls=":", lw=0.8, label=trained)
        right.plot(r["depths"], nll(r), **kw)
    left.set_ylabel("recall / peak recall")
    left.set_title("Recall, normalised by each model's peak")
    right.set(yscale="log", ylabel=nll_label(result))
    plotting.plain_ticks(right.yaxis, subs=(1, 2, 5))
    right.set_title("NLL across serving depths")
    for ax in (left, right):
        _depth_axis(ax)
    fig.legend(*left.get_legend_handles_labels(), fontsize=8, ncol=5)  # under the panels
    return plotting.save(fig, path)


def fig7_schedules(result: dict, path: Path) -> Path:
    """The depth each step trains at: uniform vs fixed-first (paper Fig. 7)."""
    full = at_full_budget(result, seed=0)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
    for ax, label in zip(axes, (paper.label(UNIFORM), paper.label(FIXED_FIRST))):
        if label not in full:
            continue
        curve = np.asarray(full[label][0]["curve"], dtype=float)
        color, drawn = plotting.color(label), "the K of each step"
        ax.scatter(curve[:, 0], curve[:, 2], s=2, color=color, alpha=0.6, label=drawn)
        if switch := full[label][0].get("switch_step"):
            ax.axvline(switch, color="k", ls="--", lw=0.8, label="switch to uniform")
            ax.legend(fontsize=8, markerscale=3, loc="upper left")  # K=4 until the switch
        ax.set_title(label)
        ax.set_xlabel("optimizer step")
    axes[0].set_ylabel("training depth K")
    plotting.chosen_ticks(axes[0].yaxis, [1, 4, 8, 12, 16])
    return plotting.save(fig, path)


def fig8_nll_by_depth(result: dict, path: Path) -> Path:
    """Next-token NLL across serving depths with seed bands: full range and K>=4 (Fig. 8)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    _bands(left, at_full_budget(result), nll)
    _bands(right, at_full_budget(result), nll, least=4)
    left.set_yscale("log")
    plotting.plain_ticks(left.yaxis, subs=(1, 2, 3, 5, 7))
    left.set_title("All serving depths")
    right.set_title("K = 4..16")
    for ax in (left, right):
        _depth_axis(ax, nll_label(result))
    # under both panels: where the curves leave room inside one depends on the runs drawn
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, ncol=min(len(labels), 4))
    return plotting.save(fig, path)


def fig_finish(result: dict, path: Path) -> Path:
    """Fixed-first before its switch and after its uniform finish, beside uniform (seed 0)."""
    full = at_full_budget(result, seed=0)
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ff = full.get(paper.label(FIXED_FIRST), [])
    if ff and ff[0].get("pre_switch"):
        r, pre = ff[0], ff[0]["pre_switch"]
        kw = {"color": plotting.color(FIXED_FIRST)}
        before = f"fixed-first, before the switch (step {r['switch_step']})"
        ax.plot(pre["depths"], nll(pre), "o--", **kw, alpha=0.6, ms=3, label=before)
        after = f"fixed-first, after the finish (step {r['steps']})"
        ax.plot(r["depths"], nll(r), "o-", **kw, ms=3, label=after)
    for r in full.get(paper.label(UNIFORM), [])[:1]:
        end = f"{paper.label(UNIFORM)}, end (step {r['steps']})"
        ax.plot(r["depths"], nll(r), "s:", color=plotting.color(UNIFORM), ms=3, label=end)
    ax.axvline(4, color="k", ls=":", lw=0.8, label="fixed-first's fixed depth, K=4")
    ax.set_yscale("log")
    _depth_axis(ax, nll_label(result))
    plotting.plain_ticks(ax.yaxis, subs=(1, 2, 3, 5, 7))
    ax.set_title("What the finishing phase does (seed 0, full budget)")
    fig.legend(*ax.get_legend_handles_labels(), fontsize=8, ncol=2)  # under the panel
    return plotting.save(fig, path)


DODGE = 0.25  # serving depths apart that equal values at one depth are drawn, side by side


def fig_two_hop(result: dict, path: Path) -> Path:
    """Two-hop recall (employer -> city) across serving depths: where extra loops can matter.
    The fixed-depth runs (`looped demo --full`) get a panel of their own beside the bands."""
    depth_runs = [r for r in result["runs"] if r["group"] == "depth" and "two_hop_acc" in r]
    panels, width = (2, 10) if depth_runs else (1, 5.5)
    fig, axes = plt.subplots(1, panels, figsize=(width, 3.8), sharey=True, squeeze=False)
    ax = axes[0][0]
    _bands(ax, at_full_budget(result), lambda r: r["two_hop_acc"], lambda _, r: "two_hop_acc" in r)
    ax.set_ylabel("two-hop exact-match accuracy")
    ax.set_title("The three schedules (seed bands)" if depth_runs else "Two-hop recall")
    for i, r in enumerate(depth_runs):  # one seed each: markers, side by side at each depth
        name = paper.label(r["schedule"])
        colour = plotting.color(name, (3, 5, 8)[i % 3])  # red, brown, olive: none a schedule's
        kw = {"color": colour, "marker": plotting.marker(name, i), "ms": 3.5, "ls": "none"}
        dodge = DODGE * (i - (len(depth_runs) - 1) / 2)  # their accuracies are often equal (0)
        axes[0][1].plot(np.asarray(r["depths"]) + dodge, r["two_hop_acc"], label=name, **kw)
    if depth_runs:
        axes[0][1].set_title("Fixed K at other depths (seed 0), side by side")
    for panel, where in zip(axes[0], ("upper right", "center right")):
        _depth_axis(panel)
        # the bands' accuracies are low beyond the first K; a fixed K's sit at 0 or at the top
        panel.legend(fontsize=8, loc=where)
    return plotting.save(fig, path)


def paper_figures(result: dict, out_dir: str | Path) -> list[Path]:
    """Every demo figure into out_dir; returns the paths written."""
    plotting.use_theme()
    runs, out = result["runs"], Path(out_dir)
    bits = all("bits" in r for r in runs)
    depth = bits and any("depth" in r["group"] for r in runs)
    drawn = (  # (figure, its file, whether the runs hold what it draws)
        (fig1_recall, "fig1_recall_bits.png", bits),
        (fig2_nll_vs_flops, "fig2_nll_vs_flops.png", True),
        (fig3_loss, "fig3_loss_trajectory.png", True),
        (fig7_schedules, "fig7_schedules.png", True),
        (fig8_nll_by_depth, "fig8_nll_by_depth.png", True),
        (fig5_specialisation, "fig5_depth_specialisation.png", depth),
        (fig_finish, "finishing_phase.png", bits and any(r.get("pre_switch") for r in runs)),
        (fig_two_hop, "two_hop_recall.png", bits and any("two_hop_acc" in r for r in runs)),
    )
    return [figure(result, out / name) for figure, name, shown in drawn if shown]


# short headers, costs in one column and the paired gap beside its per-seed range: GitHub's
# 890 px column shows all twelve numbers of a row without scrolling (tests/test_report_tables.py
# estimates the width)
SUMMARY_HEADER = ["schedule", "LR", "steps", "compute / wall-clock vs uniform"]
SUMMARY_HEADER += ["mean fact NLL, K=1..16 (seed range)", "vs uniform (per-seed range)"]
SUMMARY_HEADER += ["bits per person at K=1", "K=4", "K=8", "K=16"]


def format_summary(table: list[dict]) -> str:
    """A summary table: seed means, the seed range of the mean fact NLL and of the paired gap."""
    rows = []
    for r in table:
        n, v = r.get("fact_nll"), r.get("vs_uniform_by_seed")
        nll = f"{r['mean_fact_nll']:.3f}" + (f" ({n['min']:.3f}-{n['max']:.3f})" if n else "")
        per_seed = f" ({v['min']:+.1%} to {v['max']:+.1%})" if v else ""
        lr = f"{r['lr']:g}" if r.get("lr") else "-"
        costs = f"{r['compute_vs_uniform']:.2f}x / {r['wall_vs_uniform']:.2f}x"
        bits = [f"{r['bits'].get(str(k), float('nan')):.1f}" for k in (1, 4, 8, 16)]
        gap = f"{paired_mean(r):+.1%}{per_seed}"
        rows.append([paper.label(r["schedule"]), lr, r["steps"], costs, nll, gap, *bits])
    return md_table(SUMMARY_HEADER, rows)


def paired_mean(row: dict) -> float:
    """A row's gap to uniform paired by seed (the track's interval), or the ratio of seed means
    where no interval was drawn."""
    return row["gap"]["mean"] if row.get("gap") else row["fact_nll_vs_uniform"]


def _value(row: dict | None, path: str) -> float:
    """A row's value at `path` (`bits.16`: its bits at depth 16), NaN where it has none."""
    for key in path.split("."):
        row = row.get(key) if isinstance(row, dict) else None
    return float("nan") if row is None else float(row)


# what the demo's closing tables put beside the reference: (measure, its path in a row, format);
# a difference is formatted as its values are, signed
COMPARED = (
    ("steps", "steps", ".0f"),
    ("compute vs uniform", "compute_vs_uniform", ".2f"),
    ("wall-clock vs uniform", "wall_vs_uniform", ".2f"),
    ("mean fact NLL K=1..16", "mean_fact_nll", ".3f"),
    ("fact NLL vs uniform", "fact_nll_vs_uniform", "+.1%"),
    *((f"bits/person K={k}", f"bits.{k}", ".1f") for k in (1, 4, 8, 16)),
)
TEXT_COMPARED = (("mean NLL K=1..16", "mean_nll.mean", ".3f"), ("vs uniform", "vs_uniform", "+.1%"))
BESIDE = ["schedule", "measure", "yours", "reference", "difference"]


def _beside(yours: list[dict], reference: list[dict], measures: tuple, *first: str) -> list[list]:
    """Per schedule of yours and measure: your value, the reference's and the difference."""
    ref, rows = {r["schedule"]: r for r in reference}, []
    for row in yours:
        for measure, path, spec in measures:
            a, b = _value(row, path), _value(ref.get(row["schedule"]), path)
            cells = [f"{b:{spec}}", f"{a - b:+{spec.lstrip('+')}}"] if b == b else ["-", "-"]
            rows.append([*first, paper.label(row["schedule"]), measure, f"{a:{spec}}", *cells])
    return rows


def compare_summaries(yours: list[dict], reference: list[dict]) -> str:
    """Your full-budget table beside the reference's: one row per schedule and measure."""
    return md_table(BESIDE, _beside(yours, reference, COMPARED))


def compare_text(yours: dict, reference: dict) -> str:
    """Your text track beside the reference's: per basis and schedule, NLL and gap to uniform."""
    rows = []
    for basis, key in (("equal tokens", "equal_tokens"), ("equal FLOPs", "equal_flops")):
        rows += _beside(yours.get(key, []), reference.get(key, []), TEXT_COMPARED, basis)
    return md_table(["basis", *BESIDE], rows)


# settings that do not bear on the full-budget table: how it was run, the runs beside it
IGNORED = {"workers", "catch_up", "sweep", "sweep_lrs", "text", "text_seeds", "probe", "depth_ks"}


def changed_settings(yours: dict, reference: dict) -> list[str]:
    """Settings that differ and bear on the full-budget table (not workers, not catch-up runs)."""
    yours, reference = json.loads(json.dumps(yours)), json.loads(json.dumps(reference))
    keys = sorted(set(yours) | set(reference))
    return [k for k in keys if k not in IGNORED and yours.get(k) != reference.get(k)]


# the bios LR sweep's y label and title
SWEEP_AXES = ("mean fact NLL, K=1..16", "Bios LR sweep (seed 0, full FLOP budget; circled: chosen)")


def figures(result: dict, out: Path) -> list[Path]:
    """The bios figures, the LR sweep's (with --sweep) and Fig. 4."""
    paths = paper_figures(result, out)
    if result["sweep"]:
        paths.append(fig_lr_sweep(result, out / "demo_lr_sweep.png", *SWEEP_AXES))
    if rows := result["update_benefit"]:
        rows = [dict(r, benefit={int(k): v for k, v in r["benefit"].items()}) for r in rows]
        paths.append(plot_benefit(rows, out / "fig4_update_benefit.png"))
    return paths


SHOWN_DEPTHS = (1, 4, 8, 16)
DEPTH_MEASURES = (
    ("fact NLL", "fact_nll", ".3f"),
    ("exact recall", "exact", ".0%"),
    ("two-hop accuracy", "two_hop_acc", ".2f"),
)


def setup_table(result: dict) -> str:
    """How the demo was run: command, machine, time per phase, model, data, budget."""
    meta, s = result["meta"], result["meta"]["settings"]
    flags = (" --sweep" if s.get("sweep") else "") + (" --full" if s.get("depth_ks") else "")
    phases = ", ".join(f"{k} {v / 60:.1f}" for k, v in (meta.get("phase_seconds") or {}).items())
    m, params = meta["model"], meta["params"] / 1e6
    swept = ", ".join(f"{x:g}" for x in s["sweep_lrs"]) if s.get("sweep") else "none"
    batch = f"batch {meta['batch_size']}x{meta['seq_len']} tokens"
    rows = [
        ["command", f"`looped demo{flags}`"],
        ["machine, dtype", f"{meta['machine']}, {meta['dtype']}"],
        ["minutes (per phase)", f"{meta['wall_seconds'] / 60:.1f} ({phases})"],
        ["runs, seeds", f"{len(result['runs'])}, {s['seeds']}"],
        ["model", f"{params:.2f}M parameters, d={m['d_model']}, {m['n_block']} looped layer"],
        ["data", f"{meta['persons']} synthetic persons, {batch}"],
        ["bits of attributes per person", f"{result['runs'][0].get('full_bits') or np.nan:.1f}"],
        ["full budget (modeled FLOPs)", f"{meta['full_budget_flops']:.3g}"],
        ["LRs swept (seed 0, full budget)", swept],
    ]
    return md_table(["setting", "value"], rows)


def full_runs(result: dict, schedule: str) -> list[dict]:
    """A main schedule's runs at the grid's largest budget."""
    return at_full_budget(result, schedule=schedule).get(paper.label(schedule), [])


def depth_table(result: dict) -> str:
    """Per main schedule at the full budget, seed means at serving depths 1, 4, 8, 16."""
    at = {k: i for i, k in enumerate(result["runs"][0]["depths"])}
    rows = []
    for schedule in MAIN_SCHEDULES:
        runs = full_runs(result, schedule)
        for name, key, spec in DEPTH_MEASURES:
            if runs and key in runs[0]:
                mean = np.mean([r[key] for r in runs], axis=0)
                cells = [format(mean[at[k]], spec) for k in SHOWN_DEPTHS]
                rows.append([paper.label(schedule), name, *cells])
    return md_table(["schedule (full budget)", "measure", *(f"K={k}" for k in SHOWN_DEPTHS)], rows)


def specialisation_table(result: dict) -> str:
    """Fig. 5 in numbers: each fixed-K model's steps, best serving depth, fact NLL there and at
    K=16. The steps are shown because the models share a FLOP budget, not a step count: a
    shallower model trains for more steps, which is partly why its NLL there is lower."""
    rows = []
    for r in depth_runs(result):
        nll, best = r["fact_nll"], int(np.argmin(r["fact_nll"]))
        at = [f"{nll[i]:.3f}" for i in (best, r["depths"].index(16))]  # the best depth, K=16
        rows.append([fixed_depth(r["schedule"]), r["steps"], r["depths"][best], *at])
    head = ["trained at K", "steps", "best serving depth", "fact NLL there", "at K=16"]
    return md_table(head, rows)


def specialisation_heading(result: dict) -> str:
    """The table's budget in words: equal modeled FLOPs, so fewer loops buy more steps."""
    budgets = sorted({r["budget"] for r in depth_runs(result)})
    share = " and ".join(f"{b:.0%}" for b in budgets)
    return (
        f"Depth specialisation (seed 0, each model at {share} of the full modeled-FLOP budget,"
        " so a shallower model trains for more steps):"
    )


def switch_numbers(result: dict, window: int = 20) -> dict[str, float]:
    """Fixed-first at the full budget, seed means: NLL and training loss around the switch."""
    runs = full_runs(result, FIXED_FIRST)
    before, peak = [], []
    for r in runs:
        curve, s = np.asarray(r["curve"], dtype=float), r["switch_step"]
        before.append(curve[(curve[:, 0] > s - window) & (curve[:, 0] <= s), 1].mean())
        peak.append(curve[(curve[:, 0] > s) & (curve[:, 0] <= s + window), 1].max())
    pre = [np.mean(r["pre_switch"]["fact_nll"]) for r in runs if r.get("pre_switch")]
    return {
        "mean fact NLL before the switch": float(np.mean(pre)) if pre else float("nan"),
        "mean fact NLL after the finish": float(np.mean([np.mean(r["fact_nll"]) for r in runs])),
        f"training loss, {window} steps before the switch": float(np.mean(before)),
        f"training loss, peak in the {window} steps after": float(np.mean(peak)),
    }


def catch_up_table(result: dict) -> str:
    """Uniform beyond the full budget (`--catch-up`) against fixed-first at it (seed 0)."""
    catch = [r for r in result["runs"] if r["group"] == "catchup"]
    catch.sort(key=lambda r: r["budget"])
    ff = [r for r in full_runs(result, FIXED_FIRST) if r["seed"] == catch[0]["seed"]]
    shown = [(FIXED_FIRST, "1x", ff[0])] + [(UNIFORM, f"{r['budget']:.0f}x", r) for r in catch]
    rows = [[paper.label(s), b, r["steps"], f"{np.mean(r['fact_nll']):.3f}"] for s, b, r in shown]
    return md_table(["schedule", "budget", "steps", "mean fact NLL K=1..16"], rows)


def section(result: dict) -> str:
    """docs/RESULTS.md's bios section: every table, no sentences."""
    parts = [setup_table(result), "Equal FLOPs (full budget):", format_summary(result["summary"])]
    if result.get("summary_tokens"):
        parts += ["Equal tokens (uniform's steps):", format_summary(result["summary_tokens"])]
    if {1, 4, 8, 16} <= set(result["runs"][0]["depths"]) and full_runs(result, FIXED):
        parts += ["At serving depths 1, 4, 8 and 16:", depth_table(result)]
    if any("depth" in r["group"] for r in result["runs"]):
        parts += [specialisation_heading(result), specialisation_table(result)]
    if any(r.get("pre_switch") for r in full_runs(result, FIXED_FIRST)):
        rows = [[k, f"{v:.3f}"] for k, v in switch_numbers(result).items()]
        head = [f"{paper.label(FIXED_FIRST)}, seed mean", "value"]
        parts += ["The switch:", md_table(head, rows)]
    if any(r["group"] == "catchup" for r in result["runs"]):
        parts += ["Catch-up (seed 0):", catch_up_table(result)]
    return "\n\n".join(parts)


def comparison(
    result: dict,
    reference: dict,
    paths: tuple[Path, Path],
    figures: Path,
    text_pair: tuple[dict, dict] | None = None,
) -> str:
    """What `looped demo` prints at its end: your tables beside the reference's (`paths` and
    `text_pair`: yours, the reference's), what differs in how they were made, your figures."""
    text = [
        f"\nYour demo ({paths[0]}) beside the reference ({paths[1]}, measured on "
        f"{reference['meta']['machine']}), full budget, seed means:",
        compare_summaries(result["summary"], reference["summary"]),
    ]
    ours, theirs = result["meta"].get("dtype"), reference["meta"].get("dtype")
    if ours != theirs:
        text.append(f"(you trained in {ours}, the reference in {theirs}: expect small differences)")
    if differ := changed_settings(result["meta"]["settings"], reference["meta"]["settings"]):
        names = ", ".join(differ)
        text.append(f"(your {names} differ from the reference's: not a reproduction check)")
    if text_pair is not None:
        text.append("\nYour text track beside the reference's at your seeds (seed means):")
        text += [compare_text(*text_pair), *text_note(text_pair[0])]
    text.append(
        f"Your figures: {figures}/ (the reference's: figures/). "
        f"Docs from your numbers: looped report --results {paths[0]}"
    )
    return "\n".join(text)


def _pair(new: dict | None, old: dict | None, path: str, spec: str) -> str:
    a, b = (_value(r, path) for r in (new, old))
    return " / ".join("-" if v != v else f"{v:{spec}}" for v in (a, b))


def _gaps(new: dict | None, old: dict | None) -> str:
    """A row's paired gap to uniform with its interval under both recipes, and the verdicts."""
    if not all(r and r.get("gap") and r["schedule"] != UNIFORM for r in (new, old)):
        return "-"
    return " / ".join(
        f"{gap_text(r['gap'], 1)} {verdict_words(r) if r.get('verdict') else ''}".strip()
        for r in (new, old)
    )


def recipe_change(new: dict, old: dict, new_text: dict, old_text: dict, names: tuple) -> str:
    """The demo under a new recipe beside its reference under the old (NAMES: the new recipe's,
    the old bios and text recipes'): per track and basis, each schedule's mean NLL over depths
    1..16, its gap to uniform (paired by seed, 95% interval, verdict) and, on bios, the bits per
    person it recalls at K=1 and K=16, each as new / old."""
    tracks = (
        ("bios, equal FLOPs", "summary", new, old, "mean_fact_nll"),
        ("bios, equal tokens", "summary_tokens", new, old, "mean_fact_nll"),
        ("text, equal tokens", "equal_tokens", new_text, old_text, "mean_nll.mean"),
    )
    rows = []
    for where, key, a, b, nll in tracks:
        before = {r["schedule"]: r for r in b.get(key, [])}
        for r in a.get(key, []):
            if key == "summary_tokens" and r["schedule"] == paper.UNIFORM:
                continue  # the equal-FLOPs row's run
            was = before.get(r["schedule"])
            bits = [_pair(r, was, f"bits.{k}", ".1f") for k in (1, 16)] if "bios" in where else []
            bits = bits or ["-", "-"]
            label = paper.label(r["schedule"])
            rows.append([where, label, _pair(r, was, nll, ".3f"), _gaps(r, was), *bits])
    new_name, *old_names = names
    head = [f"track ({new_name} / {' and '.join(old_names)})", "schedule", "mean NLL K=1..16"]
    return md_table(head + ["gap to uniform [95%]", "bits/person K=1", "K=16"], rows)
