"""The trainer: the training loop, and how a run resumes, branches or starts from another run's weights."""
