"""`nlpkit serve` as a process on 127.0.0.1: the options' usage errors, a load of concurrent clients (nothing lost,
nothing mixed up), a client that disconnects, SIGTERM while a request runs (it finishes, exit 0), and the `openai`
Python client (completions, chat, streaming)."""

from __future__ import annotations

import json
import shutil
import threading
import time

import pytest

from serve_helpers import SCORE, Server

httpx = pytest.importorskip("httpx")


def test_a_non_loopback_host_needs_an_api_key(cli):
    r = cli("serve", "-m", "default", "--host", "0.0.0.0", "--port", "0")
    assert r.returncode == 2
    assert r.stderr.decode().startswith("nlpkit: error: --host 0.0.0.0") and "--api-key" in r.stderr.decode()
    assert b"Traceback" not in r.stderr


def test_a_port_in_use_is_an_error_before_the_model_loads(cli):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        r = cli("serve", "-m", "default", "--port", str(s.getsockname()[1]))
    assert r.returncode == 2 and "cannot listen on 127.0.0.1" in r.stderr.decode()


def _requests(k: int) -> list[dict]:
    """Mixed requests: scoring (echo, logprobs), greedy generation, seeded sampling, several prompts at once."""
    words = ["river", "garden", "mountain", "letter", "window", "morning", "music", "story"]
    w = words[k % len(words)]
    return [
        {"prompt": f"The {w} was quiet and {k}", "echo": True, "max_tokens": 1, "logprobs": 1, "temperature": 0},
        {"prompt": f"Once upon a time the {w}", "max_tokens": 12 + k % 5, "temperature": 0},
        {"prompt": f"A {w} of {k}", "max_tokens": 10, "temperature": 0.9, "seed": k, "n": 2, "logprobs": 2},
        {"prompt": [f"{w} one", f"{w} two {k}"], "max_tokens": 5, "temperature": 0, "echo": True, "logprobs": 0},
    ]


def _strip(body: dict) -> dict:
    return {"choices": body["choices"], "usage": body["usage"]}


def test_the_listening_socket_sends_small_writes_at_once():
    """TCP_NODELAY on the socket (accepted connections inherit it): asyncio sets it only on sockets made with
    proto=IPPROTO_TCP, and without it each response waited for the client's delayed ACK (~40 ms a request: lm-eval's
    remote tokenizer makes one /tokenize request per string)."""
    import socket

    from nlpkit.cli.serve import _bind

    sock = _bind("127.0.0.1", 0)
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        sock.close()


def test_concurrent_clients_each_get_their_own_answers():
    """16 clients x 4 mixed requests at once: every answer equals the one the same request gets alone (greedy and
    seeded generations decode in other rows of the batch: the same tokens; scores: the same numbers)."""
    clients, per = 16, 4
    with Server("-m", "default", "--batch-size", "16") as srv:
        alone = {}
        with httpx.Client(base_url=srv.url, timeout=120) as c:
            for k in range(clients):
                for j, body in enumerate(_requests(k)):
                    alone[k, j] = _strip(c.post("/v1/completions", json=body).json())
        got: dict = {}
        errors: list = []

        def client(k: int) -> None:
            try:
                with httpx.Client(base_url=srv.url, timeout=120) as c:
                    for j, body in enumerate(_requests(k)[:per]):
                        r = c.post("/v1/completions", json=body)
                        assert r.status_code == 200, r.text
                        got[k, j] = _strip(r.json())
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not errors, errors[:3]
        assert set(got) == set(alone)
        for key in alone:
            a, b = alone[key], got[key]
            assert [c["text"] for c in a["choices"]] == [c["text"] for c in b["choices"]], key
            assert a["usage"] == b["usage"], key
            for ca, cb in zip(a["choices"], b["choices"]):
                if ca["logprobs"]:
                    assert cb["logprobs"]["tokens"] == ca["logprobs"]["tokens"]
                    assert cb["logprobs"]["token_logprobs"] == pytest.approx(ca["logprobs"]["token_logprobs"],
                                                                             abs=1e-4)
        health = httpx.get(srv.url + "/health").json()
        assert health["live"] == 0 and health["queued"] == 0
        assert srv.stop() == 0


def test_a_client_that_disconnects_frees_its_sequences():
    with Server("-m", "default") as srv:
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            with c.stream("POST", "/v1/completions", json={"prompt": "Once", "max_tokens": 500, "temperature": 0,
                                                          "stream": True}) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        break
            assert c.get("/health").json()["live"] <= 1
            deadline = time.monotonic() + 20
            while c.get("/health").json()["live"] and time.monotonic() < deadline:
                time.sleep(0.1)
            assert c.get("/health").json()["live"] == 0
            # a non-streamed request whose client gives up
            with pytest.raises(httpx.TimeoutException):
                c.post("/v1/completions", json={"prompt": "Once", "max_tokens": 500, "temperature": 0, "n": 4},
                       timeout=0.3)
            deadline = time.monotonic() + 20
            while c.get("/health").json()["live"] and time.monotonic() < deadline:
                time.sleep(0.1)
            assert c.get("/health").json()["live"] == 0
            assert c.post("/v1/completions", json={"prompt": "a", "max_tokens": 2}).status_code == 200


def _ask_in_background(url: str, body: dict) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def ask() -> None:
        out["r"] = httpx.post(url + "/v1/completions", json=body, timeout=300)

    t = threading.Thread(target=ask)
    t.start()
    return t, out


def test_sigterm_lets_a_running_request_finish_and_exits_0():
    srv = Server("-m", "default", "--grace", "120")
    t, out = _ask_in_background(srv.url, {"prompt": "Once", "max_tokens": 60, "temperature": 0, "n": 2})
    time.sleep(0.5)
    code = srv.stop(180)
    t.join(60)
    assert code == 0
    assert out["r"].status_code == 200
    assert [c["finish_reason"] for c in out["r"].json()["choices"]] == ["length", "length"]
    err = srv.stderr()
    assert "server stopped" in err and "Traceback" not in err


def test_sigterm_cancels_what_outlasts_the_grace_and_exits_0():
    srv = Server("-m", "default", "--grace", "1")
    # 16 x 500 tokens: several seconds of decoding on any machine, so that the grace runs out first
    t, out = _ask_in_background(srv.url, {"prompt": "Once", "max_tokens": 500, "temperature": 0, "n": 16})
    time.sleep(0.5)
    t0 = time.monotonic()
    code = srv.stop(120)
    t.join(60)
    assert code == 0 and time.monotonic() - t0 < 60
    assert out["r"].status_code == 503 and out["r"].json()["error"]["type"] == "server_unavailable"
    assert "Traceback" not in srv.stderr()


def test_the_openai_client_completes_chats_and_streams(tmp_path):
    openai = pytest.importorskip("openai")
    model = tmp_path / "chat-model"
    shutil.copytree(SCORE / "models" / "gpt2-bpe", model)
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    cfg["chat_template"] = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                            "{% if add_generation_prompt %}assistant:{% endif %}")
    (model / "tokenizer_config.json").write_text(json.dumps(cfg))
    with Server("-m", str(model), "--api-key", "k") as srv:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="k")
        assert [m.id for m in client.models.list()] == ["chat-model"]
        done = client.completions.create(model="x", prompt="The capital of France is", max_tokens=5, temperature=0,
                                         logprobs=1, echo=True)
        assert done.choices[0].text.startswith("The capital of France is")
        assert done.choices[0].logprobs.token_logprobs[0] is None
        chat = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}], max_tokens=6,
                                              temperature=0, logprobs=True, top_logprobs=2)
        assert chat.choices[0].message.role == "assistant" and chat.usage.completion_tokens >= 1
        assert len(chat.choices[0].logprobs.content) == chat.usage.completion_tokens
        pieces = [ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
            model="x", messages=[{"role": "user", "content": "hi"}], max_tokens=6, temperature=0, stream=True)
            if ch.choices]
        assert "".join(pieces) == chat.choices[0].message.content
        streamed = "".join(ch.choices[0].text for ch in client.completions.create(
            model="x", prompt="a b", max_tokens=6, temperature=0, stream=True))
        assert streamed == client.completions.create(model="x", prompt="a b", max_tokens=6, temperature=0).choices[0].text
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=srv.url + "/v1", api_key="wrong").models.list()
        with pytest.raises(openai.BadRequestError):
            client.completions.create(model="x", prompt="a", logprobs=50)
