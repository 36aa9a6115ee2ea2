"""The CLI side of a gate (core: nlpkit/evaluation/gate.py): the verdict records written after a command's results,
then exit status `GATE_FAILED` (3) when one failed. `score --fail-if-worse` and `perplexity --compare --fail-if-*`
both write and exit through here."""

from __future__ import annotations

import sys
from typing import Sequence

from nlpkit.errors import GateFailed

GATE_HELP = "exit 3 (a failed gate; 1 is an error) after the results and a verdict record per check"


def write_verdicts(verdicts: Sequence, columns: Sequence[str], fmt: str, signature: str | None,
                   no_signature: bool) -> None:
    """The verdicts as their own section: jsonl records with `"record": "verdict"`, a TSV block or a table after a
    blank line (json: the command puts `verdicts` in its one document)."""
    from nlpkit.cli.common import open_writer

    if fmt in ("tsv", "table"):
        sys.stdout.write("\n")
    with open_writer(columns, fmt, signature, no_signature, title="verdict") as out:
        for v in verdicts:
            out.write({"record": "verdict", **v.record} if fmt == "jsonl" else v.record)


def enforce(verdicts: Sequence) -> None:
    """Raise `GateFailed` (exit 3, ``nlpkit: gate failed: <reason>``) when a verdict failed."""
    from nlpkit.evaluation.gate import failure_message

    message = failure_message(verdicts)
    if message is not None:
        sys.stdout.flush()
        raise GateFailed(message)
