"""The one exception type nlpkit raises for bad data and runtime failures.

The CLI turns it into ``nlpkit: error: <message>`` and exit status 1;
library callers catch it like any other exception.
"""


class NlpkitError(Exception):
    """Bad input data or a runtime failure, with a message a user can act on."""


class UsageError(NlpkitError):
    """A bad option value detected by the core (the CLI maps it to exit status 2)."""
