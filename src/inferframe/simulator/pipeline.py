"""The request pipeline shared by every inference endpoint (HTTP plumbing, limits, faults, latency).

An endpoint module supplies an object with ``name`` (stats key), ``path``,
``text_faults`` (whether refusal/length faults apply), optionally
``prefix_cached`` (its prompts go through the prefix cache), ``prepare(state, body)
-> Prepared`` (validate + extract) and ``render(state, prep, result) -> dict``
(the success body).  :func:`inference_handler` wraps it into an aiohttp
handler that runs, in order: auth -> body hash/record -> JSON parse -> stream
check -> prepare -> rate limit -> fail rules / random faults -> prefix cache
and prefill queue (endpoints with ``prefix_cached = True``) -> answer ->
latency -> response with OpenAI headers.

Example (a new module registering its own route, answered here without HTTP):
    >>> import types
    >>> from inferframe.simulator import SimState, SimulatorConfig, create_app
    >>> class Echo:
    ...     name, path, text_faults = "echo", "/v1/echo", False
    ...     def prepare(self, state, body):
    ...         return Prepared("gpt-4o-mini", body, body["text"], body["text"], prompt_tokens=1)
    ...     def render(self, state, prep, result):
    ...         return {"echo": prep.text}
    >>> echo = types.ModuleType("echo")
    >>> echo.register = lambda app, state: app.router.add_post(Echo.path, inference_handler(state, Echo()))
    >>> state = SimState(SimulatorConfig())
    >>> app = create_app(state=state, modules=[echo])
    >>> asyncio.run(execute(state, "/v1/echo", {"text": "hi"}))
    (200, {'echo': 'hi'})
"""

from __future__ import annotations

import asyncio
import math
import socket
import struct
from hashlib import blake2b
from time import monotonic
from typing import Any, Callable, NoReturn, Optional

from aiohttp import web

from .answers import finish_text, raw_answer
from .errors import SimError, error_for_status, invalid_api_key, invalid_json, invalid_request, overloaded, server_error
from .faults import draws
from .jsonio import dumps, loads
from .ratelimit import Decision, format_duration

__all__ = ["Prepared", "inference_handler", "simple_handler", "check_auth", "rate_limit_error", "json_response",
           "execute"]

_LINGER0 = struct.pack("ii", 1, 0)
_JSON = "application/json"


class Prepared:
    """A validated request.

    Attributes: model, body, text (all prompt text, for fail rules), user_text
    (last user message), prompt_tokens, max_out (None = unlimited), cost
    (rate-limit tokens), fmt ('text' | 'json_schema' | 'json_object'), schema,
    n (choices), stop (list of stop strings), extra (endpoint specific),
    cached_tokens (part of prompt_tokens the prefix cache served; set by ``SimState.prefill``).
    """

    __slots__ = ("model", "body", "text", "user_text", "prompt_tokens", "max_out", "cost",
                 "fmt", "schema", "n", "stop", "extra", "cached_tokens")

    def __init__(self, model: str, body: dict, text: str, user_text: str, prompt_tokens: int,
                 max_out: Optional[int] = None, cost: int = 0, fmt: str = "text", schema: Any = None,
                 n: int = 1, stop: Optional[list] = None, extra: Any = None) -> None:
        self.model = model
        self.body = body
        self.text = text
        self.user_text = user_text
        self.prompt_tokens = prompt_tokens
        self.max_out = max_out
        self.cost = cost
        self.fmt = fmt
        self.schema = schema
        self.n = n
        self.stop = stop
        self.extra = extra
        self.cached_tokens = 0


def json_response(payload: Any, status: int = 200, headers: Optional[dict] = None) -> web.Response:
    """JSON response with the simulator's encoder."""
    return web.Response(body=dumps(payload), status=status, headers=headers, content_type=_JSON)


def check_auth(state: Any, request: web.Request) -> None:
    """Raise 401 unless the request carries the configured bearer key."""
    want = state.auth_header
    if want is not None:
        got = request.headers.get("Authorization")
        if got != want:
            key = got[7:] if got and got.startswith("Bearer ") else got
            raise invalid_api_key(key)


def rate_limit_error(d: Decision, model: str, cost: int) -> SimError:
    """The 429 of a denied :class:`Decision`, with Retry-After headers (OpenAI wording)."""
    if d.reason == "too_large":
        return SimError(
            429,
            f"Request too large for {model} in organization org-simulator on tokens per min (TPM): "
            f"Limit {d.limit}, Requested {d.used}. The input or output tokens must be reduced in order to run "
            "successfully. Visit https://platform.openai.com/account/rate-limits to learn more.",
            "tokens",
            None,
            "rate_limit_exceeded",
        )
    if d.reason == "requests":
        unit, requested = "requests per min (RPM)", 1
    else:
        unit, requested = "tokens per min (TPM)", cost
    wait = d.retry_after_s
    return SimError(
        429,
        f"Rate limit reached for {model} in organization org-simulator on {unit}: Limit {d.limit}, "
        f"Used {d.used}, Requested {requested}. Please try again in {format_duration(wait)}. "
        "Visit https://platform.openai.com/account/rate-limits to learn more.",
        d.reason or "requests",
        None,
        "rate_limit_exceeded",
        {"retry-after": str(max(1, math.ceil(wait))), "retry-after-ms": str(max(1, math.ceil(wait * 1000)))},
    )


def _drop_connection(request: web.Request) -> web.Response:
    """Close the TCP connection with a RST and no response."""
    transport = request.transport
    if transport is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER0)
            except OSError:
                pass
        transport.abort()
    return web.Response(status=500)  # never reaches the client


class _NoResponse(Exception):
    def __init__(self, resp: web.Response) -> None:
        self.resp = resp


def inference_handler(state: Any, ep: Any) -> Callable:
    """aiohttp handler running the full pipeline for endpoint object ``ep``."""
    name = ep.name
    state.endpoints[ep.path] = ep
    path_key = ep.path.encode() + b"\x00"
    prefix_cached = getattr(ep, "prefix_cached", False)

    async def handle(request: web.Request) -> web.StreamResponse:
        st = state
        stats = st.stats
        stats.total += 1
        stats.by_endpoint[name] = stats.by_endpoint.get(name, 0) + 1
        stats.in_flight += 1
        if stats.in_flight > stats.max_in_flight:
            stats.max_in_flight = stats.in_flight
        t0 = monotonic()
        headers = {"x-request-id": st.next_id("req_"), "openai-version": "2020-10-01"}
        try:
            body_bytes = await _process(request, st, ep, headers, t0, path_key, prefix_cached)
            status = 200
        except SimError as e:
            if e.headers:
                headers.update(e.headers)
            body_bytes, status = e.body(), e.status
        except _NoResponse as nr:
            return nr.resp
        finally:
            stats.in_flight -= 1
        headers["openai-processing-ms"] = str(int((monotonic() - t0) * 1000))
        key = str(status)
        bs = stats.by_status
        bs[key] = bs.get(key, 0) + 1
        return web.Response(body=body_bytes, status=status, headers=headers, content_type=_JSON)

    handle.__name__ = f"handle_{name.replace('.', '_')}"
    return handle


async def _read_request(request: web.Request, st: Any, path: str, path_key: bytes) -> tuple[bytes, int, dict]:
    """(request hash, attempt number, JSON body) after auth, recording and the body checks."""
    cfg = st.cfg
    if st.auth_header is not None:
        check_auth(st, request)
    raw = await request.read()
    h = blake2b(path_key + raw, digest_size=16).digest()
    # The attempt number makes a retry of the same request draw a fresh fault, as a real server's would.
    attempt = st.stats.seen(h) if cfg.track_request_hashes else st.stats.total
    if cfg.record_requests:
        st.record(request.method, path, raw, h)
    try:
        body = loads(raw)
    except ValueError:
        raise invalid_json() from None
    if not isinstance(body, dict):
        raise invalid_request("Invalid body: expected a JSON object.", code="invalid_type")
    if body.get("stream"):
        raise invalid_request(
            "Streaming is not supported by the simulator; send stream=false.",
            param="stream",
            code="unsupported_value",
        )
    return h, attempt, body


def _admit(st: Any, prep: Prepared, headers: dict, t0: float) -> None:
    """Apply the rate limit, adding its headers; raises the 429 when the request is over it."""
    limiter = st.limiter
    if limiter is not None:
        d = limiter.acquire(prep.model if st.cfg.ratelimit_scope == "model" else "*", prep.cost, t0)
        headers.update(d.headers)
        if not d.allowed:
            st.stats.rate_limited += 1
            raise rate_limit_error(d, prep.model, prep.cost)


def _pick_fault(st: Any, ep: Any, prep: Prepared, u_fault: float, attempt: int) -> tuple[Optional[str], Any]:
    """(fault kind or None, the matching rule or None): a rule matching the prompt wins over random faults."""
    stats = st.stats
    kind: Optional[str] = None
    rule = None
    if st.rules:
        text = prep.text
        for r in st.rules:
            if r.match in text and (r.times is None or attempt < r.times):
                rule = r
                kind = r.kind
                stats.rule_hits += 1
                break
    if kind is None and st.faults.active and ep.name in st.faults.endpoints:
        kind = st.faults.pick(u_fault)
        if kind is not None:
            if not ep.text_faults and (kind == "refusal" or kind == "length"):
                kind = None
            else:
                f = stats.faults
                f[kind] = f.get(kind, 0) + 1
    return kind, rule


async def _fail(request: web.Request, st: Any, kind: str, rule: Any, delay: float) -> NoReturn:
    """Raise the error (or drop the connection) for a fault that gives no answer body."""
    if delay:
        await asyncio.sleep(delay)
    if kind == "error":
        raise error_for_status(rule.status, rule.message, rule.code)
    if kind == "server_error":
        raise server_error()
    if kind == "overloaded":
        raise overloaded()
    st.stats.no_response += 1
    if kind == "timeout":
        await asyncio.sleep(st.cfg.timeout_hang_s)
    raise _NoResponse(_drop_connection(request))  # connection_reset, or a timeout that ran out


async def _process(request: web.Request, st: Any, ep: Any, headers: dict, t0: float, path_key: bytes,
                   prefix_cached: bool) -> bytes:
    stats = st.stats
    h, attempt, body = await _read_request(request, st, ep.path, path_key)
    prep = ep.prepare(st, body)
    stats.prompt_tokens += prep.prompt_tokens
    _admit(st, prep, headers, t0)
    u_fault, u_lat = draws(st.seed_key, h, attempt)
    kind, rule = _pick_fault(st, ep, prep, u_fault, attempt)
    lat = st.latency
    delay = 0.0 if lat.zero else lat.sample(u_lat)
    if kind is not None and kind not in ("refusal", "length", "malformed"):
        await _fail(request, st, kind, rule, delay)
    if prefix_cached:
        delay += st.prefill(prep, monotonic())
    payload, tokens = await answer(st, ep, prep, kind if kind == "refusal" or kind == "length" else None)
    if tokens:
        stats.completion_tokens += tokens * prep.n
        if lat.per_token_s:
            delay += lat.per_token_s * tokens
    out = dumps(payload)
    if kind == "malformed":
        out = out[: max(1, len(out) // 2)]
    serving = st.serving
    if serving is not None:
        async with serving.slot() as factor:  # a self-hosted server's batch: wait in its FIFO when full
            await asyncio.sleep(delay * factor)
    elif delay:
        await asyncio.sleep(delay)
    return out


async def answer(state: Any, ep: Any, prep: Prepared, fault: Optional[str] = None) -> tuple[dict, int]:
    """(success body, tokens generated per choice) for a prepared request.

    Runs the responder / default answer, stop sequences, truncation and the
    'refusal' / 'length' faults, then the endpoint's render.
    """
    result = None
    if ep.text_faults:
        responded = None
        if state.responder is not None:
            try:
                responded = state.responder(prep.body)
                if state.responder_async:
                    responded = await responded
            except Exception as exc:  # surface responder bugs as a 500 the test can read
                raise SimError(500, f"responder raised {type(exc).__name__}: {exc}", "server_error") from exc
        result = finish_text(state, prep, raw_answer(state.cfg, prep, responded), fault)
    return ep.render(state, prep, result), (result.tokens if result is not None else 0)


async def execute(state: Any, path: str, body: dict) -> tuple[int, dict]:
    """Run one request body through endpoint ``path`` without HTTP, limits, faults or latency.

    Returns (status, JSON body).  Meant for modules that answer requests in bulk
    (/v1/batches).

    Example:
        >>> from inferframe.simulator import SimState, SimulatorConfig, create_app
        >>> state = SimState(SimulatorConfig())
        >>> app = create_app(state=state)
        >>> body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
        >>> status, out = asyncio.run(execute(state, "/v1/chat/completions", body))
        >>> status, out["choices"][0]["message"]["content"]
        (200, 'sim answer: hi')
    """
    ep = state.endpoints.get(path)
    if ep is None:
        err = SimError(404, f"Invalid URL (POST {path})")
        return err.status, loads(err.body())
    try:
        prep = ep.prepare(state, body)
        if getattr(ep, "prefix_cached", False):
            state.prefill(prep, None)
        return 200, (await answer(state, ep, prep))[0]
    except SimError as err:
        return err.status, loads(err.body())


def simple_handler(state: Any, name: str, fn: Callable[[web.Request], Any]) -> Callable:
    """Handler for cheap GET endpoints: auth, counters and SimError handling around ``fn``.

    ``fn(request)`` returns a JSON-able payload (sync or async).
    """

    async def handle(request: web.Request) -> web.StreamResponse:
        stats = state.stats
        stats.total += 1
        stats.by_endpoint[name] = stats.by_endpoint.get(name, 0) + 1
        headers = {"x-request-id": state.next_id("req_"), "openai-version": "2020-10-01"}
        try:
            check_auth(state, request)
            payload = fn(request)
            if asyncio.iscoroutine(payload):
                payload = await payload
            body, status = dumps(payload), 200
        except SimError as e:
            if e.headers:
                headers.update(e.headers)
            body, status = e.body(), e.status
        stats.status(status)
        return web.Response(body=body, status=status, headers=headers, content_type=_JSON)

    return handle
