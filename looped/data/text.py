"""Text corpora -> memory-mapped token shards, and the reader the trainer samples from.

Sources stream through ``datasets`` (hub names, local .txt/.jsonl/.json/.parquet, saved
datasets); ``pydoc`` and ``stdlib`` are built in and offline. On disk: ``{split}_00000.bin ...``
(EOS after every document), ``tokenizer.json`` for ``bpe:``/``hf:`` tokenizers, and
``meta.json``, written last: a directory without it is unfinished.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import sys
import sysconfig
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from pydoc_data.topics import topics
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from tqdm import tqdm

from looped.data.package_corpus import MANIFESTS, manifest_digest, package_documents
from looped.data.splits import split_of
from looped.errors import UserError, first_line
from looped.runtime.atomic import write_text_atomic

EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|eos|>")
FILE_BUILDERS = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}
META = "meta.json"
TOKENIZER_FILE = "tokenizer.json"


class TextTokenizer:
    """Ids in, text out, one EOS id; subclasses define `encode_batch` and `decode`."""

    spec: str
    vocab_size: int
    eos_id: int

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]


class TiktokenTokenizer(TextTokenizer):
    """OpenAI's BPEs through tiktoken (``gpt2`` = GPT-2's 50257-token vocabulary)."""

    def __init__(self, name: str = "gpt2") -> None:
        try:
            import tiktoken  # an optional extra (text)
        except ImportError:
            raise UserError(
                f"tokenizer {name!r} needs tiktoken; install it with `pip install 'looped[text]'` "
                "or use --tokenizer bpe:VOCAB"
            ) from None
        self.spec = name if name == "gpt2" else f"tiktoken:{name}"
        self._enc = tiktoken.get_encoding(name)
        self.vocab_size, self.eos_id = self._enc.n_vocab, self._enc.eot_token

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        # encode_ordinary: "<|endoftext|>" inside a document is text, never a separator
        return self._enc.encode_ordinary_batch(texts, num_threads=1)

    def decode(self, ids: list[int]) -> str:
        return self._enc.decode(list(ids))


class HFTokenizer(TextTokenizer):
    """A Hugging Face ``tokenizers`` tokenizer (tokenizer.json); special tokens are never added."""

    def __init__(self, tokenizer: Any, spec: str, eos_id: int | None = None) -> None:
        self._tok, self.spec = tokenizer, spec
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        if eos_id is None:
            ids = (tokenizer.token_to_id(t) for t in EOS_CANDIDATES)
            eos_id = next((i for i in ids if i is not None), None)
        if eos_id is None:
            raise UserError(
                f"tokenizer {spec!r} has no end-of-text token ({', '.join(EOS_CANDIDATES)}); "
                "use one that has, or --tokenizer bpe:VOCAB"
            )
        self.eos_id = int(eos_id)

    @classmethod
    def from_spec(cls, name: str) -> HFTokenizer:
        path = Path(name) / TOKENIZER_FILE if Path(name).is_dir() else Path(name)
        if path.suffix == ".json" or path.exists():
            if not path.is_file():
                raise UserError(
                    f"tokenizer file {path} not found; pass a tokenizer.json or its directory"
                )
            return cls(Tokenizer.from_file(str(path)), f"hf:{name}")
        try:
            return cls(Tokenizer.from_pretrained(name), f"hf:{name}")
        except Exception as err:  # the hub raises many types; one line for the user
            raise UserError(
                f"could not load tokenizer {name!r} from the hub ({first_line(err)}); "
                "pass a local tokenizer.json with hf:PATH"
            ) from None

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def save(self, path: str | Path) -> None:
        self._tok.save(str(path))


def train_bpe(spec: str, texts: Iterator[str]) -> HFTokenizer:
    """A byte-level BPE (any text encodes); ``<|endoftext|>`` = id 0 separates documents."""
    try:
        vocab_size = int(spec.split(":", 1)[1])
    except ValueError:
        msg = f"tokenizer spec {spec!r}: the vocabulary must be an integer, e.g. bpe:4096"
        raise UserError(msg) from None
    if vocab_size < 257:
        raise UserError(
            f"bpe:{vocab_size} is too small; byte-level BPE needs a vocabulary of at least 257"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet, special = pre_tokenizers.ByteLevel.alphabet(), ["<|endoftext|>"]
    kw = {"initial_alphabet": alphabet, "special_tokens": special, "show_progress": False}
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, **kw))
    return HFTokenizer(tok, f"bpe:{vocab_size}", eos_id=tok.token_to_id("<|endoftext|>"))


def make_tokenizer(spec: str, texts: Callable[[], Iterator[str]] | None = None) -> TextTokenizer:
    """A tokenizer from its spec: ``gpt2``, ``tiktoken:NAME``, ``hf:NAME_OR_PATH``, or
    ``bpe:VOCAB`` fit on `texts()` (read only then)."""
    if spec == "gpt2" or spec.startswith("tiktoken:"):
        return TiktokenTokenizer(spec.removeprefix("tiktoken:"))
    if spec.startswith("hf:"):
        return HFTokenizer.from_spec(spec.split(":", 1)[1])
    if spec.startswith("bpe:") and texts is not None:
        return train_bpe(spec, texts())
    raise UserError(
        f"unknown tokenizer spec {spec!r}; use gpt2, tiktoken:NAME, hf:NAME_OR_PATH or bpe:VOCAB"
    )


def load_tokenizer(directory: str | Path) -> TextTokenizer:
    """The tokenizer a token directory was written with (offline for bpe:/hf: specs)."""
    meta = read_meta(directory)
    if not meta["tokenizer"].startswith(("bpe:", "hf:")):  # tiktoken's: nothing saved
        return make_tokenizer(meta["tokenizer"])
    tok = Tokenizer.from_file(str(Path(directory) / TOKENIZER_FILE))
    return HFTokenizer(tok, meta["tokenizer"], eos_id=meta["eos_id"])


def pydoc_named_documents() -> list[tuple[str, str]]:
    """(topic name, text) of every pydoc topic, sorted by name."""
    return [(name, topics[name]) for name in sorted(topics)]


def stdlib_named_documents() -> list[tuple[str, str]]:
    """(path, source) of every stdlib module but tests, IDLE, site-packages; sorted by path."""
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"site-packages", "dist-packages", "test", "tests", "idlelib"}
    files = sorted(p for p in root.rglob("*.py") if not skip & set(p.relative_to(root).parts))
    return [
        (f.relative_to(root).as_posix(), f.read_text(encoding="utf-8", errors="replace"))
        for f in files
    ]


# the built-in corpora; torch's sources are the map's one-pass corpus
NAMED_CORPORA = {
    "pydoc": pydoc_named_documents,
    "stdlib": stdlib_named_documents,
    "torch-2.13.0": functools.partial(package_documents, "torch-2.13.0"),
}


def local_data_files(path: Path) -> tuple[str, list[str]]:
    """The `datasets` builder and files of a local file or folder (compressed ones included)."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    kinds = {}
    for f in files:
        packed = f.suffix in (".gz", ".zst", ".bz2", ".xz") and len(f.suffixes) > 1
        suffix = f.suffixes[-2] if packed else f.suffix
        if suffix in FILE_BUILDERS:
            kinds.setdefault(FILE_BUILDERS[suffix], []).append(str(f))
    if len(kinds) != 1:
        raise UserError(
            f"{path}: need files of one kind (.txt, .jsonl/.json or .parquet), found "
            f"{', '.join(kinds) or 'none'}; "
            "point --dataset at one kind of file"
        )
    return next(iter(kinds.items()))


def open_documents(
    dataset: str = "pydoc",
    subset: str | None = None,
    split: str = "train",
    text_field: str = "text",
) -> Any:
    """A lazy ``datasets.IterableDataset``; a .txt file is one document (one per line: .jsonl)."""
    import datasets  # ~2 s to import: only reading and writing corpora need it

    if dataset in NAMED_CORPORA:
        docs = [text for _, text in NAMED_CORPORA[dataset]()]
        return datasets.Dataset.from_dict({text_field: docs}).to_iterable_dataset()
    path = Path(dataset)
    if path.exists():
        if all((path / f).exists() for f in ("dataset_info.json", "state.json")):
            return datasets.load_from_disk(str(path)).to_iterable_dataset()
        builder, files = local_data_files(path)
        kw = {"sample_by": "document"} if builder == "text" else {}
        return datasets.load_dataset(builder, data_files=files, split="train", streaming=True, **kw)
    if dataset.startswith((".", "/", "~")) or dataset.endswith(tuple(FILE_BUILDERS)):
        raise UserError(
            f"dataset path {dataset} does not exist; pass an existing file or directory"
        )
    try:
        return datasets.load_dataset(dataset, subset, split=split, streaming=True)
    except Exception as err:  # the hub raises many types; one line for the user
        raise UserError(
            f"could not open dataset {dataset!r} (subset={subset}, split={split}): "
            f"{first_line(err)}; check the name, --subset and --split, or pass a local path"
        ) from None


def _tokenize_batch(batch: dict[str, list], tokenizer: TextTokenizer) -> dict:
    texts = [t for t in batch["text"] if t]  # None or empty documents would be bare EOS tokens
    return {"ids": [ids + [tokenizer.eos_id] for ids in tokenizer.encode_batch(texts)]}


def tokenize_chunk(
    texts: list[str], tokenizer: TextTokenizer, num_proc: int = 1
) -> list[np.ndarray]:
    """Token ids of each non-empty document, EOS appended: in this process (the Rust tokenizer
    uses every core) or, with `num_proc` > 1, through a ``Dataset.map`` over forked workers."""
    if num_proc <= 1 or len(texts) <= 1:  # Arrow's round trip would add a third to the time
        ids = _tokenize_batch({"text": texts}, tokenizer)["ids"]
        if not ids:
            return []
        ends = np.cumsum([len(i) for i in ids])
        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(ends[-1]))
        return np.split(flat, ends[:-1])
    import datasets  # ~2 s to import: only writing corpora needs it

    ds = datasets.Dataset.from_dict({"text": texts})
    fn = functools.partial(_tokenize_batch, tokenizer=tokenizer)
    kw = {"batch_size": max(1, min(1000, -(-len(texts) // num_proc)))}
    kw["num_proc"] = num_proc  # > 1 here: one process took the path above
    kw["new_fingerprint"] = f"looped-tokenize-{len(texts)}"  # skip hashing the tokenizer
    bars_were_on = not datasets.utils.are_progress_bars_disabled()
    datasets.utils.disable_progress_bars()  # one bar per chunk is noise; prepare_text has its own
    try:
        out = ds.map(fn, batched=True, remove_columns=["text"], **kw)
    finally:
        if bars_were_on:
            datasets.utils.enable_progress_bars()
    col = out.data.column("ids").combine_chunks()
    values, offsets = col.values.to_numpy(zero_copy_only=False), col.offsets.to_numpy()
    return [values[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (vocab <= 65536), else uint32."""
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


class ShardWriter:
    """Ids into ``{split}_00000.bin, ...``; a shard is renamed to its name once complete."""

    def __init__(self, out: Path, split: str, dtype: np.dtype, shard_tokens: int) -> None:
        self.out, self.split, self.dtype, self.shard_tokens = out, split, dtype, shard_tokens
        self.shards: list[dict[str, Any]] = []
        self.docs = self._n = 0
        self._file = None

    def _close(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            name = self.shards[-1]["file"]
            os.replace(self.out / (name + ".tmp"), self.out / name)
            self.shards[-1]["tokens"], self._file = self._n, None

    def write(self, ids: np.ndarray, docs: int = 0) -> None:
        ids, self.docs = np.asarray(ids).astype(self.dtype, copy=False), self.docs + docs
        while len(ids):
            if self._file is None:
                name = f"{self.split}_{len(self.shards):05d}.bin"
                self.shards.append({"file": name, "tokens": 0})
                self._file, self._n = open(self.out / (name + ".tmp"), "wb"), 0
            take = min(len(ids), self.shard_tokens - self._n)
            ids[:take].tofile(self._file)
            self._n, ids = self._n + take, ids[take:]
            if self._n == self.shard_tokens:
                self._close()

    def finish(self) -> dict[str, Any]:
        self._close()
        tokens = sum(s["tokens"] for s in self.shards)
        return {"tokens": tokens, "docs": self.docs, "shards": self.shards}


def prepare_out(out: Path, overwrite: bool) -> None:
    if (out / META).exists():
        if not overwrite:
            raise UserError(
                f"{out} already holds a token corpus; pass --overwrite or choose another --out"
            )
        shards = ("train_*.bin", "val_*.bin", "test_*.bin")  # every split a corpus can hold
        for pattern in (*shards, "*.tmp", ".tmp-*", META, TOKENIZER_FILE):
            for p in out.glob(pattern):
                p.unlink()
    out.mkdir(parents=True, exist_ok=True)


def prepare_text(
    out: str | Path,
    dataset: str = "pydoc",
    tokenizer: str = "bpe:4096",
    subset: str | None = None,
    split: str = "train",
    text_field: str = "text",
    num_proc: int = 1,
    max_docs: int | None = None,
    val_frac: float = 0.05,
    shard_tokens: int = 2**27,
    chunk_docs: int = 20_000,
    bpe_docs: int = 100_000,
    overwrite: bool = False,
    progress: bool = False,
    test_frac: float = 0.0,
) -> dict[str, Any]:
    """Stream a corpus into ``out``, return meta.json; test_frac > 0 splits by a text hash."""
    if not 0.0 <= val_frac < 1.0 or not 0.0 <= test_frac < 1.0 - val_frac:
        raise UserError(f"--val-frac {val_frac}, --test-frac {test_frac}: each in [0, 1), sum < 1")
    if num_proc < 1 or shard_tokens < 1 or chunk_docs < 1:
        raise UserError("--num-proc, --shard-tokens and --chunk-docs must be positive")
    out = Path(out)
    prepare_out(out, overwrite)

    def documents(limit: int | None = max_docs) -> Iterator[list[str]]:  # opens the stream anew
        ds = open_documents(dataset, subset, split, text_field)
        for batch in (ds if limit is None else ds.take(limit)).iter(batch_size=chunk_docs):
            if text_field not in batch:
                raise UserError(
                    f"dataset {dataset!r} has no column {text_field!r} (columns: {', '.join(batch)}); "
                    "pass --text-field"
                )
            yield batch[text_field]

    def hashed(text: str, n_tokens: int = 0) -> str:
        return split_of(text, val_frac, test_frac) if test_frac > 0 else "train"

    def train_texts() -> Iterator[str]:  # read only when a bpe tokenizer is fit on them
        n_bpe = bpe_docs if max_docs is None else min(bpe_docs, max_docs)
        return (t for c in documents(n_bpe) for t in c if t and hashed(t) == "train")

    assign = hashed if test_frac > 0 else count_rule(val_frac)
    tok = make_tokenizer(tokenizer, train_texts)
    names = ("train", "val", "test") if test_frac > 0 else ("train", "val")
    splits = write_splits(out, documents(), tok, names, assign, shard_tokens, num_proc, progress)
    _check_splits(splits, out, dataset, text_field, test_frac)
    kept = {"dataset": dataset, "subset": subset, "split": split, "text_field": text_field}
    fracs = {"max_docs": max_docs, "val_frac": val_frac, "test_frac": test_frac}
    return write_meta(out, tok, splits, **kept, **fracs)


def _check_splits(splits: dict, out: Path, dataset: str, text_field: str, test_frac: float) -> None:
    """Refuse a corpus no run could use: no training text, or an empty held-out split."""
    if splits["train"]["tokens"] == 0:
        raise UserError(
            f"dataset {dataset!r} gave no text in column {text_field!r}; check --text-field and --split"
        )
    empty = [name for name, w in splits.items() if w["tokens"] == 0 and name != "train"]
    if test_frac > 0 and empty:
        raise UserError(
            f"the {' and '.join(empty)} split of {out} got no documents ({sum(w['docs'] for w in splits.values())} "
            "in all); use more documents or larger --val-frac / --test-frac"
        )


def write_meta(out: Path, tok: TextTokenizer, splits: dict, **fields: Any) -> dict[str, Any]:
    """meta.json (after tokenizer.json), written last and atomically: a directory holding it
    holds a whole corpus."""
    meta = {"format": 1, **fields, "tokenizer": tok.spec, "vocab_size": tok.vocab_size}
    meta |= {
        "eos_id": tok.eos_id,
        "dtype": token_dtype(tok.vocab_size).name,
        "splits": splits,
    }
    # the built-in corpora follow the interpreter that read them
    meta["python"] = sys.version.split()[0] if fields["dataset"] in NAMED_CORPORA else None
    if (MANIFESTS / f"{fields['dataset']}.tsv").is_file():  # a pinned package's sources
        meta["manifest"] = manifest_digest(fields["dataset"])
    if isinstance(tok, HFTokenizer):  # tiktoken's need no file: load_tokenizer names them
        tok.save(out / TOKENIZER_FILE)
    write_text_atomic(out / META, json.dumps(meta, indent=2) + "\n")
    return meta


def count_rule(val_frac: float) -> Callable[[str, int], str]:
    """A document goes to val while val holds < `val_frac` of the tokens seen: no second pass."""
    seen = n_val = 0

    def assign(text: str, n_tokens: int) -> str:
        nonlocal seen, n_val
        name = "val" if n_val < val_frac * seen else "train"
        n_val += n_tokens if name == "val" else 0
        seen += n_tokens
        return name

    return assign


def write_splits(
    out: Path,
    chunks: Iterator[list[str]],
    tok: TextTokenizer,
    names: Iterable[str],
    assign: Callable[[str, int], str],
    shard_tokens: int,
    num_proc: int = 1,
    progress: bool = False,
) -> dict[str, dict[str, Any]]:
    """Tokenize each chunk, append each document to the split `assign(text, n_tokens)` names."""
    dtype = token_dtype(tok.vocab_size)
    writers = {name: ShardWriter(out, name, dtype, shard_tokens) for name in names}
    if num_proc > 1:  # forked workers cannot use the Rust thread pool the parent started
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    bar = tqdm(unit=" docs", desc="tokenizing", file=sys.stderr, disable=not progress)
    for chunk in chunks:
        parts: dict[str, list[np.ndarray]] = {name: [] for name in writers}
        texts = [t for t in chunk if t]  # tokenize_chunk drops the empty ones too
        for text, ids in zip(texts, tokenize_chunk(texts, tok, num_proc)):
            parts[assign(text, len(ids))].append(ids)
        for split_name, docs in parts.items():
            if docs:
                writers[split_name].write(np.concatenate(docs), len(docs))
        bar.update(len(chunk))
    bar.close()
    return {s: w.finish() for s, w in writers.items()}


def read_meta(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / META
    if not path.is_file():
        raise UserError(
            f"{directory} has no {META}; write a token corpus there with `looped data text --out {directory}`"
        )
    return json.loads(path.read_text())


class TokenShards:
    """One split of a token directory as one memory-mapped stream; windows span documents."""

    def __init__(self, directory: str | Path, split: str = "train") -> None:
        self.directory, self.split, self.meta = Path(directory), split, read_meta(directory)
        if split not in self.meta["splits"]:
            raise UserError(
                f"split {split!r} not in {directory}; choose one of {', '.join(self.meta['splits'])}"
            )
        self.vocab_size: int = self.meta["vocab_size"]
        self.eos_id, self.dtype = self.meta["eos_id"], np.dtype(self.meta["dtype"])
        self.shards = [
            np.memmap(self.directory / s["file"], dtype=self.dtype, mode="r", shape=(s["tokens"],))
            for s in self.meta["splits"][split]["shards"]
            if s["tokens"] > 0
        ]
        self._ends = np.cumsum([len(s) for s in self.shards], dtype=np.int64)
        self.n_tokens = int(self._ends[-1]) if len(self.shards) else 0

    def __len__(self) -> int:
        return self.n_tokens

    def window(self, start: int, length: int) -> np.ndarray:
        """Tokens [start, start + length) of the split's stream, across shard boundaries."""
        parts, pos, end = [], start, start + length
        i = int(np.searchsorted(self._ends, pos, side="right"))
        while pos < end:
            base = int(self._ends[i - 1]) if i else 0
            take = min(end, int(self._ends[i])) - pos
            parts.append(self.shards[i][pos - base : pos - base + take])
            pos += take
            i += 1
        return np.concatenate(parts) if len(parts) > 1 else np.asarray(parts[0])

    def _need(self, seq_len: int) -> None:
        if self.n_tokens < seq_len + 1:
            raise UserError(
                f"the {self.split} split of {self.directory} has {self.n_tokens} tokens, fewer than "
                f"seq_len + 1 = {seq_len + 1}; use a shorter seq_len or a bigger corpus/--val-frac"
            )

    def _batch(self, starts: list[int], seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        w = np.stack([self.window(s, seq_len + 1) for s in starts]).astype(np.int64)
        return torch.from_numpy(w[:, :-1]), torch.from_numpy(w[:, 1:])

    def sample_batch(
        self, batch_size: int, seq_len: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Random windows (x, y = x shifted by one), from ``generator`` alone: a state replays."""
        self._need(seq_len)
        starts = torch.randint(self.n_tokens - seq_len, (batch_size,), generator=generator)
        return self._batch(starts.tolist(), seq_len)

    def iter_eval_batches(
        self, batch_size: int, seq_len: int, n_batches: int, split: str = "val"
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The same batches on every call, spread evenly over ``split`` (disjoint if it is long)."""
        src = self if split == self.split else TokenShards(self.directory, split)
        src._need(seq_len)
        n_windows, last = n_batches * batch_size, src.n_tokens - seq_len - 1
        if n_windows * (seq_len + 1) > src.n_tokens:
            warnings.warn(
                f"{src.split} split has {src.n_tokens} tokens, fewer than {n_windows} windows of "
                f"{seq_len + 1}; evaluation windows overlap (raise --val-frac for a better estimate)",
                stacklevel=2,
            )
        starts = [i * last // max(1, n_windows - 1) for i in range(n_windows)]
        for b in range(n_batches):
            yield src._batch(starts[b * batch_size : (b + 1) * batch_size], seq_len)
