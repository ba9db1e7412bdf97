"""`looped samples`: routed here; its parser still lives in `looped.experiments.samples` until it moves."""

from looped.experiments.samples import main

__all__ = ["main"]
