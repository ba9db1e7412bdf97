"""``looped data bios ...`` and ``looped data text ...``: write a corpus to disk."""

from __future__ import annotations

from looped.commands.common import Parser, described

BIOS = """`looped data bios`: write a synthetic-biographies corpus, its tokenizer and recall queries.

looped data bios --persons 100 --seed 0 --out data/bios          # demo-sized pools
looped data bios --persons 10000 --pools bioS --out data/bioS     # the capacity studies' pools
"""
TEXT = """`looped data text`: tokenize a text corpus into memory-mapped token shards with meta.json.

    looped data text --out data/pydoc --tokenizer bpe:4096          # offline: CPython's own prose
    looped data text --dataset stdlib --out data/stdlib --tokenizer bpe:4096   # offline, ~3M tokens
    looped data text --dataset HuggingFaceFW/fineweb-edu --subset sample-10BT \\
        --tokenizer gpt2 --out data/fineweb --max-docs 2000000 --num-proc 16
    looped data text --dataset my_corpus/ --text-field body --tokenizer hf:tokenizer.json --out data/mine
"""


def bios_parser() -> Parser:
    p = described("looped data bios", BIOS, allow_abbrev=False)
    p.add_argument("--persons", type=int, default=100, help="number of persons (default 100)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.add_argument("--bios-per-person", type=int, default=4, help="training biographies per person")
    p.add_argument("--no-two-hop", action="store_true", help="leave out the two-hop facts")
    p.add_argument("--pools", choices=("demo", "bioS"), default="demo", help="pool sizes")
    p.add_argument("--out", default="data/bios", help="output folder (default data/bios)")
    return p


def bios(argv: list[str]) -> int:
    """A synthetic-biographies corpus, its tokenizer and recall queries."""
    from looped.data.bios import BiosConfig, generate  # only this kind needs the bios world

    args = bios_parser().parse_args(argv)
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


def text_parser() -> Parser:
    p = described("looped data text", TEXT)
    add = p.add_argument
    offline = "pydoc (CPython's docs, offline; default) or stdlib (its source, ~3M tokens, offline)"
    add("--dataset", default="pydoc", help=f"hub name, local file/dir, {offline}")
    add("--subset", default=None, help="hub config name, e.g. sample-10BT")
    add("--split", default="train", help="hub split to read (default train)")
    add("--text-field", default="text", help="column holding the text (default text)")
    tokenizers = "gpt2 | tiktoken:NAME | hf:NAME_OR_PATH | bpe:VOCAB (default bpe:4096)"
    add("--tokenizer", default="bpe:4096", help=tokenizers)
    add("--out", required=True, help="output directory")
    add("--num-proc", type=int, default=1, help="tokenizer processes (Dataset.map num_proc)")
    add("--max-docs", type=int, default=None, help="stop after this many documents")
    add("--val-frac", type=float, default=0.05, help="share of tokens held out for val (0.05)")
    test = "share of documents held out for test; > 0 also fits a bpe tokenizer on train alone"
    test += " and splits by a hash of each document (default 0: train and val only)"
    add("--test-frac", type=float, default=0.0, help=test)
    add("--shard-tokens", type=int, default=2**27, help="tokens per shard file (default 2^27)")
    add("--chunk-docs", type=int, default=20_000, help="documents tokenized per map call")
    add("--bpe-docs", type=int, default=100_000, help="bpe: train on the first N documents")
    add("--overwrite", action="store_true", help="replace an existing corpus in --out")
    add("--quiet", action="store_true", help="no progress bar")
    return p


def text(argv: list[str]) -> int:
    """A text corpus tokenized into memory-mapped shards (tokenizers, torch: only this kind)."""
    from looped.data.text import prepare_text  # tokenizers and torch: only this kind

    a = vars(text_parser().parse_args(argv))
    out, quiet = a.pop("out"), a.pop("quiet")
    meta = prepare_text(out, **a, progress=not quiet)
    s = meta["splits"]
    print(
        f"wrote {out}: {s['train']['tokens']:,} train tokens ({s['train']['docs']:,} docs), "
        f"{s['val']['tokens']:,} val tokens ({s['val']['docs']:,} docs); tokenizer {meta['tokenizer']} "
        f"(vocab {meta['vocab_size']:,}, eos {meta['eos_id']}, {meta['dtype']})"
    )
    return 0


KINDS = {"bios": bios, "text": text}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in KINDS:
        print("usage: looped data {bios,text} [options]   (looped data bios --help)")
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    return KINDS[argv[0]](argv[1:])
