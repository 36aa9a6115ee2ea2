"""`nlpkit serve`: one model behind an OpenAI-compatible HTTP API (the top floor, beside `nlpkit.cli`).

- `model`: the one function that loads the served model (`load_served_model`) and what the API needs of it
  (its reading of a prompt, token strings, the chat template, the tokenizer's description).
- `schemas`: a request body -> checked parameters, or an `ApiError` (400/422) naming the field.
- `engine`: one worker thread owns the model: scoring requests packed as `nlpkit score` packs them (the exact
  log-probabilities), generation requests joined into one continuous batch (one forward per step for all).
- `responses`: OpenAI-shaped bodies and stream chunks.
- `app`: the FastAPI routes, authentication, limits and OpenAI-shaped errors.

No wing imports this package; it is the only one that imports fastapi.
"""
