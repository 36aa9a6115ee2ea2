"""The prepared-model cache (nlpkit/lm/prepared/): a second load maps what the first one built, gives the same
arrays and the same numbers (KenLM's, transformers'), and a corrupt, truncated or stale entry is rebuilt.

Every test points $NLPKIT_CACHE_DIR at its own tmp_path (the suite's conftest already keeps it out of the
user's cache)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nlpkit.lm.ngram.ngram_model import load_ngram_model
from nlpkit.lm.ngram.line_scoring import score_lines
from nlpkit.lm.prepared import Prepared, entry_path, fingerprint, flush, load_prepared, read_entry

REPO = Path(__file__).resolve().parents[2]
NGRAM = REPO / "tests" / "fixtures" / "ngram"
QUERY = json.loads((NGRAM / "query.json").read_text())


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("NLPKIT_CACHE_DIR", str(d))
    monkeypatch.delenv("NLPKIT_NO_CACHE", raising=False)
    return d


def heldout_log10(model) -> np.ndarray:
    lines = (NGRAM / "heldout.txt").read_text(encoding="utf-8").split("\n")[:-1]
    return np.concatenate([s.log10 for s in score_lines(model, lines)])


def ngram_arrays(model) -> dict:
    out = {"vocab": model.vocab}
    for k in range(model.order):
        out[f"keys{k}"], out[f"logprob{k}"], out[f"backoff{k}"] = model.keys[k], model.logprob[k], model.backoff[k]
        if k:
            out[f"hash{k}"] = model.key_index[k].vals
    return out


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
        else:
            assert a[k] == b[k], k


def test_cached_arpa_equals_a_fresh_load_and_scores_as_kenlm_query(cache):
    path = NGRAM / "kenlm-4.arpa.gz"
    fresh = load_ngram_model(path, use_cache=False)
    assert not cache.exists()  # use_cache=False writes nothing
    load_ngram_model(path)  # builds the entry (written by a thread: flush waits for it)
    flush()
    entry = entry_path([path], "ngram")
    assert entry.is_file()
    cached = load_ngram_model(path)
    assert not cached.keys[1].flags.writeable  # mapped from the entry, read-only
    assert_same(ngram_arrays(cached), ngram_arrays(fresh))
    np.testing.assert_allclose(heldout_log10(cached), QUERY["kenlm-4"]["log10"], atol=1e-5, rtol=0)


SRILM_NO_UNK = """\\data\\
ngram 1=4
ngram 2=1

\\1-grams:
-0.5\t<s>\t-0.5
-1.0\t</s>
-0.7\ta
-0.7\tb

\\2-grams:
-0.2\t<s> a

\\end\\
"""


def test_cached_model_warns_again(cache, tmp_path):
    p = tmp_path / "no-unk.arpa"
    p.write_text(SRILM_NO_UNK)
    for _ in range(2):  # built, then from the cache
        warned = []
        model = load_ngram_model(p, warn=warned.append)
        flush()
        assert warned == [f"{p}: the model has no <unk>; unknown words get log10 probability -100 (as KenLM)"]
        s = next(iter(score_lines(model, ["a c"])))
        assert s.log10.tolist() == pytest.approx([-0.2, -100.0 + 0.0, -1.0])


def _tag(entry: Path) -> str:
    """The kind/version tag of the n-gram loader's entries (what read_entry checks)."""
    from nlpkit.lm.ngram import ngram_model
    from nlpkit.lm.prepared import code_version

    here = Path(ngram_model.__file__).parent
    return f"{ngram_model.CACHE_KIND}/{code_version(*(here / f for f in ngram_model._MADE_BY))}"


def _entry(cache: Path) -> Path:
    (entry,) = cache.glob("*.npc")
    return entry


@pytest.mark.parametrize("damage", ["flip a data byte", "truncate", "flip a header byte", "empty"])
def test_corrupt_entry_is_detected_and_rebuilt(cache, tmp_path, damage):
    src = tmp_path / "lm.arpa.gz"
    src.write_bytes((NGRAM / "kenlm-3.arpa.gz").read_bytes())
    want = ngram_arrays(load_ngram_model(src, use_cache=False))
    load_ngram_model(src)
    flush()
    entry = _entry(cache)
    data = bytearray(entry.read_bytes())
    if damage == "flip a data byte":
        data[-100] ^= 0x10
    elif damage == "truncate":
        del data[len(data) // 2:]
    elif damage == "flip a header byte":
        data[40] ^= 0x01
    else:
        data = bytearray()
    entry.write_bytes(data)
    assert read_entry(entry, _tag(entry), fingerprint([src])) is None  # the damaged entry is not trusted
    model = load_ngram_model(src)  # rebuilt and written again ...
    flush()
    assert_same(ngram_arrays(model), want)
    assert read_entry(entry, _tag(entry), fingerprint([src])) is not None  # ... valid


def test_stale_entry_is_rebuilt_when_the_source_changes(cache, tmp_path):
    src = tmp_path / "lm.arpa"
    src.write_text(SRILM_NO_UNK)
    assert load_ngram_model(src).vocab_size == 5  # <s> </s> a b + <unk>
    flush()
    src.write_text(SRILM_NO_UNK.replace("ngram 1=4", "ngram 1=5").replace("-0.7\tb\n", "-0.7\tb\n-0.9\tc\n"))
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 10**9))
    assert load_ngram_model(src).vocab_size == 6
    flush()
    # the changed content is another entry (keyed by content); the stale one goes when the cache passes its cap
    assert len(list(cache.glob("*.npc"))) == 2
    assert load_ngram_model(src).vocab_size == 6 and load_ngram_model(src).keys[0].flags.writeable is False


def test_no_cache_option_writes_nothing(cache, cli):
    r = cli("perplexity", "--no-cache", "--model", str(NGRAM / "kenlm-2.arpa.gz"), str(NGRAM / "heldout.txt"))
    assert r.returncode == 0, r.stderr
    assert not cache.exists()
    r2 = cli("perplexity", "--model", str(NGRAM / "kenlm-2.arpa.gz"), str(NGRAM / "heldout.txt"))
    assert r2.returncode == 0 and r2.stdout == r.stdout
    assert len(list(cache.glob("*.npc"))) == 1


def test_unwritable_cache_still_loads(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("NLPKIT_CACHE_DIR", str(blocker / "cache"))
    model = load_ngram_model(NGRAM / "kenlm-2.arpa.gz")
    np.testing.assert_allclose(heldout_log10(model), QUERY["kenlm-2"]["log10"], atol=1e-5, rtol=0)


LOADER = """
import sys, hashlib, numpy as np
from nlpkit.lm.ngram.ngram_model import load_ngram_model
m = load_ngram_model(sys.argv[1])
h = hashlib.sha256()
for a in m.keys + m.logprob + m.backoff:
    h.update(np.ascontiguousarray(a).tobytes())
print(h.hexdigest())
"""


def load_twice_at_once_then_again(loader: str, path) -> None:
    """Two processes run `loader` on `path` at once (both building the same cache entry), then a third reads the
    entry they left: all succeed and print the same."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", loader, str(path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    assert outs[0][0] == outs[1][0]
    third = subprocess.run([sys.executable, "-c", loader, str(path)], capture_output=True, text=True, env=env)
    assert third.stdout == outs[0][0]


def test_two_processes_building_the_same_entry_both_succeed(cache, tmp_path):
    src = tmp_path / "lm.arpa.gz"
    src.write_bytes((NGRAM / "kenlm-5.arpa.gz").read_bytes())
    load_twice_at_once_then_again(LOADER, src)
    assert not list(cache.glob(".*.tmp"))  # no temporary left behind
    assert read_entry(_entry(cache), _tag(_entry(cache)), fingerprint([src])) is not None


def test_entry_made_by_other_code_is_rebuilt(cache, tmp_path):
    src = tmp_path / "model.bin"
    src.write_bytes(b"weights")
    built = []

    def build() -> Prepared:
        built.append(1)
        return Prepared({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, {"note": "x"})

    for version in ("a", "a", "b", "b"):
        got = load_prepared([src], "test", build, version=version)
        flush()
        assert got.arrays["w"].tolist() == [[0, 1, 2], [3, 4, 5]] and got.meta == {"note": "x"}
    assert len(built) == 2  # once per version; the "b" entry replaced the "a" one
    assert len(list(cache.glob("*.npc"))) == 1


# ------------------------------------------------------------------ transformer weights

LM = REPO / "tests" / "fixtures" / "lm"


def weight_arrays(model) -> dict:
    from nlpkit.lm.transformer.loaders.prepared_weights import pack
    return pack(model.weights, {}).arrays


@pytest.mark.parametrize("name", ["llama-gqa", "llama-untied", "llama-mqa-bias", "gpt2"])
def test_cached_weights_equal_a_fresh_load_and_logits_equal_transformers(cache, name):
    from nlpkit.lm.transformer.loaders import load_model
    fresh = load_model(LM / name, use_cache=False)
    assert not cache.exists()
    load_model(LM / name)  # prepares and writes the entry
    flush()
    cached = load_model(LM / name)
    got = weight_arrays(cached)
    assert_same(got, weight_arrays(fresh))
    assert not any(a.flags.writeable for a in got.values())  # mapped from the entry
    assert cached.config == fresh.config
    seqs = np.array(json.loads((LM / name / "reference.json").read_text())["sequences"])
    np.testing.assert_allclose(cached.forward(seqs), np.load(LM / name / "logits.npy"), atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", ["mistral", "phi3", "gemma3_text"])
def test_cached_gguf_weights_equal_a_fresh_load_and_logits_equal_transformers(cache, name):
    from nlpkit.lm.transformer.loaders import load_model
    d = LM / "families" / name
    fresh = load_model(d / "model.gguf", use_cache=False)
    load_model(d / "model.gguf")
    flush()
    cached = load_model(d / "model.gguf")
    assert_same(weight_arrays(cached), weight_arrays(fresh))
    assert cached.config == fresh.config
    ref = json.loads((d / "reference.json").read_text())
    seqs, expected = np.array(ref["sequences"]), np.load(d / "logits.npy")
    if name == "mistral":  # llama.cpp writes no sliding window for Mistral: checked within it (test_lm_families)
        seqs, expected = seqs[:, :ref["window"]], expected[:, :ref["window"]]
    np.testing.assert_allclose(cached.forward(seqs), expected, atol=1e-4, rtol=0)


def test_corrupt_weights_entry_is_rebuilt(cache, tmp_path):
    import shutil
    from nlpkit.lm.transformer.loaders import load_model
    d = tmp_path / "model"
    shutil.copytree(LM / "llama-gqa", d)
    want = weight_arrays(load_model(d, use_cache=False))
    load_model(d)
    flush()
    entry = _entry(cache)
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0x40  # one bit inside a weight matrix
    entry.write_bytes(data)
    assert_same(weight_arrays(load_model(d)), want)  # the damaged entry was rebuilt, not used
    flush()
    assert entry.read_bytes() != bytes(data)
    assert_same(weight_arrays(load_model(d)), want)


HF_LOADER = """
import sys, hashlib, numpy as np
from nlpkit.lm.transformer.loaders import load_model
m = load_model(sys.argv[1])
print(hashlib.sha256(m.forward(np.arange(12)[None] % m.config.vocab_size).tobytes()).hexdigest())
"""


def test_two_processes_preparing_the_same_weights_both_succeed(cache, tmp_path):
    import shutil
    d = tmp_path / "model"
    shutil.copytree(LM / "llama-untied", d)
    load_twice_at_once_then_again(HF_LOADER, d)
    assert len(list(cache.glob("weights-*.npc"))) == 1 and not list(cache.glob(".*.tmp"))
