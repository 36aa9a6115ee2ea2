"""Read the shared Project Gutenberg novels as clean text (maintainer helper, no third-party imports).

Used by tools/train_default_model.py and by tests/test_default_model.py, so the training text and the
held-out text the tests score are cut the same way.

Cleaning, per file (see ../shared/data/SOURCES.md, "gutenberg"):
- decode UTF-8, drop a leading BOM, CRLF (and stray CR) -> LF;
- drop everything up to and including the "*** START OF ..." line (also spelled "***START OF ...");
- drop everything from the "*** END OF ..." / "***END OF ..." line on (the licence), and a trailing
  "End of (the) Project Gutenberg ..." line just before it;
- strip leading/trailing blank space.

    >>> clean_gutenberg("\\ufeffheader\\r\\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\\r\\n\\r\\nHello.\\r\\n"
    ...                 "*** END OF THIS PROJECT GUTENBERG EBOOK X ***\\r\\nlicence\\r\\n")
    'Hello.'
"""

from __future__ import annotations

import re
from pathlib import Path

HELD_OUT_FILE = "105.txt"  # Jane Austen, "Persuasion": never seen by the tokenizer or the model
EOT = "<|endoftext|>"

_START = re.compile(r"^\*\*\* ?START OF .*$", re.MULTILINE)
_END = re.compile(r"^\*\*\* ?END OF .*$", re.MULTILINE)
_END_NOTE = re.compile(r"\n[ \t]*End of (the )?Project Gutenberg[\s\S]{0,300}$", re.IGNORECASE)


def clean_gutenberg(raw: str) -> str:
    """One Gutenberg file's text without BOM, CR, header and licence footer (see module docstring)."""
    text = raw.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    m = _START.search(text)
    if m:
        text = text[m.end():]
    m = _END.search(text)
    if m:
        text = text[: m.start()]
    text = _END_NOTE.sub("\n", text)
    return text.strip()


def read_clean(path: str | Path) -> str:
    """`clean_gutenberg` of the file at `path` (UTF-8)."""
    return clean_gutenberg(Path(path).read_bytes().decode("utf-8"))


def novel_files(data_dir: str | Path) -> list[Path]:
    """All novel files of `<data_dir>/gutenberg` in sorted name order (MANIFEST.csv excluded)."""
    return sorted(p for p in (Path(data_dir) / "gutenberg").glob("*.txt"))


def training_files(data_dir: str | Path) -> list[Path]:
    """The novels the tokenizer and model are trained on: every novel except `HELD_OUT_FILE`."""
    return [p for p in novel_files(data_dir) if p.name != HELD_OUT_FILE]


def training_docs(data_dir: str | Path) -> list[str]:
    """Cleaned text of each training novel, in `training_files` order."""
    return [read_clean(p) for p in training_files(data_dir)]


def held_out_text(data_dir: str | Path) -> str:
    """Cleaned text of the held-out novel."""
    return read_clean(Path(data_dir) / "gutenberg" / HELD_OUT_FILE)


def bpe_training_text(docs: list[str]) -> str:
    """The text the tokenizer is trained on: the documents, each ending with one newline.

    `<|endoftext|>` is NOT in this text (it is a special token with id 0, never split or merged);
    the model's token stream puts it before every document instead.
    """
    return "".join(d + "\n" for d in docs)
