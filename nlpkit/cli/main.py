"""The `nlpkit` entry point: one click group that imports each subcommand lazily.

`nlpkit --help` must not import numpy, rich or model code, so the group lists
commands from the `COMMANDS` registry (name -> module, one-line help) and
imports a subcommand's module only when that subcommand runs.

Errors: `NlpkitError` -> ``nlpkit: error: ...`` and exit 1 (`UsageError` -> 2; `GateFailed` -> ``nlpkit: gate
failed: ...`` and `GATE_FAILED`, 3),
click usage errors the same one line and exit 2, a closed stdout pipe exits 0 quietly, Ctrl-C exits 130
(`nlpkit.cli.shutdown`: workers stopped, partial outputs removed).
``NLPKIT_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import os
import sys

import click

from nlpkit import __version__
from nlpkit.errors import GateFailed, NlpkitError, UsageError

# name -> (module, one-line help). Only subcommands that work are registered here.
COMMANDS: dict[str, tuple[str, str]] = {
    "edit-distance": ("nlpkit.cli.edit_distance", "Levenshtein-family distances, alignments, nearest dictionary words."),
    "tfidf": ("nlpkit.cli.tfidf", "TF-IDF weights (every TF/IDF/norm variant, SMART), top terms, matrix, query ranking."),
    "pmi": ("nlpkit.cli.pmi", "Pointwise mutual information (PMI/NPMI/PPMI) of co-occurring words."),
    "perplexity": ("nlpkit.cli.perplexity", "Perplexity, NLL and bits per byte of text under a language model."),
    "score": ("nlpkit.cli.score", "Log-likelihoods, multiple choice, preference pairs, the generate task (as lm-eval); compare models."),
    "generate": ("nlpkit.cli.generate", "Stream one continuation of a prompt, or --prompts FILE decoded together (greedy or sampled)."),
    "sample": ("nlpkit.cli.sample", "N sampled continuations of a prompt (or of each --prompts line), log-probs; next-token distribution."),
    "bpe-train": ("nlpkit.cli.bpe_train", "Train a byte-level BPE tokenizer (same merges as HF tokenizers)."),
    "tokenize": ("nlpkit.cli.tokenize", "Token ids, pieces or counts of text (any BPE tokenizer, GGUF); ids to text."),
    "bm25": ("nlpkit.cli.bm25", "BM25 index, search and add (five variants); TREC runs, IR metrics."),
    "rrf": ("nlpkit.cli.rrf", "Reciprocal rank fusion of TREC runs or ranked lists."),
    "ngram-train": ("nlpkit.cli.ngram_train", "Train an n-gram LM (modified Kneser-Ney as KenLM lmplz, MLE, add-k) as ARPA."),
    "bleu": ("nlpkit.cli.bleu", "BLEU / chrF / TER with sacrebleu: many systems, signed, significance."),
    "serve": ("nlpkit.cli.serve", "Serve a model with OpenAI's API (completions with echo + logprobs, chat) for lm-eval."),
    "cache": ("nlpkit.cli.cache", "The prepared-model cache: list its entries, clear them, print where it is."),
    "completion": ("nlpkit.cli.completion", "Print the shell completion script (bash, zsh or fish)."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        import importlib

        module = importlib.import_module(COMMANDS[name][0])
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="nlpkit", message="%(prog)s %(version)s")
def cli() -> None:
    """nlpkit: NLP utilities for shell pipelines, corpus analysis and CI evaluations.

    Every subcommand reads files or stdin, writes results to stdout
    (table on a terminal, TSV otherwise; --format tsv|jsonl|json|table)
    and messages to stderr. Exit status: 0 ok, 1 bad data, 2 usage error,
    3 a gate failed (score --fail-if-worse, perplexity --fail-if-*),
    130 interrupted (Ctrl-C). Shell completion: nlpkit completion bash|zsh|fish.
    """


def _silence_stdout() -> None:
    from nlpkit.io import silence_stdout

    silence_stdout()


def usage_message(e: click.UsageError) -> str:
    """A click usage error as one line, in the format of every other error: the message, and where
    it is not about an option's value, the help to read (`nlpkit pmi --help`)."""
    message = " ".join(e.format_message().split())
    if e.ctx is not None and not isinstance(e, click.BadParameter):
        message += f" (see '{e.ctx.command_path} --help')"
    return message


def check_arguments(argv: list[str]) -> None:
    """Command-line text must be UTF-8: bytes Python could not decode (kept as surrogates) are a
    usage error naming the argument, unless the argument names an existing file."""
    for i, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as e:
            if os.path.exists(arg):
                continue
            bad = arg[e.start].encode("utf-8", "surrogateescape")
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise UsageError(f"argument {i} ('{shown}') is not valid UTF-8 (byte 0x{bad.hex()} "
                             f"at character {e.start + 1}); nlpkit reads command-line text as UTF-8") from None


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and turn every failure into a message and an exit status."""
    debug = os.environ.get("NLPKIT_DEBUG", "") not in ("", "0")
    code = 0
    if argv is None:
        argv = sys.argv[1:]
    from nlpkit.cli.shutdown import install

    restore_signals = install()
    try:
        check_arguments(argv)
        rv = cli.main(args=argv, prog_name="nlpkit", standalone_mode=False)
        if isinstance(rv, int):
            code = rv
        sys.stdout.flush()
    except click.exceptions.Exit as e:
        code = e.exit_code
    except SystemExit:
        # click's own main() turns EPIPE into sys.exit(1) after wrapping stdout in a
        # PacifyFlushWrapper; a closed pipe (`nlpkit ... | head -1`) is not a failure.
        from click.utils import PacifyFlushWrapper

        if isinstance(sys.stdout, PacifyFlushWrapper):
            _silence_stdout()
            code = 0
        else:
            raise
    except click.UsageError as e:
        if type(e).__name__ == "NoArgsIsHelpError":   # `nlpkit` alone: the help text
            e.show()
        else:
            sys.stderr.write(f"nlpkit: error: {usage_message(e)}\n")
        code = e.exit_code
    except click.ClickException as e:  # e.g. click.FileError: the same prefix as every other error
        sys.stderr.write(f"nlpkit: error: {e.format_message()}\n")
        code = e.exit_code
    except click.exceptions.Abort:
        code = 130
    except KeyboardInterrupt:   # SIGINT normally ends the process in nlpkit.cli.shutdown's handler
        from nlpkit.cli.shutdown import remove_partial_outputs, stop_workers

        stop_workers()
        remove_partial_outputs()
        code = 130
    except BrokenPipeError:
        _silence_stdout()
        code = 0
    except GateFailed as e:   # the results are written: a verdict, not a crash
        sys.stderr.write(f"nlpkit: gate failed: {e}\n")
        code = e.exit_status
    except NlpkitError as e:
        if debug:
            import traceback

            traceback.print_exc()
        from nlpkit.cli.common import cli_message

        sys.stderr.write(f"nlpkit: error: {cli_message(e)}\n")
        code = 2 if isinstance(e, UsageError) else 1
    except MemoryError:
        sys.stderr.write("nlpkit: error: out of memory\n")
        code = 1
    except Exception as e:  # noqa: BLE001 - last resort: a message, not a traceback
        if debug:
            import traceback

            traceback.print_exc()
        sys.stderr.write(f"nlpkit: error: unexpected {type(e).__name__}: {e} "
                         "(set NLPKIT_DEBUG=1 for the traceback)\n")
        code = 1
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        _silence_stdout()
    restore_signals()
    sys.exit(code)


if __name__ == "__main__":
    main()
