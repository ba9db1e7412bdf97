"""`looped fidelity`: routed here; its parser still lives in `looped.experiments.fidelity` until it moves."""

from looped.experiments.fidelity import main

__all__ = ["main"]
