"""`nlpkit serve -m MODEL`: the model behind an OpenAI-compatible HTTP API, for lm-evaluation-harness's
`local-completions` and any OpenAI client (core: nlpkit/serve/). Options, the listening socket, uvicorn, and a
graceful stop on SIGTERM or Ctrl-C."""

from __future__ import annotations

import ipaddress
import sys

import click

from nlpkit.cli.common import quiet_option, weights_option
from nlpkit.cli.options import Count, FiniteFloat, model_path_type

EPILOG = """\b
Examples:
  nlpkit serve -m SmolLM2-135M-Instruct.Q4_1.gguf --port 8000
  lm_eval --model local-completions --tasks hellaswag --model_args \\
    base_url=http://127.0.0.1:8000/v1/completions,tokenizer_backend=remote
  curl localhost:8000/v1/completions -H 'Content-Type: application/json' \\
    -d '{"prompt": "The capital of France is", "max_tokens": 8}'
"""


def is_loopback(host: str) -> bool:
    """Whether `host` binds only this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("serve", epilog=EPILOG)
@click.option("-m", "--model", "model_path", default=None, metavar="PATH", type=model_path_type(),
              help="Hugging Face model directory, .gguf file, or 'default' (the shipped model) [$NLPKIT_MODEL, else "
                   "the shipped model].")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; any other than a loopback address needs --api-key.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port to listen on (0: a free one, named on stderr).")
@click.option("--batch-size", type=Count(1, 1024), default=None, metavar="N",
              help="Generation requests decoded together, one forward per step for all [32, fewer while their KV "
                   "caches would take over a quarter of the free memory].")
@weights_option
@click.option("--api-key", envvar="NLPKIT_API_KEY", default=None, metavar="KEY",
              help="Require 'Authorization: Bearer KEY' on every route but /health [$NLPKIT_API_KEY].")
@click.option("--timeout", type=FiniteFloat(min=0, min_open=True), default=600.0, show_default=True,
              metavar="SECONDS", help="A request still unfinished after SECONDS (queueing included) fails with 504.")
@click.option("--grace", type=FiniteFloat(min=0), default=30.0, show_default=True, metavar="SECONDS",
              help="On SIGTERM or Ctrl-C: stop accepting, give running requests SECONDS to finish, cancel the rest, "
                   "exit 0 (a second signal exits at once).")
@quiet_option
def command(model_path, host, port, batch_size, weights, api_key, timeout, grace, quiet):
    """Serve a model over HTTP with OpenAI's API: POST /v1/completions (legacy completions: prompt as text or
    token ids, echo, logprobs, max_tokens, temperature, top_p, top_k, seed, stop, n, stream), POST
    /v1/chat/completions (the model's chat template), GET /v1/models, GET /health, and /tokenize, /detokenize,
    /tokenizer_info (lm-evaluation-harness's remote tokenizer).

    With echo and max_tokens 0 (or 1, as lm-evaluation-harness asks), a prompt's token_logprobs are the numbers
    `nlpkit score` gives: lm-evaluation-harness's `local-completions` model scores multiple-choice and
    loglikelihood tasks through the server. Requests from many clients share the model: scoring requests are
    packed together, generation requests join one continuous batch.

    The model must be a transformer (a Hugging Face directory or a GGUF file). Every bad request gets an
    OpenAI-shaped error (400, 401, 404, 413, 422, 503) and the server goes on. Bodies over 32 MB are refused.
    """
    from nlpkit.cli.common import load_spec, warn
    from nlpkit.lm.generation.batch_generation import DEFAULT_BATCH

    try:
        import fastapi  # noqa: F401 - the app's framework, checked before the model loads
        import uvicorn
    except ImportError:
        raise click.UsageError("serve needs FastAPI and uvicorn: pip install 'nlpkit[serve]'") from None
    if not is_loopback(host) and not api_key:
        raise click.UsageError(f"--host {host} listens beyond this machine: give --api-key KEY (or $NLPKIT_API_KEY)")
    sock = _bind(host, port)
    from nlpkit.serve.app import create_app
    from nlpkit.serve.engine import Engine
    from nlpkit.serve.model import load_served_model

    # decode: `--weights auto` holds the weights as float32 when they fit (a token per step; a Q4_1 SmolLM2 held
    # natively decoded 0.6 tok/s under load)
    served = load_served_model(load_spec(model_path, weights, purpose="decode"), warn=lambda m: warn(m, quiet))
    engine = Engine(served, batch_size or DEFAULT_BATCH)
    app = create_app(served, engine, api_key=api_key, timeout=timeout, grace=grace)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=grace + 10,
                            lifespan="on")
    server = _Server(config)
    _stop_on_signal(server, engine, grace, quiet)
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    if not quiet:
        sys.stderr.write(f"nlpkit: serving {served.name} on http://{shown}:{bound[1]}/v1 (Ctrl-C to stop)\n")
        sys.stderr.flush()
    server.run(sockets=[sock])
    if not quiet:
        sys.stderr.write("nlpkit: server stopped\n")


def _bind(host: str, port: int):
    """The listening socket (bound before the model loads: a port in use is an error at once)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by each connection: a response's writes
    # go out at once (asyncio sets it only on sockets made with proto=IPPROTO_TCP; without it every request waited
    # ~40 ms for the client's delayed ACK)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise click.UsageError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _stop_on_signal(server, engine, grace: float, quiet: bool) -> None:
    """The first SIGTERM or Ctrl-C stops the server (`nlpkit.cli.shutdown.stop_gracefully`): no new connections or
    requests (503), running requests get --grace seconds, then the engine fails what is left (503) and uvicorn
    closes the connections; exit 0."""
    import threading

    from nlpkit.cli.shutdown import stop_gracefully

    def stop(signum: int) -> None:
        if not quiet:
            import os

            os.write(2, b"nlpkit: stopping (finishing running requests; signal again to exit at once)\n")
        engine.accepting = False
        server.should_exit = True
        threading.Thread(target=engine.stop, args=(grace,), name="nlpkit-serve-stop", daemon=True).start()

    stop_gracefully(stop)


def _server_class():
    import contextlib

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server without its own signal handlers (nlpkit's handle SIGINT and SIGTERM)."""

        @contextlib.contextmanager
        def capture_signals(self):
            yield

    return Server


def _Server(config):
    return _server_class()(config)
