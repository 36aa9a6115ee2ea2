"""The Dask path gives byte-identical output to the local path (issue 18).

One LocalCluster(n_workers=2, processes=True) serves the whole session. The corpus is cut
into many shards (a tiny --shard-size puts boundaries inside the plain files) and has
several gzip files, which are one shard each.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys

import pytest

from tests.conftest import REPO, run_cli

distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (nlpkit[dask])")

WORDS = ("the cat sat on a mat dog ran big red house tree river stone light dark old new "
         "small world time year day night water fire over under with from into after").split()


@pytest.fixture(scope="session")
def cluster():
    import logging

    c = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                 dashboard_address=":0", silence_logs=logging.ERROR)
    yield c
    c.close()


@pytest.fixture(scope="session")
def client(cluster):
    with distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """Three plain files (cut into many shards) and three gzip files, plus JSONL."""
    d = tmp_path_factory.mktemp("dask_corpus")
    rng = random.Random(18)

    def line() -> str:
        words = [rng.choice(WORDS) + rng.choice(["", "", "", "s", "ed", "."]) for _ in range(rng.randint(0, 16))]
        return " ".join(words).capitalize() + rng.choice(["", ".", "!", "?", ""])

    plain = []
    for i in range(3):
        p = d / f"plain{i}.txt"
        p.write_text("\n".join(line() for _ in range(300)) + "\n", encoding="utf-8")
        plain.append(str(p))
    gz = []
    for i in range(3):
        p = d / f"part{i}.txt.gz"
        with gzip.open(p, "wt", encoding="utf-8") as f:
            f.write("\n".join(line() for _ in range(150)) + "\n")
        gz.append(str(p))
    jl = d / "docs.jsonl"
    with open(jl, "w", encoding="utf-8") as f:
        for i in range(250):
            f.write(json.dumps({"id": f"d{i}", "text": line()}) + "\n")
    short = d / "short.txt"
    short.write_text("\n".join(line()[:60] for _ in range(8)) + "\n", encoding="utf-8")
    short_gz = d / "short.txt.gz"
    with gzip.open(short_gz, "wt", encoding="utf-8") as f:
        f.write("\n".join(line()[:60] for _ in range(5)) + "\n")
    heads = []   # the first 60 lines of two plain files: still many shards, for the (slow) neural windows
    for i in range(2):
        p = d / f"head{i}.txt"
        p.write_text("".join(open(plain[i], encoding="utf-8").readlines()[:60]), encoding="utf-8")
        heads.append(str(p))
    return {"dir": d, "plain": plain, "gz": gz, "files": plain + gz, "jsonl": str(jl),
            "short": [str(short), str(short_gz)], "heads": heads}


def _both(cluster, *args: str, shard: str = "2k"):
    local = run_cli(*args)
    assert local.returncode == 0, local.stderr.decode()
    dask = run_cli(*args, "--dask", cluster.scheduler_address, "--shard-size", shard, "--quiet")
    assert dask.returncode == 0, dask.stderr.decode()
    return local.stdout, dask.stdout


@pytest.mark.parametrize("opts", [[], ["--cross-lines", "-w", "4"], ["--cross-lines", "--cross-sentences", "-w", "3"],
                                  ["--ngram", "3", "-w", "5", "--cross-lines"]])
def test_pmi_identical(cluster, corpus, opts):
    local, dask = _both(cluster, "pmi", *corpus["files"], "--top", "0", "--format", "tsv", *opts, shard="1k")
    assert local == dask
    assert local.count(b"\n") > 100


def test_pmi_identical_auto_shard_size(cluster, corpus):
    """The default --shard-size auto: small files grouped into one task."""
    local, dask = _both(cluster, "pmi", *corpus["files"], *corpus["short"], "--top", "0", "--format", "tsv",
                        "--cross-lines", shard="auto")
    assert local == dask


def test_tfidf_identical(cluster, corpus):
    local, dask = _both(cluster, "tfidf", "--docs", "lines", *corpus["files"], "--top", "3", "--format", "tsv")
    assert local == dask
    local, dask = _both(cluster, "tfidf", "--docs", "jsonl", "--id-field", "id", corpus["jsonl"],
                        "--smart", "ltc", "--min-df", "2", "--format", "jsonl")
    assert local == dask


def _tree(path) -> dict:
    return {f: open(os.path.join(path, f), "rb").read() for f in sorted(os.listdir(path))}


def test_bm25_index_identical(cluster, corpus, tmp_path):
    big = tmp_path / "corpus.txt"
    big.write_bytes(b"".join(open(p, "rb").read() for p in corpus["plain"]))
    for variant in ("lucene", "bm25+"):
        a, b = tmp_path / f"local-{variant}", tmp_path / f"dask-{variant}"
        local = run_cli("bm25", "index", str(big), "-o", str(a), "--variant", variant, "--format", "tsv",
                        "--no-signature")
        dask = run_cli("bm25", "index", str(big), "-o", str(b), "--variant", variant, "--format", "tsv",
                       "--no-signature", "--dask", cluster.scheduler_address, "--shard-size", "3k")
        assert local.returncode == 0 and dask.returncode == 0, dask.stderr.decode()
        assert _tree(a) == _tree(b)
        assert local.stdout.replace(str(a).encode(), b"X") == dask.stdout.replace(str(b).encode(), b"X")
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".nlpkit")]


def test_bm25_index_of_many_files_plain_and_gzip_identical(cluster, corpus, tmp_path):
    """A corpus in six files (three plain, cut into shards, three .gz): the same index either way, document
    ids numbered on across the files in the order given, equal to indexing the files concatenated."""
    files = [corpus["plain"][0], corpus["gz"][0], corpus["plain"][1], corpus["gz"][1]]
    a, b, c = tmp_path / "local", tmp_path / "dask", tmp_path / "one"
    one = tmp_path / "all.txt"
    one.write_bytes(b"".join(gzip.open(p).read() if p.endswith(".gz") else open(p, "rb").read() for p in files))
    local = run_cli("bm25", "index", *files, "-o", str(a), "--format", "tsv", "--no-signature")
    dask = run_cli("bm25", "index", *files, "-o", str(b), "--format", "tsv", "--no-signature",
                   "--dask", cluster.scheduler_address, "--shard-size", "3k")
    whole = run_cli("bm25", "index", str(one), "-o", str(c), "--format", "tsv", "--no-signature")
    assert local.returncode == dask.returncode == whole.returncode == 0, dask.stderr.decode()
    assert _tree(a) == _tree(b) == _tree(c)
    rows = [r.stdout.split(b"\n")[1].split(b"\t")[1:] for r in (local, dask, whole)]
    assert rows[0] == rows[1] == rows[2]
    assert rows[0][0] == b"900"                                                 # 300 + 150 + 300 + 150 documents
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".nlpkit")]


def test_bm25_add_of_many_files_plain_and_gzip_identical(cluster, corpus, tmp_path):
    """bm25 add of files (plain, cut into shards, and .gz) with --dask: the same index as locally, and as
    indexing everything at once; ids numbered on from the index's in file order."""
    first, more = corpus["plain"][0], [corpus["gz"][0], corpus["plain"][1], corpus["gz"][1]]
    a, b, c = tmp_path / "local", tmp_path / "dask", tmp_path / "once"
    for d in (a, b):
        assert run_cli("bm25", "index", first, "-o", str(d), "--quiet").returncode == 0
    local = run_cli("bm25", "add", str(a), *more, "--format", "tsv", "--no-signature")
    dask = run_cli("bm25", "add", str(b), *more, "--format", "tsv", "--no-signature",
                   "--dask", cluster.scheduler_address, "--shard-size", "3k")
    once = run_cli("bm25", "index", first, *more, "-o", str(c), "--format", "tsv", "--no-signature")
    assert local.returncode == dask.returncode == once.returncode == 0, dask.stderr.decode()
    assert _tree(a) == _tree(b) == _tree(c)
    assert local.stdout.split(b"\n")[1].split(b"\t")[1] == b"900"
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".nlpkit")]


def test_bpe_train_identical(cluster, corpus, tmp_path):
    a, b = tmp_path / "local", tmp_path / "dask"
    local = run_cli("bpe-train", *corpus["files"], "-o", str(a), "--vocab-size", "400", "--quiet")
    dask = run_cli("bpe-train", *corpus["files"], "-o", str(b), "--vocab-size", "400", "--quiet",
                   "--dask", cluster.scheduler_address, "--shard-size", "2k")
    assert local.returncode == 0 and dask.returncode == 0, dask.stderr.decode()
    assert _tree(a) == _tree(b)


def test_perplexity_per_line_identical(cluster, corpus):
    local, dask = _both(cluster, "perplexity", "--per-line", *corpus["short"], "--context", "64",
                        "--format", "tsv", shard="100")
    assert local == dask
    assert local.count(b"\n") == 14


def test_tfidf_matrix_identical(cluster, corpus, tmp_path):
    local, dask = _both(cluster, "tfidf", "--docs", "lines", *corpus["files"], "--matrix", shard="1k")
    assert local == dask
    assert local.count(b"\n%doc\t") > 1000
    va, vb = tmp_path / "a.txt", tmp_path / "b.txt"
    local = run_cli("tfidf", "--docs", "paragraphs", *corpus["plain"], "--matrix", "--vocab-out", str(va),
                    "--no-signature")
    dask = run_cli("tfidf", "--docs", "paragraphs", *corpus["plain"], "--matrix", "--vocab-out", str(vb),
                   "--no-signature", "--dask", cluster.scheduler_address, "--shard-size", "1k", "--quiet")
    assert local.returncode == 0 and dask.returncode == 0, dask.stderr.decode()
    assert local.stdout == dask.stdout and va.read_bytes() == vb.read_bytes()


@pytest.mark.parametrize("top", ["5", "0"])
def test_tfidf_query_identical(cluster, corpus, top):
    """Many documents tie on the cosine: the ranking keeps the earlier document first, as locally."""
    local, dask = _both(cluster, "tfidf", "--docs", "lines", *corpus["files"], "--query", "red house by the river",
                        "--top", top, "--format", "tsv", shard="1k")
    assert local == dask
    assert local.count(b"\n") == 6 if top == "5" else local.count(b"\n") > 100


@pytest.mark.parametrize("opts", [["--context", "64", "--stride", "24"], ["--mode", "disjoint", "--context", "48"],
                                  ["--mode", "second-half", "--context", "64", "--no-add-bos"]])
def test_perplexity_whole_text_windows_identical(cluster, corpus, opts):
    """Whole texts: the windows are scored on the workers, in tasks of a few windows each."""
    files = corpus["heads"] if "second-half" in opts else [*corpus["short"], corpus["heads"][0]]
    local, dask = _both(cluster, "perplexity", *files, *opts, "--format", "tsv", shard="400")
    assert local == dask
    assert local.count(b"\n") == len(files) + 2 and b"(total)" in local


@pytest.mark.parametrize("opts", [["--context", "24", "--stride", "8"], ["--mode", "second-half", "--context", "16"],
                                  ["--mode", "disjoint", "--context", "16", "--per-token"]])
def test_perplexity_compare_identical(cluster, corpus, opts):
    """--compare: each worker loads the model and its base once; the windows' comparisons come back in order."""
    tiny = REPO / "tests" / "fixtures" / "lm" / "compare" / "tiny"
    files = corpus["heads"]
    local, dask = _both(cluster, "perplexity", *files, "-m", str(tiny / "model"), "--compare", str(tiny / "base"),
                        *opts, "--format", "tsv", shard="400")
    assert local == dask
    assert b"(total)" in local or b"--per-token" in " ".join(opts).encode()


def test_perplexity_per_token_identical(cluster, corpus):
    local, dask = _both(cluster, "perplexity", "--per-line", "--per-token", *corpus["short"], "--format", "jsonl",
                        shard="100")
    assert local == dask
    local, dask = _both(cluster, "perplexity", "--per-token", corpus["short"][0], "--context", "16",
                        "--format", "tsv", shard="40")
    assert local == dask
    assert local.count(b"\n") > 100


def _ranked(co):
    from nlpkit.stats import pmi

    ids, counts, scores = pmi.ranked(co, top=0)
    return [(tuple(co.words[i] for i in row), c, s) for row, c, s in zip(ids.tolist(), counts.tolist(),
                                                                       scores.tolist())]


def _write_memory(files: dict) -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    for name, data in files.items():
        with fs.open(name, "wb") as f:
            f.write(data)


def test_fsspec_memory_paths(client, corpus):
    """Workers open memory:// paths themselves (each worker process gets the same files)."""
    from nlpkit.distributed.stages import pmi_counts
    from nlpkit.stats.pmi import count_cooccurrences
    from nlpkit.text import WordTokenizer

    files = {f"/nlpkit-test/{os.path.basename(p)}": open(p, "rb").read() for p in corpus["files"]}
    _write_memory(files)
    client.run(_write_memory, files)
    urls = [f"memory://{name}" for name in files]
    tok = WordTokenizer()
    co = pmi_counts(client, urls, tok, window=3, cross_lines=True, shard_bytes=1500)
    assert _ranked(co) == _ranked(count_cooccurrences(corpus["files"], tok, window=3, cross_lines=True))


def test_worker_killed_mid_run_same_result(client, corpus):
    from nlpkit.distributed.stages import pmi_counts
    from nlpkit.stats.pmi import count_cooccurrences
    from nlpkit.text import WordTokenizer

    pids = client.run(os.getpid)
    victim = sorted(pids.values())[0]
    killed = []

    def progress(done, total):
        if not killed and done >= 1 and done < total:
            os.kill(victim, signal.SIGKILL)
            killed.append(done)

    tok = WordTokenizer()
    co = pmi_counts(client, corpus["files"], tok, window=4, cross_lines=True, shard_bytes=400,
                    progress=progress)
    assert killed, "the worker was not killed during the run"
    assert _ranked(co) == _ranked(count_cooccurrences(corpus["files"], tok, window=4, cross_lines=True))
    client.wait_for_workers(2, timeout=60)          # the nanny restarts it for the next tests


def test_unreadable_input_names_the_file_and_leaves_no_output(cluster, corpus, tmp_path):
    bad = tmp_path / "broken.txt.gz"
    bad.write_bytes(b"this is not gzip data\n" * 50)
    out = tmp_path / "tok"
    r = run_cli("bpe-train", corpus["plain"][0], str(bad), "-o", str(out), "--vocab-size", "300",
                "--dask", cluster.scheduler_address, "--quiet")
    assert r.returncode == 1
    err = r.stderr.decode()
    assert err.startswith("nlpkit: error:") and "broken.txt.gz" in err and "Traceback" not in err
    assert not out.exists()
    r = run_cli("bm25", "index", str(bad), "-o", str(tmp_path / "idx"), "--dask", cluster.scheduler_address)
    assert r.returncode == 1 and "broken.txt.gz" in r.stderr.decode()
    assert not (tmp_path / "idx").exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".nlpkit")]


def test_workers_must_run_the_same_version(client, monkeypatch):
    import nlpkit
    from nlpkit.distributed.cluster import check_versions
    from nlpkit.errors import NlpkitError

    monkeypatch.setattr(nlpkit, "__version__", "0.0.0-other")
    with pytest.raises(NlpkitError, match="runs nlpkit 0.1|same version"):
        check_versions(client)


def test_local_cluster_address_and_env_var(corpus):
    r = run_cli("pmi", corpus["plain"][0], "--top", "5", "--format", "tsv", env={"NLPKIT_DASK": "local:1"})
    assert r.returncode == 0, r.stderr.decode()
    assert b"dashboard" in r.stderr
    assert r.stdout == run_cli("pmi", corpus["plain"][0], "--top", "5", "--format", "tsv").stdout


def test_missing_dask_is_a_clear_error():
    code = ("import sys; sys.modules['distributed'] = None\n"
            "from nlpkit.distributed.cluster import connect\n"
            "from nlpkit.errors import NlpkitError\n"
            "try:\n    connect('local:1').__enter__()\nexcept NlpkitError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=str(REPO))
    assert b"nlpkit[dask]" in r.stdout


def test_bad_address_is_a_usage_error():
    r = run_cli("pmi", "--dask", "nowhere", "README.md")
    assert r.returncode == 2 and b"nlpkit: error:" in r.stderr


def test_pmi_without_dask_never_imports_it(corpus):
    code = ("import sys\nfrom nlpkit.cli.main import main\n"
            f"sys.argv = ['nlpkit', 'pmi', {corpus['plain'][0]!r}, '--top', '1']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('DASK=' + str(any(m.split('.')[0] in ('dask', 'distributed') for m in sys.modules)))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=str(REPO))
    assert r.stderr.decode().endswith("DASK=False")


def test_env_address_serves_every_mode(cluster, corpus):
    """$NLPKIT_DASK set for a session: tfidf --query and whole-text perplexity run on it too."""
    env = {"NLPKIT_DASK": cluster.scheduler_address}
    for args in (("tfidf", "--docs", "lines", "--query", "cat sat", corpus["plain"][0], "--format", "tsv"),
                 ("perplexity", corpus["short"][0], "--context", "32", "--format", "tsv")):
        r = run_cli(*args, "--quiet", env=env)
        assert r.returncode == 0, r.stderr.decode()
        assert r.stdout == run_cli(*args).stdout


def test_ngram_train_identical(cluster, corpus, tmp_path):
    a, b = tmp_path / "local.arpa", tmp_path / "dask.arpa"
    local = run_cli("ngram-train", *corpus["files"], "-o", str(a), "--order", "3", "--quiet")
    dask = run_cli("ngram-train", *corpus["files"], "-o", str(b), "--order", "3", "--quiet",
                   "--dask", cluster.scheduler_address, "--shard-size", "2k")
    assert local.returncode == 0 and dask.returncode == 0, dask.stderr.decode()
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("opts", [[], ["--per-line"], ["--per-token"]])
def test_ngram_perplexity_identical(cluster, corpus, tmp_path, opts):
    """An n-gram model's scores: line shards on the workers, totals summed line by line in order, so
    the figures are the same digits as locally (files cut into many shards, gzip files whole)."""
    model = tmp_path / "m.arpa"
    assert run_cli("ngram-train", corpus["plain"][0], "-o", str(model), "--order", "3", "--quiet").returncode == 0
    local, dask = _both(cluster, "perplexity", *corpus["files"], "--model", str(model), *opts, "--format", "tsv",
                        shard="2k")
    assert local == dask
    if not opts:
        assert local.count(b"\n") == len(corpus["files"]) + 2 and b"(total)" in local


def test_stdin_with_dask_is_a_usage_error_or_local_from_the_environment(cluster):
    """Workers read files: `--dask` on stdin is refused; `$NLPKIT_DASK` with stdin scores it here (was
    "-: no such file" either way)."""
    r = run_cli("pmi", "--dask", cluster.scheduler_address, input="the cat sat\n")
    assert r.returncode == 2 and b"not stdin" in r.stderr
    env = {"NLPKIT_DASK": cluster.scheduler_address}
    for args in (("pmi", "--format", "tsv"), ("perplexity", "--per-line", "--format", "tsv")):
        r = run_cli(*args, "--quiet", input="the cat sat on the mat\n", env=env)
        assert r.returncode == 0, r.stderr.decode()
        assert r.stdout == run_cli(*args, input="the cat sat on the mat\n").stdout


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:notaport", "tcp://127.0.0.1", "tcp://:8786"])
def test_a_malformed_scheduler_address_is_a_usage_error(tmp_path, address):
    (tmp_path / "a.txt").write_text("the cat sat\n")
    r = run_cli("pmi", "--dask", address, str(tmp_path / "a.txt"))
    assert r.returncode == 2 and b"expected tcp://HOST:PORT" in r.stderr and b"unexpected" not in r.stderr


@pytest.mark.parametrize("content", ["{}", "not json"])
def test_a_file_that_is_not_a_scheduler_file_says_so(tmp_path, content):
    (tmp_path / "a.txt").write_text("the cat sat\n")
    (tmp_path / "sched.json").write_text(content)
    r = run_cli("pmi", "--dask", str(tmp_path / "sched.json"), str(tmp_path / "a.txt"))
    assert r.returncode == 1 and b"not a Dask scheduler file" in r.stderr


def test_ngram_train_on_a_cluster_skips_an_empty_file_and_refuses_an_empty_corpus(cluster, corpus, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    a, b = tmp_path / "local.arpa", tmp_path / "dask.arpa"
    files = [corpus["plain"][0], str(empty), corpus["plain"][1]]
    assert run_cli("ngram-train", *files, "-o", str(a), "--quiet").returncode == 0
    r = run_cli("ngram-train", *files, "-o", str(b), "--quiet", "--dask", cluster.scheduler_address,
                "--shard-size", "1k")
    assert r.returncode == 0, r.stderr.decode()
    assert a.read_bytes() == b.read_bytes()
    r = run_cli("ngram-train", str(empty), "-o", str(tmp_path / "e.arpa"), "--dask", cluster.scheduler_address)
    assert r.returncode == 1 and b"empty corpus" in r.stderr and b"unexpected" not in r.stderr


def test_score_items_identical(cluster):
    """`score --dask`: chunks of items on the workers (each loads the models once), records and statistics identical."""
    fix = REPO / "tests" / "fixtures" / "score"
    gpt2, llama = str(fix / "models" / "gpt2-bpe"), str(fix / "models" / "llama-spm")
    local, dask = _both(cluster, "score", "-m", gpt2, "-m", llama, str(fix / "mc.jsonl"), "--mutual-info",
                        "--format", "jsonl", shard="200")
    assert local == dask and local.count(b'"record": "item"') == 28
    local, dask = _both(cluster, "score", "-m", gpt2, "--reference", str(fix / "models" / "gpt2-bpe-ref"),
                        str(fix / "preference.jsonl"), "--format", "tsv", shard="100")
    assert local == dask
    local, dask = _both(cluster, "score", "-m", str(REPO / "tests" / "fixtures" / "ngram" / "tiny-3.arpa"),
                        str(fix / "ll.jsonl"), "--format", "jsonl")
    assert local == dask
