"""Capabilities declared by a backend's class, never probed: what an n-gram model cannot do is a usage error (exit 2)
worded from its declaration, whether the option came from the command line or from its environment variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nlpkit.lm.interface import Capability, Decoder, SentenceScoring, TokenLogits, WindowScoring
from nlpkit.lm.ngram.ngram_lm import NgramLM
from nlpkit.lm.transformer.transformer_lm import TransformerLM

ARPA = str(Path(__file__).resolve().parents[1] / "fixtures" / "ngram" / "tiny-3.arpa")
PKG = Path(__file__).resolve().parents[2] / "nlpkit"
PROTOCOLS = {Capability.WINDOWS: WindowScoring, Capability.LOGITS: TokenLogits,
             Capability.SENTENCES: SentenceScoring, Capability.GENERATE: Decoder}


def _members(protocol) -> set[str]:
    return {n for n in {*vars(protocol), *protocol.__annotations__} if not n.startswith("_")}


@pytest.mark.parametrize("backend", [TransformerLM, NgramLM])
def test_every_capability_a_backend_lacks_has_its_reason_and_no_member(backend):
    assert set(Capability) - backend.capabilities == set(backend.why_not)
    for capability, protocol in PROTOCOLS.items():
        has = {n for n in _members(protocol) if hasattr(backend, n)}
        assert has == (_members(protocol) if capability in backend.capabilities else set()), (capability, has)


@pytest.mark.parametrize(("args", "env", "said"), [
    (["perplexity", "-m", ARPA, "--weights", "native", "-"], {}, "--weights"),
    (["perplexity", "-m", ARPA, "-"], {"NLPKIT_WEIGHTS": "native"}, "$NLPKIT_WEIGHTS"),
    (["generate", "-m", ARPA, "the", "--weights", "float32"], {}, "--weights"),
    (["sample", "-m", ARPA, "the"], {"NLPKIT_WEIGHTS": "native"}, "$NLPKIT_WEIGHTS"),
    (["score", "-m", ARPA, "--weights", "native", "-"], {}, "--weights"),
    (["score", "-m", ARPA, "-"], {"NLPKIT_WEIGHTS": "native"}, "$NLPKIT_WEIGHTS"),
])
def test_weights_on_an_ngram_model_is_refused_as_chat_is(cli, args, env, said):
    r = cli(*args, input='{"context": "the", "continuation": " cat"}\n', env=env)
    assert r.returncode == 2, r.stderr
    err = r.stderr.decode()
    assert f"{said} does not apply to an n-gram model (its n-grams are held as read, it has no weights layout)" \
        in err and "Traceback" not in err
    assert r.stdout == b""


def test_score_takes_weights_when_one_of_its_models_has_a_layout(cli):
    r = cli("score", "-m", ARPA, "-m", "default", "--weights", "native", "-",
            input='{"context": "the", "continuation": " cat"}\n')
    assert r.returncode == 0, r.stderr


def test_chat_is_refused_in_the_same_words(cli):
    r = cli("generate", "-m", ARPA, "the", "--chat")
    assert r.returncode == 2
    assert "--chat does not apply to an n-gram model (it has no chat template)" in r.stderr.decode()


def test_auto_weights_from_the_environment_pass_for_an_ngram_model(cli):
    r = cli("perplexity", "-m", ARPA, "-", input="the cat\n", env={"NLPKIT_WEIGHTS": ""})
    assert r.returncode == 0, r.stderr


def test_no_module_probes_a_model_batch_or_scorer():
    """Models, batches and scorers say what they can do by their type (`capabilities`, declared attributes): no
    hasattr/getattr on them in the lm wing, the evaluation wing or the commands."""
    probe = re.compile(r"\b(hasattr|getattr)\((self\.)?(model|lm|batch|scorer|base|tok|mask|model\.\w+), \"")
    found = [f"{p.relative_to(PKG)}:{i}" for d in ("lm", "evaluation", "cli") for p in (PKG / d).rglob("*.py")
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if probe.search(line)]
    assert not found, found
