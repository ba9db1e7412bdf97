# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Depth schedules: which K to train at, step by step
#
# A looped model can be served at any depth, but it is only good at the depths it was trained
# at (notebook 01). A **depth schedule** decides the loop count $K$ of each optimizer step:
#
# $$ K_s = \text{schedule}(\text{seed}, s, N), \qquad s = 0, \dots, N-1 . $$
#
# The paper compares
#
# - **fixed** $K$: cheap, but the model serves well only near $K$;
# - **uniform** $K \sim \mathcal{U}\{1..16\}$ every step: serves well at every depth, at the
#   cost of $\mathbb{E}[K] = 8.5$ loops per step;
# - **fixed-first**: fixed $K_0$ for the first fraction $f$ of the run, then uniform. The claim
#   is that this short *finishing* phase recovers most of uniform's flexibility;
# - two adaptive-from-the-start baselines: the **log-normal Poisson** sampler of
#   recurrent-depth models and a **curriculum** that ramps $K$ up.
#
# This notebook draws them, checks their exact expectations against samples, shows why $K$ is
# a pure function of (seed, step), and draws the paper's Fig. 7. All of it is
# `looped.schedules`; nothing here trains.

# %%
import inspect
import os
import random
import subprocess
import sys
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from looped import plotting
from looped.paper import FIXED, FIXED_FIRST, UNIFORM, label
from looped.schedule_spec import parse_schedule
from looped.schedules import FixedFirst, draw_bits

FULL = os.environ.get("LOOPED_FULL") == "1"  # full size: a longer run to sample
N = 20_000 if FULL else 2_000  # optimizer steps of the run we look at
sns.set_theme(style="whitegrid")

# %% [markdown]
# ## 1. One spec string per schedule
#
# Schedules are written as short specs, the same in the CLI
# (`looped train schedule=...`), the YAML presets and here. `parse_schedule` reads one;
# `str()` writes it back, so a spec survives a round trip through a config file.

# %%
SPECS = {  # the paper's three schedules (looped.paper), then the two baselines
    label(FIXED): FIXED,
    label(UNIFORM): UNIFORM,
    label(FIXED_FIRST): FIXED_FIRST,
    "log-normal Poisson": "lognormal-poisson:mean=7.5,sigma=0.5,max=16",
    "curriculum": "curriculum:start=1,end=16,frac=0.5",
}
schedules = {name: parse_schedule(spec, seed=0) for name, spec in SPECS.items()}
wide = max(map(len, schedules)), max(len(str(s)) for s in schedules.values())  # the columns
for name, s in schedules.items():
    assert str(s) == SPECS[name]  # the canonical spec round-trips
    print(f"{name:<{wide[0]}}  {s!s:<{wide[1]}}  largest K {s.max_depth()}")

# %% [markdown]
# ### Fixed-first, in code
#
# With $N$ the run's length in steps, $f$ the switch fraction and
# $S = \operatorname{round}(fN)$ the switch step, fixed-first is
#
# $$ K_s = K_0 \quad (s < S), \qquad K_s = \text{then}(s - S,\; N - S) \quad (s \ge S), $$
#
# so the finishing phase is its `then` schedule run over the last $N - S$ steps, drawn from the
# hash of (seed, $s$) at the absolute step: a uniform finish picks the same $K$ at step $s$ as a
# uniform run of the same seed would (`_draw` receives the step's hash bits from the caller). Below
# is `FixedFirst` itself (its switch step, the draw and the exact law), printed from the package
# by `inspect.getsource` so it cannot drift from what trains.

# %%
for method in (FixedFirst.switch_step, FixedFirst._draw, FixedFirst._probs):
    print(inspect.getsource(method))

# %% [markdown]
# ## 2. Sampling: K at every step
#
# `schedule.depth(step, total_steps)` is the $K$ the trainer uses at that step. Fixed-first's
# switch step is $\operatorname{round}(fN)$; the curriculum ramps over the first half of the
# run, giving each value of $K$ an equal share of the ramp.

# %%
steps = np.arange(N)
sampled = {name: np.array([s.depth(int(i), N) for i in steps]) for name, s in schedules.items()}

fig, axes = plt.subplots(len(schedules), 1, figsize=(10, 9), sharex=True, sharey=True)
for ax, (name, ks) in zip(axes, sampled.items()):
    ax.scatter(steps, ks, s=1.5, alpha=0.5)
    ax.set_title(name, fontsize=10, loc="left")
    ax.set_ylabel("K")
    switch = schedules[name].switch_step(N)
    if switch is not None:
        ax.axvline(switch, color="k", ls="--", lw=1, label=f"switch at step {switch}")
        ax.legend(loc="upper left", fontsize=9)
axes[-1].set_xlabel("optimizer step")
fig.suptitle(f"Training depth K at each step of a {N:,}-step run")
fig.tight_layout()
plotting.show(fig)

# %% [markdown]
# ## 3. Exact expectations, checked against samples
#
# Compute budgets (notebook 04) need the *expected* number of loops, and an estimate from
# sampled steps would make every budget noisy. Each schedule therefore knows its exact law:
# `probs(step, N)` is the distribution of $K$ at a step, `step_counts(N)` the expected number
# of steps at each $K$, and `mean_depth(N)` their mean. In closed form:
#
# $$
# \mathbb{E}[K]_{\text{uniform}} = \frac{1 + 16}{2} = 8.5, \qquad
# \mathbb{E}[K]_{\text{fixed-first}} = \tfrac{S}{N} K_0 + \left(1 - \tfrac{S}{N}\right) 8.5,
# \quad S = \operatorname{round}(fN),
# $$
#
# and for the log-normal Poisson sampler, rate $\lambda \sim \mathrm{LogNormal}(\ln m -
# \sigma^2/2, \sigma)$ and $K = \min(\mathrm{Poisson}(\lambda) + 1, K_{\max})$, so
# $\mathbb{E}[K] = m + 1$ before the cap (8.5 for $m = 7.5$, the same mean as uniform) and a
# little less after it.

# %%
switch = schedules[label(FIXED_FIRST)].switch_step(N)
closed_form = {
    label(FIXED): 4.0,
    label(UNIFORM): 8.5,
    label(FIXED_FIRST): switch / N * 4 + (1 - switch / N) * 8.5,
}
print(f"{'schedule':<22} {'exact E[K]':>10} {'closed form':>12} {'sampled mean':>13}")
for name, s in schedules.items():
    form = f"{closed_form[name]:.4f}" if name in closed_form else "-"
    print(f"{name:<22} {s.mean_depth(N):>10.4f} {form:>12} {sampled[name].mean():>13.4f}")
    if name in closed_form:
        assert abs(s.mean_depth(N) - closed_form[name]) < 1e-12

# %% [markdown]
# The sampled means scatter around the exact ones by about $\sigma_K/\sqrt{N}$. The full
# distributions agree too: here is the last step's exact law against the frequencies of all
# sampled steps that share it.

# %%
fig, axes = plt.subplots(1, 3, figsize=(11.5, 3.4), sharey=True)
for ax, name in zip(axes, (label(UNIFORM), "log-normal Poisson", label(FIXED_FIRST))):
    s = schedules[name]
    exact = s.probs(N - 1, N)  # for fixed-first: the finishing phase
    ks = sampled[name] if name != label(FIXED_FIRST) else sampled[name][switch:]
    counts = Counter(ks.tolist())
    depth_axis = np.arange(1, 17)
    ax.bar(depth_axis, [exact.get(int(k), 0.0) for k in depth_axis], alpha=0.5, label="exact")
    ax.plot(
        depth_axis,
        [counts[int(k)] / len(ks) for k in depth_axis],
        "ko",
        ms=4,
        label=f"sampled ({len(ks):,} steps)",
    )
    ax.set(
        title=name if name != label(FIXED_FIRST) else "fixed-first, after the switch", xlabel="K"
    )
    ax.set_xticks([1, 4, 8, 12, 16])
    ax.set_ylim(0, 0.15)  # room above the tallest bar for the key
    ax.legend(fontsize=9, loc="upper right")
axes[0].set_ylabel("probability")
fig.tight_layout()
plotting.show(fig)

# %% [markdown]
# ## 4. Why K is a pure function of (seed, step)
#
# Under data-parallel training (DDP) every process runs the same model on a different shard
# of the batch and the gradients are averaged. If two ranks looped a different number of
# times at the same step, the average would mix gradients of different depths, and under
# FSDP the ranks would wait forever on mismatched collectives. A resumed run must also see
# the $K$ sequence it would have seen without the interruption.
#
# A stateful random generator gets this wrong as soon as one process draws one extra number
# (a dropout mask, a data-loader shuffle, a retried step). Two "ranks" with the same seed:


# %%
def stateful_depths(seed: int, n: int, extra_draw_at: int | None) -> np.ndarray:
    """K ~ U{1..16} from one shared stateful generator (the fragile way)."""
    rng = random.Random(seed)
    out = []
    for step in range(n):
        if step == extra_draw_at:
            rng.random()  # something else used the same generator once
        out.append(1 + int(16 * rng.random()))
    return np.array(out)


n = 400
rank0 = stateful_depths(0, n, extra_draw_at=None)
rank1 = stateful_depths(0, n, extra_draw_at=100)
uniform = schedules[label(UNIFORM)]
pure0 = np.array([uniform.depth(s, N) for s in range(n)])
pure1 = np.array([parse_schedule("uniform:1-16", seed=0).depth(s, N) for s in range(n)])
print(f"stateful generator: ranks disagree on {(rank0 != rank1).sum()} of {n} steps")
print(f"looped.schedules:   ranks disagree on {(pure0 != pure1).sum()} of {n} steps")

fig, ax = plt.subplots(figsize=(10, 3))
ax.plot(np.arange(n), rank1 - rank0, lw=1, label="stateful generator, rank 1 - rank 0")
ax.plot(np.arange(n), pure1 - pure0, lw=2, label="looped.schedules, rank 1 - rank 0")
ax.axvline(100, color="k", ls="--", lw=1, label="rank 1 draws one extra number")
ax.set(
    xlabel="optimizer step",
    ylabel="K difference between ranks",
    title="Two ranks, same seed: a stateful generator desynchronises them",
)
ax.legend(fontsize=9, loc="lower left")
plotting.show(fig)

# %% [markdown]
# `looped.schedules` draws step $s$'s $K$ from 64 bits of a BLAKE2b hash of (seed, $s$)
# (`draw_bits`), with no generator state at all. So a resumed run, a rank that starts late or
# a step evaluated out of order all get the same $K$, with nothing to broadcast and nothing to
# checkpoint:

# %%
resumed = [uniform.depth(s, N) for s in range(1200, N)]  # a run resumed at step 1200
backwards = [uniform.depth(s, N) for s in reversed(range(N))][::-1]
assert resumed == sampled[label(UNIFORM)][1200:].tolist()
assert backwards == sampled[label(UNIFORM)].tolist()
print("resume at step 1200 and evaluation in reverse order give the same K sequence")

# %% [markdown]
# A hash also has to agree *across processes*. Python's built-in `hash()` of a string is
# salted per process (`PYTHONHASHSEED`), so it would not; BLAKE2b is the same on every machine
# and Python version. Two fresh interpreters with different salts:

# %%
code = (
    "from looped.schedule_spec import parse_schedule; from looped.schedules import draw_bits; "
    "s = parse_schedule('uniform:1-16', seed=0); "
    "print(hash('step 7') % 1000, draw_bits(0, 7), [s.depth(i, 100) for i in range(8)])"
)
for salt in ("1", "2"):
    env = {**os.environ, "PYTHONHASHSEED": salt}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    print(f"PYTHONHASHSEED={salt}: hash() % 1000, draw_bits, K =", out.stdout.strip())
print("this process:       draw_bits =", draw_bits(0, 7))

# %% [markdown]
# ## 5. The paper's Fig. 7: uniform against an 80% fixed-first schedule
#
# Uniform-depth training samples $K$ from 1..16 at every step. Fixed-first training uses
# $K=4$ for the first 80% of the run, then switches to the same uniform distribution. The
# line is the exact expected depth at each step, $\mathbb{E}[K_s]$ from `expected_depth`.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), sharey=True)
for ax, name in zip(axes, (label(UNIFORM), label(FIXED_FIRST))):
    s = schedules[name]
    ax.scatter(steps, sampled[name], s=1.5, alpha=0.4, label="sampled K")
    ax.plot(steps, [s.expected_depth(int(i), N) for i in steps], "k-", lw=1.5, label="E[K]")
    ax.set(title=name, xlabel="optimizer step", ylim=(0, 19.5))
    ax.legend(loc="upper center", fontsize=9, ncol=2)
axes[0].set_ylabel("training depth K")
fig.suptitle("Fig. 7: uniform-depth training and an 80% fixed-first schedule")
fig.tight_layout()
plotting.show(fig)

# %% [markdown]
# ## 6. What the schedules cost
#
# Training compute is roughly proportional to the loops run (plus a fixed cost, notebook 04),
# so the cumulative expected depth $\sum_{s' \le s} \mathbb{E}[K_{s'}]$ tracks compute through
# the run. Fixed-first spends 80% of its steps at under half of uniform's depth; its finish
# costs the same per step as uniform.

# %%
fig, ax = plt.subplots(figsize=(7, 3.8))
uniform_total = schedules[label(UNIFORM)].mean_depth(N) * N
loops = {n: np.cumsum([s.expected_depth(int(i), N) for i in steps]) for n, s in schedules.items()}
for name, cumulative in loops.items():
    shown, text = steps, f"{name} ({schedules[name].mean_depth(N) / 8.5:.0%})"
    if name == label(FIXED_FIRST):  # fixed K=4's line until the switch: drawn from there on
        shown = steps[np.argmax(cumulative != loops[label(FIXED)]) - 1 :]
        text += f"\n({label(FIXED)}'s line until the switch)"
    dashes = "--" if name == label(FIXED_FIRST) else "-"
    ax.plot(shown, cumulative[shown] / uniform_total, dashes, label=text)
ax.set(
    xlabel="optimizer step",
    ylabel="loops run / uniform's total",
    title="Cumulative expected loops (legend: total vs uniform)",
)
ax.legend(fontsize=9)
plotting.show(fig)

# %% [markdown]
# ## 7. Move the knobs: K0, the switch, the finish
#
# Fixed-first has three knobs: the fixed depth $K_0$, the fraction $f$ of the run spent at it,
# and the distribution the finish draws from. The sliders below rebuild the schedule from its
# spec with `parse_schedule`, redraw its depth at every step with the exact $\mathbb{E}[K_s]$,
# and print the loops it saves and the training compute it saves against uniform 1..16, modeled
# by `looped.flops.saving` on the 200m preset (whose embedding and head cost about 1.2 loop
# passes, which is why the compute saved is smaller than the loops saved; notebook 04).
#
# The figure and numbers are the default setting, the paper's 80% schedule, so they show
# without a running kernel; with one, moving a slider redraws them in place.

# %%
import ipywidgets as widgets

from looped.config import load_config
from looped.flops import saving

PRESET = load_config("200m")  # the model the compute saving is modeled on
FINISHES = {  # what the finishing phase draws K from, as a spec
    "uniform 1..16": "uniform:1-16",
    "uniform 2..16": "uniform:2-16",
    "uniform 1..8": "uniform:1-8",
    "log-normal Poisson, mean 7.5": "lognormal-poisson:mean=7.5,sigma=0.5,max=16",
    "curriculum 1 -> 16": "curriculum:start=1,end=16,frac=0.5",
}


def draw_fixed_first(k0: int = 4, frac: float = 0.8, finish: str = "uniform 1..16") -> tuple:
    """The schedule these knobs give: K at each step, E[K], and what it saves against uniform
    (the figure and a line of text)."""
    spec = f"fixed-first:k={k0},frac={frac:.2f},then={FINISHES[finish]}"
    s, reference = parse_schedule(spec, seed=0), schedules[label(UNIFORM)]
    fig, ax = plt.subplots(figsize=(10, 3.2))
    ax.scatter(steps, [s.depth(int(i), N) for i in steps], s=1.5, alpha=0.4, label="sampled K")
    ax.plot(steps, [s.expected_depth(int(i), N) for i in steps], "k-", lw=1.5, label="E[K]")
    ax.axhline(reference.mean_depth(N), color="C3", ls="--", lw=1, label="uniform 1..16: E[K]")
    ax.set(xlabel="optimizer step", ylabel="training depth K", ylim=(0, 17.5), title=spec)
    ax.legend(fontsize=9, ncol=3)
    loops = 1 - s.mean_depth(N) / reference.mean_depth(N)
    compute = saving(PRESET.model, s, reference, N, PRESET.seq_len)
    return fig, (
        f"mean depth {s.mean_depth(N):.2f} against uniform's {reference.mean_depth(N):.2f}: "
        f"{abs(loops):.1%} {'fewer' if loops >= 0 else 'more'} loops, {abs(compute):.1%} "
        f"{'less' if compute >= 0 else 'more'} modeled compute (200m preset)"
    )


plotting.with_knobs(  # the default drawn as plain outputs; a knob redraws them in place
    draw_fixed_first,
    {
        "k0": widgets.IntSlider(value=4, min=1, max=16, description="K0"),
        "frac": widgets.FloatSlider(
            value=0.8, min=0.05, max=0.95, step=0.05, description="switch at"
        ),
        "finish": widgets.Dropdown(
            options=list(FINISHES), value="uniform 1..16", description="finish"
        ),
    },
)

# %% [markdown]
# ## What we saw
#
# The numbers behind the closing paragraph, from the schedules above:

# %%
uniform_mean = schedules[label(UNIFORM)].mean_depth(N)
for name, s in schedules.items():
    print(
        f"{name:<22} mean depth {s.mean_depth(N):5.2f} "
        f"({s.mean_depth(N) / uniform_mean:4.0%} of uniform's loops), largest K {s.max_depth()}"
    )

# %% [markdown]
# Every schedule is one spec string and one pure function `depth(step)`: the sampled depths
# scatter around the exact expectations, which the package computes without sampling; and
# the same (seed, step) gives the same $K$ in every process, whatever Python's hash salt,
# which is what lets DDP ranks and resumed runs agree with no communication. Fixed-first
# with $K_0=4$ for 80% of the run loops about $0.8 \cdot 4 + 0.2 \cdot 8.5 = 4.9$ times per
# step on average, under 60% of uniform's 8.5 (printed above): notebook 04 turns that into
# modeled FLOPs, where the fixed cost of embedding and head shrinks the saving.
