"""`looped eval`: routed here; its parser still lives in `looped.eval.evaluate` until it moves."""

from looped.eval.evaluate import main

__all__ = ["main"]
