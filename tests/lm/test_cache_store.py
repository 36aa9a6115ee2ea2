"""The prepared-model cache keyed by content, capped (least recently used out), listed and cleared
(nlpkit/lm/prepared/cache_store.py, nlpkit/lm/prepared/cache_listing.py, `nlpkit cache list|clear|dir`)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nlpkit.lm.ngram.ngram_model import load_ngram_model
from nlpkit.lm.prepared import flush

REPO = Path(__file__).resolve().parents[2]
NGRAM = REPO / "tests" / "fixtures" / "ngram"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("NLPKIT_CACHE_DIR", str(d))
    monkeypatch.delenv("NLPKIT_NO_CACHE", raising=False)
    monkeypatch.delenv("NLPKIT_CACHE_MAX_SIZE", raising=False)
    return d


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.npc"))


def arpa(tmp_path: Path, name: str, order: int = 3) -> Path:
    """A copy of a KenLM fixture (unzipped, so that one can be edited in place)."""
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(gzip.decompress((NGRAM / f"kenlm-{order}.arpa.gz").read_bytes()))
    return p


def test_the_same_model_in_two_places_is_one_entry(cache, tmp_path):
    a, b = arpa(tmp_path, "venv1/lm.arpa"), arpa(tmp_path, "venv2/lm.arpa")
    want = load_ngram_model(a)
    flush()
    assert len(entries(cache)) == 1
    got = load_ngram_model(b)   # another path, the same content: read from the entry
    flush()
    assert len(entries(cache)) == 1
    assert not got.keys[1].flags.writeable   # mapped
    assert (got.logprob[2] == want.logprob[2]).all()


def test_a_file_changed_in_place_with_its_size_and_mtime_kept_is_another_model(cache, tmp_path):
    p = arpa(tmp_path, "lm.arpa")
    before = load_ngram_model(p)
    flush()
    st = p.stat()
    text = p.read_text()
    i = text.index("\\1-grams:\n") + len("\\1-grams:\n")
    changed = text[:i] + text[i:].replace("-", "-", 1)   # same bytes so far; now change one digit
    j = i + next(k for k, c in enumerate(text[i:]) if c.isdigit() and c != "0")
    changed = text[:j] + ("1" if text[j] != "1" else "2") + text[j + 1:]
    p.write_text(changed)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert p.stat().st_size == st.st_size and p.stat().st_mtime_ns == st.st_mtime_ns
    after = load_ngram_model(p)
    flush()
    assert not (after.logprob[0] == before.logprob[0]).all()   # not served the old entry
    assert (after.logprob[0] == load_ngram_model(p, use_cache=False).logprob[0]).all()
    assert len(entries(cache)) == 2


def test_the_least_recently_used_entries_go_past_the_cap(cache, tmp_path, monkeypatch):
    models = [arpa(tmp_path, f"m{k}/lm.arpa", order) for k, order in enumerate((2, 3, 4))]
    for m in models:
        load_ngram_model(m)
        flush()
        time.sleep(0.05)
    sizes = {p.name: p.stat().st_size for p in entries(cache)}
    assert len(sizes) == 3
    oldest = min(entries(cache), key=lambda p: p.stat().st_mtime_ns)
    time.sleep(0.05)
    load_ngram_model(models[0])   # read again: the most recently used now
    flush()
    lru = min(entries(cache), key=lambda p: p.stat().st_mtime_ns)
    assert lru != oldest
    cap = sum(sizes.values()) - 1 + 4096   # room for all three but nothing more
    monkeypatch.setenv("NLPKIT_CACHE_MAX_SIZE", str(cap))
    fifth = arpa(tmp_path, "m5/lm.arpa", 5)
    load_ngram_model(fifth)
    flush()
    left = {p.name for p in entries(cache)}
    assert oldest.name in left   # used since: kept
    assert lru.name not in left   # the least recently used went first
    assert sum(p.stat().st_size for p in entries(cache)) <= cap


def test_an_entry_larger_than_the_cap_is_not_written_and_says_so(cache, tmp_path, monkeypatch):
    import numpy as np

    from nlpkit.lm.prepared import Prepared, load_prepared

    monkeypatch.setenv("NLPKIT_CACHE_MAX_SIZE", "1k")
    src = tmp_path / "model.bin"
    src.write_bytes(b"weights")
    warned = []
    got = load_prepared([src], "test", lambda: Prepared({"w": np.zeros(1024, np.float32)}), warn=warned.append)
    flush()
    assert got.cache == "not written" and got.arrays["w"].shape == (1024,) and not entries(cache)
    assert any("NLPKIT_CACHE_MAX_SIZE" in w and "not cached" in w for w in warned)


def test_a_cap_that_is_not_a_size_is_an_error_naming_the_variable(cache, cli):
    r = cli("perplexity", "-m", str(NGRAM / "kenlm-2.arpa.gz"), str(NGRAM / "heldout.txt"),
            env={"NLPKIT_CACHE_MAX_SIZE": "lots", "NLPKIT_CACHE_DIR": str(cache)})
    assert r.returncode in (1, 2) and b"NLPKIT_CACHE_MAX_SIZE" in r.stderr and b"Traceback" not in r.stderr


def run(*args, cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), NLPKIT_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "nlpkit", *args], capture_output=True, text=True, env=env,
                          cwd=str(REPO))


def test_cache_list_clear_and_dir(cache, tmp_path):
    for order in (2, 3):
        load_ngram_model(arpa(tmp_path, f"m{order}/lm.arpa", order))
        flush()
    assert run("cache", "dir", cache=cache).stdout == f"{cache}\n"
    listed = run("cache", "list", "--format", "jsonl", cache=cache)
    assert listed.returncode == 0, listed.stderr
    recs = [json.loads(line) for line in listed.stdout.splitlines()]
    assert {r["entry"] for r in recs} == {p.name for p in entries(cache)}
    assert all(r["kind"] == "ngram" and r["valid"] and r["model"] == "lm.arpa" and r["bytes"] > 0 for r in recs)
    assert {r["made_from"] for r in recs} == {str(tmp_path / f"m{k}" / "lm.arpa") for k in (2, 3)}
    assert "2 entries" in listed.stderr and str(cache) in listed.stderr
    unknown = run("cache", "clear", "no-such-entry.npc", cache=cache)
    assert unknown.returncode == 2 and "no entry 'no-such-entry.npc'" in unknown.stderr
    assert len(entries(cache)) == 2   # nothing deleted
    one = run("cache", "clear", recs[0]["entry"], cache=cache)
    assert one.returncode == 0 and "deleted 1 entry" in one.stderr
    assert [p.name for p in entries(cache)] == [recs[1]["entry"]]
    every = run("cache", "clear", cache=cache)
    assert every.returncode == 0 and "deleted 1 entry" in every.stderr
    assert not entries(cache) and not (cache / "digests.json").exists()
    empty = run("cache", "list", "--format", "jsonl", cache=cache)
    assert empty.returncode == 0 and empty.stdout == "" and "0 entries" in empty.stderr


def test_a_damaged_entry_is_listed_as_not_valid(cache, tmp_path):
    load_ngram_model(arpa(tmp_path, "lm.arpa"))
    flush()
    (entry,) = entries(cache)
    entry.write_bytes(b"garbage")
    recs = [json.loads(line) for line in run("cache", "list", "--format", "jsonl", cache=cache).stdout.splitlines()]
    assert [r["valid"] for r in recs] == [False]
