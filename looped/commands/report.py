"""`looped report`: routed here; its parser still lives in `looped.report.render` until it moves."""

from looped.report.render import main

__all__ = ["main"]
