"""`looped data bios`: routed here; its parser still lives in `looped.data.bios` until it moves."""

from looped.data.bios import main

__all__ = ["main"]
