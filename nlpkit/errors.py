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


GATE_FAILED = 3  # the exit status of a failed gate: not 0 (pass), 1 (crash or bad data), 2 (usage), 130 (Ctrl-C)


class GateFailed(NlpkitError):
    """A gate's verdict was fail (`score --fail-if-worse`, `perplexity --fail-if-*`): the results and verdict records
    are written; the CLI prints ``nlpkit: gate failed: <reason>`` and exits `GATE_FAILED`."""

    exit_status = GATE_FAILED
