"""Word tokenization shared by pmi, tfidf and bm25: a regex, lowercasing, stopwords.

The default token pattern is scikit-learn's (and bm25s'): ``(?u)\\b\\w\\w+\\b``,
Unicode words of two or more characters. It was chosen so that nlpkit's numbers
equal those references with their defaults; pass ``pattern=r"(?u)\\b\\w+\\b"``
(``--token-pattern``) to keep one-letter words such as "a" and "I".

Order of operations (as scikit-learn's analyzer): lowercase the text, find all
matches of the pattern, then drop stopwords (compared with the tokens as they are,
so a stopword list is lowercase and meant for lowercased text).

>>> tokenize("The cat sat on the mat.")
['the', 'cat', 'sat', 'on', 'the', 'mat']
>>> WordTokenizer(stopwords="english").tokenize("The cat sat on the mat.")
['cat', 'sat', 'mat']

Patterns compile with the standard `re` module when they can (its ``\\w`` and
``\\b`` are what scikit-learn uses), and with the `regex` module otherwise, so
``\\p{L}+`` and other Unicode property classes work too.
"""

from __future__ import annotations

import hashlib
import os
import re
from functools import lru_cache
from typing import Iterable, Pattern

from nlpkit.errors import NlpkitError, UsageError

DEFAULT_PATTERN = r"(?u)\b\w\w+\b"
BUILTIN_STOPWORDS = ("english", "sklearn", "lucene")  # NLTK's 179 words; scikit-learn's 318; Lucene's 33
_DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

# Sentence breaks for co-occurrence counting: end punctuation and line ends.
SENTENCE_BREAK = re.compile(r"[.!?\r\n]+")


# findall-equivalent spellings without \b, ~30% faster: a greedy \w run always starts and
# ends at a word boundary when findall scans left to right.
_FAST_EQUIVALENT = {r"(?u)\b\w\w+\b": r"\w\w+", r"\b\w\w+\b": r"\w\w+",
                    r"(?u)\b\w+\b": r"\w+", r"\b\w+\b": r"\w+"}


@lru_cache(maxsize=32)
def compile_pattern(pattern: str | None = None) -> Pattern:
    """Compile a token pattern: `re` first (scikit-learn's semantics), `regex` as fallback.

    A pattern with more than one capturing group is refused (which group would be
    the token?); with exactly one group the group's text is the token, as in re.findall.
    """
    pattern = DEFAULT_PATTERN if pattern is None else pattern
    try:
        compiled = re.compile(_FAST_EQUIVALENT.get(pattern, pattern))
    except re.error:
        import regex

        try:
            compiled = regex.compile(pattern)
        except regex.error as e:
            raise UsageError(f"invalid `pattern` {pattern!r}: {e}") from None
    if compiled.groups > 1:
        raise UsageError(f"`pattern` {pattern!r} has {compiled.groups} capturing groups; "
                         "use at most one (or (?:...) groups)")
    if compiled.fullmatch("") is not None:
        raise UsageError(f"`pattern` {pattern!r} matches the empty string")
    return compiled


def load_stopwords(spec: str | Iterable[str] | None) -> frozenset[str]:
    """A stopword set from a name (``english`` = NLTK's list, ``sklearn`` = scikit-learn's
    ``ENGLISH_STOP_WORDS``, ``lucene``, ``none``), a file path or words.

    A file has one word per line; blank lines and lines starting with ``#`` are ignored.

    >>> "the" in load_stopwords("english")
    True
    """
    if spec is None:
        return frozenset()
    if not isinstance(spec, str):
        return frozenset(spec)
    if spec in ("", "none"):
        return frozenset()
    if spec in BUILTIN_STOPWORDS:
        path = os.path.join(_DATA_DIR, f"stopwords_{spec}.txt")
    else:
        path = spec
        if not os.path.isfile(path):
            raise NlpkitError(f"stopwords {spec!r}: no such file and not a built-in list "
                              f"(built-in: {', '.join(BUILTIN_STOPWORDS)}, none)")
    try:
        with open(path, encoding="utf-8") as f:
            words = [w.strip() for w in f]
    except UnicodeDecodeError:
        raise NlpkitError(f"{path}: stopword file is not valid UTF-8") from None
    except OSError as e:
        raise NlpkitError(f"{path}: cannot read stopwords ({e.strerror or e})") from None
    return frozenset(w for w in words if w and not w.startswith("#"))


def stopwords_name(spec: str | Iterable[str] | None) -> str:
    """How a stopword choice appears in signatures: ``none``, ``english``, ``file:NAME``, ``list:N``."""
    if spec is None or spec in ("", "none"):
        return "none"
    if isinstance(spec, str):
        return spec if spec in BUILTIN_STOPWORDS else f"file:{os.path.basename(spec)}"
    return f"list:{len(frozenset(spec))}"


class WordTokenizer:
    """Regex word tokenizer with lowercasing and stopword removal.

    >>> WordTokenizer(lowercase=False).tokenize("New York")
    ['New', 'York']
    """

    def __init__(self, pattern: str | None = None, lowercase: bool = True,
                 stopwords: str | Iterable[str] | None = None) -> None:
        self.pattern = DEFAULT_PATTERN if pattern is None else pattern
        self.regex = compile_pattern(self.pattern)
        self.lowercase = lowercase
        self.stopwords = load_stopwords(stopwords)
        self.stopwords_name = stopwords_name(stopwords)
        self._findall = self.regex.findall

    @property
    def signature(self) -> str:
        """Short name for signatures: ``word-lower`` for the default, ``re:<hash>`` for others."""
        if self.pattern == DEFAULT_PATTERN:
            name = "word"
        elif self.pattern == r"(?u)\b\w+\b":
            name = "word1"
        else:
            name = "re:" + hashlib.sha1(self.pattern.encode("utf-8")).hexdigest()[:8]
        return name + ("-lower" if self.lowercase else "")

    def tokenize(self, text: str) -> list[str]:
        """Tokens of one text (a document, a line, a query)."""
        if self.lowercase:
            text = text.lower()
        tokens = self._findall(text)
        if self.stopwords:
            stop = self.stopwords
            tokens = [t for t in tokens if t not in stop]
        return tokens

    __call__ = tokenize

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        """Tokens of each text; one list per text (empty texts give empty lists)."""
        return [self.tokenize(t) for t in texts]

    def sentences(self, text: str) -> list[list[str]]:
        """Token lists of the sentences of `text`: split at ``.``, ``!``, ``?`` and line ends.

        >>> WordTokenizer().sentences("The cat sat. The dog ran!")
        [['the', 'cat', 'sat'], ['the', 'dog', 'ran']]
        """
        if self.lowercase:
            text = text.lower()
        out = []
        findall, stop = self._findall, self.stopwords
        for piece in SENTENCE_BREAK.split(text):
            tokens = findall(piece)
            if stop:
                tokens = [t for t in tokens if t not in stop]
            if tokens:
                out.append(tokens)
        return out

    def __repr__(self) -> str:
        return (f"WordTokenizer(pattern={self.pattern!r}, lowercase={self.lowercase}, "
                f"stopwords={self.stopwords_name!r})")


def tokenize(text: str, lowercase: bool = True, pattern: str | None = None,
             stopwords: str | Iterable[str] | None = None) -> list[str]:
    """Tokens of `text` (see `WordTokenizer`); the tokenizer is cached per settings.

    >>> tokenize("Hello, World! Hello again.", stopwords=["again"])
    ['hello', 'world', 'hello']
    """
    if stopwords is None or isinstance(stopwords, str):
        return _cached_tokenizer(pattern, lowercase, stopwords).tokenize(text)
    return WordTokenizer(pattern, lowercase, stopwords).tokenize(text)


@lru_cache(maxsize=16)
def _cached_tokenizer(pattern: str | None, lowercase: bool, stopwords: str | None) -> WordTokenizer:
    return WordTokenizer(pattern, lowercase, stopwords)
