"""Synthetic biographies for the knowledge-recall task: persons, facts, text, tokenizer, storage.

In the style of bioS (Allen-Zhu and Li, Physics of Language Models 3.1/3.3).

    looped data bios --persons 100 --seed 0 --out data/bios          # demo-sized pools
    looped data bios --persons 10000 --pools bioS --out data/bioS     # the capacity studies' pools

    corpus = generate(BiosConfig(n_persons=100, seed=0))
    corpus.save("data/bios"); corpus = BiosCorpus.load("data/bios")

Each person gets a unique full name (first, middle, last) and six facts, each drawn uniformly and
independently from a pool: birth date, birth city, university, major, employer, gender. Because
the facts are random, a model can only predict them by having stored them, which is what
``looped.eval.recall`` measures in bits. A biography has one sentence per fact except gender, which
shows in the pronouns: the full name in the first sentence, He/She after. Every training
biography draws fresh templates (and, by default, a fresh sentence order).

Two hops. Every employer is in one city (a fixed function of the employer, so it adds no bits
per person). Biographies never state it: it is learned only from company sentences such as
"Velmora Systems is based in Tamrik." To answer "The employer of Anna Bel Kor is based in" a model
must recall the person's employer (from her biographies) and then that employer's city (from
company sentences): two stored facts composed without the bridge ever being written down. So
that the query's wording is familiar, the persons of the two-hop training split (half by
default) also get sentences stating their employer's city this way; the queries ask about the
other persons only, so no query appears verbatim in training text.

Evaluation text uses held-out templates (never in training text) for the same facts: one
biography per person in canonical sentence order, which ``looped.eval.recall`` scores token by token.

On disk (``BiosCorpus.save``): ``dataset/`` a ``datasets`` DatasetDict with splits ``train``
(text), ``queries`` (held-out texts and their value spans) and ``persons``; ``bios_config.json``,
``pools.json`` and ``tokenizer.json`` beside it. Helpers: ``bios_world`` (the config, pools and persons),
``bios_templates`` (sentence templates), ``bios_tokenizer`` (the word-level tokenizer).
"""

from __future__ import annotations

import argparse
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

__all__ = [
    "ATTRIBUTES",
    "BiosConfig",
    "BiosCorpus",
    "Person",
    "Pools",
    "Query",
    "WordTokenizer",
    "generate",
    "main",
]


@dataclass
class Query:
    """One scored text: the values sit at known token spans of ``tokenizer.encode(text)``."""

    kind: str  # "bio" (one per person) | "two_hop" (per queried person) | "employer_city" (per employer)
    index: int  # person index, or employer index for employer_city
    text: str  # the whole text, values included
    spans: list[tuple[str, int, int]]  # (attribute, start, end) token offsets of each scored value


def make_tokenizer(pools: Pools) -> WordTokenizer:
    """Every word the templates and pools can write; nothing else."""
    words = template_words()
    for attr in (*ATTRIBUTES, "employer_city"):
        for value in pools.values(attr):
            words.update(split_words(value))
    words.update(pools.first + pools.middle + pools.last)
    return WordTokenizer.from_words(words)


def bio_pieces(
    person: Person, templates: dict[str, str], order: tuple[str, ...]
) -> list[tuple[str, str]]:
    """A biography as tagged pieces: the name in the first sentence, the pronoun after."""
    subject, possessive = PRONOUNS[person.gender]
    pieces: list[tuple[str, str]] = []
    for k, attr in enumerate(order):
        subj = (person.name, "name") if k == 0 else (subject, "gender")
        pieces += fill(templates[attr], person.value(attr), attr, *subj, possessive=possessive)
    return pieces


def encode_pieces(
    tok: WordTokenizer, pieces: list[tuple[str, str]]
) -> tuple[list[int], list[tuple[str, int, int]]]:
    """Token ids of the pieces in order, and the (tag, start, end) span of each tagged piece."""
    ids: list[int] = []
    spans = []
    for text, tag in pieces:
        part = tok.encode(text)
        if tag:
            spans.append((tag, len(ids), len(ids) + len(part)))
        ids += part
    return ids, spans


def _write(tok: WordTokenizer, pieces: list[tuple[str, str]]) -> str:
    return tok.decode(encode_pieces(tok, pieces)[0])


def _query(
    tok: WordTokenizer, kind: str, index: int, pieces: list[tuple[str, str]], keep: tuple[str, ...]
) -> Query:
    """A Query scoring the first span of each tag in `keep`."""
    ids, spans = encode_pieces(tok, pieces)
    first: dict[str, tuple[str, int, int]] = {}
    for span in spans:
        if span[0] in keep:
            first.setdefault(span[0], span)
    return Query(kind, index, tok.decode(ids), [first[k] for k in keep])


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
        bios = [len(self.tokenizer.encode(t)) for t in self.eval_texts]
        return {
            "persons": len(self.persons),
            "train_texts": len(self.train_texts),
            "train_tokens": sum(len(self.tokenizer.encode(t)) + 1 for t in self.train_texts),
            "vocab_size": self.tokenizer.vocab_size,
            "tokens_per_bio_max": max(bios),
            "bits_per_person": sum(self.pools.entropy_bits(a) for a in ATTRIBUTES),
            "two_hop_queries": sum(q.kind == "two_hop" for q in self.queries),
        }

    def save(self, out_dir: str | Path) -> None:
        """Write config/pools/tokenizer JSON and a `datasets` DatasetDict (train, queries, persons).

        Written to a sibling folder first and renamed, so an interrupted save leaves no half corpus.
        """
        # datasets takes ~2 s to import: a corpus generated in memory for a run never needs it
        from datasets import Dataset, DatasetDict
        from datasets.utils.tqdm import (  # the same lazy import: its progress-bar switches
            are_progress_bars_disabled,
            disable_progress_bars,
            enable_progress_bars,
        )

        out = Path(out_dir)
        if out.exists() and any(out.iterdir()) and not (out / "bios_config.json").is_file():
            raise UserError(
                f"{out} exists and is not a bios corpus; choose another --out or empty it"
            )
        queries = {k: [] for k in ("kind", "index", "text", "span_attr", "span_start", "span_end")}
        for q in self.queries:
            for key, val in zip(queries, (q.kind, q.index, q.text, *map(list, zip(*q.spans)))):
                queries[key].append(val)
        splits = DatasetDict(
            train=Dataset.from_dict({"text": self.train_texts}),
            queries=Dataset.from_dict(queries),
            persons=Dataset.from_list([dataclasses.asdict(p) for p in self.persons]),
        )
        with atomic_path(out) as tmp:
            tmp.mkdir()
            quiet = are_progress_bars_disabled()
            disable_progress_bars()
            try:
                splits.save_to_disk(str(tmp / "dataset"))
            finally:
                if not quiet:
                    enable_progress_bars()
            config = dataclasses.asdict(self.config)
            (tmp / "bios_config.json").write_text(json.dumps(config, indent=1))
            (tmp / "pools.json").write_text(json.dumps(dataclasses.asdict(self.pools)))
            self.tokenizer.save(tmp / "tokenizer.json")

    @classmethod
    def load(cls, out_dir: str | Path) -> BiosCorpus:
        from datasets import load_from_disk  # ~2 s to import; see save

        out = Path(out_dir)
        if not (out / "bios_config.json").is_file():
            raise UserError(
                f"no bios corpus in {out}; write one with `looped data bios --out {out}`"
            )
        config = BiosConfig(**json.loads((out / "bios_config.json").read_text()))
        pools = Pools(**json.loads((out / "pools.json").read_text()))
        splits = load_from_disk(str(out / "dataset"))
        queries = [
            Query(
                r["kind"],
                r["index"],
                r["text"],
                list(zip(r["span_attr"], r["span_start"], r["span_end"])),
            )
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

    texts: list[str] = []
    for person in persons:
        for _ in range(cfg.bios_per_person):
            order = list(BIO_ATTRIBUTES)
            if cfg.permute_sentences:
                rng.shuffle(order)
            chosen = {a: rng.choice(train_bank[a]) for a in order}
            texts.append(_write(tok, bio_pieces(person, chosen, tuple(order))))
    if cfg.two_hop:
        for person in (p for p in persons if p.two_hop_split == "train"):
            for _ in range(cfg.bios_per_person):
                template = rng.choice(TWO_HOP)
                texts.append(_write(tok, fill(template, person.employer_city, "", person.name)))
        for employer, city in pools.employer_city.items():
            for _ in range(cfg.company_texts):
                template = rng.choice(train_bank["employer_city"])
                texts.append(_write(tok, fill(template, city, "", employer=employer)))
    rng.shuffle(texts)

    queries = []
    for person in persons:
        chosen = {a: rng.choice(heldout_bank[a]) for a in BIO_ATTRIBUTES}
        pieces = bio_pieces(person, chosen, BIO_ATTRIBUTES)
        queries.append(_query(tok, "bio", person.index, pieces, ATTRIBUTES))
    if cfg.two_hop:
        for person in (p for p in persons if p.two_hop_split == "query"):
            pieces = fill(TWO_HOP[0], person.employer_city, "two_hop", person.name)
            queries.append(_query(tok, "two_hop", person.index, pieces, ("two_hop",)))
        for i, (employer, city) in enumerate(pools.employer_city.items()):
            pieces = fill(
                heldout_bank["employer_city"][0], city, "employer_city", employer=employer
            )
            queries.append(_query(tok, "employer_city", i, pieces, ("employer_city",)))
    return BiosCorpus(cfg, pools, persons, texts, queries, tok)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="looped data bios", description=__doc__.splitlines()[0], allow_abbrev=False
    )
    parser.add_argument("--persons", type=int, default=100, help="number of persons (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    parser.add_argument(
        "--bios-per-person", type=int, default=4, help="training biographies per person"
    )
    parser.add_argument(
        "--no-two-hop", action="store_true", help="leave out the employer-city two-hop facts"
    )
    parser.add_argument(
        "--pools", choices=("demo", "bioS"), default="demo", help="pool sizes (default demo)"
    )
    parser.add_argument("--out", default="data/bios", help="output folder (default data/bios)")
    args = parser.parse_args(argv)
    kwargs = dict(
        n_persons=args.persons,
        seed=args.seed,
        bios_per_person=args.bios_per_person,
        two_hop=not args.no_two_hop,
    )
    cfg = BiosConfig.bioS(**kwargs) if args.pools == "bioS" else BiosConfig(**kwargs)
    corpus = generate(cfg)
    corpus.save(args.out)
    s = corpus.summary()
    print(
        f"wrote {args.out}: {s['persons']} persons, {s['train_texts']} training texts "
        f"({s['train_tokens']} tokens), vocab {s['vocab_size']}, {s['bits_per_person']:.2f} bits/person, "
        f"longest eval bio {s['tokens_per_bio_max']} tokens, {s['two_hop_queries']} two-hop queries"
    )
    return 0
