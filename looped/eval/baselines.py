"""Count-table baselines a text model must beat before its numbers mean anything.

    table = NgramBaseline.fit(train_tokens, vocab_size)          # counts on the train split
    table.nll(batches)     # {"unigram": nats/token, "bigram": nats/token} on the same windows

Two models worse than a bigram table compare plateaus, not depth schedules. Smoothing is add-k,
p(b | a) = (c(a, b) + k) / (c(a) + k V), with k chosen on validation windows, never on test.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from looped.data.text import TokenShards

K_GRID = (1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0)  # add-k values tried on validation windows


@dataclass
class NgramBaseline:
    unigram_counts: np.ndarray  # (V,) token counts on the train split
    bigram_counts: np.ndarray  # (V, V) counts of (previous, next) pairs on the train split
    k: float = 0.1  # add-k smoothing of both tables

    @classmethod
    def fit(cls, tokens: np.ndarray, vocab_size: int, k: float = 0.1) -> NgramBaseline:
        tokens = np.asarray(tokens, dtype=np.int64)
        uni = np.bincount(tokens, minlength=vocab_size).astype(np.float64)
        pairs = tokens[:-1] * vocab_size + tokens[1:]
        bi = np.bincount(pairs, minlength=vocab_size * vocab_size).astype(np.float64)
        return cls(uni, bi.reshape(vocab_size, vocab_size), k)

    def log_probs(self, prev: np.ndarray, nxt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log p(next) under the unigram and log p(next | prev) under the bigram, per token."""
        v, k = len(self.unigram_counts), self.k
        uni = np.log((self.unigram_counts[nxt] + k) / (self.unigram_counts.sum() + k * v))
        row = self.bigram_counts[prev]
        bi = np.log((row[np.arange(len(nxt)), nxt] + k) / (row.sum(axis=1) + k * v))
        return uni, bi

    def nll(self, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, float]:
        """Mean NLL (nats/token) of both tables over (x, y) windows, the bigram on x[t]."""
        uni_sum = bi_sum = 0.0
        count = 0
        for x, y in batches:
            prev, nxt = x.reshape(-1).numpy(), y.reshape(-1).numpy()
            uni, bi = self.log_probs(prev, nxt)
            uni_sum -= float(uni.sum())
            bi_sum -= float(bi.sum())
            count += len(nxt)
        if count == 0:
            raise ValueError("no windows to score")
        return {"unigram": uni_sum / count, "bigram": bi_sum / count}


def choose_k(
    table: NgramBaseline,
    val_batches: list[tuple[torch.Tensor, torch.Tensor]],
    grid: tuple[float, ...] = K_GRID,
) -> float:
    """The add-k value with the lowest bigram NLL on validation windows."""
    scores = {}
    for k in grid:
        table.k = k
        scores[k] = table.nll(val_batches)["bigram"]
    table.k = min(scores, key=lambda k: (scores[k], k))
    return table.k


def corpus_baselines(
    corpus_dir: str | Path, vocab_size: int, choose_on: list, score_on: list
) -> dict[str, float]:
    """Both tables fit on the train split, k chosen on `choose_on`, scored on `score_on`."""
    train = TokenShards(corpus_dir, "train")
    table = NgramBaseline.fit(np.asarray(train.window(0, train.n_tokens)), vocab_size)
    k = choose_k(table, choose_on)
    return {"k": k, **table.nll(score_on), "tokens": sum(int(y.numel()) for _, y in score_on)}
