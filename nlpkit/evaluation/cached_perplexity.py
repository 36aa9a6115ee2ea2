"""`perplexity --results-cache`: each text's figures (and each window's log-probabilities) taken from the results cache
(`nlpkit.evaluation.results_cache`) where they are; the model loaded only when something is missing.

Entries (every key also holds the code's identity and the BLAS kernel, the model's content and how it is loaded:
its `LoadSpec`'s weights layout, purpose and RoPE override):
- the run's settings -> what `perplexity_run` resolved: columns, signature, window and stride (a fully cached
  rerun prints its signature without loading the model to resolve them; this key also holds the model's path,
  which names it in the signature);
- a text (a whole file, or one line with ``--per-line``) and the window settings -> its `Perplexity` (and its
  scored tokens with ``--per-token``), or "too short";
- a window of a text -> its tokens' log-probabilities: a file killed half-way resumes at its first window not
  stored (stored as each window finishes, here or on a Dask worker);
- an n-gram model: the whole run, keyed by every input's content (its scoring is quick; inputs read from stdin are
  not cached).

The records are `nlpkit.lm.perplexity.records`' own (the same fields, the same corpus total) and come out of the
cache with the bytes a first run printed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from nlpkit.errors import NlpkitError
from nlpkit.evaluation.results_cache import ResultsCache, computation_identity, load_part, make_key, model_identity
from nlpkit.lm.interface import PerplexityRun
from nlpkit.lm.perplexity.records import perplexity_stats, total_record
from nlpkit.lm.perplexity.text_perplexity import Perplexity
from nlpkit.lm.perplexity.windows import TooShort, Window
from nlpkit.lm.spec import LoadSpec

PERPLEXITY_FIELDS = ("tokens", "nll", "mean_nll", "words", "bytes", "nll_sq")


@dataclass(frozen=True)
class Settings:
    """`perplexity`'s options that change its numbers or records (as given: None is the model's default)."""

    mode: str
    context: int | None
    stride: int | None
    add_bos: bool | None
    per_line: bool
    per_token: bool
    errors: str


@dataclass
class CachedPerplexity:
    """A `perplexity` run over `results`: `load()` gives the `LanguageModel` (called at most once, when an entry
    is missing); `spec` how it is loaded (its path None: $NLPKIT_MODEL or the shipped model)."""

    results: ResultsCache
    spec: LoadSpec
    load: Callable[[], object]
    settings: Settings
    _lm: object = field(default=None, repr=False)
    _model: str | None = field(default=None, repr=False)

    def lm(self):
        if self._lm is None:
            self._lm = self.load()
        return self._lm

    @property
    def loaded(self) -> bool:
        return self._lm is not None

    def _base(self) -> list | None:
        """The key parts every entry shares (None: the model has no local files; nothing is cached)."""
        if self._model is None:
            self._model = model_identity(self.results, self.spec.path) or ""
        if not self._model:
            return None
        return [computation_identity(), self._model, load_part(self.spec)]

    def run(self, paths: Sequence[str]) -> PerplexityRun:
        """The `PerplexityRun` of `paths`: its settings from the cache (else resolved by the loaded model, then
        stored), its records from `records` (cached texts, the rest computed)."""
        from nlpkit.lm.model_files import resolve_model_path
        from nlpkit.lm.spec import resolve_path

        base = self._base()
        if base is None:
            return self._plain_run(paths)
        s = self.settings
        where = resolve_path(self.spec.path) or str(resolve_model_path(None))
        key = make_key("perplexity-run", base, where, s.mode, s.context, s.stride, s.add_bos, s.per_line,
                       s.per_token)
        meta = self.results.get_many([key], check=_valid_meta, count=None).get(key)
        if meta is None:
            run = self._plain_run(paths)
            meta = {"columns": run.columns, "signature": run.signature, "digits": run.digits,
                    "context": run.context, "stride": run.stride,
                    "add_bos": None if run.context is None else self._bos()}
            self.results.put(key, meta, count=None)
        if meta["context"] is None:
            return self._ngram_run(paths, meta)
        windows = _Resolved(s.mode, meta["context"], meta["stride"], meta["add_bos"])

        def records(progress=None, map_windows: Callable | None = None,
                    map_lines: Callable | None = None) -> Iterator[dict]:
            if s.per_line:
                if map_lines is not None:
                    return self._dask_lines(paths, progress, map_windows, map_lines)
                return self._line_records(paths, windows, progress)
            return self._text_records(paths, windows, progress, map_windows)

        return PerplexityRun(list(meta["columns"]), meta["signature"], records, digits=meta["digits"],
                             context=meta["context"], stride=meta["stride"])

    def _plain_run(self, paths: Sequence[str]) -> PerplexityRun:
        from nlpkit.lm.perplexity import perplexity_run

        from nlpkit.lm.interface import Capability

        s, lm = self.settings, self.lm()
        ctx = lm.window_context(s.context) if Capability.WINDOWS in lm.capabilities else None
        return perplexity_run(lm, paths, mode=s.mode, context=ctx,
                              stride=s.stride, add_bos=s.add_bos, per_line=s.per_line, per_token=s.per_token,
                              errors=s.errors)

    def _bos(self) -> bool:
        lm = self.lm()
        return lm.prefix_id is not None if self.settings.add_bos is None else self.settings.add_bos

    # ------------------------------------------------------------------ texts
    def _text_key(self, w: "_Resolved", text: str, per_token: bool) -> str:
        return make_key("perplexity-text", self._base(), w.mode, w.context, w.stride, w.add_bos, per_token, text)

    def _score_text(self, text: str, w: "_Resolved", progress=None, map_windows=None, windows_cached=False):
        """(Perplexity, Scored) of a text, computed (`text_perplexity`), its windows through the cache when
        `windows_cached`."""
        from nlpkit.lm.perplexity.text_perplexity import text_perplexity

        lm = self.lm()
        mapper = map_windows
        if windows_cached:
            mapper = self._window_mapper(self._text_key(w, text, False), progress, map_windows)
            progress = None
        return text_perplexity(lm, text, mode=w.mode, context=w.context, stride=w.stride, add_bos=w.add_bos,
                               progress=progress, map_windows=mapper)

    def _entry(self, p: Perplexity | None, scored, per_token: bool) -> dict:
        if p is None:
            return {"short": True}
        entry = {"p": [getattr(p, f) for f in PERPLEXITY_FIELDS]}
        if per_token:
            lm = self.lm()
            entry["rows"] = [[pos, i, lm.token_bytes(i).decode("utf-8", errors="replace"), lp]
                             for pos, i, lp in zip(scored.positions, scored.ids, scored.logprobs)]
        return entry

    def _text_records(self, paths, w: "_Resolved", progress, map_windows) -> Iterator[dict]:
        """`records._text_records` over the cache: each file whole."""
        from nlpkit.io import display_name, read_text

        s = self.settings
        several = len(paths) > 1 and not s.per_token
        totals: list[Perplexity] = []
        for path in paths:
            name = display_name(path)
            text = read_text(path, errors=s.errors)
            if not text.strip():
                what = "empty text" if not text else "only whitespace (no text)"
                raise NlpkitError(f"{name}: {what}, nothing to score")
            key = self._text_key(w, text, s.per_token)
            entry = self.results.get_many([key], check=lambda v: _valid_text(v, s.per_token)).get(key)
            if entry is None:
                p, scored = self._score_text(text, w, progress, self._elsewhere(map_windows), windows_cached=True)
                entry = self._entry(p, scored, s.per_token)
                self.results.put(key, entry)
            p = Perplexity(*entry["p"])
            if s.per_token:
                yield from ({"file": name, "position": pos, "id": i, "token": tok, "logprob": lp}
                            for pos, i, tok, lp in entry["rows"])
            else:
                yield {"file": name, **perplexity_stats(p), **({"total": False} if several else {})}
                totals.append(p)
        if several and totals:
            yield total_record(totals)

    def _elsewhere(self, map_windows):
        """`records`' window mapper on the workers (each loads the model from `worker_key`)."""
        if map_windows is None:
            return None
        from nlpkit.lm.threads import blas_threads
        from nlpkit.lm.perplexity.window_scoring import score_windows_task

        key = self.lm().worker_key

        def elsewhere(seq: list[int], windows: list[Window]):
            return map_windows(score_windows_task, [(w.tokens(seq), w.first) for w in windows], (key, blas_threads()))
        return elsewhere

    def _window_mapper(self, text_key: str, progress, elsewhere) -> Callable:
        """A `score_windows` mapper: each window's log-probabilities from the cache, the missing ones computed
        (here: `local_windows`; or by `elsewhere`) and stored one by one as they come."""
        import numpy as np

        from nlpkit.lm.perplexity.window_scoring import local_windows

        def mapped(seq: list[int], windows: list[Window]) -> Iterator[np.ndarray]:
            keys = [make_key("perplexity-window", text_key, k, w.start, w.end, w.first, w.swap) for k, w in
                    enumerate(windows)]
            found = self.results.get_many(keys, check=lambda v: isinstance(v, list)
                                          and all(isinstance(x, float) for x in v), count="parts")
            todo = [w for w, k in zip(windows, keys) if k not in found]
            done = iter(elsewhere(seq, todo) if elsewhere is not None else local_windows(self.lm(), seq, todo)) \
                if todo else iter(())
            for n, (w, k) in enumerate(zip(windows, keys), 1):
                lp = found.get(k)
                if lp is None or len(lp) != len(w.positions):
                    lp = [float(x) for x in next(done)]
                    self.results.put(k, lp, count="parts")
                if progress:
                    progress(n, len(windows))
                yield np.asarray(lp, dtype=np.float64)
        return mapped

    # ------------------------------------------------------------------ lines
    def _line_records(self, paths, w: "_Resolved", progress) -> Iterator[dict]:
        """`records._line_records` over the cache: each line a text of its own."""
        from nlpkit.io import display_name, iter_lines

        s = self.settings
        for path in paths:
            name = display_name(path)
            lines = list(iter_lines(path, errors=s.errors))
            keys = [self._text_key(w, line, s.per_token) for line in lines]
            found = self.results.get_many(keys, check=lambda v: _valid_text(v, s.per_token))
            for lineno, (line, key) in enumerate(zip(lines, keys), 1):
                entry = found.get(key)
                if entry is None:
                    try:
                        p, scored = self._score_text(line, w)
                    except TooShort:
                        p = scored = None
                    entry = self._entry(p, scored, s.per_token)
                    self.results.put(key, entry)
                    found[key] = entry
                if entry.get("short"):
                    if not s.per_token:
                        yield {"file": name, "line": lineno, "tokens": 0, "words": 0, "bytes": 0}
                elif s.per_token:
                    yield from ({"file": name, "line": lineno, "position": pos, "id": i, "token": tok,
                                 "logprob": lp} for pos, i, tok, lp in entry["rows"])
                else:
                    yield {"file": name, "line": lineno, **perplexity_stats(Perplexity(*entry["p"]))}

    def _dask_lines(self, paths, progress, map_windows, map_lines) -> Iterator[dict]:
        """Lines on a Dask cluster: the workers score the files' lines as without the cache (not stored)."""
        self.results._warn("results cache: lines scored one by one on a Dask cluster are not cached (scored here, "
                           "they are)")
        return self._plain_run(paths).records(progress, map_windows, map_lines)

    # ------------------------------------------------------------------ n-gram models
    def _ngram_run(self, paths: Sequence[str], meta: dict) -> PerplexityRun:
        """An n-gram model's run: its records stored whole, keyed by every input's content."""
        from nlpkit.io import read_text

        s = self.settings

        def records(progress=None, map_windows=None, map_lines=None) -> Iterator[dict]:
            if "-" in paths:
                return self._plain_run(paths).records(progress, map_windows, map_lines)
            texts = [read_text(p, errors=s.errors) for p in paths]
            key = make_key("perplexity-ngram", self._base(), list(paths), s.per_line, s.per_token, texts)
            got = self.results.get_many([key], check=lambda v: isinstance(v, list)
                                        and all(isinstance(r, dict) for r in v)).get(key)
            if got is None:
                got = _roundtrip(list(self._plain_run(paths).records(progress, map_windows, map_lines)))
                self.results.put(key, got)
            return iter(got)

        return PerplexityRun(list(meta["columns"]), meta["signature"], records, digits=meta["digits"],
                             context=None, stride=None)


@dataclass(frozen=True)
class _Resolved:
    """The window settings in force (`perplexity_run`'s resolution, as stored)."""

    mode: str
    context: int
    stride: int | None
    add_bos: bool


def _roundtrip(value):
    import json

    from nlpkit.evaluation.results_cache import encode_value

    return json.loads(encode_value(value))


def _valid_meta(v) -> bool:
    return (isinstance(v, dict) and isinstance(v.get("columns"), list) and isinstance(v.get("signature"), str)
            and isinstance(v.get("digits"), int) and "context" in v and "stride" in v and "add_bos" in v)


def _valid_text(v, per_token: bool) -> bool:
    if not isinstance(v, dict):
        return False
    if v.get("short") is True:
        return True
    p = v.get("p")
    ok = isinstance(p, list) and len(p) == len(PERPLEXITY_FIELDS) and all(isinstance(x, (int, float)) for x in p)
    return ok and (not per_token or isinstance(v.get("rows"), list))
