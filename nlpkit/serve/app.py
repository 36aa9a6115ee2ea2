"""The HTTP API (FastAPI): OpenAI's legacy completions and chat completions, the model list, health, and the
tokenizer endpoints lm-evaluation-harness's remote tokenizer uses (`/tokenize`, `/detokenize`, `/tokenizer_info`).

Every failure is an OpenAI-shaped error body, {"error": {"message", "type", "param", "code"}}: 400 a value the server
cannot honour, 401 a missing or wrong API key, 404 an unknown route or model, 413 a body over the limit, 422 a body
that is not the right JSON, 503 shutting down or too busy, 504 past the request timeout, 500 anything else (a
one-line message, never a traceback). The server keeps serving after each.

A completions or chat request is handled by `nlpkit.serve.handlers` (its prompts and choices as engine jobs). A
client that disconnects (a closed stream, or a dropped connection while a non-streamed request waits) cancels its
jobs: their sequences leave the batch at the next step.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from nlpkit.serve.handlers import Chat, Completion, checked, engine_error
from nlpkit.serve.schemas import ApiError, chat_params, completion_params

MAX_BODY = 32 * 1024 * 1024   # bytes of a request body (lm-eval's batches of token ids stay far below)
TIMEOUT = 600.0               # seconds a request may take, queueing included
OPEN_PATHS = ("/health",)     # served without the API key (load balancers' probes)


def error_response(e: ApiError) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status)


class Guard:
    """The API key on every route but /health, and the last resort: any failure a one-line 500, no traceback. A
    plain ASGI middleware: the route still sees its client disconnect (`Request.is_disconnected`)."""

    def __init__(self, app, api_key: str | None = None):
        self.app, self.api_key = app, api_key

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.api_key is not None and scope["path"] not in OPEN_PATHS:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            given = headers.get("authorization", "")
            token = given[7:].strip() if given[:7].lower() == "bearer " else headers.get("x-api-key", "")
            if not hmac.compare_digest(token.encode(), self.api_key.encode()):
                e = ApiError(401, "a valid API key is required (Authorization: Bearer KEY)", None, "invalid_api_key")
                return await error_response(e)(scope, receive, send)
        started = False

        async def tracked(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as e:  # noqa: BLE001 - a one-line error, the server goes on
            if not started:
                await error_response(engine_error(e))(scope, receive, send)


async def read_json(request: Request, limit: int):
    """The body as JSON: 413 past `limit` bytes, 400 when it is not JSON."""
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > limit:
        raise ApiError(413, f"the request body is {size} bytes, over the limit of {limit}", None, "too_large")
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise ApiError(413, f"the request body is over the limit of {limit} bytes", None, "too_large")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ApiError(400, f"the request body is not valid JSON ({e})", None, "invalid_json") from None


def create_app(served, engine, *, api_key: str | None = None, max_body: int = MAX_BODY,
               timeout: float = TIMEOUT, grace: float = 30.0) -> FastAPI:
    """The API over `served` (a `ServedModel`) and `engine` (started on startup if it is not yet; stopped on
    shutdown, giving running requests `grace` seconds)."""

    @asynccontextmanager
    async def lifespan(app):
        if not engine.thread.is_alive() and engine.accepting:
            engine.start()
        yield
        await asyncio.get_running_loop().run_in_executor(None, engine.stop, grace)

    app = FastAPI(title="nlpkit serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(ApiError)
    async def api_error(request, e: ApiError):
        return error_response(e)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, e):
        message = "no such route: " + request.url.path if e.status_code == 404 else str(e.detail)
        return error_response(ApiError(e.status_code, message, None, "not_found" if e.status_code == 404 else None))

    app.add_middleware(Guard, api_key=api_key)

    def model_entry() -> dict:
        return {"id": served.name, "object": "model", "created": 0, "owned_by": "nlpkit",
                "max_model_len": served.context}

    @app.get("/health")
    async def health():
        if not engine.accepting:
            raise ApiError(503, "the server is shutting down", None, "unavailable")
        return {"status": "ok", "model": served.name, **engine.load}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [model_entry()]}

    @app.get("/v1/models/{name:path}")
    async def model(name: str):
        if name != served.name:
            raise ApiError(404, f"no model {name!r} (this server serves {served.name!r})", "model",
                           "model_not_found")
        return model_entry()

    @app.get("/tokenizer_info")
    async def tokenizer_info():
        return served.tokenizer_info()

    @app.post("/tokenize")
    async def tokenize(request: Request):
        body = await read_json(request, max_body)
        if not isinstance(body, dict):
            raise ApiError(422, "the request body must be a JSON object", None, "invalid_type")
        add = body.get("add_special_tokens", True)
        if not isinstance(add, bool):
            raise ApiError(422, "`add_special_tokens` must be a boolean", "add_special_tokens", "invalid_type")
        if "messages" in body:
            params = chat_params({"messages": body["messages"]})
            inp, _ = checked(served.chat_input, params.messages)
            ids = inp.ids
        else:
            text = body.get("prompt")
            if not isinstance(text, str):
                raise ApiError(422, "`prompt` must be a string", "prompt", "invalid_type")
            ids = checked(served.tokenize, text, add)
        return {"tokens": ids, "count": len(ids), "max_model_len": served.context}

    @app.post("/detokenize")
    async def detokenize(request: Request):
        body = await read_json(request, max_body)
        ids = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ApiError(422, "`tokens` must be an array of token ids", "tokens", "invalid_type")
        checked(served.check_ids, ids)
        return {"prompt": served.decode(ids, skip_special=False)}

    @app.post("/v1/completions")
    async def completions(request: Request):
        p = completion_params(await read_json(request, max_body))
        return await Completion(served, engine, request, p, timeout).respond()

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        p = chat_params(await read_json(request, max_body))
        return await Chat(served, engine, request, p, timeout).respond()

    return app


