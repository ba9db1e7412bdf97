"""One exception type for every problem a user can fix.

The CLI turns a ``UserError`` into one line on stderr and exit status 2, with no traceback; as
a ``ValueError`` subclass, notebooks and tests catch it the usual way.
"""


class UserError(ValueError):
    """Bad input from the user (config, spec, path); the message says how to fix it."""


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (or its type), for a UserError to quote."""
    text = str(err)
    return text.splitlines()[0] if text.strip() else type(err).__name__
