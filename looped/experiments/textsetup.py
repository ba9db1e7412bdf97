"""The text setup that learns on a 2-core CPU, with its corpus, baselines and run config.

    corpus = ensure_corpus(TextSetup(), Path("runs/length"))   # tokenized once, then reused
    cfg = run_config(TextSetup(), corpus, schedule=paper.UNIFORM, lr=3e-3, seed=0, steps=400)

The corpus is the standard library's source (offline everywhere), split without leaks
(`data.splits`: near-duplicate families in one split, the tokenizer fit on train alone) into
train, validation (every LR choice) and test (every reported number). A small BPE keeps the
embedding and head from dominating a d=64 model (`results/text_regime.json` has the
measurements behind the choice). The baselines are fit on the train split and scored on the
same test windows as the models.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from looped.config import TrainConfig, load_config
from looped.data.text import META, TokenShards, prepare_documents, read_meta, stdlib_named_documents
from looped.errors import UserError
from looped.eval.baselines import corpus_baselines
from looped.model import fit_vocab
from looped.runtime.atomic import write_text_atomic
from looped.runtime.device import pick_device, resolve_dtype


@dataclass
class TextSetup:
    tokenizer: str = "bpe:512"  # a small byte-level BPE fit on the train split
    d_model: int = 64  # width of the one looped layer
    n_head: int = 4  # attention heads
    batch_size: int = 32  # sequences per step
    seq_len: int = 128  # tokens per sequence
    warmup_steps: int = 10  # linear LR warmup, then warmup-stable-decay (shared by every length)
    val_batches: int = 12  # validation windows (x batch_size x seq_len tokens): LR choice
    test_batches: int = 24  # test windows: every reported number
    val_frac: float = 0.05  # share of the corpus's near-duplicate clusters held out for val
    test_frac: float = 0.05  # and for test


def corpus_path(setup: TextSetup, out: Path, source: str | None = None) -> Path:
    name = "stdlib" if not source else re.sub(r"[^A-Za-z0-9]+", "_", source).strip("_")[-40:]
    return out / f"corpus-{name}-{setup.tokenizer.replace(':', '')}-split"


def source_documents(source: str) -> list[tuple[str, str]]:
    """(name, text) of every document of a `datasets` source: a local .txt/.jsonl/.parquet
    file or folder, a saved dataset, or a hub name (needs the network)."""
    from looped.data.text import open_documents  # imports datasets (~2 s): only --corpus needs it

    docs = [(f"doc{i:07d}", str(row["text"])) for i, row in enumerate(open_documents(source))]
    if not docs:
        raise UserError(
            f"--corpus {source} holds no documents; point it at text files or a dataset"
        )
    return docs


def ensure_corpus(setup: TextSetup, out: Path, source: str | None = None) -> dict[str, Any]:
    """The corpus's meta.json (with its path). Default: the standard library's source, tokenized
    the first time. `source`: a directory `looped data text` prepared (used as it is; it must
    have a test split), or any `datasets` source, split and tokenized here the same way as the
    standard library (near-duplicate families in one split, the tokenizer fit on train)."""
    if source and (Path(source) / META).is_file():
        meta = read_meta(source)
        if "test" not in meta["splits"]:
            raise UserError(
                f"{source} has no test split; prepare it with `looped data text ... --test-frac 0.05`"
            )
        return {**meta, "path": str(Path(source).resolve())}
    path = corpus_path(setup, out, source)
    if not (path / META).is_file():
        prepare_documents(
            path,
            source_documents(source) if source else stdlib_named_documents(),
            setup.tokenizer,
            setup.val_frac,
            setup.test_frac,
            dataset=source or "stdlib",
            overwrite=True,
        )
    meta = read_meta(path)
    if meta["tokenizer"] != setup.tokenizer or "test" not in meta["splits"]:
        raise UserError(f"{path} holds another corpus; remove it and run again")
    return {**meta, "path": str(path)}


def run_config(
    setup: TextSetup,
    corpus: dict[str, Any],
    *,
    schedule: str,
    lr: float,
    seed: int,
    steps: int,
    extra: tuple[str, ...] = (),
    preset: str = "demo",
    log_interval: int = 10,
    before: tuple[str, ...] | list[str] = (),
) -> TrainConfig:
    """One text run: the preset with this setup's model, data and batch; evaluation on the
    validation windows at the end only (test windows are scored after training). `before`
    (a user's overrides) is applied before the run's LR, seed and schedule, which win over it;
    `extra` after them. Every text study builds its runs here (`looped length`, `looped
    fidelity` and the demo's text track)."""
    overrides = [
        "data.kind=text",
        f"data.path={corpus['path']}",
        f"model.d_model={setup.d_model}",
        f"model.n_head={setup.n_head}",
        f"model.seq_len={setup.seq_len}",
        f"seq_len={setup.seq_len}",
        f"batch_size={setup.batch_size}",
        f"optim.warmup_steps={setup.warmup_steps}",
        f"eval_batches={setup.val_batches}",
        "eval_depths=1-16",
        "eval_interval=0",
        f"log_interval={log_interval}",
        "keep_last=1",
        f"max_steps={steps}",
        "paper_schedules=[]",
        *before,
        f"optim.lr={lr}",
        f"seed={seed}",
        f"schedule={schedule}",
        *extra,
    ]
    cfg = load_config(preset, overrides)
    cfg.model.vocab_size = fit_vocab(cfg.model.vocab_size, corpus["vocab_size"])
    cfg.dtype = resolve_dtype(cfg.dtype, pick_device(cfg.device))
    return cfg


def heldout_windows(setup: TextSetup, corpus: dict[str, Any], split: str = "test") -> list:
    """The fixed windows of a held-out split (the same list for every model and baseline):
    `val_batches` of validation, `test_batches` of test."""
    n = setup.val_batches if split == "val" else setup.test_batches
    shards = TokenShards(corpus["path"], split)
    return list(shards.iter_eval_batches(setup.batch_size, setup.seq_len, n, split))


def baselines(setup: TextSetup, corpus: dict[str, Any], cache: Path) -> dict[str, Any]:
    """Unigram and add-k bigram NLL on the test (and validation) windows, fit on train, k chosen
    on validation."""
    if cache.is_file():
        return json.loads(cache.read_text())
    path, vocab, val = corpus["path"], corpus["vocab_size"], heldout_windows(setup, corpus, "val")
    test = corpus_baselines(path, vocab, val, heldout_windows(setup, corpus))
    out = {"k": test.pop("k"), "test": test, "val": corpus_baselines(path, vocab, val, val)}
    out["val"].pop("k")
    write_text_atomic(cache, json.dumps(out, indent=1))  # a killed run leaves no half cache
    return out
