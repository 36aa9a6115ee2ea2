"""Byte-level BPE training with the same merges, in the same order, as HF tokenizers' BpeTrainer.

Two phases, as HF:
1. Count pre-tokens once, streaming: files are read line by line (each line keeps its '\\n'),
   each line is pre-tokenized; big inputs are counted in blocks of lines on all cores.
2. Merge: ids are special tokens, then the byte alphabet sorted by code point, then merged
   tokens in creation order. Pair counts live in a dict and candidates in a max-heap keyed
   (count, then smallest (left id, right id)); a popped entry whose count is stale is pushed
   back with the current count (lazy invalidation). Merging a pair only touches the words
   recorded for that heap entry, and only the pairs next to each merge change count.

HF details reproduced on purpose: a heap entry carries the set of words where its pair
appeared since the entry was made, so a pair that reappears later (its token can be built
in two ways) is merged word-set by word-set and recorded again, the later rank winning;
with ``max_token_length`` a pair is only formed when the two lengths sum below the limit.

    >>> tok = train_bpe([Path("input.txt")], vocab_size=1000, min_frequency=2,
    ...                 special_tokens=["<|endoftext|>"])
    >>> tok.merges[:3]
    [('Ġ', 't'), ('h', 'e'), ('Ġ', 'a')]
"""

from __future__ import annotations

import heapq
import io
import os
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Iterator, TextIO, Union

import regex

from nlpkit.bpe.pretokenize import GPT2_BLOCK_PATTERN, PreTokenizer, byte_level, byte_level_alphabet
from nlpkit.bpe.spec import AddedToken
from nlpkit.bpe.tokenizer import Tokenizer
from nlpkit.errors import NlpkitError, UsageError

Source = Union[Path, str, TextIO]
Progress = Callable[[int, int], None]
_SHIFT = 32
_MASK = (1 << _SHIFT) - 1
_BLOCK_BYTES = 1 << 20          # lines are counted in blocks of about 1 MB
_SUB_BLOCK = 1 << 18            # ... a quarter MB of pieces at a time (memory stays flat)
_PARALLEL_MIN_BYTES = 1 << 22   # smaller inputs are counted in-process


# ---------------------------------------------------------------------------- phase 1: counting
def _as_source(src: Source) -> Source:
    """A str naming an existing file (one line, no newline) is that file; other str are texts."""
    if isinstance(src, str) and "\n" not in src and len(src) < 4096 and os.path.isfile(src):
        return Path(src)
    return src


def _read_blocks(sources: Iterable[Source], errors: str = "strict") -> Iterator[str]:
    """Yield blocks of whole lines from files (Path, or '-' for stdin), texts (str) and
    binary/text streams. Bytes are kept as they are (a BOM too, as HF reads files)."""
    from nlpkit.io import display_name, open_binary

    for src in sources:
        src = _as_source(src)
        if isinstance(src, str):
            yield src
            continue
        if isinstance(src, Path):
            name = display_name(str(src))
            stream = open_binary(str(src))
        elif hasattr(src, "file_index"):           # a nlpkit.shards.Shard
            name = str(src)
            stream = src.open()
        else:
            name = getattr(src, "name", "<stream>")
            stream = getattr(src, "buffer", src)
        line_no, rest = 1, b""
        try:
            while True:
                chunk = stream.read(_BLOCK_BYTES)
                if isinstance(chunk, str):  # a text stream without .buffer
                    chunk = chunk.encode("utf-8")
                data = rest + chunk
                if not chunk:
                    rest, cut = b"", len(data)
                else:
                    cut = data.rfind(b"\n") + 1
                    rest = data[cut:]
                if cut:
                    try:
                        yield data[:cut].decode("utf-8", errors=errors)
                    except UnicodeDecodeError as e:
                        line = line_no + data.count(b"\n", 0, e.start)
                        start = data.rfind(b"\n", 0, e.start) + 1
                        raise NlpkitError(f"{name}, line {line}: invalid UTF-8 at byte {e.start - start} of the "
                                          "line (use `errors` replace to substitute U+FFFD)") from None
                    line_no += data.count(b"\n", 0, cut)
                if not chunk:
                    break
        finally:
            if (isinstance(src, Path) and str(src) != "-") or hasattr(src, "file_index"):
                stream.close()


def _count_block(block: str, pretok: PreTokenizer) -> Counter:
    """Counter of raw pieces over the lines of `block` (each line keeps its '\\n')."""
    if not pretok.steps and pretok.use_regex and not pretok.add_prefix_space:
        counts, findall, start = Counter(), _gpt2_block_re().findall, 0
        while start < len(block):  # the common case: many lines per findall, cut at a newline
            end = block.find("\n", start + _SUB_BLOCK) + 1 or len(block)
            counts.update(findall(block, start, end))
            start = end
        return counts
    counts: Counter = Counter()
    update, split = counts.update, pretok.split
    for line in io.StringIO(block, newline="\n"):
        update(split(line))
    return counts


@lru_cache(maxsize=1)
def _gpt2_block_re() -> regex.Pattern:
    return regex.compile(GPT2_BLOCK_PATTERN)


_worker_pretok: PreTokenizer | None = None


def _init_worker(pretok: PreTokenizer) -> None:
    global _worker_pretok
    _worker_pretok = pretok


def _count_in_worker(block: str) -> Counter:
    return _count_block(block, _worker_pretok)


def _total_size(sources: list[Source]) -> int:
    size = 0
    for s in map(_as_source, sources):
        if isinstance(s, Path) and str(s) != "-":
            try:
                size += s.stat().st_size
            except OSError:
                pass
        elif isinstance(s, str):
            size += len(s)
        else:
            size += _PARALLEL_MIN_BYTES  # a stream: assume it is big
    return size


def count_pieces(sources: Iterable[Source], pretok: PreTokenizer, workers: int | None = None,
                 errors: str = "strict", progress: Progress | None = None) -> Counter:
    """Raw pre-token counts over all lines of all sources, on `workers` processes when large.
    `progress(mb_done, mb_total)` follows the input read, in MB (approximately)."""
    sources = list(sources)
    if workers is None:
        workers = min(os.cpu_count() or 1, 8)
    size = _total_size(sources)
    mb_total, done = max(size / 1e6, 1e-6), 0

    def tick(chars: int) -> None:
        nonlocal done
        done += chars
        if progress is not None:
            progress(min(done / 1e6, mb_total), mb_total)

    total: Counter = Counter()
    if workers <= 1 or size < _PARALLEL_MIN_BYTES:
        for block in _read_blocks(sources, errors):
            total.update(_count_block(block, pretok))
            tick(len(block))
        return total
    from nlpkit.workers import process_executor

    with process_executor(workers, initializer=_init_worker, initargs=(pretok,)) as pool:
        pending = []
        for block in _read_blocks(sources, errors):
            pending.append((pool.submit(_count_in_worker, block), len(block)))
            if len(pending) >= 2 * workers:  # bounded: memory does not grow with the input
                fut, n = pending.pop(0)
                total.update(fut.result())
                tick(n)
        for fut, n in pending:
            total.update(fut.result())
            tick(n)
    return total

# ---------------------------------------------------------------------------- phase 2: merging
def _alphabet(word_counts: dict[str, int], limit_alphabet: int | None) -> list[str]:
    """The 256 byte symbols (HF initial_alphabet=ByteLevel.alphabet()), sorted by code point;
    with `limit_alphabet` < 256 only the most frequent symbols (ties: lower code point)."""
    alphabet = byte_level_alphabet()
    if limit_alphabet is None or limit_alphabet >= len(alphabet):
        return alphabet
    freq: Counter = Counter()
    for w, c in word_counts.items():
        for ch in w:
            freq[ch] += c
    kept = sorted(alphabet, key=lambda ch: (-freq[ch], ch))[:limit_alphabet]
    return sorted(kept)


def train_bpe(texts_or_files: Iterable[Source], vocab_size: int, min_frequency: int = 0,
              special_tokens: Iterable[str] = (), pattern: str | None = "gpt2", *,
              add_prefix_space: bool = False, max_token_length: int | None = None,
              limit_alphabet: int | None = None, progress: Progress | None = None,
              workers: int | None = None, encoding_errors: str = "strict",
              count_progress: Progress | None = None, pieces: Counter | None = None) -> Tokenizer:
    """Train a byte-level BPE tokenizer; same vocabulary and merges as HF BpeTrainer with
    ByteLevel(add_prefix_space) and initial_alphabet=ByteLevel.alphabet().

    `texts_or_files`: Path objects are files (Path("-") is stdin); a str naming an existing
    file is that file, other str items are texts (split into lines like a file's content);
    open streams are read to the end. `workers` processes count big inputs (default: all
    cores); `pieces` gives the pre-token counts instead (first-occurrence order, as
    `count_pieces` returns them). `progress(done, total)` follows the merges, `count_progress(mb_read, mb_total)`
    the counting. Raises UsageError for a vocab_size below alphabet + specials or a bad
    pattern, NlpkitError for an empty corpus or unreadable input.
    """
    pretok = PreTokenizer.from_pattern(pattern, add_prefix_space)
    specials = list(dict.fromkeys(special_tokens))
    n_alpha = 256 if limit_alphabet is None else min(256, max(limit_alphabet, 0))
    minimum = n_alpha + len(specials)
    if vocab_size < minimum:
        raise UsageError(f"vocab size {vocab_size} is below the minimum {minimum} "
                         f"({n_alpha} byte symbols + {len(specials)} special tokens)")
    if max_token_length is not None and max_token_length < 1:
        raise UsageError(f"max token length must be positive, got {max_token_length}")
    if pieces is None:         # counted already (nlpkit.distributed) or count now
        pieces = count_pieces(texts_or_files, pretok, workers, encoding_errors, count_progress)
    if not pieces:
        raise NlpkitError("empty corpus: no text to train on")
    word_counts = {byte_level(p): c for p, c in pieces.items()}
    del pieces

    id_to_word: list[str] = list(specials)
    for ch in _alphabet(word_counts, limit_alphabet):
        if ch not in id_to_word:
            id_to_word.append(ch)
    word_to_id = {w: i for i, w in enumerate(id_to_word)}
    words: list[list[int]] = []
    counts: list[int] = []
    for w, c in word_counts.items():
        words.append([word_to_id[ch] for ch in w if ch in word_to_id])
        counts.append(c)
    del word_counts
    merges = _merge(words, counts, id_to_word, word_to_id, vocab_size, min_frequency,
                    max_token_length, progress)
    vocab = {w: i for i, w in enumerate(id_to_word)}
    added = [AddedToken(s, vocab[s], True) for s in specials]
    return Tokenizer(vocab, merges, added_tokens=added, pretokenizer=pretok)


def _merge(words: list[list[int]], counts: list[int], id_to_word: list[str], word_to_id: dict[str, int],
           vocab_size: int, min_frequency: int, max_token_length: int | None,
           progress: Progress | None) -> list[tuple[str, str]]:
    """The merge loop (HF ``BpeTrainer::do_train`` step 5); grows id_to_word in place."""
    # Word positions are lists, not sets: a word is processed whole before the next, so a
    # repeat of the same word is always at the end of its list (cheaper than a set).
    pair_counts: dict[int, int] = {}
    where: dict[int, list[int]] = {}
    for wi, w in enumerate(words):
        c = counts[wi]
        for k in range(len(w) - 1):
            key = w[k] << _SHIFT | w[k + 1]
            pair_counts[key] = pair_counts.get(key, 0) + c
            s = where.get(key)
            if s is None:
                where[key] = [wi]
            elif s[-1] != wi:
                s.append(wi)
    heap = [(-pair_counts[key], key, seq, pos) for seq, (key, pos) in enumerate(where.items())
            if pair_counts[key] > 0]
    seq = len(heap)
    del where
    heapq.heapify(heap)
    heappush, heappop = heapq.heappush, heapq.heappop
    tlen = [len(w) for w in id_to_word]
    limit = max_token_length
    target = max(vocab_size - len(id_to_word), 1)
    done: list[tuple[int, int, int]] = []
    while len(id_to_word) < vocab_size and heap:
        negc, key, _, pos = heap[0]
        cur = pair_counts[key]
        if -negc != cur:  # stale: push back with the current count
            heapq.heapreplace(heap, (-cur, key, seq, pos))
            seq += 1
            continue
        heappop(heap)
        if cur < 1 or min_frequency > cur:
            break
        a, b = key >> _SHIFT, key & _MASK
        token = id_to_word[a] + id_to_word[b]
        new = word_to_id.get(token)
        if new is None:
            new = len(id_to_word)
            id_to_word.append(token)
            word_to_id[token] = new
            tlen.append(len(token))
        done.append((a, b, new))
        new_len = tlen[new]
        updates: dict[int, list[int]] = {}
        for wi in pos:
            w = words[wi]
            try:
                i = w.index(a)
            except ValueError:
                continue
            c = counts[wi]
            while True:
                if i + 1 < len(w) and w[i + 1] == b:
                    if i > 0:
                        p = w[i - 1]
                        k1 = p << _SHIFT | a  # absent when too long to count (max_token_length)
                        pair_counts[k1] = pair_counts.get(k1, 0) - c
                        if limit is None or tlen[p] + new_len < limit:
                            k2 = p << _SHIFT | new
                            pair_counts[k2] = pair_counts.get(k2, 0) + c
                            s = updates.get(k2)
                            if s is None:
                                updates[k2] = [wi]
                            elif s[-1] != wi:
                                s.append(wi)
                    w[i] = new
                    del w[i + 1]
                    if i < len(w) - 1:
                        q = w[i + 1]
                        k1 = b << _SHIFT | q
                        pair_counts[k1] = pair_counts.get(k1, 0) - c
                        if limit is None or tlen[q] + new_len < limit:
                            k2 = new << _SHIFT | q
                            pair_counts[k2] = pair_counts.get(k2, 0) + c
                            s = updates.get(k2)
                            if s is None:
                                updates[k2] = [wi]
                            elif s[-1] != wi:
                                s.append(wi)
                try:
                    i = w.index(a, i + 1)
                except ValueError:
                    break
        for k2, s in updates.items():
            cnt = pair_counts[k2]
            if cnt > 0:
                heappush(heap, (-cnt, k2, seq, s))
                seq += 1
        if progress is not None and len(done) % 64 == 0:
            progress(min(len(done), target), target)
    if progress is not None:
        progress(target, target)
    # HF keeps merges in a map: a pair merged twice keeps its later rank.
    last = {(a, b): r for r, (a, b, _) in enumerate(done)}
    return [(id_to_word[a], id_to_word[b]) for (a, b), _ in sorted(last.items(), key=lambda kv: kv[1])]


# Moved to `nlpkit.bpe.trainer_shards` in 0.4 (issue 34): still importable from here, with a DeprecationWarning.
