"""`looped data bios`: write a synthetic-biographies corpus, its tokenizer and recall queries.

looped data bios --persons 100 --seed 0 --out data/bios          # demo-sized pools
looped data bios --persons 10000 --pools bioS --out data/bioS     # the capacity studies' pools
"""

from __future__ import annotations

import argparse

from looped.commands.common import described
from looped.data.bios import BiosConfig, generate


def parser() -> argparse.ArgumentParser:
    p = described("looped data bios", __doc__, allow_abbrev=False)
    p.add_argument("--persons", type=int, default=100, help="number of persons (default 100)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.add_argument("--bios-per-person", type=int, default=4, help="training biographies per person")
    p.add_argument("--no-two-hop", action="store_true", help="leave out the two-hop facts")
    p.add_argument("--pools", choices=("demo", "bioS"), default="demo", help="pool sizes")
    p.add_argument("--out", default="data/bios", help="output folder (default data/bios)")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    kwargs = dict(n_persons=args.persons, seed=args.seed, bios_per_person=args.bios_per_person)
    kwargs["two_hop"] = not args.no_two_hop
    corpus = generate(BiosConfig.bioS(**kwargs) if args.pools == "bioS" else BiosConfig(**kwargs))
    corpus.save(args.out)
    s = corpus.summary()
    print(
        f"wrote {args.out}: {s['persons']} persons, {s['train_texts']} training texts "
        f"({s['train_tokens']} tokens), vocab {s['vocab_size']}, {s['bits_per_person']:.2f} "
        f"bits/person, longest eval bio {s['tokens_per_bio_max']} tokens, "
        f"{s['two_hop_queries']} two-hop queries"
    )
    return 0
