"""Recalled bits per person: how many of the biographies' random facts a model has stored.

    res = recall_by_depth(model, corpus, depths=range(1, 17))     # one pass of 16 loops per batch
    res[4]["bits_per_person"], res[4]["attributes"]["birth_city"], res[4]["two_hop"]

A fact drawn uniformly from S values takes log2 S bits; a model with mean loss p nats on the
true value holds at least log2 S - p / ln 2 bits about it (Allen-Zhu and Li, Physics of Language
Models 3.3). Bits per person sum max(0, that) over the six facts, p the mean over persons
(clamping per person would turn lucky guesses into a floor). The two-hop query adds no bits but
composes two facts; ``employer_city`` (one hop) tells a missing fact from a missing composition.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from looped.data.bios import ATTRIBUTES
from looped.errors import UserError

QUERY_SETS = {"bio": ATTRIBUTES, "two_hop": ("two_hop",), "employer_city": ("employer_city",)}


def bits_from_losses(mean_ce_nats: float, pool_size: int) -> float:
    """Recalled bits for one attribute from the mean (over persons) summed value loss in nats."""
    return bits_from_entropy(mean_ce_nats, math.log2(pool_size))


def bits_from_entropy(mean_ce_nats: float, entropy_bits: float) -> float:
    """max(0, H - mean CE / ln 2): the bits the loss saves over the prior of entropy H."""
    return max(0.0, entropy_bits - mean_ce_nats / math.log(2))


@dataclass
class QuerySet:
    """Teacher-forced queries of one kind as padded tensors, ready for ``forward_depths``."""

    attributes: tuple[str, ...]  # label index -> attribute name
    entropy: dict[str, float]  # attribute -> prior entropy in bits (log2 of the pool size)
    inputs: Tensor  # (N, T) <eos> + query tokens, right-padded with <pad>
    targets: Tensor  # (N, T) the next token where it is a value token, else -100
    labels: Tensor  # (N, T) index into `attributes` of each scored target, else -1
    rows: list[int]  # person (or employer) index of each row


def check_queries_fit(sets: dict[str, QuerySet], seq_len: int) -> None:
    """Refuse queries longer than `model.seq_len` (the trainer checks before training)."""
    longest = max(qs.inputs.shape[1] for qs in sets.values())
    if longest > seq_len:
        msg = f"recall queries are {longest} tokens, longer than model.seq_len={seq_len}; raise model.seq_len"
        raise UserError(msg)


def recall_queries(corpus: Any) -> dict[str, QuerySet]:
    """{"bio", "two_hop", "employer_city"} query sets (the last two when the corpus has them),
    each query starting with <eos> as every document does in the training stream."""
    tok = corpus.tokenizer
    out = {}
    for kind, attrs in QUERY_SETS.items():
        queries = [q for q in corpus.queries if q.kind == kind]
        if not queries:
            continue
        seqs = [[tok.eos_id, *tok.encode(q.text)] for q in queries]
        spans = [[(attrs.index(a), s + 1, e + 1) for a, s, e in q.spans] for q in queries]
        shape = (len(seqs), max(map(len, seqs)) - 1)
        inputs, targets, labels = (torch.full(shape, v) for v in (tok.pad_id, -100, -1))
        for i, (ids, sp) in enumerate(zip(seqs, spans)):
            inputs[i, : len(ids) - 1] = torch.tensor(ids[:-1])
            for a, s, e in sp:  # position j predicts token j + 1
                targets[i, s - 1 : e - 1] = torch.tensor(ids[s:e])
                labels[i, s - 1 : e - 1] = a
        entropy = {a: corpus.pools.entropy_bits(a) for a in attrs}
        out[kind] = QuerySet(attrs, entropy, inputs, targets, labels, [q.index for q in queries])
    return out


@torch.no_grad()
def score(
    model: Any, qs: QuerySet, depths: list[int], batch_size: int = 64, device: str = "cpu"
) -> dict[int, tuple[Tensor, Tensor]]:
    """{depth: (summed value loss in nats (N, A), all value tokens argmax-correct (N, A))}:
    exact match under teacher forcing is exact match of greedy decoding."""
    n_attr = len(qs.attributes)
    out: dict[int, tuple[list[Tensor], list[Tensor]]] = {d: ([], []) for d in depths}
    for i in range(0, len(qs.rows), batch_size):
        idx, tgt, lab = (
            x[i : i + batch_size].to(device) for x in (qs.inputs, qs.targets, qs.labels)
        )
        onehot = torch.nn.functional.one_hot(lab.clamp(min=0), n_attr) * (lab >= 0).unsqueeze(-1)
        onehot = onehot.float()
        per_depth = model.forward_depths(idx, depths, tgt, reduction="none", return_logits=True)
        for d in depths:
            logits, loss = per_depth[d]
            wrong = ((logits.argmax(-1) != tgt) & (lab >= 0)).float()
            out[d][0].append(torch.einsum("bt,bta->ba", loss.float(), onehot).cpu())
            out[d][1].append(torch.einsum("bt,bta->ba", wrong, onehot).cpu() == 0)
    return {d: (torch.cat(nll), torch.cat(ok)) for d, (nll, ok) in out.items()}


def summarize(qs: QuerySet, nll: Tensor, ok: Tensor) -> dict[str, dict[str, float]]:
    """{attribute: {bits, nll, acc, entropy, n}} from per-row losses: mean first, then clamp."""
    out = {}
    for a, attr in enumerate(qs.attributes):
        mean_nll, entropy = nll[:, a].double().mean().item(), qs.entropy[attr]
        out[attr] = {"bits": bits_from_entropy(mean_nll, entropy), "nll": mean_nll}
        out[attr] |= {
            "acc": ok[:, a].double().mean().item(),
            "entropy": entropy,
            "n": len(qs.rows),
        }
    return out


def recall_by_depth(
    model: Any, corpus: Any, depths: Iterable[int], batch_size: int = 64, device: str = "cpu"
) -> dict[int, dict[str, Any]]:
    """{depth: {"bits_per_person", "full_bits_per_person", "attributes": {attr: summary},
    "two_hop", "employer_city"}} (the last two only with two-hop facts, never summed in)."""
    depths = sorted(set(depths))
    sets = recall_queries(corpus)
    check_queries_fit(sets, model.config.seq_len)
    was_training = model.training
    model.eval()
    try:
        scored = {kind: score(model, qs, depths, batch_size, device) for kind, qs in sets.items()}
    finally:
        model.train(was_training)
    result: dict[int, dict[str, Any]] = {}
    for d in depths:
        attrs = summarize(sets["bio"], *scored["bio"][d])
        row: dict[str, Any] = {"bits_per_person": sum(v["bits"] for v in attrs.values())}
        row["full_bits_per_person"] = sum(v["entropy"] for v in attrs.values())
        row["attributes"] = attrs
        for kind in ("two_hop", "employer_city"):
            if kind in sets:
                row[kind] = summarize(sets[kind], *scored[kind][d])[kind]
        result[d] = row
    return result
