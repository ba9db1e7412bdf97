"""A word-level tokenizer for the synthetic biographies: one token per word or punctuation mark.

    tok = WordTokenizer.from_words(["Zorvik", "was", "born", "in", "."])
    ids = tok.encode("Zorvik was born in Qwerty.")   # "Qwerty" is unknown -> tok.unk_id
    tok.save("data/bios/tokenizer.json"); tok = WordTokenizer.load("data/bios/tokenizer.json")

Word-level because the generator knows every word it can write, so a fact's value is a short
known run of tokens. ``decode(encode(text)) == text`` for every generated text; ``encode`` never
emits the special tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from looped.errors import UserError

WORD_RE = re.compile(r"[A-Za-z0-9]+|[^\sA-Za-z0-9]")  # a run of letters/digits, or one symbol
NO_SPACE_BEFORE = frozenset(".,;:!?")  # decode glues these to the previous token
PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIALS = (PAD, EOS, UNK)  # ids 0, 1, 2
FORMAT = "looped-word-tokenizer"


def split_words(text: str) -> list[str]:
    """The word and symbol strings ``encode`` maps to ids, in order."""
    return WORD_RE.findall(text)


class WordTokenizer:
    """Words <-> ids through one list; ids 0, 1, 2 are <pad>, <eos>, <unk>."""

    pad_id, eos_id, unk_id = 0, 1, 2

    def __init__(self, vocab: list[str]) -> None:
        if tuple(vocab[:3]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with {SPECIALS}, got {vocab[:3]}")
        if len(set(vocab)) != len(vocab):
            raise ValueError("the vocabulary has duplicate entries")
        self.vocab = list(vocab)
        self.index = {word: i for i, word in enumerate(self.vocab)}

    @classmethod
    def from_words(cls, words: Iterable[str]) -> WordTokenizer:
        """Specials first, then the distinct words sorted, so the ids depend only on the set."""
        return cls([*SPECIALS, *sorted(set(words) - set(SPECIALS))])

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        return [self.index.get(word, self.unk_id) for word in split_words(text)]

    def decode(self, ids: Iterable[int]) -> str:
        parts: list[str] = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.vocab):
                raise ValueError(f"token id {i} is outside the vocabulary 0..{len(self.vocab) - 1}")
            word = self.vocab[i]
            if parts and word not in NO_SPACE_BEFORE:
                parts.append(" ")
            parts.append(word)
        return "".join(parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WordTokenizer) and self.vocab == other.vocab

    def __repr__(self) -> str:
        return f"WordTokenizer(vocab_size={self.vocab_size})"

    def save(self, path: str | Path) -> None:
        data = {"format": FORMAT, "version": 1, "vocab": self.vocab}
        Path(path).write_text(json.dumps(data, indent=0) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> WordTokenizer:
        path = Path(path)
        if not path.is_file():
            raise UserError(f"tokenizer {path} not found; write a corpus with `looped data bios`")
        data = json.loads(path.read_text())
        if data.get("format") != FORMAT:
            msg = f"{path} is not a looped word tokenizer; rewrite it with `looped data bios`"
            raise UserError(msg)
        return cls(data["vocab"])
