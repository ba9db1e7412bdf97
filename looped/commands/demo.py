"""`looped demo`: routed here; its parser still lives in `looped.experiments.demo` until it moves."""

from looped.experiments.demo import main

__all__ = ["main"]
