"""The numpy language-model engine: config, forward pass, KV cache, RoPE, loaders, scoring."""
