"""`looped train`: routed here; its parser still lives in `looped.training.trainer` until it moves."""

from looped.training.trainer import main

__all__ = ["main"]
