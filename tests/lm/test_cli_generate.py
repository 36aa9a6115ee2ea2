"""`nlpkit generate` and `nlpkit sample` through the real entry point (subprocess), on a tiny fixture model."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES

MODEL = str(FIXTURES / "lm" / "llama-gqa")  # context 64, byte-level BPE tokenizer, random weights


def run(cli, *args, input=b""):
    return cli(*args, "--model", MODEL, input=input)


def out(r) -> str:
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def api_greedy_text(prompt: str, n: int, **kw) -> str:
    from nlpkit.lm.generation import generate
    from nlpkit.lm.transformer.transformer_lm import encode_prompt
    from nlpkit.lm.transformer.loaders import load_model
    from nlpkit.lm.generation.sampling import SamplingConfig

    model = load_model(MODEL)
    return "".join(generate(model, encode_prompt(model, prompt), max_new_tokens=n,
                            sampling=SamplingConfig(temperature=0), **kw))


def line(text: str) -> str:
    """What the plain output of generate is: the text, ended by a newline (piped or not)."""
    return text if text.endswith("\n") else text + "\n"


def test_generate_greedy_streams_the_same_text_as_the_api(cli):
    text = out(run(cli, "generate", "Once upon a time", "--temperature", "0", "--max-new-tokens", "30"))
    assert text == line(api_greedy_text("Once upon a time", 30))


def test_generate_no_kv_cache_gives_the_same_greedy_text(cli):
    a = out(run(cli, "generate", "Once upon", "--temperature", "0", "--max-new-tokens", "25"))
    b = out(run(cli, "generate", "Once upon", "--temperature", "0", "--max-new-tokens", "25", "--no-kv-cache"))
    assert a == b


def test_generate_reads_the_prompt_from_stdin(cli):
    a = out(run(cli, "generate", "--temperature", "0", "--max-new-tokens", "12", input=b"Once upon\n"))
    assert a == line(api_greedy_text("Once upon", 12))


def test_generate_seed_reproducible(cli):
    """The same seed gives the same text (the tiny fixture has random weights: the text is noise, but
    exactly this noise), another seed another text."""
    args = ("generate", "hello", "--max-new-tokens", "20", "--temperature", "0.9", "--top-k", "40")
    a, b = out(run(cli, *args, "--seed", "7")), out(run(cli, *args, "--seed", "7"))
    c = out(run(cli, *args, "--seed", "8"))
    assert a == b == "^-^\ufffd\ufffdqon/R\ufffd\r\ufffd\ufffd\ufffd\ufffd\ufffd+Va<s>\n"
    assert c == "\t*\x13Kc\u0636\x01gh\ufffd\u0410\ufffd\ufffdk\ufffd\ufffd\u016a\ufffd\n"


def test_generate_stop_string_ends_output_before_it(cli):
    full = api_greedy_text("Once upon", 40)
    stop = full[10:13]
    assert stop and stop in full
    r = out(run(cli, "generate", "Once upon", "--temperature", "0", "--max-new-tokens", "40", "--stop", stop))
    assert r == line(full[:full.index(stop)])


def test_generate_stats_on_stderr(cli):
    r = run(cli, "generate", "hi", "--max-new-tokens", "5", "--ignore-eos", "--stats")
    err = r.stderr.decode()
    assert r.returncode == 0 and "prefill:" in err and "decode: 5 tokens" in err and "tok/s" in err


def test_generate_prompts_file_gives_one_jsonl_record_per_line(cli, tmp_path):
    f = tmp_path / "prompts.txt"
    f.write_text("Once upon\nhello there\n")
    lines = out(run(cli, "generate", "--prompts", str(f), "--temperature", "0", "--max-new-tokens", "8",
                    "--format", "jsonl")).split("\n")[:-1]
    recs = [json.loads(x) for x in lines]
    assert [r["prompt"] for r in recs] == ["Once upon", "hello there"]
    assert recs[0]["text"] == api_greedy_text("Once upon", 8)
    assert all(r["signature"].startswith("generate|model:llama-gqa|temp:0.0") for r in recs)


def test_context_full_stops_with_a_message(cli):
    r = run(cli, "generate", "hi", "--max-new-tokens", "200", "--ignore-eos")
    assert r.returncode == 0 and "context is full" in r.stderr.decode()
    r = run(cli, "generate", "hi", "--max-new-tokens", "100", "--ignore-eos", "--sliding", "--stats")
    assert r.returncode == 0 and "decode: 100 tokens" in r.stderr.decode()


def test_prompt_longer_than_context_is_an_error_naming_both_lengths(cli):
    long = "one two three four five six " * 20
    r = run(cli, "generate", long, "--max-new-tokens", "5")
    msg = r.stderr.decode()
    assert r.returncode == 1 and "nlpkit: error:" in msg and "context is 64 tokens" in msg
    assert "prompt is " in msg and "--truncate-prompt" in msg
    assert run(cli, "generate", long, "--max-new-tokens", "5", "--truncate-prompt").returncode == 0


def test_empty_prompt_starts_from_bos(cli):
    r = run(cli, "sample", "", "-n", "2", "--max-new-tokens", "6", "--format", "jsonl", "--ignore-eos")
    recs = [json.loads(x) for x in out(r).split("\n")[:-1]]
    assert len(recs) == 2 and all(x["tokens"] == 6 for x in recs)


@pytest.mark.parametrize("args, message", [
    (("--top-p", "0"), "--top-p"), (("--top-p", "1.5"), "--top-p"), (("--temperature", "-0.5"), "--temperature"),
    (("-n", "0"), "-n"), (("--top-k", "-3"), "--top-k"),
])
def test_bad_options_are_usage_errors(cli, args, message):
    r = run(cli, "sample", "hi", *args)
    assert r.returncode == 2 and message in r.stderr.decode()


def test_top_k_zero_means_disabled(cli):
    a = out(run(cli, "sample", "hi", "--dist", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--format", "jsonl"))
    assert len(a.split("\n")[:-1]) == 300  # the whole vocabulary


def test_sample_n8_reproducible_distinct_with_records_and_signature(cli):
    args = ("sample", "Once upon", "-n", "8", "--max-new-tokens", "12", "--seed", "42", "--format", "jsonl",
            "--ignore-eos", "--temperature", "0.9")
    a, b = out(run(cli, *args)), out(run(cli, *args))
    assert a == b
    recs = [json.loads(x) for x in a.split("\n")[:-1]]
    assert [r["index"] for r in recs] == list(range(8))
    assert len({r["text"] for r in recs}) == 8
    for r in recs:
        assert set(r) == {"index", "text", "tokens", "logprob", "logprob_filtered", "finish", "ids", "signature"}
        assert r["tokens"] == 12 and r["logprob"] < 0 and r["finish"] == "length"
    assert recs[0]["signature"].startswith("sample|model:llama-gqa|temp:0.9|")
    # each logprob is the sum of the per-token log-probabilities of a forward pass over prompt + sample
    import numpy as np

    from nlpkit.lm.transformer.transformer_lm import encode_prompt
    from nlpkit.lm.transformer.loaders import load_model
    from nlpkit.lm.generation.sampling import log_softmax

    model = load_model(MODEL)
    prompt = encode_prompt(model, "Once upon")
    for r in recs:
        lp = log_softmax(model.forward(np.array([prompt + r["ids"]]))[0, len(prompt) - 1:-1])
        assert r["logprob"] == pytest.approx(float(lp[np.arange(12), r["ids"]].sum()), abs=1e-4)
        assert model.tokenizer.decode(r["ids"]) == r["text"]
    assert "|seed:42|" in recs[0]["signature"] and "|n:8|" in recs[0]["signature"]


def test_sample_dist_prints_filtered_distribution_tsv(cli):
    lines = out(run(cli, "sample", "Once", "--dist", "--top-p", "0.5", "--format", "tsv")).split("\n")[:-1]
    assert lines[0].split("\t") == ["token", "id", "probability", "cumulative", "signature"]
    rows = [x.split("\t") for x in lines[1:]]
    probs = [float(r[2]) for r in rows]
    assert probs == sorted(probs, reverse=True)
    assert float(rows[-1][3]) == pytest.approx(1.0)


def test_help_lists_the_decoding_options(cli):
    text = cli("generate", "--help").stdout.decode()
    for opt in ("--temperature", "--top-k", "--top-p", "--min-p", "--repetition-penalty", "--seed", "--stop",
                "--no-kv-cache", "--stats", "--truncate-prompt", "0 = disabled"):
        assert opt in text


def test_generate_into_a_closed_pipe_exits_quietly():
    import subprocess
    import sys

    from conftest import REPO

    p = subprocess.Popen([sys.executable, "-m", "nlpkit", "generate", "Once", "--model", MODEL, "--sliding",
                          "--ignore-eos", "--max-new-tokens", "100000"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(REPO))
    p.stdout.read(5)
    p.stdout.close()  # like `| head -c 5`
    err = p.stderr.read()
    assert p.wait(timeout=120) == 0 and err == b""


def test_generate_uses_the_shipped_default_model_without_model_option(cli):
    from nlpkit.lm.transformer.loaders import DEFAULT_MODEL_DIR

    if not (DEFAULT_MODEL_DIR / "config.json").is_file():
        pytest.skip("the default model is not installed in nlpkit/lm/default/")
    r = cli("generate", "Once upon a time", "--max-new-tokens", "8", "--temperature", "0", "--stats",
            input=b"", env={"NLPKIT_MODEL": ""})
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout and "decode:" in r.stderr.decode()


def test_generate_and_sample_take_the_rope_scaling_override(cli):
    """--rope-scaling/--rope-factor are shared with perplexity and recorded in the signature."""
    r = cli("generate", "--temperature", "0", "--max-new-tokens", "3",
            "--rope-scaling", "linear", "--rope-factor", "2", "--prompts", "-", "--format", "jsonl",
            input="It was\n")
    assert r.returncode == 0, r.stderr.decode()
    import json

    rec = json.loads(r.stdout.decode().splitlines()[0])
    assert "|rope:linearx2.0|" in rec["signature"]
    r = cli("sample", "It was", "-n", "2", "--rope-factor", "0")
    assert r.returncode == 2
    assert b"--rope-factor" in r.stderr and b"is not in the range x>0" in r.stderr


def test_sample_max_new_tokens_0_gives_empty_rows_as_generate_does(cli):
    r = cli("sample", "Once upon", "--max-new-tokens", "0", "-n", "2", "--format", "jsonl", "--no-signature")
    assert r.returncode == 0, r.stderr.decode()
    rows = [json.loads(x) for x in r.stdout.decode().splitlines()]
    assert [(x["text"], x["tokens"], x["finish"]) for x in rows] == [("", 0, "length"), ("", 0, "length")]


def test_an_empty_stop_string_is_a_usage_error(cli):
    r = cli("generate", "Once upon", "--stop", "", "--max-new-tokens", "2")
    assert r.returncode == 2 and b"empty stop string" in r.stderr


def test_bad_config_names_config_json_and_its_field(cli, tmp_path):
    import shutil

    from nlpkit.lm.transformer.loaders import resolve_model_path

    model = tmp_path / "m"
    shutil.copytree(resolve_model_path(None), model)
    cfg = json.loads((model / "config.json").read_text())
    cfg["num_attention_heads"] = cfg["num_key_value_heads"] * 2 + 1
    (model / "config.json").write_text(json.dumps(cfg))
    r = cli("perplexity", "--model", str(model), input="hello there")
    assert r.returncode == 1
    assert f"{model / 'config.json'}: num_attention_heads {cfg['num_attention_heads']} is not a multiple of " \
           f"num_key_value_heads".encode() in r.stderr


def test_tokenize_names_a_gguf_that_is_not_one(cli, tmp_path):
    (tmp_path / "empty.gguf").write_bytes(b"")
    r = cli("tokenize", "-m", str(tmp_path / "empty.gguf"), input="hi\n")
    assert r.returncode == 1 and b"empty.gguf: not a GGUF file (empty)" in r.stderr


FAMILIES = FIXTURES / "lm" / "families"


def test_a_longrope_gguf_runs_every_lm_command(cli):
    """Phi-3's GGUF carries its longrope factors but no overall factor: the signature's RoPE label
    used to raise KeyError 'factor' in perplexity, generate and sample."""
    model = str(FAMILIES / "phi3" / "model.gguf")
    for args in (("perplexity",), ("generate", "--max-new-tokens", "3", "--temperature", "0"),
                 ("sample", "-n", "2", "--max-new-tokens", "3", "--seed", "1")):
        r = cli(*args, "-m", model, "--format", "jsonl", input="hello world")
        assert r.returncode == 0, r.stderr.decode()
        assert b"rope:longrope" in r.stdout


def test_ids_past_the_tokenizer_decode_to_nothing_as_hf_does(cli):
    """Qwen2 pads its embedding past the tokenizer (320 rows, 300 tokens here): drawing a padding id
    must not abort generation (HF's decode skips such ids)."""
    r = cli("generate", "Hello world", "-m", str(FAMILIES / "qwen2"), "--temperature", "0", "--max-new-tokens", "30",
            "--ignore-eos", "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["tokens"] == 30


@pytest.mark.parametrize("value", [-3, 0, 8.5, "4"])
def test_a_sliding_window_that_is_not_a_positive_integer_is_refused(cli, tmp_path, value):
    import shutil

    model = tmp_path / "m"
    shutil.copytree(FAMILIES / "mistral", model)
    cfg = json.loads((model / "config.json").read_text())
    cfg["sliding_window"] = value
    (model / "config.json").write_text(json.dumps(cfg))
    r = cli("perplexity", "-m", str(model), input="hello world")
    assert r.returncode == 1 and f"{model / 'config.json'}: sliding_window".encode() in r.stderr


def test_a_bad_generation_config_value_names_the_file(cli, tmp_path):
    import shutil

    from nlpkit.lm.transformer.loaders import resolve_model_path

    model = tmp_path / "m"
    shutil.copytree(resolve_model_path(None), model)
    (model / "generation_config.json").write_text('{"temperature": -1}')
    r = cli("generate", "hi", "-m", str(model), "--max-new-tokens", "2")
    assert r.returncode == 1
    assert f"{model / 'generation_config.json'}: temperature must be a number >= 0".encode() in r.stderr
    assert cli("generate", "hi", "-m", str(model), "--max-new-tokens", "2", "--temperature", "0").returncode == 0


def test_rope_scaling_extends_generation_as_it_extends_perplexity(cli):
    """One limit: trained positions x the RoPE factor (llama-gqa: 64 positions, x2 with linear scaling)."""
    model = str(FIXTURES / "lm" / "llama-gqa")
    plain = json.loads(cli("generate", "Hello world", "-m", model, "--max-new-tokens", "100", "--seed", "1",
                           "--format", "jsonl").stdout)
    scaled = json.loads(cli("generate", "Hello world", "-m", model, "--max-new-tokens", "100", "--seed", "1",
                            "--rope-scaling", "linear", "--rope-factor", "2", "--format", "jsonl").stdout)
    assert plain["finish"] == "context" and scaled["tokens"] == 100
    r = cli("perplexity", "-m", model, "--rope-scaling", "linear", "--rope-factor", "2", "--context", "129",
            input="hello world")
    assert r.returncode == 2 and b"128 positions" in r.stderr
