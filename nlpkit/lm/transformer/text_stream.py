"""A tokenizer's token ids to text pieces, as they are generated: never half a UTF-8 character, never
any part of a stop string (the text stream of the transformer backend)."""

from __future__ import annotations

import codecs
from typing import Sequence

from nlpkit.errors import NlpkitError


class TokenTextStream:
    """Token ids in, text pieces out: complete UTF-8 characters only, and never any part of a stop string.

    Text that could still be the start of a stop string is held back until it cannot; when a stop
    string appears, the text before it is released and `stopped` becomes True.
    """

    def __init__(self, tokenizer, stop: Sequence[str] = ()):
        self.tokenizer = tokenizer
        self.stop = [s for s in stop if s]
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.pending = ""
        self.stopped = False
        self.shown: list[str] = []   # every piece returned so far (`text`)

    def _held(self) -> int:
        """Length of the longest suffix of `pending` that is a proper prefix of some stop string."""
        best = 0
        for s in self.stop:
            for k in range(min(len(s) - 1, len(self.pending)), best, -1):
                if self.pending.endswith(s[:k]):
                    best = k
                    break
        return best

    def push(self, token_id: int) -> str:
        """Add one token; return the text that is now safe to show ('' while held back)."""
        if self.stopped:
            return ""
        self.pending += self.decoder.decode(self._bytes(int(token_id)))
        hits = [i for i in (self.pending.find(s) for s in self.stop) if i >= 0]
        if hits:
            out, self.pending, self.stopped = self.pending[:min(hits)], "", True
        else:
            cut = len(self.pending) - self._held()
            out, self.pending = self.pending[:cut], self.pending[cut:]
        self.shown.append(out)
        return out

    def _bytes(self, token_id: int) -> bytes:
        """The token's bytes; none for an id the model has but its tokenizer does not (models pad their
        embedding past the tokenizer, e.g. Qwen2: HF's decode skips such ids too)."""
        try:
            return self.tokenizer.decode_bytes([token_id])
        except NlpkitError:
            return b""

    def finish(self) -> str:
        """The held-back rest (no stop string followed); an unfinished UTF-8 sequence becomes U+FFFD."""
        if self.stopped:
            return ""
        out = self.pending + self.decoder.decode(b"", final=True)
        self.pending = ""
        self.shown.append(out)
        return out

    def text(self) -> str:
        """The whole text: what was shown and the held-back rest (call at the end)."""
        self.finish()
        return "".join(self.shown)
