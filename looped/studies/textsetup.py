"""The text setup every text study shares: its corpus (the one builder), baselines and run config.

    corpus = ensure_corpus(TextSetup(), Path("runs/length"))   # tokenized once, then reused
    cfg = run_config(TextSetup(), corpus, schedule=paper.UNIFORM, lr=3e-3, seed=0, steps=400)

The default corpus is the standard library's source, split without leaks (`data.splits`) into
train, validation (every LR choice) and test (every reported number).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from looped.config import TrainConfig, load_config
from looped.data.splits import assign_splits, near_duplicate_keys
from looped.data.text import (
    META,
    NAMED_CORPORA,
    TokenShards,
    make_tokenizer,
    open_documents,
    prepare_out,
    read_meta,
    write_meta,
    write_splits,
)
from looped.errors import UserError
from looped.eval.baselines import NgramBaseline, choose_k
from looped.model import fit_vocab
from looped.runtime.atomic import write_text_atomic
from looped.runtime.device import pick_device, resolve_dtype
from looped.studies.recipe import parse_recipe


@dataclass
class TextSetup:
    tokenizer: str = "bpe:512"  # a small byte-level BPE fit on the train split
    d_model: int = 64  # width of the one looped layer
    n_head: int = 4  # attention heads
    batch_size: int = 32  # sequences per step
    seq_len: int = 128  # tokens per sequence
    warmup_steps: int = 10  # linear LR warmup, then warmup-stable-decay (shared by every length)
    # warmup as this fraction of each run instead (0: warmup_steps); runs of different lengths
    # then part at step 0 and no longer share a trunk
    warmup_frac: float = 0.0
    init_loops: int = 1  # block applications the residual init counts (`model.init_loops`)
    state_norm: bool = False  # an RMSNorm on the recurrent state between loops (`model.state_norm`)
    val_batches: int = 12  # validation windows (x batch_size x seq_len tokens): LR choice
    test_batches: int = 24  # test windows: every reported number
    val_frac: float = 0.05  # share of the corpus's near-duplicate clusters held out for val
    test_frac: float = 0.05  # and for test
    dtype: str = "auto"  # auto (bf16 where the CPU has a fast path, else fp32) | fp32 | bf16


# The recipe the demo's two tracks and their committed reference train with: the probe's choice
# for uniform (`looped map --probe`, results/recipe.json), warmup over 2% of each run, the
# residual init counting the block once. The reference records it (its overrides), so that a
# probe that moves on is seen as a reference to regenerate (`looped demo --reference`, under an
# hour on two cores). Each map block names its own.
DEMO_RECIPE = "w2pct_i1"


def recipe_setup(
    setup: TextSetup, warmup: float | None, init_loops: int, state_norm: bool = False
) -> TextSetup:
    """SETUP under a recipe: WARMUP in steps (1 or more) or as a share of each run (below 1;
    None keeps the setup's), the residual init counting INIT_LOOPS applications, the state
    normed between loops or not."""
    setup = replace(setup, init_loops=init_loops, state_norm=state_norm)
    if warmup is not None and warmup < 1:
        return replace(setup, warmup_frac=warmup)
    if warmup is not None:
        return replace(setup, warmup_frac=0.0, warmup_steps=int(warmup))
    return setup


def track_setup(setup: TextSetup, name: str, steps: int) -> TextSetup:
    """SETUP under the recipe NAME for a track whose runs last at most STEPS: a warmup share is
    that share of STEPS, the same steps in every run, so that a shorter run (uniform cut to a
    schedule's FLOPs) still branches off the full one; the map's lengths warm up each their own."""
    warmup, loops, normed = parse_recipe(name)
    warm = max(1, round(warmup * steps)) if warmup < 1 else warmup
    return recipe_setup(setup, warm, loops, normed)


def slug(source: str) -> str:
    """A source (a path, a datasets spec) as a directory name's part: word characters, its tail."""
    return re.sub(r"[^A-Za-z0-9]+", "_", source).strip("_")[-40:]


def source_documents(source: str) -> list[tuple[str, str]]:
    """(name, text) of every document of a `datasets` source, read into memory."""
    docs = [(f"doc{i:07d}", str(row["text"])) for i, row in enumerate(open_documents(source))]
    if not docs:
        raise UserError(
            f"--corpus {source} holds no documents; point it at text files or a dataset"
        )
    return docs


def ensure_corpus(
    setup: TextSetup, out: Path, source: str | None = None, *, quiet: bool = True
) -> dict[str, Any]:
    """The corpus's meta.json and path, tokenized into OUT/corpus-SOURCE-TOKENIZER-split once,
    then reused. `source`: None (stdlib), a built-in name, a `looped data text` directory (as it
    is), or a `datasets` source (read into memory, near-duplicates kept in one split)."""
    if source and (Path(source) / META).is_file():  # a `looped data text` directory, as it is
        meta = read_meta(source)
        if "test" not in meta["splits"]:
            fix = "prepare it with `looped data text ... --test-frac 0.05`"
            raise UserError(f"{source} has no test split; {fix}")
        return {**meta, "path": str(Path(source).resolve())}
    name = slug(source) if source else "stdlib"
    path = out / f"corpus-{name}-{setup.tokenizer.replace(':', '')}-split"
    dataset = str(Path(source).expanduser()) if source else "stdlib"
    if not (path / META).is_file():
        if not quiet:
            print(f"tokenizing {dataset} ({setup.tokenizer}) into {path}")
        fracs = {"val_frac": setup.val_frac, "test_frac": setup.test_frac}
        docs = NAMED_CORPORA[dataset]() if dataset in NAMED_CORPORA else source_documents(dataset)
        prepare_documents(path, docs, setup.tokenizer, **fracs, dataset=dataset, overwrite=True)
    meta = read_meta(path)
    if (meta["dataset"], meta["tokenizer"]) != (dataset, setup.tokenizer) or (
        "test" not in meta["splits"]
    ):
        raise UserError(
            f"{path} holds {meta['dataset']} ({meta['tokenizer']}), not {dataset} "
            f"({setup.tokenizer}); remove that directory or pass another --out"
        )
    return {**meta, "path": str(path)}


def run_config(
    setup: TextSetup, corpus: dict, *, schedule: str, lr: float, seed: int, steps: int, extra=()
) -> TrainConfig:
    """One text run (the demo preset at the setup's size), scored on validation at the end;
    `extra`: overrides after all of these (the per-micro-batch arm's, `engine.MICRO_ARGS`).
    A fresh copy each call (callers change theirs); the config itself is built once."""
    key = repr((setup, corpus["path"], corpus["vocab_size"], schedule, lr, seed, steps, extra))
    if (known := _RUN_CONFIGS.get(key)) is None:
        known = _RUN_CONFIGS[key] = _run_config(setup, corpus, schedule, lr, seed, steps, extra)
    return copy.deepcopy(known)


_RUN_CONFIGS: dict[str, TrainConfig] = {}  # a study plans each run several times; OmegaConf
# takes a tenth of a second to build one


def _run_config(
    setup: TextSetup, corpus: dict, schedule: str, lr: float, seed: int, steps: int, extra
) -> TrainConfig:
    fixed = "data.kind=text eval_depths=1-16 eval_interval=0 keep_last=1 paper_schedules=[]"
    own = {"data.path": corpus["path"]}
    own |= {f"model.{k}": getattr(setup, k) for k in ("d_model", "n_head", "seq_len")}
    own |= {
        "seq_len": setup.seq_len,
        "batch_size": setup.batch_size,
        "max_steps": steps,
        "optim.warmup_steps": setup.warmup_steps,
        "eval_batches": setup.val_batches,
        "optim.warmup_frac": setup.warmup_frac,
        "model.init_loops": setup.init_loops,
        "model.state_norm": setup.state_norm,
        "log_interval": 10,
        "dtype": setup.dtype,
    }
    run = [f"optim.lr={lr}", f"seed={seed}", f"schedule={schedule}"]
    overrides = [*fixed.split(), *(f"{k}={v}" for k, v in own.items()), *run, *extra]
    cfg = load_config("demo", overrides)
    cfg.model.vocab_size = fit_vocab(cfg.model.vocab_size, corpus["vocab_size"])
    cfg.dtype = resolve_dtype(cfg.dtype, pick_device(cfg.device))
    return cfg


def heldout_windows(setup: TextSetup, corpus: dict[str, Any], split: str = "test") -> list:
    """The fixed windows of a held-out split: the same list for every model and baseline."""
    n = setup.val_batches if split == "val" else setup.test_batches
    shards = TokenShards(corpus["path"], split)
    return list(shards.iter_eval_batches(setup.batch_size, setup.seq_len, n, split))


def baselines(setup: TextSetup, corpus: dict[str, Any], cache: Path) -> dict[str, Any]:
    """Unigram and add-k bigram NLL on the test (and validation) windows, k chosen on validation."""
    if cache.is_file():
        return json.loads(cache.read_text())
    path, vocab, val = corpus["path"], corpus["vocab_size"], heldout_windows(setup, corpus, "val")
    test = corpus_baselines(path, vocab, val, heldout_windows(setup, corpus))
    out = {"k": test.pop("k"), "test": test, "val": corpus_baselines(path, vocab, val, val)}
    del out["val"]["k"]
    write_text_atomic(cache, json.dumps(out, indent=1))  # a killed run leaves no half cache
    return out


def corpus_baselines(
    corpus_dir: str | Path, vocab_size: int, choose_on: list, score_on: list
) -> dict[str, float]:
    """Both tables fit on the train split, k chosen on `choose_on`, scored on `score_on`."""
    train = TokenShards(corpus_dir, "train")
    table = NgramBaseline.fit(np.asarray(train.window(0, train.n_tokens)), vocab_size)
    k = choose_k(table, choose_on)
    return {"k": k, **table.nll(score_on), "tokens": sum(int(y.numel()) for _, y in score_on)}


def prepare_documents(
    out: str | Path,
    named_docs: list[tuple[str, str]],
    tokenizer: str = "bpe:512",
    val_frac: float = 0.05,
    test_frac: float = 0.05,
    dataset: str = "documents",
    overwrite: bool = False,
) -> dict[str, Any]:
    """In-memory documents into train / val / test without leaks (`data.splits`), BPE on train."""
    if val_frac <= 0 or test_frac <= 0 or val_frac + test_frac >= 1:
        raise UserError(f"val_frac={val_frac}, test_frac={test_frac}: both > 0, sum < 1")
    out = Path(out)
    prepare_out(out, overwrite)
    names, texts = [n for n, _ in named_docs], [t for _, t in named_docs]
    splits = assign_splits(near_duplicate_keys(texts), val_frac, test_frac, names)
    pairs = list(zip(texts, splits))
    by_split = {s: [t for t, x in pairs if t and x == s] for s in ("train", "val", "test")}
    if not all(by_split.values()):
        raise UserError(
            f"{len(texts)} documents leave a split empty ({', '.join(f'{k}: {len(v)}' for k, v in by_split.items())}); "
            "use more documents or larger fractions"
        )
    tok = make_tokenizer(tokenizer, lambda: iter(by_split["train"]))
    order = iter([split for text, split in pairs if text])
    written = write_splits(out, iter([texts]), tok, by_split, lambda *_: next(order), 2**27)
    held = {s: sorted(n for n, x in zip(names, splits) if x == s) for s in ("val", "test")}
    kept = dict(dataset=dataset, subset=None, split="train", text_field="text", max_docs=None)
    fracs = {"val_frac": val_frac, "test_frac": test_frac, "held_out_documents": held}
    return write_meta(out, tok, written, **kept, **fracs)
