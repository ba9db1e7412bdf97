"""One exception type for every problem a user can fix.

The CLI turns a ``UserError`` into one line on stderr and exit status 2, with no traceback:
the message names the problem and the fix. Library code raises ``ValueError`` subclasses so
that notebooks and tests can catch them the usual way.
"""


class UserError(ValueError):
    """Bad input from the user (config, spec, path); the message says how to fix it."""
