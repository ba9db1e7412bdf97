"""``looped data bios ...`` and ``looped data text ...``: write a corpus to disk."""

from __future__ import annotations

import importlib

KINDS = {
    "bios": "looped.commands.data_bios",  # synthetic biographies + tokenizer + recall queries
    "text": "looped.commands.data_text",  # a text corpus tokenized into memory-mapped shards
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in KINDS:
        print("usage: looped data {bios,text} [options]   (looped data bios --help)")
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    return int(importlib.import_module(KINDS[argv[0]]).main(argv[1:]) or 0)
