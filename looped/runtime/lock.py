"""One writer per run directory: an exclusive lock, taken before the first write, held to the end.

    with dir_lock(out, "looped train"):
        ...  # config.yaml, metrics.jsonl, checkpoints: only this process writes here

Two writers would interleave metrics and race on checkpoint renames, so every writer takes
``DIR/.lock`` with ``flock(LOCK_EX | LOCK_NB)`` and a second one is refused, naming the holder.
The kernel releases a flock however its holder dies, so a stale lock file is taken over with a
warning. On NFS the lock holds across hosts only when the mount supports locking.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from looped.errors import UserError

LOCK_NAME = ".lock"


@dataclass
class Holder:
    """Who holds (or held) a lock: what the refusal and the takeover lines print."""

    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=socket.gethostname)
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    command: str = "looped"

    def __str__(self) -> str:
        return f"PID {self.pid} on {self.host} ({self.command}, started {self.started})"


class DirectoryLocked(UserError):
    """Another live process writes this directory."""


@contextmanager
def dir_lock(directory: str | Path, command: str = "looped") -> Iterator[Holder | None]:
    """Hold the write lock of `directory` (created if missing, removed if left empty) for the
    block; yields the dead holder whose stale lock was taken over, or None."""
    directory = Path(directory)
    created = [p for p in (directory, *directory.parents) if not p.exists()]  # deepest first
    path = directory / LOCK_NAME
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, stale = _acquire(directory, path, Holder(command=command))
    except FileExistsError:
        raise UserError(f"{directory} is a file, not a directory; choose another output") from None
    except OSError as err:  # a read-only or full file system: mkdir or the lock file's open
        raise UserError(
            f"cannot write {directory}: {err.strerror or err}; free space in {directory.parent} "
            "(or make it writable) and run again"
        ) from None
    try:
        yield stale
    finally:
        if fd is not None:
            _release(fd, path, created)


def _acquire(directory: Path, path: Path, me: Holder) -> tuple[int | None, Holder | None]:
    """Open and flock the lock file; retry when it was replaced between the open and the flock."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DirectoryLocked(_refusal(directory, path)) from None
        except OSError as err:  # a file system without flock: run unguarded, and say so
            os.close(fd)
            print(
                f"{me.command}: warning: cannot lock {directory} ({err.strerror or err}); make "
                "sure no other command writes there at the same time",
                file=sys.stderr,
            )
            return None, None
        if _same_file(fd, path):
            break
        os.close(fd)  # locked a file its holder had just deleted: lock the current one
    stale = _read(path)
    text = json.dumps(asdict(me)).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, text, 0)
    if stale is not None:
        gone = (
            "which is gone"
            if stale.host == me.host
            else "no longer held; if that command still runs, this file system does not share "
            "locks between hosts (NFS mounted without locking), so stop one of the two"
        )
        print(
            f"{me.command}: warning: took over a stale lock on {directory} left by {stale}, {gone}",
            file=sys.stderr,
        )
    return fd, stale


def _refusal(directory: Path, path: Path) -> str:
    holder = None
    for _ in range(20):  # the holder writes its name just after taking the lock
        holder = _read(path)
        if holder is not None:
            break
        time.sleep(0.05)
    who = str(holder) if holder is not None else "a process that has not written its name yet"
    return (
        f"{directory} is being written by another command: {who}; wait for it to finish (or "
        "stop it), or write somewhere else"
    )


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, held = os.stat(path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)


def _read(path: Path) -> Holder | None:
    """The holder a lock file names (JSON only); None for a missing, empty or unreadable one."""
    try:
        data = json.loads(path.read_text())
        return Holder(int(data["pid"]), *(str(data[k]) for k in ("host", "started", "command")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _release(fd: int, path: Path, created: list[Path]) -> None:
    """Delete the lock file while held (absent = clean exit) and our empty dirs."""
    try:
        path.unlink(missing_ok=True)
        for directory in created:
            try:
                directory.rmdir()
            except OSError:
                break  # not empty: the run wrote something (or another writer came)
    finally:
        os.close(fd)
