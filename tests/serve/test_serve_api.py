"""`nlpkit serve`'s API in process (FastAPI's TestClient): echo log-probabilities equal `nlpkit score`'s, prompts in
every shape, generation, streaming, the tokenizer endpoints, and every bad request an OpenAI-shaped error after
which the server goes on serving."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from serve_helpers import (MODELS, SCORE, items, lm_eval_loglikelihood, lm_eval_pair, make_client, model_path,
                           score_records)

TOL = 1e-5  # per token: lm-eval sends context + continuation as one prompt, scored from its first token; `score`
# cuts the sequence at the context, whose rows then sit in other product slots (`packing.Packing.slots`: a row's bits
# depend on its slot modulo 12): float32 rounding, ~1e-7 (exact when the cut is the same: the test below)


@pytest.fixture(scope="module", params=MODELS)
def api(request):
    client, served, engine = make_client(request.param)
    with client:
        yield client, served
    assert not engine.thread.is_alive()



def tokenize(client, text: str, add_special_tokens: bool = False) -> list[int]:
    r = client.post("/tokenize", json={"prompt": text, "add_special_tokens": add_special_tokens})
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def complete(client, **body) -> dict:
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("fixture", ["ll.jsonl", "mc.jsonl"])
def test_echo_logprobs_sum_to_nlpkit_scores_as_lm_eval_reads_them(api, fixture):
    """lm-eval's `local-completions` request (token ids, echo, max_tokens 1, logprobs 1, temperature 0) per
    (context, continuation): the sum of the continuation's token_logprobs and the greedy flag equal the records of
    `nlpkit score` on the same items (items whose context fits the model's 64 positions)."""
    client, served = api
    info = client.get("/tokenizer_info").json()
    prefix = tokenize(client, info["bos_token"] or info["eos_token"])[0]
    recs = score_records(served.name, SCORE / fixture)
    pairs = []
    for item in items(SCORE / fixture):
        if "choices" in item:
            pairs += [(item["context"], " " + c) for c in item["choices"]]
        else:
            pairs.append((item["context"], item["continuation"]))
    want = []
    for rec in recs:
        want += [(lp, None) for lp in rec["logprobs"]] if "logprobs" in rec else [(rec["logprob"], rec["is_greedy"])]
    assert len(want) == len(pairs)
    checked = 0
    for (context, continuation), (logprob, greedy) in zip(pairs, want):
        ctx, cont = lm_eval_pair(lambda t: tokenize(client, t), prefix, context, continuation)
        if len(ctx) + len(cont) + (served.bos() is not None and ctx[0] != served.bos()) > served.context:
            continue
        out = complete(client, model="whatever", prompt=[ctx + cont], echo=True, max_tokens=1, logprobs=1,
                       temperature=0, seed=1234)
        got, got_greedy = lm_eval_loglikelihood(out["choices"][0], len(ctx))
        assert got == pytest.approx(logprob, abs=TOL * len(cont)), (context, continuation)
        if greedy is not None:
            assert got_greedy == greedy
        checked += 1
    assert checked >= len(pairs) // 2


def test_an_echoed_prompt_is_nlpkit_scores_item_with_the_prompt_as_continuation_bit_for_bit(api, tmp_path):
    """The echo of a prompt too short to be cut (`prompt_scoring.prompt_cut`: under 20 tokens fed; a longer one is
    score's segment for (its first `cut` tokens, the rest), tests/lm/test_prompt_scoring.py) is `score`'s segment
    for (its first token, the rest): a prompt after the BOS the server
    adds (a model whose tokenizer adds one), or after the prefix token the client sends (one that adds none), scores
    as `nlpkit score` scores the item with an empty context (conditioned on that token). Each token's float64
    log-probability is score's own: their numpy sum equals score's logprob exactly (score sums them with numpy; lm-eval's
    Python sum differs from it by float64 rounding only). With a non-empty context `score` cuts the sequence
    elsewhere: the context rows take other product slots (`packing.Packing.slots`), ~1e-7 per token (TOL above)."""
    import numpy as np

    client, served = api
    texts = ["The capital of France is Paris, and it is a lovely city in the spring", "a b c", "Pick the animal: cat"]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"context": "", "continuation": t}) + "\n" for t in texts), encoding="utf-8")
    r = run_cli("score", "-m", str(model_path(served.name)), str(path), "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    want = [rec["logprob"] for rec in map(json.loads, r.stdout.decode().splitlines()) if rec["record"] == "item"]
    for text, logprob in zip(texts, want):
        if served.bos() is not None:
            prompt, skip = text, 0
        else:
            prompt, skip = [served.lm.prefix_id] + tokenize(client, text), 1
        lps = complete(client, prompt=prompt, echo=True, max_tokens=0, logprobs=0)["choices"][0]["logprobs"]
        got = lps["token_logprobs"][skip:]
        assert float(np.sum(np.asarray(got, np.float64))) == logprob, text
        assert sum(got) == pytest.approx(logprob, rel=1e-12)  # lm-eval's sum: float64 rounding apart


def test_a_batch_of_prompts_gives_each_its_own_numbers(api):
    """Several prompts in one request (lm-eval's batch_size > 1) are packed together: each prompt's
    token_logprobs equal those it gets alone."""
    client, _ = api
    prompts = [tokenize(client, t) for t in ("The capital of France is Paris", "Pick the animal: cat", "a b c")]
    alone = [complete(client, prompt=p, echo=True, max_tokens=0, logprobs=2)["choices"][0] for p in prompts]
    together = complete(client, prompt=prompts, echo=True, max_tokens=0, logprobs=2)["choices"]
    assert [c["index"] for c in together] == [0, 1, 2]
    for a, b in zip(alone, together):
        assert a["logprobs"] == b["logprobs"]


def test_the_choices_of_an_item_score_the_same_bits_together_apart_and_in_any_order(api):
    """lm-eval's prompts of one item (its context + each choice) share the context's rows when they are scored
    together (`prompt_scoring`); each prompt's numbers are the bits it gets alone, in any order, in one request or
    several."""
    client, served = api
    context = "The old house stood at the end of the road, and the wind came"
    prompts = [tokenize(client, context + c) for c in (" and sang.", " cold", " to the sea below", " .")]
    body = dict(echo=True, max_tokens=1, logprobs=1, temperature=0)
    together = complete(client, prompt=prompts, **body)["choices"]
    backwards = complete(client, prompt=prompts[::-1] + [tokenize(client, "a b c")], **body)["choices"]
    for k, p in enumerate(prompts):
        alone = complete(client, prompt=p, **body)["choices"][0]
        assert alone["logprobs"] == together[k]["logprobs"] == backwards[len(prompts) - 1 - k]["logprobs"]
        assert len(alone["logprobs"]["token_logprobs"]) == len(served.read_ids(p).shown) + 1


def test_echo_with_max_tokens_0_returns_the_prompt_and_its_logprobs(api):
    client, served = api
    text = "The capital of France is"
    out = complete(client, prompt=text, echo=True, max_tokens=0, logprobs=0)
    choice = out["choices"][0]
    lp = choice["logprobs"]
    ids = served.read_text(text).shown
    assert choice["text"] == text and choice["finish_reason"] == "length"
    assert lp["tokens"] == [served.token_string(i) for i in ids]
    assert (lp["token_logprobs"][0] is None) == (served.bos() is None)  # a BOS the server adds conditions it
    assert all(isinstance(x, float) and x < 0 for x in lp["token_logprobs"][1:])
    assert lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(lp["text_offset"])
    assert out["usage"]["completion_tokens"] == 0


def test_a_string_prompt_and_its_token_ids_score_the_same(api):
    client, _ = api
    text = "Pick the animal: cat"
    a = complete(client, prompt=text, echo=True, max_tokens=0, logprobs=1)["choices"][0]["logprobs"]
    b = complete(client, prompt=tokenize(client, text), echo=True, max_tokens=0, logprobs=1)["choices"][0]["logprobs"]
    assert a["token_logprobs"] == b["token_logprobs"]


def test_top_logprobs_hold_k_tokens_best_first(api):
    client, _ = api
    lp = complete(client, prompt="a b c d", echo=True, max_tokens=2, logprobs=3, temperature=0)["choices"][0]
    tops = [t for t in lp["logprobs"]["top_logprobs"] if t is not None]
    assert all(len(t) <= 3 and list(t.values()) == sorted(t.values(), reverse=True) for t in tops)
    # greedy: each generated token is its position's best
    for tok, top in zip(lp["logprobs"]["token_logprobs"][-2:], tops[-2:]):
        assert tok == pytest.approx(max(top.values()), abs=1e-6)


def test_greedy_generation_equals_nlpkit_score_generate_task(api, cli, tmp_path):
    """A greedy completion is `nlpkit score`'s generation of the same context (its generate task: lm-evaluation-
    harness's `generate_until`, the text decoded without special tokens and cut at the stop strings)."""
    client, served = api
    texts = ["The capital of France is", "Question: what is two plus two?\nAnswer:"]
    data = tmp_path / "gen.jsonl"
    data.write_text("".join(json.dumps({"context": t, "target": "x"}) + "\n" for t in texts))
    r = cli("score", "-m", str(SCORE / "models" / served.name), str(data), "--max-gen-toks", "6", "--until", "\n\n",
            "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    want = [rec["generation"] for rec in map(json.loads, r.stdout.decode().splitlines()) if rec.get("record") == "item"]
    out = complete(client, prompt=texts, max_tokens=6, temperature=0, stop=["\n\n"])
    assert [c["text"] for c in out["choices"]] == want


def test_a_seed_repeats_a_sample_and_n_choices_differ(api):
    client, _ = api
    body = dict(prompt="Once upon a time", max_tokens=8, temperature=1.0, seed=7, n=3)
    a, b = complete(client, **body)["choices"], complete(client, **body)["choices"]
    assert [c["text"] for c in a] == [c["text"] for c in b]
    assert len({c["text"] for c in a}) > 1
    assert [c["index"] for c in a] == [0, 1, 2]


def test_a_stop_string_cuts_the_text_before_it(api):
    client, _ = api
    full = complete(client, prompt="a b c", max_tokens=10, temperature=0)["choices"][0]["text"]
    stop = full[3:5]
    assert stop
    cut = complete(client, prompt="a b c", max_tokens=10, temperature=0, stop=[stop])["choices"][0]
    assert cut["text"] == full[:full.index(stop)] and cut["finish_reason"] == "stop"


def test_streamed_text_joins_to_the_whole_text(api):
    client, _ = api
    body = dict(prompt="Pick the animal:", max_tokens=8, temperature=0, logprobs=1)
    whole = complete(client, **body)["choices"][0]
    with client.stream("POST", "/v1/completions", json={**body, "stream": True,
                                                        "stream_options": {"include_usage": True}}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[-1]["usage"]["completion_tokens"] == 8
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    lps = [x for c in chunks if c["choices"] and c["choices"][0]["logprobs"]
           for x in c["choices"][0]["logprobs"]["token_logprobs"]]
    assert text == whole["text"]
    assert lps == whole["logprobs"]["token_logprobs"]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"


def test_the_tokenizer_endpoints_answer_as_lm_eval_remote_tokenizer_reads_them(api):
    client, served = api
    info = client.get("/tokenizer_info").json()
    assert info["eos_token"] and info["model_max_length"] == served.context
    ids = tokenize(client, "Hello world")
    assert client.post("/detokenize", json={"tokens": ids}).json()["prompt"] == "Hello world"
    with_bos = tokenize(client, "Hello world", add_special_tokens=True)
    assert with_bos == ([served.bos()] if served.bos() is not None else []) + ids
    assert tokenize(client, info["eos_token"]) == [served.engine_model.config.eos_id]


def test_the_models_route_lists_the_model_whatever_a_request_names(api):
    client, served = api
    data = client.get("/v1/models").json()["data"]
    assert [m["id"] for m in data] == [served.name]
    assert client.get(f"/v1/models/{served.name}").status_code == 200
    assert complete(client, model="gpt-4", prompt="a", max_tokens=1)["model"] == served.name


BAD = [
    ("prompt over the context", 400, {"prompt": "a " * 200, "max_tokens": 1}),
    ("token id outside the vocabulary", 400, {"prompt": [1, 2, 10 ** 6]}),
    ("too many logprobs", 400, {"prompt": "a", "logprobs": 21}),
    ("temperature out of range", 400, {"prompt": "a", "temperature": 3}),
    ("negative max_tokens", 400, {"prompt": "a", "max_tokens": -1}),
    ("empty prompt list", 400, {"prompt": []}),
    ("n zero", 400, {"prompt": "a", "n": 0}),
    ("too many choices", 400, {"prompt": ["a"] * 100, "n": 20}),
    ("presence penalty", 400, {"prompt": "a", "presence_penalty": 1.0}),
    ("prompt a number", 422, {"prompt": 5}),
    ("max_tokens a string", 422, {"prompt": "a", "max_tokens": "5"}),
    ("echo a number", 422, {"prompt": "a", "echo": 1}),
    ("no prompt", 422, {"max_tokens": 3}),
    ("mixed prompt list", 422, {"prompt": ["a", 3]}),
    ("body an array", 422, ["a"]),
]


@pytest.mark.parametrize("what, status, body", BAD, ids=[b[0] for b in BAD])
def test_a_bad_request_is_an_openai_error_and_the_server_goes_on(api, what, status, body):
    client, _ = api
    r = client.post("/v1/completions", json=body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    assert "Traceback" not in r.text
    assert complete(client, prompt="a", max_tokens=1)["choices"][0]["finish_reason"] in ("length", "stop")


def test_bad_json_unknown_routes_and_models_are_400_404(api):
    client, _ = api
    r = client.post("/v1/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
    assert client.get("/v2/nothing").status_code == 404
    assert client.get("/v2/nothing").json()["error"]["code"] == "not_found"
    assert client.get("/v1/models/no-such-model").status_code == 404
    assert client.post("/v1/chat/completions", json={"messages": "hi"}).status_code == 422


def test_a_model_without_a_chat_template_answers_chat_with_400():
    client, _, _ = make_client("gpt2-bpe")
    with client:
        r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 400 and "chat template" in r.json()["error"]["message"]


def test_a_body_over_the_limit_is_413():
    client, _, _ = make_client("gpt2-bpe", max_body=1000)
    with client:
        r = client.post("/v1/completions", json={"prompt": "a" * 2000})
        assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"
        assert client.post("/v1/completions", json={"prompt": "a", "max_tokens": 1}).status_code == 200


def test_an_api_key_is_required_on_every_route_but_health():
    client, _, _ = make_client("gpt2-bpe", api_key="sekrit")
    with client:
        assert client.get("/health").status_code == 200
        for method, path in (("get", "/v1/models"), ("post", "/v1/completions"), ("get", "/tokenizer_info")):
            r = getattr(client, method)(path, **({"json": {"prompt": "a"}} if method == "post" else {}))
            assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        bad = client.get("/v1/models", headers={"Authorization": "Bearer wrong"})
        assert bad.status_code == 401
        good = client.get("/v1/models", headers={"Authorization": "Bearer sekrit"})
        assert good.status_code == 200


def test_a_closed_engine_answers_503():
    client, _, engine = make_client("gpt2-bpe")
    with client:
        engine.accepting = False
        r = client.post("/v1/completions", json={"prompt": "a", "max_tokens": 1})
        assert r.status_code == 503 and r.json()["error"]["type"] == "server_unavailable"
        assert client.get("/health").status_code == 503
        engine.accepting = True
        assert client.post("/v1/completions", json={"prompt": "a", "max_tokens": 1}).status_code == 200


def test_a_request_past_the_timeout_is_504_and_its_sequences_leave():
    client, _, engine = make_client("gpt2-bpe", timeout=0.05)
    with client:
        # 64 choices x 60 tokens: far past 50 ms on any machine (8 x 60 could finish inside it once decoding got faster)
        r = client.post("/v1/completions", json={"prompt": "a", "max_tokens": 60, "n": 64, "temperature": 0})
        assert r.status_code == 504 and r.json()["error"]["code"] == "timeout"
        import time

        deadline = time.monotonic() + 10
        while (engine.load["live"] or engine.load["queued"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert engine.load == {"queued": 0, "live": 0}
