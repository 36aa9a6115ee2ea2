"""`sample --prompts FILE`: every prompt's -n continuations decoded together (`--batch-size`), each prompt's draws the
ones `sample PROMPT` gives it alone (continuation j draws row j's share of the seed's stream), records in input
order."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES

MODELS = {"gpt2-bpe": str(FIXTURES / "score" / "models" / "gpt2-bpe"),
          "llama-spm": str(FIXTURES / "score" / "models" / "llama-spm"),
          "ngram": str(FIXTURES / "ngram" / "kenlm-3.arpa.gz")}
MODEL = MODELS["gpt2-bpe"]
PROMPTS = ["It is a truth", "The capital of France is", "", "Once upon a", "a single man"]
SAMPLING = ("--temperature", "1", "--top-k", "20", "--seed", "5", "--max-new-tokens", "9")


def jsonl(r) -> list[dict]:
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


def batched(cli, model, prompts, *args, n="3"):
    return jsonl(cli("sample", "-m", model, "--prompts", "-", "-n", n, "--format", "jsonl", "--no-signature",
                     *SAMPLING, *args, input="".join(p + "\n" for p in prompts).encode()))


def alone(cli, model, prompt, *args, n="3"):
    return jsonl(cli("sample", prompt, "-m", model, "-n", n, "--format", "jsonl", "--no-signature", *SAMPLING, *args))


def same_draws(got: list[dict], ref: list[dict]) -> None:
    """The same continuations: ids, text, count and finish exactly; log-probabilities up to the batched engine's last
    bits (a row's logits in a many-row product)."""
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert {k: g[k] for k in ("index", "ids", "text", "tokens", "finish")} == \
               {k: r[k] for k in ("index", "ids", "text", "tokens", "finish")}
        assert g["logprob"] == pytest.approx(r["logprob"], abs=1e-4)
        assert g["logprob_filtered"] == pytest.approx(r["logprob_filtered"], abs=1e-4)


def per_prompt(records: list[dict]) -> list[list[dict]]:
    groups: dict[int, list[dict]] = {}
    for r in records:
        groups.setdefault(r.pop("prompt_index"), []).append(r)
    return [groups[i] for i in sorted(groups)]


@pytest.mark.parametrize("name", list(MODELS))
def test_each_prompt_draws_what_sample_prompt_draws_alone(cli, name):
    """Prompt i's continuations are `sample PROMPT_i -n 3 --seed 5`'s (the empty line starts from BOS, as PROMPT '')."""
    got = per_prompt(batched(cli, MODELS[name], PROMPTS, "--batch-size", "4"))
    assert len(got) == len(PROMPTS)
    for prompt, records in zip(PROMPTS, got):
        same_draws(records, alone(cli, MODELS[name], prompt))


def test_seeded_draws_do_not_depend_on_the_batch_size(cli):
    ref = batched(cli, MODEL, PROMPTS)  # the default batch size (16 continuations)
    for size in ("1", "2", "7"):
        got = batched(cli, MODEL, PROMPTS, "--batch-size", size)
        assert [(r["prompt_index"], r["index"]) for r in got] == [(r["prompt_index"], r["index"]) for r in ref]
        same_draws(got, ref)


def test_records_come_in_input_order_with_the_prompts_index(cli):
    got = batched(cli, MODEL, PROMPTS, "--batch-size", "4", "--stop", "o")  # rows end at different steps
    assert [(r["prompt_index"], r["index"]) for r in got] == [(i, j) for i in range(len(PROMPTS)) for j in range(3)]
    assert set(got[0]) == {"prompt_index", "index", "text", "tokens", "logprob", "logprob_filtered", "finish", "ids"}
    assert all("o" not in r["text"] for r in got)
    assert {r["finish"] for r in got} == {"stop", "length"}


def test_a_row_generator_takes_every_nth_number_of_the_seeds_stream():
    """`RowGenerator(seed, j, n)` gives the numbers row j of an n-row `draw` takes from `default_rng(seed)`."""
    import numpy as np

    from nlpkit.lm.generation.batch_sampling import RowGenerator

    stream = np.random.default_rng(11).random(4 * 5)  # 4 steps of 5 rows
    for j in range(5):
        g = RowGenerator(11, j, 5)
        assert [g.random(1)[0] for _ in range(4)] == stream[j::5].tolist()
    assert RowGenerator(11, 0, 1).random(3).tolist() == stream[:3].tolist()


def test_the_prompts_order_does_not_change_any_prompts_draws(cli):
    forward = per_prompt(batched(cli, MODEL, PROMPTS, "--batch-size", "5"))
    backward = per_prompt(batched(cli, MODEL, PROMPTS[::-1], "--batch-size", "5"))
    for f, b in zip(forward, backward[::-1]):
        same_draws(f, b)


def test_one_prompt_line_gives_sample_prompts_numbers(cli):
    """The one-prompt equivalence: a file of one line draws what `sample PROMPT` draws, with the same seed."""
    got = batched(cli, MODEL, ["Once upon a"], "--batch-size", "2", n="5")
    assert [r.pop("prompt_index") for r in got] == [0] * 5
    same_draws(got, alone(cli, MODEL, "Once upon a", n="5"))


def test_one_prompt_at_a_time_without_the_kv_cache_gives_the_same_records(cli):
    """--no-kv-cache runs each prompt's shared-prefix batch in turn (`sample PROMPT`'s path): the same draws."""
    same_draws(batched(cli, MODEL, PROMPTS, "--no-kv-cache"), batched(cli, MODEL, PROMPTS, "--batch-size", "3"))


def test_jsonl_prompts_carry_their_id(cli):
    lines = [{"id": "a", "q": "It is a truth"}, {"q": "Hello"}, {"id": 7, "q": "Once upon a"}]
    text = json.dumps(lines[0]) + "\n\n" + "\n".join(json.dumps(x) for x in lines[1:]) + "\n"  # a blank line skipped
    got = jsonl(cli("sample", "-m", MODEL, "--prompts", "-", "--field", "q", "-n", "2", "--format", "jsonl",
                    "--no-signature", *SAMPLING, input=text.encode()))
    assert [(r["prompt_index"], r["id"]) for r in got] == [(0, "a"), (0, "a"), (1, None), (1, None), (2, "7"), (2, "7")]
    same_draws(got[2:4], alone(cli, MODEL, "Hello", n="2"))


@pytest.mark.parametrize("args, stdin, code, message", [
    (["--prompts", "-"], b"", 1, "no prompts"),
    (["--prompts", "-", "--field", "q"], b"\n\n", 1, "no prompts"),
    (["--prompts", "-"], b"fine\n\xff\xfe\n", 1, "line 2: invalid UTF-8"),
    (["--prompts", "-", "--field", "q"], b'{"p": "x"}\n', 1, "no field 'q'"),
    (["Hello", "--prompts", "-"], b"a\n", 2, "give a PROMPT or --prompts FILE, not both"),
    (["--prompts", "-", "--batch-size", "0"], b"a\n", 2, "--batch-size"),
    (["--prompts", "-", "--batch-size", "x"], b"a\n", 2, "--batch-size"),
    (["Hello", "--batch-size", "2"], b"", 2, "--batch-size applies to --prompts FILE"),
    (["Hello", "--field", "q"], b"", 2, "--field applies to --prompts FILE"),
    (["--prompts", "-", "--batch-size", "2", "--sliding"], b"a\n", 2, "not with --no-kv-cache or --sliding"),
    (["--prompts", "-", "--dist"], b"a\n", 2, "--dist"),
    (["--prompts", "-", "--chat", "--messages", "-"], b"a\n", 2, "would both read stdin"),
])
def test_bad_input_is_a_clear_error(cli, args, stdin, code, message):
    r = cli("sample", "-m", MODEL, *args, input=stdin)
    err = r.stderr.decode()
    assert r.returncode == code and message in err and err.startswith("nlpkit: error:") and "Traceback" not in err
    assert r.stdout == b""


@pytest.mark.parametrize("size", [1, 3, 16])
def test_continuations_copying_a_siblings_prefill_draw_the_same(size):
    """`DecodingBatch.fork`: a prompt's continuations are prefilled once (while a sibling is live) and draw
    what `sample_batch` draws, whatever the batch size; the prefill counts a prompt's tokens once when all its
    continuations fit in the batch together."""
    from nlpkit.lm.generation.batch_generation import BatchStats
    from nlpkit.lm.generation.batch_sampling import sample_prompts
    from nlpkit.lm.generation import sample_batch
    from nlpkit.lm.load import load_language_model
    from nlpkit.lm.generation.sampling import SamplingConfig
    from nlpkit.lm.transformer.batch_decoding import supports_batching

    lm = load_language_model(MODEL)
    assert supports_batching(lm.model)
    cfg = SamplingConfig(temperature=1.0, top_k=20).validate()
    prompts = [lm.prompt(t, max_new_tokens=9) for t in PROMPTS]
    st = BatchStats()
    got = list(sample_prompts(lm, prompts, 4, batch_size=size, max_new_tokens=9, sampling=cfg, seed=5, stop=["o"],
                              stats=st))
    for p, samples in zip(prompts, got):
        ref = sample_batch(lm, p, 4, max_new_tokens=9, sampling=cfg, seed=5, stop=["o"])
        assert [(s.ids, s.text, s.finish) for s in samples] == [(s.ids, s.text, s.finish) for s in ref]
        assert [s.logprob for s in samples] == pytest.approx([s.logprob for s in ref], abs=1e-4)
    once = sum(len(p.ids) for p in prompts)
    if size == 1:  # no sibling is ever live: each continuation prefills
        assert st.prompt_tokens == 4 * once
    elif size == 16:  # every sibling joins while the first is live
        assert st.prompt_tokens == once
    else:
        assert once < st.prompt_tokens < 4 * once
