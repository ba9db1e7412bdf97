"""Batches for training and evaluation, from any corpus, as a pure function of (seed, step).

A batch's generator is seeded by (seed, step, micro-batch, rank): a resumed or branched run draws
its parent's batches with no data-loader state to save.

    source = build_source(cfg.data)
    x, y = source.train.sample_batch(32, 128, batch_generator(seed, step))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from looped.data.bios import BiosConfig, BiosCorpus, generate
from looped.data.text import TokenShards
from looped.errors import UserError

_MASK = (1 << 64) - 1


def mix_seed(*values: int) -> int:
    """Deterministic 63-bit seed from integers (splitmix64 steps; no Python hash())."""
    z = 0x9E3779B97F4A7C15
    for v in values:
        z = (z ^ (int(v) & _MASK)) * 0xBF58476D1CE4E5B9 & _MASK
        z = (z ^ (z >> 31)) * 0x94D049BB133111EB & _MASK
        z ^= z >> 29
    return z & ((1 << 63) - 1)


def batch_generator(seed: int, step: int, micro: int = 0, rank: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(mix_seed(seed, step, micro, rank))


def train_generator(
    seed: int, step: int, micro: int, rank: int, grad_accum: int, global_batch: int
) -> torch.Generator:
    """One micro-batch's generator. With `global_batch` it is named by its index in the whole
    step, so a step's sequences are the same on 1 process or 8; else per (micro, rank)."""
    micro, rank = (rank * grad_accum + micro, 0) if global_batch > 0 else (micro, rank)
    return batch_generator(seed, step, micro, rank)


class TokenStream:
    """A token array in memory (e.g. the bios corpus joined with EOS) sampled as random windows."""

    def __init__(self, tokens: np.ndarray | list[int], vocab_size: int) -> None:
        self.tokens = torch.as_tensor(np.asarray(tokens, dtype=np.int64))
        self.vocab_size = vocab_size

    def __len__(self) -> int:
        return len(self.tokens)

    def sample_batch(
        self, batch_size: int, seq_len: int, generator: torch.Generator
    ) -> tuple[Tensor, Tensor]:
        n = len(self.tokens) - seq_len - 1
        if n < 0:
            msg = f"corpus has {len(self.tokens)} tokens, fewer than seq_len+1={seq_len + 1}"
            raise UserError(f"{msg}; use more data or a shorter seq_len")
        starts = torch.randint(0, n + 1, (batch_size,), generator=generator)
        rows = torch.stack([self.tokens[s : s + seq_len + 1] for s in starts.tolist()])
        return rows[:, :-1], rows[:, 1:]

    def iter_eval_batches(self, batch_size: int, seq_len: int, n_batches: int):
        """Contiguous, non-overlapping windows from the start: the same every time."""
        n_windows = (len(self.tokens) - 1) // seq_len
        for b in range(min(n_batches, max(1, n_windows // batch_size))):
            starts = range(b * batch_size, min((b + 1) * batch_size, n_windows))
            if not starts:
                return
            rows = torch.stack([self.tokens[i * seq_len : (i + 1) * seq_len + 1] for i in starts])
            yield rows[:, :-1], rows[:, 1:]


@dataclass
class DataSource:
    train: Any  # has sample_batch(batch_size, seq_len, generator)
    eval: Any  # has iter_eval_batches(batch_size, seq_len, n_batches)
    vocab_size: int
    bios: Any = None  # the BiosCorpus for recall evaluation, when training on bios


def bios_config(data_cfg: Any) -> Any:
    """The BiosConfig a DataConfig describes (its names meet the generator's here)."""
    d = data_cfg
    kw = {"bios_per_person": d.bios_per_person, "two_hop": d.two_hop}
    return BiosConfig(n_persons=d.persons, seed=d.bios_seed, **kw)


def build_source(data_cfg: Any) -> DataSource:
    """The training and evaluation token sources a DataConfig describes."""
    path = data_cfg.path
    if data_cfg.kind == "bios":
        if path and not Path(path).is_dir():
            raise UserError(
                f"bios corpus {path} not found; write one with `looped data bios --out {path}`"
            )
        corpus = BiosCorpus.load(path) if path else generate(bios_config(data_cfg))
        tok = corpus.tokenizer

        def stream(texts: list[str]) -> TokenStream:  # the texts joined with EOS
            ids = [i for t in texts for i in [*tok.encode(t), tok.eos_id]]
            return TokenStream(ids, tok.vocab_size)

        train, val = stream(corpus.train_texts), stream(corpus.eval_texts)
        return DataSource(train, val, tok.vocab_size, corpus)
    if data_cfg.kind == "text":
        if not path or not Path(path).is_dir():
            raise UserError(
                f"text corpus {path!r} not found; write one with `looped data text --out DIR` and set data.path=DIR"
            )
        train, val = TokenShards(path, "train"), TokenShards(path, "val")
        return DataSource(train, val, train.vocab_size)
    raise UserError(f"data.kind={data_cfg.kind!r}: choose bios or text")
