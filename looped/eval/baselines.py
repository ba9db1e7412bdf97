"""Count-table baselines a text model must beat before its numbers mean anything.

    table = NgramBaseline.fit(train_tokens, vocab_size)          # counts on the train split
    table.nll(batches)     # {"unigram": nats/token, "bigram": nats/token} on the same windows

Two models worse than a bigram table compare plateaus, not depth schedules. Smoothing is add-k,
p(b | a) = (c(a, b) + k) / (c(a) + k V), with k chosen on validation windows, never on test.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import torch

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

    def nll(self, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, float]:
        """Mean NLL (nats/token) of both tables over (x, y) windows, the bigram on x[t]."""
        v, k, uni_sum, bi_sum, count = len(self.unigram_counts), self.k, 0.0, 0.0, 0
        for x, y in batches:
            prev, nxt = x.reshape(-1).numpy(), y.reshape(-1).numpy()
            uni = np.log((self.unigram_counts[nxt] + k) / (self.unigram_counts.sum() + k * v))
            row = self.bigram_counts[prev]  # the bigram: log p(next | prev)
            bi = np.log((row[np.arange(len(nxt)), nxt] + k) / (row.sum(axis=1) + k * v))
            uni_sum -= float(uni.sum())
            bi_sum -= float(bi.sum())
            count += len(nxt)
        if count == 0:
            raise ValueError("no windows to score")
        return {"unigram": uni_sum / count, "bigram": bi_sum / count}


def choose_k(table: NgramBaseline, val_batches: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """The add-k value of K_GRID with the lowest bigram NLL on validation windows."""
    scores = {k: replace(table, k=k).nll(val_batches)["bigram"] for k in K_GRID}
    table.k = min(scores, key=lambda k: (scores[k], k))
    return table.k
