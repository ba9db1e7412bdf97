"""Synthetic biographies for the knowledge-recall task, in the style of bioS (Allen-Zhu and Li,
Physics of Language Models 3.1/3.3): persons, facts, text, tokenizer, storage.

    corpus = generate(BiosConfig(n_persons=100, seed=0))   # = looped data bios --persons 100
    corpus.save("data/bios"); corpus = BiosCorpus.load("data/bios")

Each person has a unique full name and six random facts (birth date, birth city, university,
major, employer, gender), predictable only by storing them (``looped.eval.recall`` counts bits);
one fact per sentence, fresh templates and order in every training biography. Two hops: each
employer's city is stated only in company sentences, and "The employer of X is based in" composes
two stored facts. Evaluation text uses held-out templates, one biography per person.
"""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from looped.data.bios_templates import (
    ATTRIBUTES,
    BIO_ATTRIBUTES,
    PRONOUNS,
    TEMPLATES,
    TWO_HOP,
    fill,
    template_words,
)
from looped.data.bios_tokenizer import WordTokenizer, split_words
from looped.data.bios_world import BiosConfig, Person, Pools, make_persons, make_pools
from looped.errors import UserError
from looped.runtime.atomic import atomic_path

Pieces = list[tuple[str, str]]  # (text, tag): a tag names the fact a piece holds ("": none)
Span = tuple[str, int, int]  # (tag, start, end) token offsets


@dataclass
class Query:
    """One scored text: the values sit at known token spans of ``tokenizer.encode(text)``."""

    kind: str  # "bio" (one per person) | "two_hop" (per queried person) | "employer_city" (per employer)
    index: int  # person index, or employer index for employer_city
    text: str  # the whole text, values included
    spans: list[Span]  # (attribute, start, end) token offsets of each scored value


def make_tokenizer(pools: Pools) -> WordTokenizer:
    """Every word the templates and pools can write; nothing else."""
    words = template_words()
    for attr in (*ATTRIBUTES, "employer_city"):
        for value in pools.values(attr):
            words.update(split_words(value))
    words.update(pools.first + pools.middle + pools.last)
    return WordTokenizer.from_words(words)


def bio_pieces(person: Person, templates: dict[str, str], order: tuple[str, ...]) -> Pieces:
    """A biography as tagged pieces: the name in the first sentence, the pronoun after."""
    subject, possessive = PRONOUNS[person.gender]
    pieces: Pieces = []
    for k, attr in enumerate(order):
        subj = (person.name, "name") if k == 0 else (subject, "gender")
        pieces += fill(templates[attr], person.value(attr), attr, *subj, possessive=possessive)
    return pieces


def encode_pieces(tok: WordTokenizer, pieces: Pieces) -> tuple[list[int], list[Span]]:
    """Token ids of the pieces in order, and the (tag, start, end) span of each tagged piece."""
    ids: list[int] = []
    spans = []
    for text, tag in pieces:
        part = tok.encode(text)
        if tag:
            spans.append((tag, len(ids), len(ids) + len(part)))
        ids += part
    return ids, spans


def _write(tok: WordTokenizer, pieces: Pieces) -> str:
    return tok.decode(encode_pieces(tok, pieces)[0])


def _query(
    tok: WordTokenizer, kind: str, index: int, pieces: Pieces, keep: tuple[str, ...]
) -> Query:
    """A Query scoring the first span of each tag in `keep`."""
    ids, spans = encode_pieces(tok, pieces)
    first: dict[str, Span] = {}
    for span in spans:
        if span[0] in keep:
            first.setdefault(span[0], span)
    return Query(kind, index, tok.decode(ids), [first[k] for k in keep])


QUERY_COLUMNS = ("kind", "index", "text", "span_attr", "span_start", "span_end")


@dataclass
class BiosCorpus:
    config: BiosConfig
    pools: Pools
    persons: list[Person]
    train_texts: list[str]  # biographies (training templates), company and two-hop sentences
    queries: list[Query]  # held-out-template texts with their scored value spans
    tokenizer: WordTokenizer = field(repr=False)

    @property
    def eval_texts(self) -> list[str]:
        """One biography per person written with held-out templates (for held-out NLL)."""
        return [q.text for q in self.queries if q.kind == "bio"]

    def summary(self) -> dict[str, float]:
        tok = self.tokenizer
        out = {"persons": len(self.persons), "train_texts": len(self.train_texts)}
        out["train_tokens"] = sum(len(tok.encode(t)) + 1 for t in self.train_texts)  # + 1: its EOS
        out["vocab_size"] = tok.vocab_size
        out["tokens_per_bio_max"] = max(len(tok.encode(t)) for t in self.eval_texts)
        out["bits_per_person"] = sum(self.pools.entropy_bits(a) for a in ATTRIBUTES)
        return out | {"two_hop_queries": sum(q.kind == "two_hop" for q in self.queries)}

    def save(self, out_dir: str | Path) -> None:
        """Write config/pools/tokenizer JSON and a `datasets` DatasetDict (train, queries,
        persons) atomically: an interrupted save leaves no half corpus."""
        import datasets  # ~2 s to import: a corpus generated in memory for a run never needs it

        out = Path(out_dir)
        if out.exists() and any(out.iterdir()) and not (out / "bios_config.json").is_file():
            msg = f"{out} exists and is not a bios corpus; choose another --out or empty it"
            raise UserError(msg)
        queries = {k: [] for k in QUERY_COLUMNS}
        for q in self.queries:
            for key, val in zip(queries, (q.kind, q.index, q.text, *map(list, zip(*q.spans)))):
                queries[key].append(val)
        splits = datasets.DatasetDict(
            train=datasets.Dataset.from_dict({"text": self.train_texts}),
            queries=datasets.Dataset.from_dict(queries),
            persons=datasets.Dataset.from_list([dataclasses.asdict(p) for p in self.persons]),
        )
        with atomic_path(out) as tmp:
            tmp.mkdir()
            quiet = datasets.are_progress_bars_disabled()
            datasets.disable_progress_bars()
            try:
                splits.save_to_disk(str(tmp / "dataset"))
            finally:
                if not quiet:
                    datasets.enable_progress_bars()
            config = dataclasses.asdict(self.config)
            (tmp / "bios_config.json").write_text(json.dumps(config, indent=1))
            (tmp / "pools.json").write_text(json.dumps(dataclasses.asdict(self.pools)))
            self.tokenizer.save(tmp / "tokenizer.json")

    @classmethod
    def load(cls, out_dir: str | Path) -> BiosCorpus:
        from datasets import load_from_disk  # ~2 s to import; see save

        out = Path(out_dir)
        if not (out / "bios_config.json").is_file():
            msg = f"no bios corpus in {out}; write one with `looped data bios --out {out}`"
            raise UserError(msg)
        config = BiosConfig(**json.loads((out / "bios_config.json").read_text()))
        pools = Pools(**json.loads((out / "pools.json").read_text()))
        splits = load_from_disk(str(out / "dataset"))
        queries = [
            Query(r["kind"], r["index"], r["text"], list(zip(*(r[k] for k in QUERY_COLUMNS[3:]))))
            for r in splits["queries"]
        ]
        persons = [Person(**row) for row in splits["persons"].to_list()]
        tok = WordTokenizer.load(out / "tokenizer.json")
        return cls(config, pools, persons, splits["train"]["text"], queries, tok)


def generate(cfg: BiosConfig) -> BiosCorpus:
    """The corpus `cfg` describes; the same config always gives the same corpus."""
    cfg.check()
    pools = make_pools(cfg)
    persons = make_persons(cfg, pools)
    tok = make_tokenizer(pools)
    rng = random.Random(f"looped-bios:{cfg.seed}:text")
    n, h = cfg.n_templates, cfg.n_heldout_templates
    train_bank = {k: bank[:n] for k, bank in TEMPLATES.items()}
    heldout_bank = {k: bank[n : n + h] for k, bank in TEMPLATES.items()}
    texts = _train_texts(cfg, pools, persons, tok, rng, train_bank)
    queries = _queries(cfg, pools, persons, tok, rng, heldout_bank)
    return BiosCorpus(cfg, pools, persons, texts, queries, tok)


def _train_texts(cfg, pools, persons, tok, rng, bank) -> list[str]:
    """Biographies (fresh templates and order each), two-hop and company sentences, shuffled."""
    texts: list[str] = []
    for person in persons:
        for _ in range(cfg.bios_per_person):
            order = list(BIO_ATTRIBUTES)
            if cfg.permute_sentences:
                rng.shuffle(order)
            chosen = {a: rng.choice(bank[a]) for a in order}
            texts.append(_write(tok, bio_pieces(person, chosen, tuple(order))))
    if cfg.two_hop:
        for person in (p for p in persons if p.two_hop_split == "train"):
            for _ in range(cfg.bios_per_person):
                template = rng.choice(TWO_HOP)
                texts.append(_write(tok, fill(template, person.employer_city, "", person.name)))
        for employer, city in pools.employer_city.items():
            for _ in range(cfg.company_texts):
                template = rng.choice(bank["employer_city"])
                texts.append(_write(tok, fill(template, city, "", employer=employer)))
    rng.shuffle(texts)
    return texts


def _queries(cfg, pools, persons, tok, rng, bank) -> list[Query]:
    """One held-out biography per person; the two-hop and one-hop employer-city queries."""
    queries = []
    for person in persons:
        chosen = {a: rng.choice(bank[a]) for a in BIO_ATTRIBUTES}
        pieces = bio_pieces(person, chosen, BIO_ATTRIBUTES)
        queries.append(_query(tok, "bio", person.index, pieces, ATTRIBUTES))
    if cfg.two_hop:
        for person in (p for p in persons if p.two_hop_split == "query"):
            pieces = fill(TWO_HOP[0], person.employer_city, "two_hop", person.name)
            queries.append(_query(tok, "two_hop", person.index, pieces, ("two_hop",)))
        for i, (employer, city) in enumerate(pools.employer_city.items()):
            pieces = fill(bank["employer_city"][0], city, "employer_city", employer=employer)
            queries.append(_query(tok, "employer_city", i, pieces, ("employer_city",)))
    return queries
