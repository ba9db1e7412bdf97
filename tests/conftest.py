"""One thread per test process: on a shared 2-core machine, torch's default thread pool makes
tiny forwards hundreds of times slower under contention."""

import torch

torch.set_num_threads(1)
