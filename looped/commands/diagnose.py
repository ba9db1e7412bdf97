"""`looped diagnose`: routed here; its parser still lives in `looped.experiments.diagnose` until it moves."""

from looped.experiments.diagnose import main

__all__ = ["main"]
