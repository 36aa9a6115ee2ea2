"""`nlpkit ngram-train` and an n-gram model as the --model of perplexity, sample and generate (real entry point)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ngram"
QUERY = json.loads((FIX / "query.json").read_text())


def run(*args, input: str | None = None):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("NLPKIT_MODEL", None)
    return subprocess.run([sys.executable, "-m", "nlpkit", *args], input=input, capture_output=True, text=True,
                          env=env)


def test_ngram_train_then_perplexity_equals_query(tmp_path):
    model = tmp_path / "lm.arpa.gz"
    r = run("ngram-train", str(FIX / "train.txt"), "-o", str(model), "--order", "3", "--format", "jsonl", "-q")
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["order"] == 3 and rec["smoothing"] == "kneser-ney" and rec["output"] == str(model)
    r = run("perplexity", str(FIX / "heldout.txt"), "--model", str(model), "--format", "json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["results"][0]
    ref = QUERY["nlpkit-3"]
    assert got["tokens"] == ref["tokens"] and got["oov"] == ref["oov"]
    assert got["ppl"] == pytest.approx(ref["ppl"], rel=1e-5)
    assert got["ppl_no_oov"] == pytest.approx(ref["ppl_no_oov"], rel=1e-5)
    nbytes = (FIX / "heldout.txt").stat().st_size
    assert got["bytes"] == nbytes
    assert got["bits_per_byte"] == pytest.approx(-sum(ref["log10"]) * 3.321928094887362 / nbytes, rel=1e-5)
    assert got["mean_nll"] == pytest.approx(-sum(ref["log10"]) * 2.302585092994046 / ref["tokens"], rel=1e-5)


def test_perplexity_per_token_and_per_line_on_kenlm_arpa():
    model = str(FIX / "kenlm-4.arpa.gz")
    r = run("perplexity", str(FIX / "heldout.txt"), "--model", model, "--per-token", "--format", "jsonl")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    ref = QUERY["kenlm-4"]
    assert [x["token"] for x in rows] == QUERY["heldout_words"]
    assert [x["ngram"] for x in rows] == ref["ngram"]
    assert max(abs(x["log10_prob"] - y) for x, y in zip(rows, ref["log10"])) < 1e-5
    r = run("perplexity", str(FIX / "heldout.txt"), "--model", model, "--per-line", "--format", "jsonl")
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(lines) == len(ref["line_total"])
    assert max(abs(x["log10_prob"] - y) for x, y in zip(lines, ref["line_total"])) < 1e-4
    assert [x["oov"] for x in lines] == ref["line_oov"]


@pytest.mark.parametrize("opt", [["--mode", "disjoint"], ["--context", "64"], ["--stride", "8"], ["--no-add-bos"]])
def test_window_options_refused_with_ngram_model(opt):
    r = run("perplexity", str(FIX / "heldout.txt"), "--model", str(FIX / "kenlm-2.arpa.gz"), *opt)
    assert r.returncode == 2
    assert "does not apply to an n-gram model" in r.stderr


def test_mle_perplexity_infinite_with_zero_prob_count(tmp_path):
    corpus = tmp_path / "jm.txt"
    corpus.write_text("I am Sam\nSam I am\nI do not like green eggs and ham\n")
    model = tmp_path / "jm.ngram"
    assert run("ngram-train", str(corpus), "-o", str(model), "--order", "2", "--smoothing", "mle",
               "-q").returncode == 0
    assert model.read_text().split("\\counts\\")[0].count("# nlpkit: smoothing=mle") == 1
    r = run("perplexity", "--model", str(model), "--format", "tsv", input="Sam am\nI like ham\n")
    header, row = r.stdout.splitlines()
    got = dict(zip(header.split("\t"), row.split("\t")))
    assert got["zero_prob"] == "3" and got["ppl"] == "inf" and got["log10_prob"] == "-inf"


def test_bad_inputs_exit_codes(tmp_path):
    r = run("ngram-train", str(FIX / "tiny.txt"), "-o", str(tmp_path / "x.arpa"), "--order", "0")
    assert r.returncode == 2 and "--order" in r.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    r = run("ngram-train", str(empty), "-o", str(tmp_path / "x.arpa"))
    assert r.returncode == 1 and "empty corpus" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "bad.arpa"
    bad.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-1\t<s>\n\n\\end\\\n")
    r = run("perplexity", str(FIX / "heldout.txt"), "--model", str(bad))
    assert r.returncode == 1 and "bad.arpa, line 4" in r.stderr and "line 2 declares 2" in r.stderr


@pytest.mark.parametrize("name, content, why", [
    ("empty.arpa", b"", "(the file is empty)"),
    ("nothing.arpa.gz", gzip.compress(b"", mtime=0), "(it decompresses to nothing)"),
    ("broken.arpa.gz", b"\x1f\x8b not gzip at all", "(a gzip file that does not decompress)"),
    ("words.lm", b"just some words\n", "no \\data\\ (ARPA) or \\counts\\ (nlpkit) line"),
])
def test_a_file_named_like_an_ngram_model_but_not_one_says_so(tmp_path, name, content, why):
    """Not "not a GGUF file": a file named .arpa/.lm/.ngram (.gz) that holds no model says what is missing."""
    path = tmp_path / name
    path.write_bytes(content)
    r = run("perplexity", "--model", str(path), input="a b\n")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"{name}: not an n-gram model" in r.stderr and why in r.stderr


def test_lowercase_recorded_and_applied_when_scoring(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("The Cat sat\nthe cat SAT\n")
    model = tmp_path / "c.arpa"
    assert run("ngram-train", str(corpus), "-o", str(model), "--order", "2", "--lowercase", "-q").returncode == 0
    assert "# nlpkit: lowercase=true" in model.read_text()
    r = run("perplexity", "--model", str(model), "--format", "json", input="THE CAT SAT\n")
    assert json.loads(r.stdout)["results"][0]["oov"] == 0


def test_tokenizer_recorded_and_applied(tmp_path):
    tok = FIX.parent / "lm" / "llama-gqa"
    if not (tok / "tokenizer.json").exists():
        pytest.skip("no tokenizer fixture")
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\nhello there world\n")
    model = tmp_path / "c.arpa"
    r = run("ngram-train", str(corpus), "-o", str(model), "--order", "2", "--tokenizer", str(tok), "-q")
    assert r.returncode == 0, r.stderr
    assert f"# nlpkit: tokenizer={tok.resolve()}" in model.read_text()
    r = run("perplexity", "--model", str(model), "--format", "json", input="hello world\n")
    assert json.loads(r.stdout)["results"][0]["oov"] == 0


def test_sample_and_generate_from_ngram_model_are_seeded():
    model = str(FIX / "kenlm-3.arpa.gz")
    args = ("sample", "It is a truth", "--model", model, "-n", "3", "--seed", "7", "--top-k", "20",
            "--max-new-tokens", "12", "--format", "jsonl")
    a, b = run(*args), run(*args)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    rows = [json.loads(line) for line in a.stdout.splitlines()]
    assert len(rows) == 3 and all(r["finish"] in ("eos", "length") for r in rows)
    assert all(r["logprob"] <= r["logprob_filtered"] + 1e-9 for r in rows)
    g = run("generate", "It is a truth", "--model", model, "--temperature", "0", "--max-new-tokens", "5")
    assert g.returncode == 0, g.stderr
    assert g.stdout.startswith(" ") and 1 <= len(g.stdout.split()) <= 5
    d = run("sample", "It is a", "--model", model, "--dist", "--top-k", "3", "--format", "jsonl")
    probs = [json.loads(line)["probability"] for line in d.stdout.splitlines()]
    assert len(probs) >= 3 and sum(probs) == pytest.approx(1.0)


def test_generate_from_ngram_model_follows_the_generate_conventions(tmp_path):
    """As with a neural model: a final newline in a pipe, records with --format, one per --prompts line."""
    model = str(FIX / "kenlm-3.arpa.gz")
    g = run("generate", "It is a truth", "--model", model, "--temperature", "0", "--max-new-tokens", "5")
    assert g.stdout.endswith("\n") and g.stdout.count("\n") == 1
    rec = run("generate", "It is a truth", "--model", model, "--temperature", "0", "--max-new-tokens", "5",
              "--format", "jsonl")
    assert rec.returncode == 0, rec.stderr
    row = json.loads(rec.stdout)
    assert row["prompt"] == "It is a truth" and row["text"] == g.stdout[:-1]
    assert row["signature"].startswith("generate|") and "ngram:3-arpa" in row["signature"]
    prompts = tmp_path / "p.txt"
    prompts.write_text("It is a truth\nShe was\n")
    many = run("generate", "--prompts", str(prompts), "--model", model, "--temperature", "0",
               "--max-new-tokens", "5", "--format", "jsonl")
    assert many.returncode == 0, many.stderr
    rows = [json.loads(line) for line in many.stdout.splitlines()]
    assert [r["index"] for r in rows] == [0, 1] and rows[0]["text"] == row["text"]
    assert all(r["finish"] in ("eos", "length") for r in rows)


def test_greedy_generation_follows_the_most_likely_word():
    from nlpkit.lm.generation import generate
    from nlpkit.lm.load import load_language_model
    from nlpkit.lm.generation.sampling import SamplingConfig

    lm = load_language_model(FIX / "kenlm-2.arpa.gz")
    prompt = lm.prompt("of")
    text = "".join(generate(lm, prompt, max_new_tokens=1, sampling=SamplingConfig(temperature=0), seed=0))
    model = lm.model
    dist = model.next_log10(prompt.ids)
    dist[[model.bos_id, model.unk_id]] = -1e9
    assert text.strip() == model.vocab[int(dist.argmax())]


def test_several_files_end_with_a_corpus_total_row(tmp_path):
    """As for a neural model: a "(total)" row ("total": true) over all files, equal to scoring them as one."""
    model = str(FIX / "kenlm-3.arpa.gz")
    lines = (FIX / "heldout.txt").read_text().splitlines(keepends=True)
    a, b, both = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "both.txt"
    a.write_text("".join(lines[:15]))
    b.write_text("".join(lines[15:]))
    both.write_text("".join(lines))
    r = run("perplexity", str(a), str(b), "--model", model, "--format", "jsonl")
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["file"], x["total"]) for x in rows] == [(str(a), False), (str(b), False), ("(total)", True)]
    one = json.loads(run("perplexity", str(both), "--model", model, "--format", "jsonl").stdout)
    ref = QUERY["kenlm-3"]
    for key in ("sentences", "tokens", "oov", "bytes"):
        assert rows[2][key] == one[key] == rows[0][key] + rows[1][key]
    assert rows[2]["tokens"] == ref["tokens"] and rows[2]["oov"] == ref["oov"]
    assert rows[2]["ppl"] == pytest.approx(ref["ppl"], rel=1e-5)
    assert rows[2]["ppl_no_oov"] == pytest.approx(ref["ppl_no_oov"], rel=1e-5)


def test_per_token_records_name_their_line(tmp_path):
    r = run("perplexity", "--model", str(FIX / "tiny-3.arpa"), "--per-token", "--format", "jsonl",
            input="the cat\nthe dog sat\n")
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["file"], x["line"], x["position"], x["token"]) for x in rows] == [
        ("<stdin>", 1, 0, "the"), ("<stdin>", 1, 1, "cat"), ("<stdin>", 1, 2, "</s>"),
        ("<stdin>", 2, 0, "the"), ("<stdin>", 2, 1, "dog"), ("<stdin>", 2, 2, "sat"), ("<stdin>", 2, 3, "</s>")]


@pytest.mark.parametrize("args, why", [
    (["-o", "m.arpa", "--smoothing", "mle"], "name it MODEL.ngram"),
    (["-o", "m.arpa.gz", "--smoothing", "add-k"], "name it MODEL.ngram"),
    (["-o", "m.ngram"], "name it MODEL.arpa"),
    (["-o", "m.arpa", "--k", "2"], "--k: applies to --smoothing add-k only"),
])
def test_ngram_train_output_name_and_k_must_fit_the_smoothing(tmp_path, args, why):
    r = run("ngram-train", str(FIX / "tiny.txt"), *[str(tmp_path / a) if a.startswith("m.") else a for a in args])
    assert r.returncode == 2 and why in r.stderr
    assert not list(tmp_path.iterdir())


def test_sample_text_is_what_generate_prints():
    model = str(FIX / "kenlm-3.arpa.gz")
    g = json.loads(run("generate", "It is a truth", "--model", model, "--temperature", "0", "--max-new-tokens", "6",
                       "--format", "jsonl").stdout)
    s = json.loads(run("sample", "It is a truth", "--model", model, "--temperature", "0", "--max-new-tokens", "6",
                       "-n", "1", "--format", "jsonl").stdout)
    assert g["text"] == s["text"] and g["text"].startswith(" ")


@pytest.mark.parametrize("opt, why", [(["--chat"], "chat template"), (["--no-kv-cache"], "keeps no cache")])
def test_neural_generation_options_refused_with_their_reason(opt, why):
    r = run("generate", "It is", "--model", str(FIX / "kenlm-2.arpa.gz"), *opt)
    assert r.returncode == 2 and "does not apply to an n-gram model" in r.stderr and why in r.stderr


def test_bom_and_crlf_held_out_text_scored_as_query():
    """query keeps a BOM in the first word and reads CR as a delimiter; bytes are counted as the
    neural path counts them (CR in, BOM out), so bits per byte share a denominator."""
    held = FIX / "tiny-held.txt"
    ref = QUERY["tiny-3"]
    r = run("perplexity", str(held), "--model", str(FIX / "tiny-3.arpa"), "--per-line", "--format", "jsonl")
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["log10_prob"] for x in lines] == pytest.approx(ref["line_total"], abs=1e-5)
    assert [x["oov"] for x in lines] == ref["line_oov"]
    got = json.loads(run("perplexity", str(held), "--model", str(FIX / "tiny-3.arpa"), "--format", "jsonl").stdout)
    assert (got["tokens"], got["oov"]) == (ref["tokens"], ref["oov"])
    assert got["ppl"] == pytest.approx(ref["ppl"], rel=1e-6) and got["ppl_no_oov"] == pytest.approx(ref["ppl_no_oov"], rel=1e-6)
    assert got["bytes"] == len(held.read_bytes()) - 3


def test_a_tokenizer_moved_beside_the_model_is_found_and_a_different_one_refused(tmp_path):
    """The model records its tokenizer's path and sha256: a copy beside the model (same name) serves
    when the path is gone; another tokenizer at that path is refused, not silently used."""
    import shutil

    src = FIX.parent / "lm" / "llama-gqa"
    tok = tmp_path / "tok"
    tok.mkdir()
    shutil.copy(src / "tokenizer.json", tok / "tokenizer.json")
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\nhello there world\n")
    model = tmp_path / "c.arpa"
    assert run("ngram-train", str(corpus), "-o", str(model), "--order", "2", "--tokenizer", str(tok),
               "-q").returncode == 0
    assert "# nlpkit: tokenizer_sha256=" in model.read_text()
    want = run("perplexity", "--model", str(model), "--format", "jsonl", input="hello world\n").stdout
    elsewhere = tmp_path / "copied"
    elsewhere.mkdir()
    shutil.copy(model, elsewhere / "c.arpa")
    shutil.move(str(tok), str(elsewhere / "tok"))
    r = run("perplexity", "--model", str(elsewhere / "c.arpa"), "--format", "jsonl", input="hello world\n")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ppl"] == json.loads(want)["ppl"]
    r = run("perplexity", "--model", str(model), input="hello world\n")
    assert r.returncode == 1 and "is not there" in r.stderr and "copy it next to the model" in r.stderr
    tok.mkdir()
    spec = json.loads((src / "tokenizer.json").read_text())
    spec["model"]["merges"] = spec["model"]["merges"][:-1]
    (tok / "tokenizer.json").write_text(json.dumps(spec))
    r = run("perplexity", "--model", str(model), input="hello world\n")
    assert r.returncode == 1 and "is not the tokenizer the model was trained with" in r.stderr


def test_ngram_train_reads_a_gguf_vocabulary_as_its_tokenizer(tmp_path):
    gguf = FIX.parent / "lm" / "families" / "qwen2" / "model.gguf"
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\nhello there world\n")
    r = run("ngram-train", str(corpus), "-o", str(tmp_path / "g.arpa"), "--order", "2", "--tokenizer", str(gguf),
            "-q")
    assert r.returncode == 0, r.stderr
    r = run("perplexity", "--model", str(tmp_path / "g.arpa"), "--format", "jsonl", input="hello world\n")
    assert r.returncode == 0 and json.loads(r.stdout)["oov"] == 0


GOOD_ARPA = "\\data\\\nngram 1=3\nngram 2=1\n\n\\1-grams:\n-1\t<s>\t-0.5\n-0.5\ta\t-0.2\n-0.7\t</s>\n\n\\2-grams:\n" \
            "-0.2\t<s> a\n\n\\end\\\n"


@pytest.mark.parametrize("edit, where, why", [
    (("ngram 2=1", "ngram 2=2"), "line 10", "line 3 declares 2"),                          # a count that does not match
    (("-0.2\t<s> a", "-0.2\t<s> a b c"), "line 11", "log10-probability words [backoff]"),  # not prob words [backoff]
    (("ngram 2=1", "ngram 3=1"), "line 3", "without a gap"),                                # an order gap
])
def test_malformed_arpa_is_exit_1_with_file_and_line(tmp_path, edit, where, why):
    bad = tmp_path / "bad.arpa"
    bad.write_text(GOOD_ARPA.replace(*edit))
    r = run("perplexity", "--model", str(bad), input="a\n")
    assert r.returncode == 1 and f"bad.arpa, {where}" in r.stderr and why in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "good.arpa").write_text(GOOD_ARPA)
    assert run("perplexity", "--model", str(tmp_path / "good.arpa"), input="a\n").returncode == 0


@pytest.mark.parametrize("command", ["perplexity", "generate", "sample"])
def test_model_help_names_ngram_models(command):
    """--help said "Hugging Face model directory or .gguf file" where an ARPA file works as well."""
    r = run(command, "--help")
    text = " ".join(r.stdout.split())
    assert "n-gram model (ARPA, .arpa.gz, an ngram-train counts file)" in text


def test_score_is_greedy_never_counts_sentence_start_as_a_prediction():
    """tiny-3.arpa gives <s> unigram log10 p = 0: after "dog" (backing off) <s> has the largest KenLM value, but <s> is
    never a prediction (KenLM's query never predicts it): "sat", the word `sample --dist` ranks first, is greedy."""
    arpa = str(FIX / "tiny-3.arpa")
    r = run("sample", "dog", "-m", arpa, "--dist", "--format", "jsonl", "--seed", "1")
    assert r.returncode == 0, r.stderr
    dist = [json.loads(line) for line in r.stdout.splitlines()]
    assert dist[0]["token"] == "sat" and "<s>" not in [d["token"] for d in dist]
    r = run("score", "-m", arpa, "--format", "jsonl", input='{"context": "dog", "continuation": " sat"}\n'
            '{"context": "dog", "continuation": " </s>"}\n')
    assert r.returncode == 0, r.stderr
    items = [json.loads(line) for line in r.stdout.splitlines() if '"item"' in line]
    assert [x["is_greedy"] for x in items] == [True, False]
    r = run("generate", "dog", "-m", arpa, "--temperature", "0", "--max-new-tokens", "1")
    assert r.stdout.split()[-1] == "sat"
