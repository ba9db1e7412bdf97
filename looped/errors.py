"""One exception type for every problem a user can fix.

The CLI turns a ``UserError`` into one line on stderr and exit status 2, with no traceback:
the message names the problem and the fix. Library code raises ``ValueError`` subclasses so
that notebooks and tests can catch them the usual way.
"""


class UserError(ValueError):
    """Bad input from the user (config, spec, path); the message says how to fix it."""


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (or its type): libraries such as the hub client
    raise many exception types with long messages, and a UserError quotes one line of them."""
    text = str(err)
    return text.splitlines()[0] if text.strip() else type(err).__name__
