"""nlpkit: a command-line toolkit of NLP utilities with a small numpy core.

Each subcommand's algorithm lives in its wing: `nlpkit.edit` (edit distances), `nlpkit.stats`
(the counting core, PMI, TF-IDF, document readers), `nlpkit.retrieval` (BM25, RRF),
`nlpkit.bpe` (tokenizers), `nlpkit.lm` (the model engine), `nlpkit.mt` (BLEU, chrF, TER via sacrebleu).
"""

import sys as _sys

__version__ = "0.2.0"

# Module paths release 0.1.0 had that moved since (issue 41: only a released path keeps an alias). Each imports
# its new module with a DeprecationWarning until the next release; one table instead of a shim file per old path.
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
    "nlpkit.lm.model": "nlpkit.lm.transformer.model",
    "nlpkit.lm.config": "nlpkit.lm.transformer.config",
    "nlpkit.lm.cache": "nlpkit.lm.transformer.cache",
    "nlpkit.lm.rope": "nlpkit.lm.transformer.rope",
    "nlpkit.lm.loaders": "nlpkit.lm.transformer.loaders",
    "nlpkit.lm.loaders.hf": "nlpkit.lm.transformer.loaders.hf",
    "nlpkit.lm.loaders.gguf": "nlpkit.lm.transformer.loaders.gguf",
    "nlpkit.lm.loaders.safetensors": "nlpkit.lm.transformer.loaders.safetensors",
    "nlpkit.lm.scoring": "nlpkit.lm.perplexity",
    "nlpkit.lm.sampling": "nlpkit.lm.generation.sampling",
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
