"""`looped length`: routed here; its parser still lives in `looped.experiments.length` until it moves."""

from looped.experiments.length import main

__all__ = ["main"]
