"""`looped flops`: routed here; its parser still lives in `looped.flops` until it moves."""

from looped.flops import main

__all__ = ["main"]
