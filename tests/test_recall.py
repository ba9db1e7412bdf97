"""Recalled bits: oracle, uniform and hand-computed predictors, and the one-pass depth sweep."""

from __future__ import annotations

import math
from collections import Counter
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from looped.data.bios import ATTRIBUTES, BiosConfig, generate
from looped.errors import UserError
from looped.eval.recall import bits_from_losses, recall_by_depth, recall_queries
from looped.model import LoopedConfig, LoopedTransformer

LN2 = math.log(2)
# 4 years -> 12*28*4 = 1344 dates; 8 cities; 4 universities, majors and employers
TOY = dict(n_years=4, n_cities=8, n_universities=4, n_majors=4, n_employers=4)


@pytest.fixture(scope="module")
def corpus():
    return generate(BiosConfig(n_persons=4, seed=2, **TOY))


class TableModel(nn.Module):
    """A stand-in for LoopedTransformer: fixed logits per query row, the same at every depth."""

    def __init__(self, table: dict[tuple[int, ...], torch.Tensor]) -> None:
        super().__init__()
        self.table = table
        self.config = SimpleNamespace(seq_len=128)

    def forward_depths(self, idx, depths, targets=None, reduction="mean", return_logits=True):
        logits = torch.stack([self.table[tuple(row.tolist())] for row in idx])
        loss = F.cross_entropy(
            logits.flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="none"
        ).view_as(targets)
        return {d: (logits, loss) for d in depths}


def table_model(corpus, probs) -> TableModel:
    """Logits from probs(kind, row, attr, j, target, vocab) -> a (V,) probability vector, called
    for value token j of each scored value; unscored positions get zeros."""
    V = corpus.tokenizer.vocab_size
    table = {}
    for kind, qs in recall_queries(corpus).items():
        for i, row in enumerate(qs.rows):
            logits = torch.zeros(qs.inputs.shape[1], V)
            for a, attr in enumerate(qs.attributes):
                pos = (qs.labels[i] == a).nonzero().flatten().tolist()
                value = qs.targets[i, pos].tolist()
                for j, t in enumerate(pos):
                    logits[t] = probs(kind, row, attr, j, value, V).log()
            table[tuple(qs.inputs[i].tolist())] = logits
    return TableModel(table)


def spread(target: int, p: float, V: int, wrong: int | None = None) -> torch.Tensor:
    """p on the target, 1 - p on `wrong` (or spread evenly over every other token)."""
    if wrong is not None:
        out = torch.zeros(V, dtype=torch.float64)
        out[wrong] = 1 - p
    else:
        out = torch.full((V,), (1 - p) / (V - 1), dtype=torch.float64)
    out[target] = p
    return out


def test_bits_from_losses_exact_values():
    assert bits_from_losses(0.0, 8) == 3.0
    assert bits_from_losses(LN2, 8) == pytest.approx(2.0)
    assert bits_from_losses(math.log(8), 8) == pytest.approx(0.0, abs=1e-12)
    assert bits_from_losses(10.0, 8) == 0.0  # worse than guessing is 0, not negative


def test_oracle_recovers_the_full_entropy(corpus):
    model = table_model(corpus, lambda kind, row, attr, j, value, V: spread(value[j], 1.0, V))
    res = recall_by_depth(model, corpus, [1, 3])
    full = sum(corpus.pools.entropy_bits(a) for a in ATTRIBUTES)
    for d in (1, 3):
        assert res[d]["bits_per_person"] == pytest.approx(full, abs=1e-6)
        assert res[d]["full_bits_per_person"] == pytest.approx(full)
        for attr in ATTRIBUTES:
            r = res[d]["attributes"][attr]
            assert r["acc"] == 1.0 and r["nll"] == pytest.approx(0.0, abs=1e-6)
            assert r["bits"] == pytest.approx(r["entropy"], abs=1e-6)
        assert res[d]["two_hop"]["bits"] == pytest.approx(2.0, abs=1e-6)  # 4 employers, 4 cities
        assert res[d]["two_hop"]["acc"] == 1.0 and res[d]["employer_city"]["acc"] == 1.0


def test_uniform_over_each_pool_gets_zero_bits(corpus):
    """Guess uniformly among the pool values that agree with the value tokens so far: the
    summed loss is exactly ln(pool size), also for multi-token values (dates, universities)."""
    tok = corpus.tokenizer
    pools = {a: [tok.encode(v) for v in corpus.pools.values(a)] for a in ATTRIBUTES}
    pools["two_hop"] = pools["employer_city"] = [
        tok.encode(v) for v in corpus.pools.values("two_hop")
    ]

    def uniform(kind, row, attr, j, value, V):
        nxt = Counter(seq[j] for seq in pools[attr] if seq[:j] == value[:j])
        out = torch.zeros(V, dtype=torch.float64)
        for t, c in nxt.items():
            out[t] = c / sum(nxt.values())
        return out

    res = recall_by_depth(table_model(corpus, uniform), corpus, [1])[1]
    assert res["bits_per_person"] == pytest.approx(0.0, abs=1e-5)
    for attr in ATTRIBUTES:
        r = res["attributes"][attr]
        assert r["nll"] == pytest.approx(math.log(len(pools[attr])), abs=1e-5)
    assert res["two_hop"]["bits"] == pytest.approx(0.0, abs=1e-5)


def test_noisy_guessing_is_not_a_floor():
    """Loss ln S - ln 2 for half the persons and ln S + ln 2 for the others averages to ln S:
    0 bits. Clamping each person before averaging would report 0.5 bits per attribute."""
    corpus = generate(BiosConfig(n_persons=20, seed=5, **TOY))
    H = {a: corpus.pools.entropy_bits(a) for a in (*ATTRIBUTES, "two_hop", "employer_city")}

    def noisy(kind, row, attr, j, value, V):
        p = 2.0 ** (-H[attr] + (1 if row % 2 == 0 else -1)) if j == 0 else 1.0
        return spread(value[j], p, V)

    res = recall_by_depth(table_model(corpus, noisy), corpus, [2])[2]
    assert res["bits_per_person"] == pytest.approx(0.0, abs=1e-5)
    for attr in ATTRIBUTES:
        assert res["attributes"][attr]["nll"] == pytest.approx(H[attr] * LN2, abs=1e-5)


def test_hand_computed_toy_case(corpus):
    """First value token p=1/2 (the rest spread), later tokens p=1; birth city: persons 0, 1
    get p=3/4 and persons 2, 3 p=1/4 with 3/4 on one wrong city (so they miss it)."""
    lived = {p.birth_city for p in corpus.persons}
    wrong_city = corpus.tokenizer.encode(next(c for c in corpus.pools.cities if c not in lived))[0]

    def toy(kind, row, attr, j, value, V):
        if attr == "birth_city":
            return spread(value[0], 3 / 4, V) if row < 2 else spread(value[0], 1 / 4, V, wrong_city)
        return spread(value[j], 0.5 if j == 0 else 1.0, V)

    res = recall_by_depth(table_model(corpus, toy), corpus, [1])[1]
    a = res["attributes"]
    city_nll = (2 * math.log(4 / 3) + 2 * math.log(4)) / 4
    assert a["birth_city"]["nll"] == pytest.approx(city_nll, abs=1e-6)
    assert a["birth_city"]["bits"] == pytest.approx(2 - math.log2(4 / 3) / 2, abs=1e-6)
    assert a["birth_city"]["acc"] == 0.5
    assert a["birth_date"]["bits"] == pytest.approx(math.log2(1344) - 1, abs=1e-6)
    for attr in ("university", "major", "employer"):
        assert a[attr]["bits"] == pytest.approx(1.0, abs=1e-6) and a[attr]["acc"] == 1.0
    assert a["gender"]["bits"] == pytest.approx(0.0, abs=1e-6)
    expected = (math.log2(1344) - 1) + (2 - math.log2(4 / 3) / 2) + 3 * 1.0 + 0.0
    assert res["bits_per_person"] == pytest.approx(expected, abs=1e-5)
    assert res["two_hop"]["bits"] == pytest.approx(1.0, abs=1e-6)
    assert res["two_hop"]["nll"] == pytest.approx(LN2, abs=1e-6)


def test_queries_target_exactly_the_value_tokens(corpus):
    tok = corpus.tokenizer
    qs = recall_queries(corpus)
    bio = qs["bio"]
    assert (bio.inputs[:, 0] == tok.eos_id).all()  # documents follow <eos> in training
    for i, person in enumerate(corpus.persons):
        for a, attr in enumerate(bio.attributes):
            assert tok.decode(bio.targets[i, bio.labels[i] == a].tolist()) == person.value(attr)
        # targets are the inputs shifted by one wherever they are scored
        scored = bio.targets[i] != -100
        nxt = torch.cat([bio.inputs[i, 1:], torch.tensor([-1])])
        assert ((bio.targets[i] == nxt) | ~scored)[:-1].all()
    assert ((bio.labels >= 0) == (bio.targets != -100)).all()


class SeparateDepths(nn.Module):
    """Evaluate every depth with its own forward(idx, depth): the reference for the sweep."""

    def __init__(self, model: LoopedTransformer) -> None:
        super().__init__()
        self.model, self.config = model, model.config

    def forward_depths(self, idx, depths, targets=None, reduction="mean", return_logits=True):
        return {d: self.model(idx, d, targets, reduction) for d in depths}


def test_one_pass_sweep_equals_separate_depths_on_a_tiny_model():
    torch.manual_seed(0)
    corpus = generate(BiosConfig(n_persons=12, seed=1, **TOY))
    cfg = LoopedConfig(vocab_size=corpus.tokenizer.vocab_size, seq_len=64, d_model=32, n_head=2)
    model = LoopedTransformer(cfg)
    model.train()
    depths = [1, 2, 4]
    res = recall_by_depth(model, corpus, depths, batch_size=5)
    assert model.training  # the caller's mode is restored
    ref = recall_by_depth(SeparateDepths(model), corpus, depths, batch_size=64)
    assert sorted(res) == depths
    for d in depths:
        assert set(res[d]["attributes"]) == set(ATTRIBUTES)
        assert res[d]["bits_per_person"] >= 0
        assert res[d]["bits_per_person"] < res[d]["full_bits_per_person"]  # untrained
        for kind in ("two_hop", "employer_city"):
            assert set(res[d][kind]) == {"bits", "nll", "acc", "entropy", "n"}
        for attr in ATTRIBUTES:
            got, want = res[d]["attributes"][attr], ref[d]["attributes"][attr]
            assert got["bits"] >= 0
            assert got["nll"] == pytest.approx(want["nll"], rel=1e-5)
            assert got["acc"] == want["acc"]
        assert res[d]["two_hop"]["nll"] == pytest.approx(ref[d]["two_hop"]["nll"], rel=1e-5)
    assert res[1]["attributes"]["birth_city"]["nll"] != res[4]["attributes"]["birth_city"]["nll"]


def test_queries_longer_than_the_model_are_a_user_error(corpus):
    cfg = LoopedConfig(vocab_size=corpus.tokenizer.vocab_size, seq_len=16, d_model=32, n_head=2)
    with pytest.raises(UserError, match="seq_len"):
        recall_by_depth(LoopedTransformer(cfg), corpus, [1])
