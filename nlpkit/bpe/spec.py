"""What a tokenizer file says, as plain data: the readers in `formats` produce a `TokenizerSpec`,
`Tokenizer.from_spec` builds the encoder from it, and `Tokenizer.to_spec` gives it back for writing.

    >>> spec = TokenizerSpec(vocab={"a": 0, "b": 1, "ab": 2}, merges=[("a", "b")])
    >>> spec.token_id("ab")
    2
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nlpkit.bpe.pretokenize import PreTokenizer


@dataclass(frozen=True)
class AddedToken:
    """A token matched whole in the text before pre-tokenization (HF ``added_tokens``)."""

    content: str
    id: int
    special: bool = True
    lstrip: bool = False  # the match takes the whitespace before it
    rstrip: bool = False  # ... and after it


@dataclass
class TokenizerSpec:
    """Everything needed to build a BPE tokenizer, as read from (or written to) a file.

    `source` names the file for error messages; `pretokenizer` None means the GPT-2 byte-level default.
    `normalizer` and `decoder` are lists of plain steps (see `nlpkit.bpe.normalize` and
    `nlpkit.bpe.decode`); an empty decoder means the byte-level one. `scores` (one per id) switch
    the model from merge ranks (HF) to llama.cpp's SentencePiece merging by token score.
    """

    vocab: dict[str, int]
    merges: list[tuple[str, str]]
    added_tokens: list[AddedToken] = field(default_factory=list)
    pretokenizer: PreTokenizer | None = None
    ignore_merges: bool = False
    bos_id: int | None = None
    eos_id: int | None = None
    source: str = ""
    normalizer: list[tuple] = field(default_factory=list)
    decoder: list[tuple] = field(default_factory=list)
    byte_fallback: bool = False
    unk_token: str | None = None
    fuse_unk: bool = False
    scores: list[float] | None = None
    add_bos: bool = False  # what encode(add_special=True) adds
    add_eos: bool = False
    chat_template: str | dict[str, str] | None = None  # a jinja template, or named templates

    def token_id(self, token: str) -> int | None:
        """The id of an added token's content or a vocabulary token, else None."""
        for t in self.added_tokens:
            if t.content == token:
                return t.id
        return self.vocab.get(token)
