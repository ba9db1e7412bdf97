"""Write a file or a directory so that it appears whole or not at all.

    with atomic_path(run / "summary.json") as tmp:
        tmp.write_text(text)

The caller writes a hidden sibling, which is fsync'ed and renamed over the final name; an
existing directory is swapped out through ``.old-NAME`` (`list_checkpoints` repairs a crash).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(final: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `final` to write (a file or a directory); leaving the block
    replaces `final` with it whole, an error removes it."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{final.name}-{uuid.uuid4().hex[:8]}"
    try:
        yield tmp
        for path in (*tmp.rglob("*"), tmp):  # a directory's files first (a file has none)
            _fsync(path)
        if tmp.is_dir() and final.is_dir():
            old = final.parent / f".old-{final.name}"
            shutil.rmtree(old, ignore_errors=True)
            final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
        _fsync(final.parent)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """`Path.write_text`, atomically (see `atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
