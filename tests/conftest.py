"""One thread per test process: on a shared 2-core machine, torch's default thread pool makes
tiny forwards hundreds of times slower under contention."""

import fcntl

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def stdlib_corpus(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> str:
    """The quick studies' corpus (the standard library in a 512-token BPE) as a `looped data
    text` directory, tokenized once per test session: each tokenization takes several seconds.
    Under xdist the workers share this session's temporary root; the first to come builds it
    while the others wait on a file lock, then read it."""
    from looped.studies.textsetup import ensure_corpus
    from looped.studies.textstudy import QUICK

    if worker_id == "master":  # one process: its own temporary directory
        return ensure_corpus(QUICK.setup, tmp_path_factory.mktemp("corpus"), "stdlib")["path"]
    shared = tmp_path_factory.getbasetemp().parent  # this session's, one per `make test`
    with open(shared / "stdlib-corpus.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        return ensure_corpus(QUICK.setup, shared, "stdlib")["path"]
