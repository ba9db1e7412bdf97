"""`looped data text`: tokenize a text corpus into memory-mapped token shards with meta.json.

    looped data text --out data/pydoc --tokenizer bpe:4096          # offline: CPython's own prose
    looped data text --dataset stdlib --out data/stdlib --tokenizer bpe:4096   # offline, ~3M tokens
    looped data text --dataset HuggingFaceFW/fineweb-edu --subset sample-10BT \\
        --tokenizer gpt2 --out data/fineweb --max-docs 2000000 --num-proc 16
    looped data text --dataset my_corpus/ --text-field body --tokenizer hf:tokenizer.json --out data/mine
"""

from __future__ import annotations

from looped.commands.common import Parser, described
from looped.data.text import prepare_text


def _parser() -> Parser:
    p = described("looped data text", __doc__)
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


def main(argv: list[str] | None = None) -> int:
    a = vars(_parser().parse_args(argv))
    out, quiet = a.pop("out"), a.pop("quiet")
    meta = prepare_text(out, **a, progress=not quiet)
    s = meta["splits"]
    print(
        f"wrote {out}: {s['train']['tokens']:,} train tokens ({s['train']['docs']:,} docs), "
        f"{s['val']['tokens']:,} val tokens ({s['val']['docs']:,} docs); tokenizer {meta['tokenizer']} "
        f"(vocab {meta['vocab_size']:,}, eos {meta['eos_id']}, {meta['dtype']})"
    )
    return 0
