"""One thread per test process: on a shared 2-core machine, torch's default thread pool makes
tiny forwards hundreds of times slower under contention."""

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def stdlib_corpus(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The quick studies' corpus (the standard library in a 512-token BPE) as a `looped data
    text` directory, tokenized once per test process: each tokenization takes a quarter-minute."""
    from looped.studies.textsetup import ensure_corpus
    from looped.studies.textstudy import QUICK

    return ensure_corpus(QUICK.setup, tmp_path_factory.mktemp("corpus"), "stdlib")["path"]
