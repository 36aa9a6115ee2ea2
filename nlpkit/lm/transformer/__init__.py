"""The numpy transformer engine: one backend of nlpkit's language models (the n-gram model is the other).

    transformer_lm.py  `TransformerLM`: the engine as a `LanguageModel` (tokens, logprobs, decoding state)
    packed_scoring.py  continuation scoring (`nlpkit score`): lm-eval's encoding, many items packed in one forward
    families.py  every model family in one table: names, config/metadata keys, tensor names, block options
    config.py    hyper-parameters from config.json / GGUF metadata -> `ModelConfig`, driven by the table
    model.py     the forward pass: one decoder block with per-family options, and gpt2
    cache.py     the key/value cache for incremental decoding
    rope.py      rotary position embeddings for every scaling method
    loaders/     a Hugging Face directory (hf, safetensors) or a GGUF file (gguf) -> `Model`; weights: the
                 block's tensors from either format, named by the table
"""
