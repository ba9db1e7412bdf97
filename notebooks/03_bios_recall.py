# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Synthetic recall: measuring stored knowledge in bits
#
# The paper's small-scale experiments (Fig. 1 and 5) ask how much a looped model *knows* at
# each serving depth. Next-token loss mixes knowledge with grammar, so the knowledge is
# measured on synthetic biographies in the style of the knowledge-capacity studies (Allen-Zhu
# and Li, *Physics of Language Models* 3.1/3.3): every person gets six facts drawn uniformly at
# random from pools, so a model can only predict them by having stored them, and how well it
# predicts them is a number of **bits per person**.
#
# This notebook generates the biographies, looks at them and their tokens, defines the bits
# measure with an oracle and a uniform predictor as anchors, and trains a small model to read
# its bits across serving depths. The code is `looped.data.bios` and `looped.eval.recall`.

# %%
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch

from looped import plotting
from looped.config import load_config
from looped.data.bios import ATTRIBUTES, BiosConfig, BiosCorpus, generate
from looped.eval.evaluate import load_model
from looped.eval.recall import bits_from_losses, recall_by_depth
from looped.model import LoopedConfig, LoopedTransformer
from looped.training.trainer import train

FULL = os.environ.get("LOOPED_FULL") == "1"  # full size: 100 persons, wider model, longer run
if not FULL:
    torch.set_num_threads(1)  # tiny models gain nothing from threads; steadier on shared CPUs
PERSONS = 100 if FULL else 16
sns.set_theme(style="whitegrid")

# %% [markdown]
# ## 1. The biographies
#
# `generate(BiosConfig(...))` draws the pools (synthetic names, cities, universities,
# employers; real months and subjects), the persons and their texts. The same config always
# gives the same corpus. `corpus.save(DIR)` writes exactly what `looped data bios --out DIR`
# writes, and the trainer reads it back with `data.path=DIR`.

# %%
corpus = generate(BiosConfig(n_persons=PERSONS, seed=0))
person = corpus.persons[0]
print(person)
print()
print("training texts about this person:")
for text in [t for t in corpus.train_texts if person.name in t][:4]:
    print("  ", text)

# %% [markdown]
# Each training biography draws fresh sentence templates and a fresh sentence order, so the
# model sees the same facts phrased several ways.
#
# **Two hops.** Every employer is in one city. Company sentences ("X is based in Y") state
# it, and the biographies themselves never do. The persons are split in two halves:
#
# - the **two-hop training split** also gets sentences joining the two facts ("... works for
#   a company based in Y"), so the wording of the question is familiar. Person 0 above is in
#   this split if its training texts include such a sentence;
# - the **query split**, the other half, never has its employer's city written anywhere. For
#   them "The employer of NAME is based in" is a real **two-hop** question: recall the
#   employer from the biographies, then its city from the company sentences.
#
# Two-hop recall is scored on the query split only and reported apart from the bits. The
# next cell prints one person of each split with every training sentence that names the
# employer's city.
#
# Evaluation uses one biography per person written with **held-out** templates that never
# appear in training text, so the model cannot answer by completing a memorised sentence.
# The scored values are marked here with brackets:

# %%
tok = corpus.tokenizer
query = next(q for q in corpus.queries if q.kind == "bio" and q.index == person.index)
ids = tok.encode(query.text)
marked = [tok.decode([i]) for i in ids]
for attr, start, end in query.spans:
    marked[start] = "[" + marked[start]
    marked[end - 1] = marked[end - 1] + f"]{attr}"
print(" ".join(marked))

for split in ("train", "query"):
    someone = next(  # (a birth city equal to the employer's would blur the example)
        p for p in corpus.persons if p.two_hop_split == split and p.birth_city != p.employer_city
    )
    said = [t for t in corpus.train_texts if someone.name in t and someone.employer_city in t]
    print(f"\n{split} split: {someone.name}, employer {someone.employer}, based in "
          f"{someone.employer_city}; training sentences with both name and city: {len(said)}")  # fmt: skip
    for text in said[:2]:
        print("  ", text)
two_hop = next(q for q in corpus.queries if q.kind == "two_hop")
asked = corpus.persons[two_hop.index]
print(f"\ntwo-hop query (person {two_hop.index}, {asked.two_hop_split} split):", two_hop.text)

# %% [markdown]
# ## 2. Tokens
#
# The tokenizer is word-level: one token per word or punctuation mark, built from every word
# the generator can write. A name part, a city or a month is exactly one token, so a fact's
# value is a short, known run of tokens (a date is day, month, year) and the recall measure can
# score exactly those tokens.

# %%
first_sentence = query.text.split(". ")[0] + "."
sentence_ids = tok.encode(first_sentence)
print(first_sentence)
print(list(zip([tok.decode([i]) for i in sentence_ids], sentence_ids)))
assert tok.decode(tok.encode(query.text)) == query.text  # lossless on generated text
for key, value in corpus.summary().items():
    print(f"  {key:<20} {value:.2f}" if isinstance(value, float) else f"  {key:<20} {value}")

# %% [markdown]
# ## 3. Bits per person
#
# A fact drawn uniformly from a pool of $S$ values carries $\log_2 S$ bits. The six facts are
# independent, so a person carries
#
# $$ H = \sum_{a} \log_2 S_a \ \text{bits}, $$
#
# and a model that knew nothing about the person could do no better than guess.
#
# **The measure.** Cross-entropy is a code length: a model whose loss on the true value is
# $\ell$ nats lets us write that value in $\ell/\ln 2$ bits, so it saves $\log_2 S - \ell/\ln 2$ bits
# over guessing. The facts are random, so those bits can only come from the weights. Averaged
# over persons (mean loss $\bar \ell_a$ on attribute $a$) and clamped at zero,
#
# $$ \text{recalled bits per person} = \sum_a \max\!\left(0,\ \log_2 S_a - \frac{\bar \ell_a}{\ln 2}\right). $$
#
# A multi-token value is scored by its summed loss, which is $-\ln P(\text{value})$ by the
# chain rule.

# %%
sizes = corpus.config.pool_sizes()
entropy = {a: math.log2(sizes[a]) for a in ATTRIBUTES}
for a in ATTRIBUTES:
    print(f"  {a:<11} pool {sizes[a]:>6,}  ->  {entropy[a]:5.2f} bits")
print(f"  {'total':<11} {'':>11}  {sum(entropy.values()):5.2f} bits per person")

# %% [markdown]
# ## 4. Anchors: what a given amount of knowledge scores
#
# Known predictors bracket the scale:
#
# - an **oracle** puts probability 1 on every true value: loss 0, all $H$ bits;
# - a predictor that knows the facts of **half the persons** and guesses the rest has mean
#   loss $\tfrac12 \ln S_a$ and recalls half the bits;
# - a predictor that knows **which values occur** in the corpus but not who has which one
#   guesses among the $n_a$ distinct values the persons actually have: loss $\ln n_a$, worth
#   $\log_2(S_a / n_a)$ bits. With few persons and a large pool this is a lot (16 persons
#   have 16 distinct birth dates out of 16,800: 10 bits each). Those bits are stored in the
#   weights, as the bound says, but they are knowledge of the corpus, not of the person;
#   exact recall (is the value the model's first choice?) tells the two apart;
# - a **uniform predictor** over each pool has loss $\ln S_a$: 0 bits;
# - an **untrained model** spreads its probability over the whole vocabulary, worse than
#   guessing within the pool, so the clamp puts it at 0. We run it through `recall_by_depth`.

# %%
occurring = {a: len({p.value(a) for p in corpus.persons}) for a in ATTRIBUTES}
anchors = {
    "oracle": {a: bits_from_losses(0.0, sizes[a]) for a in ATTRIBUTES},
    "knows half the persons": {
        a: bits_from_losses(0.5 * math.log(sizes[a]), sizes[a]) for a in ATTRIBUTES
    },
    "knows which values occur": {
        a: bits_from_losses(math.log(occurring[a]), sizes[a]) for a in ATTRIBUTES
    },
    "uniform over each pool": {
        a: bits_from_losses(math.log(sizes[a]), sizes[a]) for a in ATTRIBUTES
    },
}
torch.manual_seed(0)
untrained = LoopedTransformer(LoopedConfig(vocab_size=tok.vocab_size, d_model=64, n_head=4))
scored = recall_by_depth(untrained, corpus, depths=[4])[4]
anchors["untrained model (K=4)"] = {a: scored["attributes"][a]["bits"] for a in ATTRIBUTES}

fig, ax = plt.subplots(figsize=(8.5, 4))
left = np.zeros(len(anchors))
COLOURS = {a: f"C{i}" for i, a in enumerate(ATTRIBUTES)}  # one colour per attribute throughout
for a in ATTRIBUTES:
    values = np.array([anchors[name][a] for name in anchors])
    ax.barh(list(anchors), values, left=left, label=a, color=COLOURS[a])
    left += values
for y, total in enumerate(left):
    ax.text(total + 0.3, y, f"{total:.1f} bits", va="center", fontsize=9)
ax.invert_yaxis()
ax.set(
    xlabel="recalled bits per person",
    title=f"The bits measure on known predictors ({PERSONS} persons)",
    xlim=(0, sum(entropy.values()) * 1.18),
)
ax.legend(fontsize=9, ncol=3, loc="lower right")
plotting.show(fig)

# %% [markdown]
# ## 5. A small model, trained briefly, across serving depths
#
# We save the corpus, train a small looped model on it at fixed depth $K=2$ with the
# package's trainer (200 steps, 3,000 with `LOOPED_FULL=1`; the cell prints how long they
# took), and measure its recalled bits at every serving depth $K = 1..16$ with
# `recall_by_depth`, which gets all 16 depths from one pass of 16 loops (notebook 01).

# %%
workdir = Path(tempfile.mkdtemp(prefix="looped-nb03-"))
corpus.save(workdir / "bios")  # = looped data bios --persons PERSONS --out DIR
assert BiosCorpus.load(workdir / "bios").persons == corpus.persons

TRAIN_K = 2
overrides = [
    f"data.path={workdir / 'bios'}",
    f"schedule=fixed:{TRAIN_K}",
    f"max_steps={3000 if FULL else 200}",
    f"model.d_model={128 if FULL else 64}",
    f"threads={0 if FULL else 1}",
    "batch_size=16",
    "seq_len=64",
    "model.seq_len=128",
    "eval_interval=0",
    "ckpt_interval=0",
    "eval_depths=1-16",
    "log_interval=5",
    "optim.warmup_steps=20",
]
t0 = time.perf_counter()
summary = train(load_config("tiny", overrides), workdir / "run", quiet=True)
print(
    f"trained {summary['steps']} steps in {time.perf_counter() - t0:.0f}s "
    f"({summary['params']:,} parameters)"
)
model, _ = load_model(workdir / "run")
recall = recall_by_depth(model, corpus, depths=range(1, 17))

# %%
depths = sorted(recall)
bits = [recall[k]["bits_per_person"] for k in depths]
best = depths[int(np.argmax(bits))]
print(
    f"best serving depth K={best}: {max(bits):.2f} of {recall[best]['full_bits_per_person']:.2f} bits"
)
for a in ATTRIBUTES:
    r = recall[best]["attributes"][a]
    print(f"  {a:<11} {r['bits']:5.2f} / {r['entropy']:5.2f} bits, exact recall {r['acc']:.0%}")
if "two_hop" in recall[best]:
    print(f"  two-hop (employer -> city) exact recall {recall[best]['two_hop']['acc']:.0%}")

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
stack, unrecalled = np.zeros(len(depths)), []
for a in ATTRIBUTES:
    values = np.array([recall[k]["attributes"][a]["bits"] for k in depths])
    if values.max() < 0.05:  # no visible bar: a legend entry would name a series not drawn
        unrecalled.append(a)
        continue
    left.bar(depths, values, bottom=stack, label=a, color=COLOURS[a])
    stack += values
left.axvline(TRAIN_K, color="k", ls=":", lw=1, label="training depth")
set_only = sum(anchors["knows which values occur"].values())
left.axhline(set_only, color="gray", ls="--", lw=1, label="knows which values occur")
left.set(
    xlabel="serving depth K",
    ylabel="recalled bits per person",
    title=f"Recall across serving depths ({PERSONS} persons)",
)
missing = f"no bar (under 0.05 bits): {', '.join(unrecalled)}" if unrecalled else None
# below the panel: the bars fill its lower part and the dashed line crosses its width
left.legend(fontsize=9, ncol=3, title=missing, title_fontsize=9, loc="upper center",
            bbox_to_anchor=(0.5, -0.22))  # fmt: skip

records = [
    json.loads(line) for line in (workdir / "run" / "metrics.jsonl").read_text().splitlines()
]
curve = np.array([[r["step"], r["loss"]] for r in records if r["kind"] == "train"])
right.plot(curve[:, 0], curve[:, 1])
right.set(
    xlabel="optimizer step",
    ylabel="training loss (nats/token)",
    title="Training curve",
    yscale="log",
)
fig.tight_layout()
plotting.show(fig)

# %% [markdown]
# Two things to read here. **Across depths**, the model recalls most at depths near the one
# it was trained at and less the further it is served from there: the depth specialisation of
# the paper's Fig. 5, measured in bits. **Against the anchors**, compare the bits with the
# dashed line and the exact-recall column: a model trained this briefly has mostly learned
# which values occur (the dashed line is what that alone is worth), and only begins to learn who
# has which. That part of the score shrinks as persons are added ($\log_2(S_a/n_a)$ falls as
# $n_a$ grows; `LOOPED_FULL=1` trains on 100 persons for longer). Notebook 05 compares the
# paper's schedules on this measure.

# %%
shutil.rmtree(workdir, ignore_errors=True)
