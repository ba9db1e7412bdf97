# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · End to end: the scaled-down reproduction, read like the paper
#
# `looped demo` trains the paper's comparison at laptop scale on the synthetic biographies
# (notebook 03), and then the paper's own metric on text. Its committed results, `results/`
# and `figures/`, are the **reference** that the README, `docs/RESULTS.md` and this notebook
# show; your own `make demo` writes to `runs/demo/` and prints its table beside the
# reference's. On the
# biographies, per seed (3 seeds), the grid is
#
# - **fixed** $K=4$, **fixed-first** ($K=4$ for 80% of the run, then uniform 1..16) and
#   **uniform** $K \in 1..16$, each at 15%, 45% and 100% of one modeled-FLOP budget
#   (notebook 04). At a matched budget, a cheaper schedule trains for more steps;
# - fixed $K=4$ and fixed-first again at uniform's full-budget steps: **equal tokens**, the
#   paper's framing (the same data, less compute);
# - with `--full` (the reference ran it), fixed $K = 1, 2, 8$ at 45% of the budget (seed 0)
#   beside the grid's $K=4$ there, for the depth-specialisation figure;
# - optionally (`--catch-up 2,3`) uniform at 2x and 3x the budget (seed 0),
#   to see how much compute uniform needs to catch up. They are not part of the grid: every
#   "full budget" below means 100%.
#
# Each schedule trains at its own best learning rate, from a sweep over 4 values (seed 0; the
# reference ran it: `looped demo --reference` is `--sweep --full` that also writes the committed
# files). Every run is evaluated at serving depths
# $K = 1..16$ (fact NLL on held-out templates,
# recalled bits per person, two-hop recall). Runs share work without approximation: with a
# warmup-stable-decay learning rate, a shorter run agrees with a longer one of the same
# schedule until its own decay, so it branches off the longer run's checkpoint (the trainer
# checks that the branch is exact).
#
# This notebook loads `results/demo.json` when it exists (`looped demo --reference` writes
# it; the quick start in `docs/USAGE.md` gives how long a plain `make demo` took). Otherwise it
# runs the same code path at toy size, `looped.studies.bios.QUICK` with one seed, in a temporary
# folder: a few dozen steps of a tiny model, enough to see every figure but not to reproduce
# any number. Set `LOOPED_FULL=1` to run the full demo here instead.

# %%
import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
from IPython.display import Image, Markdown, display

import looped.studies.report.text as text_report
from looped.paper import FIXED_FIRST, MAIN_SCHEDULES, UNIFORM
from looped.paper import label as paper_label
from looped.studies.bios import FULL_DEPTH_KS, QUICK, DemoSettings, fact_nll
from looped.studies.demo import run_demo
from looped.studies.engine import paired_gap
from looped.studies.report import bios
from looped.studies.report.probe import plot_benefit
from looped.studies.report.verdicts import verdicts_section

# %matplotlib inline
# (looped.studies.report renders off-screen, to files; the magic above turns inline figures back on)

FULL = os.environ.get("LOOPED_FULL") == "1"  # run the full demo when no results file exists
ROOT = next(  # the repository root: notebooks run from notebooks/
    (p for p in (Path.cwd(), *Path.cwd().parents) if (p / "pyproject.toml").is_file()), Path.cwd()
)
saved = ROOT / "results" / "demo.json"
workdir = Path(tempfile.mkdtemp(prefix="looped-nb05-"))

if saved.is_file():
    result = json.loads(saved.read_text())
    origin = f"loaded {saved.relative_to(ROOT)}"
else:
    settings = DemoSettings(depth_ks=FULL_DEPTH_KS) if FULL else dataclasses.replace(QUICK, seeds=1)
    result = run_demo(settings, workdir, workdir / "figures", quiet=True)
    origin = (
        "ran "
        + ("`looped demo --full`" if FULL else "looped.studies.bios.QUICK with seeds=1")
        + " just now"
    )

meta = result["meta"]
print(origin)
print(
    f"model: {meta['params']:,} parameters, d_model={meta['model']['d_model']}; "
    f"{meta['persons']} persons; full budget {meta['full_budget_flops']:.3g} modeled FLOPs"
)
print(f"{len(result['runs'])} runs, {meta['wall_seconds']:.0f}s on {meta['machine']}")

# %% [markdown]
# The figures are drawn by `looped.studies.report.bios.paper_figures` from this dictionary (the same code
# `looped demo` uses for `figures/`), and every number below is read from it.

# %%
figures = {p.stem: p for p in bios.paper_figures(result, workdir / "notebook-figures")}
runs = result["runs"]
top = max(r["budget"] for r in runs if "main" in r["group"])  # the full budget (no catch-up)
catch_up = sorted(r["budget"] for r in runs if r["group"] == "catchup")
print(
    f"full budget: {top:.0%}; "
    + (
        "catch-up runs (uniform, seed 0) at " + ", ".join(f"{b:.0%}" for b in catch_up)
        if catch_up
        else "no catch-up runs (`looped demo --catch-up 2,3` adds them)"
    )
)


def main_runs(schedule: str, budget: float) -> list[dict]:
    """The main-grid runs of one schedule at one budget (one per seed)."""
    return [
        r
        for r in runs
        if r["schedule"] == schedule and r["budget"] == budget and "main" in r["group"]
    ]


# %% [markdown]
# ## 1. The tables: compute, time and quality, at equal FLOPs and at equal tokens
#
# These are `docs/RESULTS.md`'s bios tables, written by `looped.studies.report.bios.section`: the
# setup, the schedules at equal FLOPs and at equal tokens, and, where the runs exist, the
# serving depths 1, 4, 8 and 16, depth specialisation, the switch and catch-up; the sections
# below draw their figures. Rows are seed means; the brackets give the range over seeds, and "per-seed range" the
# difference from uniform computed seed by seed (same seed, same data order). At a matched
# budget every schedule spends about the same modeled compute, so the saving shows up as
# *steps*: fixed-first runs more of them than uniform for the same FLOPs. At equal tokens it
# runs the same steps and the saving shows up as compute. The paper's claim is that the
# quality across serving depths stays close to uniform training's.

# %%
display(Markdown(bios.section(result)))

# %% [markdown]
# ## 2. What was trained: the paper's Fig. 7
#
# The depth of every step of the full-budget runs. Uniform samples $K$ afresh each step;
# fixed-first holds $K=4$ and switches at 80% of its steps.

# %%
display(Image(figures["fig7_schedules"]))

# %% [markdown]
# ## 3. The loss spike at the switch: the paper's Fig. 3 (top)
#
# A model trained at $K=4$ and suddenly asked for $K \in 1..16$ has never run most of those
# depths, so its training loss should jump at the switch and recover during the finish; the
# paper's 1B runs show that spike. Measured here (seed 0, full budget, logged training losses);
# the spike's height varies a lot from seed to seed, so the last line gives every seed's:

# %%
display(Image(figures["fig3_loss_trajectory"]))
for r in main_runs(FIXED_FIRST, top)[:1]:
    curve = np.asarray(r["curve"], dtype=float)  # rows: step, loss, depth
    before = curve[curve[:, 0] <= r["switch_step"]][-5:, 1]
    after = curve[curve[:, 0] > r["switch_step"]]
    peak_k = int(after[after[:, 1].argmax(), 2])
    print(f"seed {r['seed']}, full budget, raw logged losses (the figure smooths them):")
    print(f"  switch at step {r['switch_step']} of {r['steps']}")
    print(f"  mean training loss over the last 5 logged steps before: {before.mean():.3f}")
    print(f"  highest single logged loss after the switch: {after[:, 1].max():.3f} (at K={peak_k})")
    print(f"  final logged loss: {curve[-1, 1]:.3f}")
peaks = [
    f"seed {r['seed']} {max(loss for step, loss, _ in r['curve'] if step > r['switch_step']):.2f}"
    for r in main_runs(FIXED_FIRST, top)
]
print("highest logged loss after the switch, by seed: " + ", ".join(peaks))
print("(docs/RESULTS.md's switch table gives the seed mean over 20 steps either side)")

# %% [markdown]
# ## 4. NLL across serving depths: the paper's Fig. 8 and Fig. 2
#
# The question the paper asks of every schedule: how good is the model at *each* serving
# depth? Fixed-depth training serves well near its training depth and badly elsewhere;
# uniform training serves everywhere; fixed-first should sit close to uniform. The NLL here
# is the fact NLL (the loss on the six facts of held-out biographies, nats per fact), which
# tracks knowledge rather than the unseen template words.

# %%
display(Image(figures["fig8_nll_by_depth"]))
display(Image(figures["fig2_nll_vs_flops"]))

# %% [markdown]
# The paper's headline number is the mean NLL over serving depths relative to uniform
# (within 0.5% at 200M). The same number here, per budget: the seed mean of each schedule's
# mean fact NLL, and in brackets its gap to uniform paired by seed (`engine.paired_gap`, the
# one definition every table in the docs uses):

# %%
budgets = sorted({r["budget"] for r in runs if "main" in r["group"]})
print(f"{'schedule':<22}" + "".join(f"{b:>16.0%}" for b in budgets))
for s in MAIN_SCHEDULES:
    cells = []
    for b in budgets:
        mine, uni = main_runs(s, b), main_runs(UNIFORM, b)
        gap = paired_gap(mine, uni, fact_nll).mean
        cells.append(f"{np.mean([fact_nll(r) for r in mine]):7.3f} ({gap:+6.1%})")
    print(f"{paper_label(s):<22}" + "".join(f"{c:>16}" for c in cells))
print("(seed mean of the mean fact NLL over serving depths 1..16, per budget as a share of")
print(" the full FLOP budget; in brackets: the gap to uniform at that budget, paired by seed)")

# %% [markdown]
# ## 5. Before and after the finish
#
# The fixed-first run was evaluated just before its switch (there it is a fixed $K=4$ model)
# and at the end. The short uniform finish is what the paper credits with recovering
# flexibility across depths:

# %%
display(Image(figures["finishing_phase"]))
ff = [r for r in main_runs(FIXED_FIRST, top) if r["seed"] == 0 and r.get("pre_switch")]
for r in ff:
    pre, post = np.asarray(r["pre_switch"]["fact_nll"]), np.asarray(r["fact_nll"])
    print(
        f"fixed-first, seed {r['seed']}, full budget, mean fact NLL over K=1..16: "
        f"{pre.mean():.3f} before the switch "
        f"(step {r['switch_step']}), {post.mean():.3f} after the finish (step {r['steps']}); "
        f"at K=16: {pre[-1]:.3f} -> {post[-1]:.3f}"
    )

# %% [markdown]
# ## 6. Recall across serving depths at matched budgets: the paper's Fig. 1
#
# Recalled bits per person (notebook 03) for the three schedules at 15%, 45% and 100% of the
# budget. In the paper, fixed $K=4$ recalls most near $K=4$ and little at large depths,
# uniform recalls at every depth, and the 80% fixed-first schedule matches uniform across
# depths at each budget.

# %%
display(Image(figures["fig1_recall_bits"]))
print(f"{'bits, seed mean over K=1..16':<30}" + "".join(f"{b:>8.0%}" for b in budgets))
for s in MAIN_SCHEDULES:
    label = paper_label(s)
    vals = [np.mean([np.mean(r["bits"]) for r in main_runs(s, b)]) for b in budgets]
    print(f"{label:<30}" + "".join(f"{v:8.2f}" for v in vals))

# %% [markdown]
# ## 7. Depth specialisation: the paper's Fig. 5
#
# Fixed-depth models trained at $K = 1, 2, 4, 8$, each normalised by its own peak: each model
# should serve best near the depth it was trained at. These runs come with `looped demo --full`
# (the reference ran it; a plain `make demo` leaves them out to stay within 10 minutes).

# %%
display(Image(figures["fig5_depth_specialisation"]))
for r in sorted((r for r in runs if "depth" in r["group"]), key=lambda r: r["schedule"]):
    peak = r["depths"][int(np.argmax(r["bits"]))] if max(r["bits"]) > 0 else None
    best_nll = r["depths"][int(np.argmin(r["fact_nll"]))]
    print(f"{paper_label(r['schedule']):<12} most bits at K={peak}, lowest NLL at K={best_nll}")

# %% [markdown]
# ## 8. Two-hop recall
#
# The employer-to-city question needs two recalled facts composed, which is where more loops
# could help. It is not in the paper; it is reported beside the bits. Half of the persons are
# two-hop queries, so the accuracy moves in steps of one person, a few percent at the demo's
# size: a difference of a step or two is noise.

# %%
if "two_hop_recall" in figures:
    display(Image(figures["two_hop_recall"]))

# %% [markdown]
# ## 9. Is one deep update worth more than a shallow one? The paper's Fig. 4
#
# At a checkpoint $\theta$ of the fixed $K=4$ run, take one optimizer step at $K=4$ and, from
# the same $\theta$, one at $K=16$ on the same batch; the benefit at serving depth $k$ is
#
# $$ b(k) = \mathrm{NLL}_k(\theta_{K=4}) - \mathrm{NLL}_k(\theta_{K=16}), $$
#
# positive where the deep update helps more. The checkpoints are where the fixed-first runs
# switch to uniform, one per budget (the 15%, 45% and 100% runs switch at different steps;
# `looped.studies.probes.update_benefit`).

# %%
benefit = result.get("update_benefit") or []
if benefit:
    ints = [dict(b, benefit={int(k): v for k, v in b["benefit"].items()}) for b in benefit]
    figures["fig4"] = plot_benefit(ints, workdir / "fig4.png")  # drawn through plotting.save
    display(Image(figures["fig4"]))
    for b in ints:
        best = max(b["benefit"], key=b["benefit"].get)
        at = list(dict.fromkeys([1, best, 16]))  # each depth once
        print(
            f"seed 0's full-budget fixed K=4 run, step {b['step']}: benefit "
            + ", ".join(
                f"{b['benefit'][k]:+.3f} at K={k}" + (" (the largest)" if k == best else "")
                for k in at
            )
        )

# %% [markdown]
# ## 10. The paper's metric: held-out text NLL (the demo's text track)
#
# The biographies measure knowledge; the paper measures held-out NLL on text. The demo's
# text track trains uniform 1..16, the paper's 200M recipe ($K=2$ for 67%) and its 1B recipe
# ($K=4$ for 80%) on the Python standard library's source ($d=64$, a 512-token BPE, 480 steps),
# all at one learning rate chosen on uniform's validation NLL, and compares them at equal tokens
# and at equal modeled FLOPs (uniform cut to each schedule's FLOPs). The reference shown here
# trains 3 seeds; a plain `make demo` trains one (`--text-seeds`), which shows the direction
# of each gap.

# %%
text_file = ROOT / "results" / "demo_text.json"
if text_file.is_file():
    text = json.loads(text_file.read_text())
    display(Markdown(text_report.baselines_table(text, text["baselines"])))
    display(Markdown(text_report.format_table(text)))
    text_figures = {p.stem: p for p in text_report.figures(text, workdir / "text", prefix="text")}
    display(Image(text_figures["text_nll_by_depth"]))

# %% [markdown]
# A bigram count table (which token follows which, fit on the training split) is the line a
# text model has to cross before its numbers say anything about depth schedules; the table's
# score on the same windows is printed above the comparison, and at this size every model is
# below it. Every run here trains under the recipe the map's probe chose for uniform (2% of the
# run as warmup, the residual init counting the block once); at 480 steps that is the old
# recipe's 10 warmup steps, so these are the old recipe's runs (`docs/RESULTS.md` sets the two
# references side by side, and the probe's first choice, whose depth-aware init left uniform's
# seed 0 on its plateau 90 steps longer). At equal tokens fixed-first's point estimates sit a
# fraction of a percent behind uniform, inside intervals that reach zero or below: no verdict. At equal
# FLOPs both are ahead. The verdicts at the end of this notebook come from the map's
# d=64 block at four seeds, where at its longest length K=4 (80%) is behind by more than its
# tolerance and K=2 (67%) stays undecided; notebook 07 follows the gap as training lengthens and
# across widths (`looped map`).
#
# The bump in K=4 (80%)'s training loss late in the run is its switch to uniform. The spread of
# each schedule's mean NLL over its seeds, printed below, is larger than the gaps between
# schedules: the comparison is as tight as the table says only because each seed is compared
# with the uniform run of the same seed (same initialisation and data order), which removes
# most of that spread.

# %%
if text_file.is_file() and "text_loss_by_seed" in text_figures:
    display(Image(text_figures["text_loss_by_seed"]))
    spans = text_report.seed_spreads(text)
    print("max - min of the mean NLL over seeds (nats):")
    for schedule, span in spans.items():
        print(f"  {paper_label(schedule):<24} {span:.2f}")

# %% [markdown]
# ## What we saw
#
# The verdicts below are written from the committed results by
# `looped.studies.report.verdicts.verdicts_section`, the same code that writes the README's verdicts;
# section 1 showed the bios tables. What tables and verdicts show, read against the paper: at
# this size uniform training is still on its memorisation plateau when the budget ends, so
# fixed-first and fixed K=4 end far ahead of it on the bios facts; fixed K=4 serves best near its
# training depth and fixed-first holds its recall across the deeper serving depths after its
# short uniform finish; each fixed-depth model reaches its lowest fact NLL at its own depth;
# two-hop accuracy stays near zero. The text rows carry the verdicts on the paper's own metric:
# there fixed-first K=4 (80%) ends behind uniform by more than its tolerance, and K=2 (67%) is
# behind but undecided against its smaller one.

# %%
if (ROOT / "results" / "demo_text.json").is_file():
    display(Markdown(verdicts_section(ROOT)))
else:
    print("no results/demo_text.json: the verdicts need the committed results")

# %% [markdown]
# With the reference results, section 1's tables are those of `docs/RESULTS.md` and these are
# the verdicts on the README. At toy size (no `results/demo.json`) the models train for a few
# dozen steps and recall next to nothing: the tables and figures then show the shapes of the
# code path, not the paper's results. Notebook 06 shows how to run the paper's 200M and 1B scales and draw the
# same figures from their run directories.

# %%
shutil.rmtree(workdir, ignore_errors=True)
