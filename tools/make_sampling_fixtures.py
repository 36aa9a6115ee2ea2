"""Regenerate tests/fixtures/sampling/*.npz: transformers' logits processors on stored logits.

Needs torch==2.13.0 and transformers (test/benchmark dependencies, never imported by nlpkit).
The tests compare nlpkit.lm.generation.sampling against these arrays without torch.

Each case stores the input logits `[b, V]` (float32), the token history `[b, t]` and the output of
each processor alone and of the whole chain that transformers' own `_get_logits_processor` builds
from a GenerationConfig (so the order is transformers', not ours).

    /work/venv/bin/python tools/make_sampling_fixtures.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
from transformers.generation.logits_process import (MinPLogitsWarper, RepetitionPenaltyLogitsProcessor,
                                                    TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "sampling"

# (name, settings) of the chains checked; the alone-cases come from the same settings.
CHAINS = [
    ("chain_all", dict(repetition_penalty=1.3, temperature=0.7, top_k=20, top_p=0.9, min_p=0.05)),
    ("chain_topk_topp", dict(temperature=1.5, top_k=50, top_p=0.8)),
    ("chain_rep_minp", dict(repetition_penalty=0.8, temperature=1.2, min_p=0.1)),
    ("chain_greedy_rep", dict(repetition_penalty=1.5, do_sample=False)),
]
ALONE = {
    "rep": [1.2, 0.7, 2.0],
    "temp": [0.5, 1.7],
    "topk": [1, 5, 40],
    "topp": [0.1, 0.5, 0.9, 0.999],
    "minp": [0.02, 0.2, 0.9],
}


def make_logits(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Four rows of 257 logits with different shapes (flat, peaked, heavy ties, negative) + histories."""
    V = 257
    rows = [rng.normal(0, 1, V), rng.normal(0, 4, V), np.round(rng.normal(0, 1, V), 1), rng.normal(-3, 2, V)]
    rows[1][7] = 12.0  # one dominant token
    logits = np.stack(rows).astype(np.float32)
    history = rng.integers(0, V, size=(4, 12))
    history[0, :3] = [0, 0, 5]  # repeated ids count once
    return logits, history


def tiny_model() -> LlamaForCausalLM:
    cfg = LlamaConfig(vocab_size=257, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    return LlamaForCausalLM(cfg)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261122)
    logits, history = make_logits(rng)
    ids = torch.tensor(history)
    scores = torch.tensor(logits)
    arrays: dict[str, np.ndarray] = {"logits": logits, "history": history}
    meta: dict[str, object] = {"alone": {}, "chains": {}}
    makers = {"rep": RepetitionPenaltyLogitsProcessor, "temp": TemperatureLogitsWarper,
              "topk": TopKLogitsWarper, "topp": TopPLogitsWarper, "minp": MinPLogitsWarper}
    for kind, values in ALONE.items():
        for v in values:
            proc = makers[kind](int(v) if kind == "topk" else float(v))
            key = f"{kind}_{v}"
            arrays[key] = proc(ids, scores.clone()).numpy()
            meta["alone"][key] = {"kind": kind, "value": v}
    model = tiny_model()
    for name, settings in CHAINS:
        gc = GenerationConfig(do_sample=settings.get("do_sample", True), top_k=settings.get("top_k", 0),
                              **{k: v for k, v in settings.items() if k not in ("do_sample", "top_k")})
        procs = model._get_logits_processor(gc, input_ids_seq_length=ids.shape[1], device="cpu")
        out = scores.clone()
        for p in procs:
            out = p(ids, out)
        arrays[name] = out.numpy()
        meta["chains"][name] = {"settings": settings, "processors": [type(p).__name__ for p in procs]}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez_compressed(OUT / "processors.npz", **arrays)
    print(json.dumps(meta, indent=1))
    print(f"wrote {OUT / 'processors.npz'}")


if __name__ == "__main__":
    main()
