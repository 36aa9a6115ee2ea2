"""The engine's weights: one dataclass per layer kind (`LlamaLayer`, `GPT2Layer`) and the model's `Weights`.

Plain arrays the loaders fill (`nlpkit.lm.transformer.loaders`), so nothing here knows about file formats; the
forward pass (`nlpkit.lm.transformer.model`) reads them. Projection matrices are `[in, out]`; a field may hold
a stored (native) tensor instead, expanded where it is used (`stored_weights`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nlpkit.lm.transformer.stored_weights import is_stored


@dataclass
class LlamaLayer:
    """One decoder layer of any RoPE family; optional parts are None when the family has none."""
    attn_norm: np.ndarray | None  # [d]  pre-attention norm (None: olmo2)
    wqkv: np.ndarray  # [d, (nh + 2 nkv) hd]  columns: q heads, k heads, v heads
    wo: np.ndarray  # [nh hd, d]
    mlp_norm: np.ndarray | None  # [d]  pre-MLP norm (None: olmo2)
    w_gate_up: np.ndarray  # [d, 2 h]  columns: gate, up  ([d, h] "up" only when not gated)
    w_down: np.ndarray  # [h, d]
    bqkv: np.ndarray | None = None  # [(nh + 2 nkv) hd]  (attention_bias models)
    bo: np.ndarray | None = None  # [d]
    attn_norm_b: np.ndarray | None = None  # [d]  LayerNorm biases (gpt_neox)
    mlp_norm_b: np.ndarray | None = None  # [d]
    q_norm: np.ndarray | None = None  # [hd] per head (qwen3, gemma3) or [nh hd] over the projection (olmo2)
    k_norm: np.ndarray | None = None  # [hd] or [nkv hd]
    attn_post_norm: np.ndarray | None = None  # [d]  norm of the attention output (gemma2/3, olmo2)
    mlp_post_norm: np.ndarray | None = None  # [d]  norm of the MLP output
    b_up: np.ndarray | None = None  # [h]  MLP biases (gpt_neox)
    b_down: np.ndarray | None = None  # [d]


@dataclass
class GPT2Layer:
    ln1_g: np.ndarray  # [d]
    ln1_b: np.ndarray  # [d]
    wqkv: np.ndarray  # [d, 3 d]
    bqkv: np.ndarray  # [3 d]
    wo: np.ndarray  # [d, d]
    bo: np.ndarray  # [d]
    ln2_g: np.ndarray  # [d]
    ln2_b: np.ndarray  # [d]
    w_fc: np.ndarray  # [d, h]
    b_fc: np.ndarray  # [h]
    w_proj: np.ndarray  # [h, d]
    b_proj: np.ndarray  # [d]


@dataclass
class Weights:
    lm_head: np.ndarray  # [d, V]  output projection (the transposed embedding when tied)
    embed: np.ndarray | None = None  # [V, d]  input embedding; None when tied (lookup reads lm_head columns)
    layers: list = field(default_factory=list)  # LlamaLayer | GPT2Layer
    norm_g: np.ndarray | None = None  # [d]  final RMSNorm / LayerNorm weight
    norm_b: np.ndarray | None = None  # [d]  final LayerNorm bias (gpt2)
    pos_embed: np.ndarray | None = None  # [max_seq_len, d]  (gpt2)

    def embed_tokens(self, tokens: np.ndarray) -> np.ndarray:  # [b, t] -> [b, t, d]
        table = self.embed if self.embed is not None else self.lm_head
        if is_stored(table):  # native weights: the rows looked up, expanded (a tied lm_head is [V, d] as stored)
            return table.take_rows(tokens.reshape(-1)).reshape(*tokens.shape, -1)
        if self.embed is not None:
            return self.embed[tokens]
        b, t = tokens.shape
        # C order: the rows of a transposed gather would be strided, and every norm of the first layer would sum
        # them in another order than a contiguous row (the row-parallel and serial paths must give equal bits)
        return np.ascontiguousarray(np.take(self.lm_head, tokens.reshape(-1), axis=1).T).reshape(b, t, -1)
