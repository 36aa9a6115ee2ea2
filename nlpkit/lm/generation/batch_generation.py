"""Continuations of many prompts decoded together (continuous batching), written once for every `LanguageModel`.

`generate_batched(lm, requests, batch_size=N)` keeps up to N sequences live in the model's decoding batch
(`LanguageModel.decoding_batch`): the transformer's `DecodingBatch` (one forward per step whose matrix products have
a row per live sequence, each sequence with its own KV cache and positions: `nlpkit.lm.transformer.batch_decoding`),
or a `StateBatch` (an n-gram model, a longrope transformer: one `DecodingState` per sequence advanced in turn). A
sequence leaves the batch when it ends (an end token, its own stop test, its token budget, or a full context) and
the next prompt joins at once, so the batch stays full.

Each sequence decodes exactly as it would alone (`nlpkit.lm.generation.generate_ids`): its own repetition-penalty
history and its own random generator seeded with `seed`, so a seeded run draws the same tokens whatever the batch
size, and every prompt's continuation equals `generate PROMPT --seed SEED`'s (a request may bring its own generator:
`sample --prompts`, nlpkit.lm.generation.batch_sampling). Results come out in input order, each as soon as it and every earlier
one are done. Requests of one `family` share their prompt: a batch with `fork(source, key, length, max_new_tokens)`
gives a joining member a copy of a live member's first `length` keys and values instead of a prefill.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Iterator

import numpy as np

from nlpkit.errors import UsageError
from nlpkit.lm.interface import Prompt
from nlpkit.lm.generation.sampling import SamplingConfig, draw, probabilities, process_logits, token_logprobs

DEFAULT_BATCH = 32  # live sequences, at most (the batch's KV budget may admit fewer): SmolLM2-135M decoded 48 short
# generate items in 6.2 s at 16, 4.5 s at 32, 3.9 s at 48 (benchmarks/score.py --generate), its decode steps 6.3x one
# stream at 16 and 9.2x at 24 (benchmarks/generation.py)
PREFILL_TOKENS = 1024  # prompts joining together are prefilled in packed forwards of at most this many tokens


@dataclass
class Request:
    """One prompt to continue: at most `max_new_tokens` tokens; `on_token(id)` sees each new token (not an end
    token) and returns True to end the sequence there ("stop": a stop string is complete); `rng` draws its tokens
    (anything with `random(size)`; default: its own generator seeded with `seed`). Requests of one `family` have
    the same prompt: on a batch that can `fork` a sequence, one joining while another of its family is live copies
    that one's prompt keys and values instead of prefilling them again (`sample --prompts`: a prompt's N
    continuations)."""

    prompt: Prompt
    max_new_tokens: int
    on_token: Callable[[int], bool] | None = None
    rng: object | None = None
    family: Hashable | None = None


@dataclass
class Generated:
    """One finished continuation: its new ids (an end token left out), why it ended (eos, stop, length, context)
    and its log-probabilities (sums over its tokens, an ending end token included, as `sample_batch` counts)."""

    index: int
    ids: list[int] = field(default_factory=list)
    finish: str = ""
    logprob: float = 0.0
    logprob_filtered: float = 0.0
    prompt_tokens: int = 0
    end_id: int | None = None  # the end token that ended it (finish "eos")


@dataclass
class BatchStats:
    """What `--stats` reports of a batched run: totals over every sequence."""

    prompt_tokens: int = 0
    new_tokens: int = 0
    steps: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    most_live: int = 0

    @property
    def decode_tps(self) -> float:
        return self.new_tokens / self.decode_seconds if self.decode_seconds > 0 else float("inf")


@dataclass
class _Live:
    index: int
    request: Request
    rng: np.random.Generator  # or a `Request.rng`
    seen: np.ndarray  # [V] tokens of the prompt and continuation (repetition penalty)
    logits: np.ndarray  # [V] the next token's
    out: Generated
    ends: frozenset  # the ids that end it (the model's EOS, a chat template's end of turn)


def _take_token(s: _Live, cfg: SamplingConfig, room: int, stats: BatchStats) -> tuple[int, str]:
    """Choose a live sequence's next token and add it to its output: (the token, why the sequence ends: 'eos',
    'stop', 'length', 'context' with `room` tokens left in its state, or '' while it goes on)."""
    tid = _choose(s, cfg)
    out = s.out
    lp = float(token_logprobs(s.logits[None, :], np.array([tid]))[0])
    out.logprob += lp
    s.seen[tid] = True
    if tid in s.ends:
        out.end_id = tid
        return tid, "eos"
    out.ids.append(tid)
    stats.new_tokens += 1
    if s.request.on_token is not None and s.request.on_token(tid):
        return tid, "stop"
    if len(out.ids) >= s.request.max_new_tokens:
        return tid, "length"
    return tid, "context" if room <= 0 else ""


def generate_batched(lm, requests: Iterable[Request], *, batch_size: int = DEFAULT_BATCH,
                     sampling: SamplingConfig | None = None, seed: int | None = None, ignore_eos: bool = False,
                     context: int | None = None, stats: BatchStats | None = None) -> Iterator[Generated]:
    """`Generated` of each request, in input order, decoded `batch_size` at a time (see the module docstring)."""
    if batch_size < 1:
        raise UsageError(f"`batch_size` must be at least 1, got {batch_size}")
    cfg = (sampling or SamplingConfig()).validate()
    stats = stats if stats is not None else BatchStats()
    batch = lm.decoding_batch(context)
    V = lm.vocab_size
    pending = enumerate(requests)
    more = True
    live: dict[int, _Live] = {}
    done: dict[int, Generated] = {}
    next_out = 0
    forks = batch.forks
    families: dict = {}  # family -> (its prompt's next-token logits, its live keys), while one is live

    def enter(i: int, req: Request, out: Generated, logits: np.ndarray) -> None:
        ids = req.prompt.ids
        seen = np.zeros(V, dtype=bool)
        p = np.asarray(ids, dtype=np.int64)
        seen[p[p < V]] = True
        rng = req.rng if req.rng is not None else np.random.default_rng(seed)
        live[i] = _Live(i, req, rng, seen, logits, out, lm.end_ids(ignore_eos, req.prompt.end_ids))
        if forks and req.family is not None:
            families.setdefault(req.family, (logits.copy(), set()))[1].add(i)

    def retire(key: int) -> None:
        s = live.pop(key)
        batch.leave(key)
        done[key] = s.out
        fam = s.request.family
        if fam in families:
            families[fam][1].discard(key)
            if not families[fam][1]:
                del families[fam]

    held: list = []  # a request the batch's memory could not take yet: it joins first when a sequence leaves

    def fill() -> None:
        nonlocal more
        joining: list[tuple[int, Request, Generated]] = []
        while (held or more) and len(live) + len(joining) < batch_size:
            try:
                i, req = held.pop() if held else next(pending)
            except StopIteration:
                more = False
                break
            if req.max_new_tokens < 0:
                raise UsageError(f"`max_new_tokens` must be >= 0, got {req.max_new_tokens}")
            if req.max_new_tokens == 0:
                done[i] = Generated(i, prompt_tokens=len(req.prompt.ids), finish="length")
                continue
            wanted = [len(r.prompt.ids) + r.max_new_tokens for _, r, _ in joining]
            if (live or joining) and not batch.can_take([*wanted, len(req.prompt.ids) + req.max_new_tokens]):
                held.append((i, req))  # the batch's memory: it joins when a sequence leaves
                break
            joining.append((i, req, Generated(i, prompt_tokens=len(req.prompt.ids))))
        prefill, copies = _split_families(joining, set(families), forks)
        for group in _prefill_groups(prefill):
            for (i, req, out), logits in zip(group, _join(batch, group, stats)):
                enter(i, req, out, logits)
        for i, req, out in copies:
            logits, keys = families[req.family]
            batch.fork(next(iter(keys)), i, len(req.prompt.ids), req.max_new_tokens)
            enter(i, req, out, logits.copy())

    while True:
        fill()
        while next_out in done:
            yield done.pop(next_out)
            next_out += 1
        if not live:
            if not more and not held:
                return
            continue
        stats.most_live = max(stats.most_live, len(live))
        t0 = time.perf_counter()
        feed: list[int] = []
        for key in batch.keys:
            tid, finish = _take_token(live[key], cfg, batch.room(key), stats)
            if finish:
                live[key].out.finish = finish
                retire(key)
            else:
                feed.append(tid)
        if feed:
            logits = batch.step(feed)  # [n, V]
            full = set(batch.full)
            for key, row in zip(batch.keys, logits):
                if key in full:  # a state whose context is full: the token chosen cannot be fed
                    live[key].out.finish = "context"
                    retire(key)
                else:
                    live[key].logits = row
            stats.steps += 1
        stats.decode_seconds += time.perf_counter() - t0


def _split_families(joining: list, live_families: set, forks: bool) -> tuple[list, list]:
    """(the joining sequences that prefill, those that copy a family member's state): a family's first joins by a
    prefill unless one of it is live, the others copy it (when the batch forks)."""
    prefill, copies, fams = [], [], set(live_families)
    for item in joining:
        fam = item[1].family
        (copies if forks and fam is not None and fam in fams else prefill).append(item)
        if forks and fam is not None:
            fams.add(fam)
    return prefill, copies


def _join(batch, group: list, stats: BatchStats) -> list:
    """Prefill a group of joining sequences in one `join_many` (timed, counted in `stats`); their next-token
    logits."""
    t0 = time.perf_counter()
    rows = batch.join_many([(i, req.prompt.ids, req.max_new_tokens) for i, req, _ in group])
    stats.prefill_seconds += time.perf_counter() - t0
    stats.prompt_tokens += sum(len(req.prompt.ids) for _, req, _ in group)
    return rows


def _prefill_groups(joining: list) -> list[list]:
    """The joining sequences cut into runs of at most PREFILL_TOKENS prompt tokens (a longer prompt alone), each
    prefilled in one packed forward."""
    groups: list[list] = []
    total = 0
    for item in joining:
        n = len(item[1].prompt.ids)
        if not groups or total + n > PREFILL_TOKENS:
            groups.append([])
            total = 0
        groups[-1].append(item)
        total += n
    return groups


def _choose(s: _Live, cfg: SamplingConfig) -> int:
    """The next token of one sequence, as `decode_steps` chooses it for one row (its own generator)."""
    logits = s.logits[None, :]  # [1, V]
    filtered = process_logits(logits, s.seen[None, :], cfg)
    if cfg.greedy:
        return int(np.argmax(filtered, axis=-1)[0])
    probs = probabilities(filtered, cfg)
    tid = int(draw(probs, s.rng)[0])
    s.out.logprob_filtered += float(np.log(probs[0, tid]))
    return tid
