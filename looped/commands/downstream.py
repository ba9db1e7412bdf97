"""`looped downstream`: routed here; its parser still lives in `looped.eval.downstream` until it moves."""

from looped.eval.downstream import main

__all__ = ["main"]
