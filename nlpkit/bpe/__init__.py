"""Byte-level BPE: a trainer with HF tokenizers' exact merges, and a tokenizer for its files.

    from nlpkit.bpe import Tokenizer, train_bpe
    tok = train_bpe([Path("corpus.txt")], vocab_size=8000, special_tokens=["<|endoftext|>"])
    tok.save("out/")
"""

from nlpkit.bpe.spec import AddedToken
from nlpkit.bpe.tokenizer import Tokenizer


def train_bpe(*args, **kwargs) -> Tokenizer:
    """See `nlpkit.bpe.trainer.train_bpe` (imported lazily)."""
    from nlpkit.bpe.trainer import train_bpe as _train
    return _train(*args, **kwargs)


__all__ = ["AddedToken", "Tokenizer", "train_bpe"]
