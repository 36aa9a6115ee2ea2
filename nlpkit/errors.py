"""The one exception type nlpkit raises for bad data and runtime failures.

The CLI turns it into ``nlpkit: error: <message>`` and exit status 1;
library callers catch it like any other exception.

Messages name the parameters of the function that raised them in backticks, as numpy does
("`b` must be between 0 and 1, got 1.5"): a Python caller reads the name it passed, never a
command-line option it did not type. The CLI shows the same message with each `name` spelled as
its option ("--b must be between 0 and 1, got 1.5"), in one place: `nlpkit.cli.common.cli_message`.
"""


class NlpkitError(Exception):
    """Bad input data or a runtime failure, with a message a user can act on."""


class UsageError(NlpkitError):
    """A bad option value detected by the core (the CLI maps it to exit status 2)."""
