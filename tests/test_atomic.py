"""The atomic-write helper: a file or directory appears whole or not at all, and a failure while
writing leaves the previous version untouched with no temporary left behind."""

from __future__ import annotations

import pytest

from looped.runtime.atomic import atomic_path, write_text_atomic


def test_file_replaced_whole_and_failure_keeps_the_old_one(tmp_path):
    target = tmp_path / "sub" / "summary.json"
    write_text_atomic(target, "one")
    write_text_atomic(target, "two")
    assert target.read_text() == "two"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash mid-write")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["summary.json"]


def test_directory_replaced_whole(tmp_path):
    target = tmp_path / "corpus"
    for version in ("old", "new"):
        with atomic_path(target) as tmp:
            tmp.mkdir()
            (tmp / "a.txt").write_text(version)
            (tmp / "nested").mkdir()
            (tmp / "nested" / "b.txt").write_text(version)
    assert (target / "a.txt").read_text() == "new" and (
        target / "nested" / "b.txt"
    ).read_text() == "new"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "a.txt").write_text("half")
        raise RuntimeError("crash mid-write")
    assert (target / "a.txt").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]
