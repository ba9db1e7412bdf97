"""`looped data text`: routed here; its parser still lives in `looped.data.text` until it moves."""

from looped.data.text import main

__all__ = ["main"]
