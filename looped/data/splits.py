"""Train / validation / test splits that do not leak: near-duplicate documents stay together.

    keys = near_duplicate_keys(docs)            # one key per document: its cluster's first member
    split = assign_splits(keys, val_frac=0.05, test_frac=0.05)   # "train" | "val" | "test" each

Split by file, a family of near-identical files (118 code-page tables under ``encodings/``) lands
on both sides and held-out NLL measures copying. So a whole cluster goes to one split, chosen by a
hash of its key: deterministic, order-free, no randomness to seed.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict

MIN_LINE = 20  # characters: shorter lines (``return x``, ``else:``) say nothing about a family
MAX_POSTING = 50  # a line in more documents than this is boilerplate, not a family signature
OVERLAP = 0.5  # shared fraction of the smaller document's distinctive lines that joins two
MIN_SHARED = 5  # and at least this many shared lines: two stubs sharing one line are no family


def near_duplicate_keys(docs: list[str]) -> list[int]:
    """Each document's cluster key, its cluster's first index: union-find over shared lines."""
    lines = [{s for line in d.splitlines() if len(s := line.strip()) >= MIN_LINE} for d in docs]
    postings: dict[str, list[int]] = defaultdict(list)
    for i, ls in enumerate(lines):
        for line in ls:
            postings[line].append(i)
    parent = list(range(len(docs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, ls in enumerate(lines):
        shared: Counter[int] = Counter()
        for line in ls:
            docs_with = postings[line]
            if len(docs_with) <= MAX_POSTING:
                shared.update(j for j in docs_with if j < i)
        for j, n in shared.items():
            if n >= max(MIN_SHARED, OVERLAP * min(len(ls), len(lines[j]))):
                a, b = root(i), root(j)
                parent[max(a, b)] = min(a, b)
    return [root(i) for i in range(len(docs))]


def split_of(key: str, val_frac: float, test_frac: float) -> str:
    """The split of a cluster, from a hash of its key: uniform in [0, 1) and stable."""
    u = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") / 2**64
    return "val" if u < val_frac else "test" if u < val_frac + test_frac else "train"


def assign_splits(
    keys: list[int], val_frac: float, test_frac: float, names: list[str] | None = None
) -> list[str]:
    """Each document's split, its cluster's; `names` (e.g. module paths) make it order-free."""
    return [split_of(names[k] if names else str(k), val_frac, test_frac) for k in keys]
