"""Text corpora: token shards round-trip to the documents, parallel = serial, the reader's windows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from looped.cli import main as cli_main
from looped.data import text
from looped.data.text import TokenShards, load_tokenizer, prepare_text, pydoc_named_documents
from looped.errors import UserError

FIXTURES = Path(__file__).parent / "fixtures"
TOK = f"hf:{FIXTURES / 'tokenizer.json'}"  # a 512-token byte-level BPE trained on pydoc
N_DOCS = 30


def stream(directory: Path, split: str) -> np.ndarray:
    data = TokenShards(directory, split)
    return data.window(0, data.n_tokens) if data.n_tokens else np.zeros(0, dtype=np.int64)


def find(ids: np.ndarray, window: np.ndarray) -> list[int]:
    """Every start at which `window` occurs in `ids`."""
    starts = np.flatnonzero(ids[: len(ids) - len(window) + 1] == window[0])
    return [int(s) for s in starts if np.array_equal(ids[s : s + len(window)], window)]


def split_docs(ids: np.ndarray, eos: int) -> list[np.ndarray]:
    """Documents of a stream (each ends with EOS)."""
    assert len(ids) == 0 or ids[-1] == eos
    cuts = np.flatnonzero(ids == eos)
    return [ids[a + 1 : b] for a, b in zip(np.r_[-1, cuts[:-1]], cuts)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pydoc")
    args = ["data", "text", "--out", str(out), "--tokenizer", TOK, "--max-docs", str(N_DOCS)]
    assert cli_main([*args, "--val-frac", "0.2", "--quiet"]) == 0
    return out


def test_shards_decode_back_to_the_documents(corpus: Path) -> None:
    meta = json.loads((corpus / "meta.json").read_text())
    assert (meta["vocab_size"], meta["eos_id"], meta["dtype"]) == (512, 0, "uint16")
    for split in ("train", "val"):
        for shard in meta["splits"][split]["shards"]:
            assert (corpus / shard["file"]).stat().st_size == 2 * shard["tokens"]
    tok = load_tokenizer(corpus)
    assert (tok.vocab_size, tok.eos_id) == (512, 0)
    train, val = (split_docs(stream(corpus, s), tok.eos_id) for s in ("train", "val"))
    assert (len(train), len(val)) == (
        meta["splits"]["train"]["docs"],
        meta["splits"]["val"]["docs"],
    )
    originals = [t for _, t in pydoc_named_documents()[:N_DOCS]]
    decoded_train = [tok.decode(d.tolist()) for d in train]
    decoded_val = [tok.decode(d.tolist()) for d in val]
    assert sorted(decoded_train + decoded_val) == sorted(originals)  # nothing lost, nothing twice
    assert decoded_train == [d for d in originals if d in decoded_train]  # document order kept
    # val holds val_frac of the tokens, to within one document
    n_val, n_all = (
        meta["splits"]["val"]["tokens"],
        sum(meta["splits"][s]["tokens"] for s in ("train", "val")),
    )
    longest = max(len(d) + 1 for d in train + val)
    assert len(val) > 0 and abs(n_val - 0.2 * n_all) <= longest


@pytest.mark.slow
def test_parallel_and_sharded_write_equals_serial(corpus: Path, tmp_path: Path) -> None:
    prepare_text(
        tmp_path,
        tokenizer=TOK,
        max_docs=N_DOCS,
        val_frac=0.2,
        num_proc=2,
        shard_tokens=1000,
        chunk_docs=7,
    )
    meta = json.loads((tmp_path / "meta.json").read_text())
    sizes = [s["tokens"] for s in meta["splits"]["train"]["shards"]]
    assert len(sizes) > 3 and all(n == 1000 for n in sizes[:-1]) and 0 < sizes[-1] <= 1000
    for split in ("train", "val"):
        np.testing.assert_array_equal(stream(tmp_path, split), stream(corpus, split))


def test_a_chunk_tokenizes_to_one_eos_ended_array_per_non_empty_document() -> None:
    tok = text.make_tokenizer(TOK)
    ids = text.tokenize_chunk(["", "two words", "", "x"], tok)
    assert [a.tolist() for a in ids] == [
        [*tok.encode_batch([d])[0], tok.eos_id] for d in ("two words", "x")
    ]
    assert text.tokenize_chunk([], tok) == text.tokenize_chunk(["", ""], tok) == []


def test_local_jsonl_parquet_and_txt(tmp_path: Path) -> None:
    docs = ["First document.\nWith two lines.", "Second, ünïcode: ∑ ≠ 😀", "Third."]
    rows = [
        {"id": 0, "body": docs[0]},
        {"id": 1, "body": ""},
        {"id": 2, "body": docs[1]},
        {"id": 3, "body": docs[2]},
    ]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pq.write_table(pa.table({"body": [docs[0], None, docs[1], docs[2]]}), tmp_path / "b.parquet")
    (tmp_path / "txt").mkdir()
    for i, d in enumerate(docs):
        (tmp_path / "txt" / f"{i}.txt").write_text(d)
    for source, field in [("a.jsonl", "body"), ("b.parquet", "body"), ("txt", "text")]:
        out = tmp_path / f"out-{source}"
        prepare_text(
            out, dataset=str(tmp_path / source), text_field=field, tokenizer=TOK, val_frac=0.0
        )
        tok = load_tokenizer(out)
        got = [tok.decode(d.tolist()) for d in split_docs(stream(out, "train"), tok.eos_id)]
        assert got == docs, source  # empty and null documents are skipped, not written as bare EOS
    with pytest.raises(UserError, match="no column 'text'.*id, body.*--text-field"):
        prepare_text(tmp_path / "bad", dataset=str(tmp_path / "a.jsonl"), tokenizer=TOK)


def test_bpe_is_trained_and_saved_with_the_corpus(tmp_path: Path) -> None:
    meta = prepare_text(tmp_path, tokenizer="bpe:300", max_docs=5, val_frac=0.0)
    assert (meta["tokenizer"], meta["vocab_size"], meta["eos_id"]) == ("bpe:300", 300, 0)
    tok = load_tokenizer(tmp_path)  # offline, from DIR/tokenizer.json
    doc = pydoc_named_documents()[0][1]
    assert tok.decode(tok.encode(doc)) == doc
    assert stream(tmp_path, "train")[: len(tok.encode(doc)) + 1].tolist() == tok.encode(doc) + [0]


def test_vocab_over_65536_is_stored_as_uint32(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class BigVocab(text.TextTokenizer):
        spec, vocab_size, eos_id = "test:big", 70_000, 69_999

        def encode_batch(self, texts: list[str]) -> list[list[int]]:
            return [[65_000 + ord(c) for c in t] for t in texts]

    monkeypatch.setattr(text, "make_tokenizer", lambda spec, texts=None: BigVocab())
    (tmp_path / "d.jsonl").write_text('{"text": "abc"}\n')
    meta = prepare_text(
        tmp_path / "out", dataset=str(tmp_path / "d.jsonl"), tokenizer="test:big", val_frac=0.0
    )
    assert meta["dtype"] == "uint32"
    assert stream(tmp_path / "out", "train").tolist() == [65_097, 65_098, 65_099, 69_999]
    assert text.token_dtype(65_536) == np.uint16 and text.token_dtype(65_537) == np.uint32


def test_sample_batch_windows_are_contiguous_and_replayable(corpus: Path, tmp_path: Path) -> None:
    # small shards, so that windows cross shard boundaries
    prepare_text(tmp_path, tokenizer=TOK, max_docs=N_DOCS, val_frac=0.2, shard_tokens=500)
    data = TokenShards(tmp_path)
    assert (data.vocab_size, data.n_tokens) == (512, TokenShards(corpus).n_tokens)
    full = stream(corpus, "train")
    np.testing.assert_array_equal(data.window(450, 1100), full[450:1550])  # spans three shards
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    for _ in range(3):
        x, y = data.sample_batch(8, 32, g1)
        x2, y2 = data.sample_batch(8, 32, g2)
        assert x.dtype == y.dtype == torch.int64 and x.shape == y.shape == (8, 32)
        assert torch.equal(x, x2) and torch.equal(y, y2)
        assert torch.equal(x[:, 1:], y[:, :-1])
        for row in torch.cat([x, y[:, -1:]], dim=1).numpy():
            assert find(full, row)  # a real window of the stream
    x3, _ = data.sample_batch(8, 32, torch.Generator().manual_seed(4))
    assert not torch.equal(x3, x)


def test_eval_batches_are_fixed_and_spread_over_val(corpus: Path) -> None:
    data = TokenShards(corpus)  # the train reader still evaluates on val
    val = stream(corpus, "val")
    batches = list(data.iter_eval_batches(4, 16, 2))
    assert len(batches) == 2 and all(x.shape == (4, 16) for x, _ in batches)
    assert all(
        torch.equal(a, b) for (a, _), (b, _) in zip(batches, data.iter_eval_batches(4, 16, 2))
    )
    rows = torch.cat([torch.cat([x, y[:, -1:]], 1) for x, y in batches]).numpy()
    np.testing.assert_array_equal(rows[0], val[:17])  # first window starts the split...
    np.testing.assert_array_equal(rows[-1], val[-17:])  # ...the last one ends it
    starts = [find(val, r)[0] for r in rows]
    assert all(b - a >= 17 for a, b in zip(starts, starts[1:]))  # disjoint when val is long enough
    with pytest.warns(UserWarning, match="overlap"):
        list(data.iter_eval_batches(len(val) // 17 + 1, 16, 1))


def test_user_errors(corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    with pytest.raises(UserError, match="already holds a token corpus; pass --overwrite"):
        prepare_text(corpus, tokenizer=TOK)
    with pytest.raises(UserError, match=r"has no meta.json; write a token corpus there"):
        TokenShards(tmp_path)
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # as if the `text` extra were missing
    with pytest.raises(
        UserError, match=r"needs tiktoken; install it with `pip install 'looped\[text\]'`"
    ):
        prepare_text(tmp_path / "g", tokenizer="gpt2")
    assert cli_main(["data", "text", "--out", str(tmp_path / "x"), "--tokenizer", "wordpiece"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown tokenizer spec 'wordpiece'" in err
    with pytest.raises(UserError, match="does not exist"):
        prepare_text(tmp_path / "y", dataset="./missing.jsonl", tokenizer=TOK)


def test_overwrite_replaces_the_old_shards(tmp_path: Path) -> None:
    prepare_text(tmp_path, tokenizer=TOK, max_docs=N_DOCS, shard_tokens=1000, val_frac=0.0)
    n_old = len(list(tmp_path.glob("train_*.bin")))
    (tmp_path / "test_00000.bin").write_bytes(b"\0\0")  # as a corpus with a test split holds
    prepare_text(tmp_path, tokenizer=TOK, max_docs=2, val_frac=0.0, overwrite=True)
    assert n_old > 1 and sorted(p.name for p in tmp_path.glob("*.bin")) == ["train_00000.bin"]


def test_stdlib_corpus_is_the_standard_library_source_without_tests():
    """The offline text-track corpus: every stdlib module's source once, no test suites, in a
    fixed order, and big enough (millions of characters) that a demo run sees it about once."""
    from looped.data.text import open_documents, stdlib_named_documents

    docs = [text for _, text in stdlib_named_documents()]
    assert sum(map(len, docs)) > 5_000_000
    import inspect
    import json as json_module

    assert inspect.getsource(json_module) in docs  # a real module's source, verbatim
    test_support = pytest.importorskip("test.support")  # CPython's own test suite: left out
    assert inspect.getsource(test_support) not in docs
    first = next(iter(open_documents("stdlib")))["text"]
    assert first == docs[0]
