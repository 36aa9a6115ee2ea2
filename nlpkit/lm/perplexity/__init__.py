"""Perplexity: token log-probabilities under a model, over windows chosen the way three references do.

The prefix token. As lm-evaluation-harness does, the text's first token is predicted from the model's
prefix token (BOS when the model defines one, else EOS/EOT), so that every token can be scored
(`add_bos=True`, the default whenever the model has such a token). `add_bos=False` (`--no-add-bos`)
leaves the prefix out: the first token is then context only, never scored.

- `sliding` — the transformers perplexity guide: windows of `context` tokens starting every `stride`
  tokens; each window scores only its last `trg_len` tokens (the labels -100 trick), so every token
  (after the prefix) is scored once, with up to `context - stride` tokens of left context — except
  when stride = context: then a window's first token has no prediction and, as in the guide, is not
  scored (the CLI warns).
- `disjoint` — lm-evaluation-harness `loglikelihood_rolling`: disjoint windows of `context` tokens,
  each conditioned on just the previous token (the first on the prefix token); every token is scored.
- `second-half` — llama.cpp `llama-perplexity`: chunks of `context` tokens (the prefix token swapped in
  first, as llama.cpp swaps BOS), scoring only the second half of each chunk; needs 2 x context tokens.

Every figure is over the scored tokens: the mean NLL is the plain mean of their log-probabilities in
every mode (for sliding the guide's own figure, each window's mean weighted by `trg_len - 1`, is kept
as `Scored.guide_mean_nll`), and the byte and word normalizations use the bytes and words those tokens
cover (`covered`): a token covers its own UTF-8 bytes; words are lm-evaluation-harness's pieces of
re.split(r"\\s+", text), and a word belongs to the span in which its first byte lies (the empty piece
after trailing whitespace to the span of the text's last byte). When every token is scored this is
exactly lm-evaluation-harness: words = len(re.split(r"\\s+", text)), bytes = the text's UTF-8 bytes.
Word perplexity exp(NLL / words), byte perplexity exp(NLL / bytes), bits per byte NLL / bytes / ln 2.

The package: `windows` (the window plans), `window_scoring` (a plan's windows scored under a model),
`text_perplexity` (a text's `Perplexity`), `records` (`perplexity_run`: what `nlpkit perplexity` prints),
`comparison` and `divergence` (`perplexity --compare`: KLD, top-token agreement); llama.cpp's standard errors are
`nlpkit.lm.uncertainty` (an n-gram model's perplexity uses them too). The names of the first four are re-exported
here (`from nlpkit.lm.perplexity import X`, as release 0.1.0's `nlpkit.lm.scoring`), with a transformer's window
conventions (`prefix_token`, `default_context`, `check_context`: `nlpkit.lm.transformer.conventions`).
"""

from __future__ import annotations

from nlpkit.lm.perplexity.records import (PERPLEXITY_PER_LINE, PERPLEXITY_PER_TOKEN, PERPLEXITY_SUMMARY, TOTAL,
                                          perplexity_run)
from nlpkit.lm.perplexity.text_perplexity import (Perplexity, count_words, covered, perplexity, score_ids,
                                                  score_lines_shard, summarize_scored, text_perplexity)
from nlpkit.lm.perplexity.window_scoring import (CHUNK, Scored, local_windows, log_softmax_at, row_log_normalizers,
                                                 score_windows, score_windows_task, window_logits, window_logprobs,
                                                 window_primitive)
from nlpkit.lm.perplexity.windows import (MODES, TooShort, Window, check_window, default_stride, disjoint_windows,
                                          second_half_windows, sliding_windows, window_plan)
from nlpkit.lm.spec import cached_model
from nlpkit.lm.transformer.conventions import check_context, default_context, prefix_token

__all__ = ["CHUNK", "MODES", "PERPLEXITY_PER_LINE", "PERPLEXITY_PER_TOKEN", "PERPLEXITY_SUMMARY", "TOTAL", "Perplexity",
           "Scored", "TooShort", "Window", "cached_model", "check_context", "check_window", "count_words", "covered",
           "default_context", "default_stride", "disjoint_windows", "local_windows", "log_softmax_at",
           "perplexity", "perplexity_run", "prefix_token", "row_log_normalizers", "score_ids",
           "score_lines_shard", "score_windows", "score_windows_task", "second_half_windows", "sliding_windows",
           "summarize_scored", "text_perplexity", "window_logits", "window_logprobs", "window_plan",
           "window_primitive"]
