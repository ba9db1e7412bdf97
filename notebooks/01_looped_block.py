# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · The looped block: one set of weights, any depth
#
# A standard transformer applies a stack of *different* layers, one after another. A looped
# (weight-tied) transformer applies the *same* block $A$ again and again (the paper's Fig. 6):
#
# $$
# e = P(x), \qquad h_1 = A(e), \qquad h_k = A(h_{k-1} + e) \quad (k = 2, \dots, K),
# \qquad \text{logits} = H(h_K).
# $$
#
# $P$ is the token embedding (plus optional unshared *prelude* layers), $A$ the looped block
# (one or more layers) and $H$ the output (optional unshared *coda* layers, final norm, LM
# head). The loop count $K$ is an argument of `forward`, not part of the architecture, so one
# trained model can be served at any depth. This notebook looks at what that means:
#
# 1. weight tying: the parameters stay fixed while compute grows with $K$;
# 2. a looped model *is* an unrolled stack whose layers share their weights;
# 3. input injection: how the embedding $e$ re-enters each loop;
# 4. what the hidden state does across loops, before and after training;
# 5. the all-depths pass that evaluates every serving depth at once.
#
# Everything is imported from `looped.model` and `looped.flops`; the notebook only measures.
# It runs in well under a minute; set `LOOPED_FULL=1` for a larger model trained longer.

# %%
import inspect
import os
import re
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns
import torch
import torch.nn.functional as F

from looped import plotting
from looped.config import load_config
from looped.data.batching import build_source
from looped.eval.evaluate import load_model
from looped.flops import count_params, flops_per_token
from looped.model import LoopedConfig, LoopedTransformer
from looped.training.trainer import train

FULL = os.environ.get("LOOPED_FULL") == "1"  # full size: wider model, longer training
if not FULL:
    torch.set_num_threads(1)  # tiny models gain nothing from threads; steadier on shared CPUs
sns.set_theme(style="whitegrid")
_ = torch.manual_seed(0)  # the same weights on every run

# %% [markdown]
# The recurrence as a picture, drawn by `looped.plotting.fig_architecture` (the paper's Fig. 6):
# every green box is the *same* block $A$, and the grey arcs are the input injection that
# feeds $e$ back in from the second loop on.

# %%
plotting.show(plotting.fig_architecture(depth=4))

# %% [markdown]
# ## The formula, in code
#
# The recurrence above is `LoopedTransformer.loops`: it yields $h_1, h_2, \dots, h_K$, so
# `forward(depth=K)` keeps the last one and the all-depths pass (section 5) applies $H$ to
# several. The first loop sees $e$ alone; every later one sees `_inject(h, e)`, which is
# $h_{k-1} + e$ for the default `injection="add"` (section 3 compares the modes). This is the
# package's own source, printed by `inspect.getsource`, so it cannot drift from what runs.

# %%
print(inspect.getsource(LoopedTransformer.loops))
print(inspect.getsource(LoopedTransformer._inject))

# %% [markdown]
# ## 1. Weight tying: parameters fixed, compute grows with K
#
# A looped model served at depth $K$ runs $K$ layer applications, like a $K$-layer stack,
# but it stores one layer. Per token, a layer's forward pass costs about
# $2 \times (\text{its weights}) + 4Td$ FLOPs (matmuls plus attention over $T$ positions), so
#
# $$
# \text{params}_{\text{looped}}(K) = \text{const}, \qquad
# \text{FLOPs}_{\text{looped}}(K) = \text{FLOPs}_{\text{stack}}(K) \approx F + K R .
# $$
#
# where $R$ is one pass through the looped block and $F$ the depth-independent rest (embedding,
# head, any unshared layers). `looped.flops` counts both; notebook 04 derives the formula term by
# term. Here we compare a
# one-layer looped block served at depth $K$ with a plain $K$-layer stack (a `LoopedConfig`
# with `n_block=K`, served at depth 1).

# %%
cfg = LoopedConfig(vocab_size=512, d_model=128, n_head=4, seq_len=128)
depths = list(range(1, 17))
looped_params = [count_params(cfg)[0] for _ in depths]  # the same model at every depth
stack_params = [count_params(replace(cfg, n_block=k))[0] for k in depths]
looped_flops = [flops_per_token(cfg, k, cfg.seq_len, backward=False) for k in depths]
stack_flops = [
    flops_per_token(replace(cfg, n_block=k), 1, cfg.seq_len, backward=False) for k in depths
]

print(f"looped block: {looped_params[0]:,} parameters at every depth")
print(f"16-layer stack: {stack_params[-1]:,} parameters")
print("forward FLOPs per token identical at every K:", looped_flops == stack_flops)

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
left.plot(depths, looped_params, "o-", label="looped: one block applied K times")
left.plot(depths, stack_params, "s--", label="stack: K different layers")
left.set(xlabel="depth K", ylabel="parameters", title="Parameters")
left.legend()
assert looped_flops == stack_flops  # one line, not two drawn over each other
right.plot(depths, [f / 1e6 for f in looped_flops], "o-", label="looped = stack (the same FLOPs)")
right.set(xlabel="depth K", ylabel="forward MFLOPs per token", title="Compute")
right.legend()
fig.suptitle("Weight tying: compute grows with K, parameters do not")
fig.tight_layout()
plotting.show(fig)

# %% [markdown]
# ## 2. A looped model is an unrolled stack with shared weights
#
# Take a looped model without input injection (`injection="none"`, so
# $h_k = A(h_{k-1})$) and a $K$-layer stack, and copy the looped block's single layer into
# every layer of the stack. The two compute the same function: looping is weight sharing
# across depth, nothing more. We check it to the last bit.

# %%
K = 6
cfg_none = replace(cfg, injection="none")
looped = LoopedTransformer(cfg_none).eval()
stack = LoopedTransformer(replace(cfg_none, n_block=K)).eval()

shared = looped.state_dict()  # keys: embed.*, block.layers.0.*, norm.*, head.*
tied = {
    key: shared[re.sub(r"^block\.layers\.\d+\.", "block.layers.0.", key)]
    for key in stack.state_dict()
}
stack.load_state_dict(tied)

idx = torch.randint(0, cfg.vocab_size, (2, 32))
with torch.no_grad():
    diff = (looped(idx, depth=K)[0] - stack(idx, depth=1)[0]).abs().max().item()
print(f"looped at depth {K} vs {K}-layer stack with tied weights: max |logit difference| = {diff}")
assert diff == 0.0

# %% [markdown]
# ## 3. Input injection
#
# Without injection the loop must carry the input in its own state. `looped.model` offers
# three ways to feed the embedding back in before every loop after the first:
#
# | `injection` | input of loop $k \ge 2$ | extra parameters |
# |---|---|---|
# | `"add"` (default) | $h_{k-1} + e$ | none |
# | `"concat"` | $W\,[h_{k-1}; e]$, $W \in \mathbb{R}^{d \times 2d}$ | $2d^2$ |
# | `"none"` | $h_{k-1}$ | none |
#
# With `"add"`, depth 1 is exactly a plain one-block transformer, and the token identity is
# visible at every depth, so a model trained at $K=4$ does not lose its input when served at
# $K=16$. `"concat"` starts as `"add"`: $W$ is initialised to $[I \; I]$, so
# $W[h; e] = h + e$ until training moves it.
#
# How much of the input survives the loops? A cosine measures it:
# $\cos(h_k, e)$ is 1 when the state still points along the embedding and near 0 when the
# loops have written over it. Each loop adds an update that is not aligned with $e$, so
# without injection the cosine should decay with $k$; with `"add"`, $e$ re-enters every loop
# and should keep it high. We look at untrained models, where nothing but the wiring differs.


# %%
def cos_to_input(model: LoopedTransformer, idx: torch.Tensor, depth: int) -> list[float]:
    """cos(h_k, e) for k = 1..depth, mean over tokens."""
    with torch.no_grad():
        e = model.embed_input(idx)
        return [
            F.cosine_similarity(h, e, dim=-1).mean().item() for h in model.hidden_states(idx, depth)
        ]


at_init = {}
for mode in ("add", "concat", "none"):
    torch.manual_seed(0)  # every mode draws the same weights (concat's W is made last)
    at_init[mode] = cos_to_input(LoopedTransformer(replace(cfg, injection=mode)).eval(), idx, 16)
print("concat equals add at initialisation:", at_init["concat"] == at_init["add"])

fig, ax = plt.subplots(figsize=(6, 3.6))
assert at_init["concat"] == at_init["add"]  # one line for both, not two drawn over each other
ax.plot(depths, at_init["add"], "o-", label='injection="add" (and "concat": equal at init)')
ax.plot(depths, at_init["none"], "s-", label='injection="none"')
ax.set(xlabel="loop k", ylabel="cos(h_k, e)", title="How much of the input the state keeps (init)")
ax.set_ylim(0, 1.05)
ax.legend()
plotting.show(fig)

# %% [markdown]
# Without injection the input fades loop by loop; with `"add"` (and `"concat"`, identical at
# initialisation) it stays in the state at every depth. The state's *size* grows with $k$ in
# every mode (each pre-norm layer adds an update whose size does not depend on $\lVert h \rVert$),
# but every layer and the head read $\mathrm{RMSNorm}(h)$, so only its direction matters.
#
# ## 4. What the hidden state does across loops, after training
#
# We train a tiny model for a few seconds on the synthetic biographies (notebook 03) at a
# fixed depth $K=4$, with the package's trainer, and follow its hidden state for
# $k = 1..16$, past the depth it was trained at:
#
# - its size $\lVert h_k \rVert$;
# - how much each loop turns it, $1 - \cos(h_k, h_{k-1})$;
# - how far it drifts from the state the head was trained to read,
#   $\cos(h_k, h_{K_{\text{train}}})$.

# %%
TRAIN_K = 4
overrides = [
    f"schedule=fixed:{TRAIN_K}",
    f"max_steps={600 if FULL else 100}",
    f"model.d_model={128 if FULL else 64}",
    f"data.persons={100 if FULL else 16}",
    f"threads={0 if FULL else 1}",
    "batch_size=16",
    "seq_len=64",
    "model.seq_len=128",
    "eval_interval=0",
    "ckpt_interval=0",
    "eval_depths=1-16",
    "optim.warmup_steps=10",
]
run_dir = Path(tempfile.mkdtemp(prefix="looped-nb01-"))
t0 = time.perf_counter()
summary = train(load_config("tiny", overrides), run_dir, quiet=True)
print(
    f"trained {summary['steps']} steps at K={TRAIN_K} in {time.perf_counter() - t0:.0f}s, "
    f"final training loss {summary['final_loss']:.3f}"
)
model, run_cfg = load_model(run_dir)
source = build_source(run_cfg.data)
x, y = next(source.eval.iter_eval_batches(16, 64, 1))  # held-out biographies


# %%
def dynamics(model: LoopedTransformer, x: torch.Tensor, depth: int) -> dict[str, list[float]]:
    """Per-loop statistics of the hidden state, means over tokens."""
    with torch.no_grad():
        hs = model.hidden_states(x, depth)
    cos = lambda a, b: F.cosine_similarity(a, b, dim=-1).mean().item()
    return {
        "norm": [h.norm(dim=-1).mean().item() for h in hs],
        "turn": [1 - cos(a, b) for a, b in zip(hs[:-1], hs[1:])],  # loops 2..depth
        "to_train_depth": [cos(h, hs[TRAIN_K - 1]) for h in hs],
    }


torch.manual_seed(0)
untrained = LoopedTransformer(run_cfg.model).eval()
stats = {"trained at K=4": dynamics(model, x, 16), "untrained": dynamics(untrained, x, 16)}

fig, axes = plt.subplots(1, 3, figsize=(11.5, 3.6))
for (name, s), fmt in zip(stats.items(), ("o-", "s--")):
    axes[0].plot(depths, s["norm"], fmt, label=name)
    axes[1].plot(depths[1:], s["turn"], fmt, label=name)
    axes[2].plot(depths, s["to_train_depth"], fmt, label=name)
axes[0].set(ylabel="mean ||h_k||", title="Size of the state")
axes[1].set(ylabel="1 - cos(h_k, h_(k-1))", title="How much each loop turns it", yscale="log")
axes[2].set(ylabel="cos(h_k, h_4)", title="Drift from the training-depth state")
for ax in axes:
    ax.axvline(TRAIN_K, color="k", ls=":", lw=1, label="training depth")
    ax.set_xlabel("loop k")
    ax.set_xticks([1, 4, 8, 12, 16])
    ax.legend(fontsize=9)
fig.tight_layout()
plotting.show(fig)

# %% [markdown]
# Training makes the first loops do real work (large turns), after which each further loop
# turns the state less and less. But the loops past $K=4$ were never trained: the state keeps
# drifting away from the $h_4$ the head learned to read, slowly and steadily.

# %% [markdown]
# ## 5. The all-depths pass
#
# To evaluate a model at every serving depth $K = 1..16$ we do not need 16 forward passes
# ($1 + 2 + \dots + 16 = 136$ loop applications): the state after loop $k$ *is* the depth-$k$
# state, so one pass of 16 loops with the head applied after each of them gives all 16
# answers. `LoopedTransformer.forward_depths` does this; it must agree with separate forwards.

# %%
with torch.no_grad():
    t0 = time.perf_counter()
    one_pass = model.forward_depths(x, depths, y)  # {K: (logits, loss)}
    t_one = time.perf_counter() - t0
    t0 = time.perf_counter()
    separate = {k: model(x, depth=k, targets=y)[1] for k in depths}
    t_sep = time.perf_counter() - t0

worst = max(abs(one_pass[k][1].item() - separate[k].item()) for k in depths)
print(f"largest NLL difference, one pass vs separate forwards: {worst:.2e}")
print(f"loop applications: {max(depths)} vs {sum(depths)}; time {t_one:.3f}s vs {t_sep:.3f}s")
assert worst < 1e-5

nll = [one_pass[k][1].item() for k in depths]
fig, ax = plt.subplots(figsize=(6, 3.6))
ax.plot(depths, nll, "o-", label="model trained at fixed K=4")
ax.axvline(TRAIN_K, color="k", ls=":", lw=1, label="training depth")
ax.set(
    xlabel="serving depth K",
    ylabel="held-out NLL (nats/token)",
    title="One model, every serving depth, one pass",
)
ax.legend()
plotting.show(fig)

# %% [markdown]
# A model trained only at $K=4$ serves best near $K=4$, and its loss climbs as it is looped
# further: the paper's Fig. 5 makes the same point with recall. Training across depths
# (uniform $K \in 1..16$) fixes this, at a price in compute; notebook 02 introduces the
# schedules that trade the two, and notebook 04 counts the price.

# %%
shutil.rmtree(run_dir, ignore_errors=True)
