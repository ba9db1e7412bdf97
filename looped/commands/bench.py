"""`looped bench`: routed here; its parser still lives in `looped.bench.run` until it moves."""

from looped.bench.run import main

__all__ = ["main"]
