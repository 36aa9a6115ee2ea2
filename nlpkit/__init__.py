"""nlpkit: a command-line toolkit of NLP utilities with a small numpy core.

Each subcommand's algorithm lives in its wing: `nlpkit.edit` (edit distances), `nlpkit.stats`
(the counting core, PMI, TF-IDF, document readers), `nlpkit.retrieval` (BM25, RRF),
`nlpkit.bpe` (tokenizers), `nlpkit.lm` (the model engine), `nlpkit.mt` (BLEU, chrF, TER via sacrebleu).
"""

import sys as _sys

__version__ = "0.2.0"

# Modules moved in 0.2 (issue 13). The old paths import the new modules, with a
# DeprecationWarning, for one release; one table instead of a shim file per old path.
_MOVED = {
    "nlpkit.distance": "nlpkit.edit.distance",
    "nlpkit.bitparallel": "nlpkit.edit.bitparallel",
    "nlpkit.batch_distance": "nlpkit.edit.batch",
    "nlpkit.align": "nlpkit.edit.align",
    "nlpkit.spell": "nlpkit.edit.spell",
    "nlpkit.corpus": "nlpkit.stats.counting",
    "nlpkit.cooccur": "nlpkit.stats.pmi",
    "nlpkit.tfidf": "nlpkit.stats.tfidf",
    "nlpkit.documents": "nlpkit.stats.documents",
    "nlpkit.retrieval.corpus": "nlpkit.stats.documents",
    "nlpkit.mt_eval": "nlpkit.mt.bleu",
    # 0.3 (issue 24): the transformer engine's modules together; colliding names made distinct.
    "nlpkit.lm.model": "nlpkit.lm.transformer.model",
    "nlpkit.lm.config": "nlpkit.lm.transformer.config",
    "nlpkit.lm.cache": "nlpkit.lm.transformer.cache",
    "nlpkit.lm.rope": "nlpkit.lm.transformer.rope",
    "nlpkit.lm.loaders": "nlpkit.lm.transformer.loaders",
    "nlpkit.lm.loaders.hf": "nlpkit.lm.transformer.loaders.hf",
    "nlpkit.lm.loaders.gguf": "nlpkit.lm.transformer.loaders.gguf",
    "nlpkit.lm.loaders.safetensors": "nlpkit.lm.transformer.loaders.safetensors",
    "nlpkit.lm.scoring": "nlpkit.lm.perplexity",
    # issue 41: lm/ grouped by what it does; of its old paths, only release 0.1.0's keep an alias.
    "nlpkit.lm.sampling": "nlpkit.lm.generation.sampling",
    "nlpkit.bpe.batch": "nlpkit.bpe.parallel_encoding",
    "nlpkit.bleu": "nlpkit.mt.bleu",              # issue 24: a wing like the others, no top-level exemption
    # 0.4 (issue 34): the shard protocol on the ground floor, so that no wing imports `nlpkit.distributed`.
    "nlpkit.distributed.shards": "nlpkit.shards",
}


class _MovedModules:
    """A meta-path finder/loader that answers an old module path with the module's new home."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in _MOVED:
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(name, cls())

    def create_module(self, spec):
        import importlib
        import warnings

        new = _MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there (the old path goes in the "
                      "next release)", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module):
        pass


# First on the path: an old submodule path (`nlpkit.lm.loaders.hf`) must not be found by the
# ordinary finder under its aliased parent's __path__ and loaded a second time under the old name.
if not any(f is _MovedModules for f in _sys.meta_path):
    _sys.meta_path.insert(0, _MovedModules)
