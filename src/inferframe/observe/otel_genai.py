"""One request as the OpenTelemetry GenAI semantic conventions describe it: its span's attributes and its metrics.

Only ``opentelemetry-api`` objects are touched (a tracer and a meter handed in); this module imports no
OpenTelemetry package itself, so it costs nothing where tracing is off. ``observe.otel`` decides whether
a job records anything and builds these per AI stage.

The names (https://opentelemetry.io/docs/specs/semconv/gen-ai/): a request span is named
``"{gen_ai.operation.name} {gen_ai.request.model}"`` and carries ``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.request.max_tokens``,
``gen_ai.request.temperature``, ``gen_ai.response.model``, ``gen_ai.response.id``,
``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``,
``server.address``, ``server.port`` and, on failure, ``error.type``. Prompts and answers
(``gen_ai.input.messages``, ``gen_ai.output.messages``) only with the standard opt-in
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.

Example:
    >>> operation_name("embeddings"), operation_name("responses"), operation_name("completion")
    ('embeddings', 'chat', 'text_completion')
    >>> server_of("http://127.0.0.1:8000/v1"), server_of("https://api.openai.com/v1")
    (('127.0.0.1', 8000), ('api.openai.com', 443))
"""

from __future__ import annotations

import json
import os
import urllib.parse
from types import MappingProxyType
from typing import Any

# The standard opt-in of the GenAI conventions for recording prompts and answers (off unless "true").
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# The conventions' advised histogram buckets (gen_ai.client.token.usage, gen_ai.client.operation.duration).
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
# inferframe's endpoints by the conventions' operation names (/responses is a chat turn; llama.cpp's /completion
# answers label scoring with a plain completion).
_OPERATIONS = MappingProxyType({"chat": "chat", "responses": "chat", "embeddings": "embeddings",
                                "completion": "text_completion"})
_PORTS = MappingProxyType({"http": 80, "https": 443})


def operation_name(endpoint: str) -> str:
    """The ``gen_ai.operation.name`` of an inferframe endpoint (an unknown one keeps its name)."""
    return _OPERATIONS.get(endpoint, endpoint)


def server_of(base_url: str | None) -> tuple[str | None, int | None]:
    """``(server.address, server.port)`` of a base URL (the port its scheme implies when none is written).

    Only the host and port: a URL's user and password (``https://user:secret@host``) never leave here.
    """
    if not base_url:
        return None, None
    parts = urllib.parse.urlsplit(base_url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.hostname, port if port is not None else _PORTS.get(parts.scheme)


def capture_content() -> bool:
    """The user opted in to recording prompts and answers (the standard variable, read once per job)."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"


def base_attributes(endpoint: str, provider: str, model: str | None, base_url: str | None) -> dict:
    """The attributes every request of one stage shares (also its metrics' attributes).

    Example:
        >>> base_attributes("chat", "openai", "gpt-5-mini", "http://127.0.0.1:9/v1")["server.port"]
        9
    """
    address, port = server_of(base_url)
    attrs = {"gen_ai.operation.name": operation_name(endpoint), "gen_ai.provider.name": provider}
    if model:
        attrs["gen_ai.request.model"] = model
    if address:
        attrs["server.address"] = address
    if port is not None:
        attrs["server.port"] = port
    return attrs


def request_attributes(body: dict, outcome: Any, attempt: int, capture: bool, max_tokens: int | None = None) -> dict:
    """What one answered attempt adds to its span: the options sent, the response, usage and error.

    ``outcome`` is the provider's ``Outcome``; ``max_tokens`` the request's answer cap (its call config's one
    field, ``Request.max_output_tokens``). No header, key or URL is read: the body and the answer only, and their
    text only when ``capture`` (the user's opt-in).

    Example:
        >>> from inferframe.providers.interface import Outcome, Usage
        >>> o = Outcome(value="yes", usage=Usage(12, 1), finish_reason="stop", response_id="c1", response_model="m")
        >>> a = request_attributes({"temperature": 0.0, "messages": []}, o, 1, capture=False, max_tokens=5)
        >>> a["gen_ai.usage.input_tokens"], a["gen_ai.response.finish_reasons"], "gen_ai.output.messages" in a
        (12, ('stop',), False)
        >>> a["gen_ai.request.max_tokens"]
        5
    """
    attrs: dict[str, Any] = {"inferframe.attempt": attempt}
    if max_tokens is not None:
        attrs["gen_ai.request.max_tokens"] = max_tokens
    temperature = body.get("temperature")
    if isinstance(temperature, (int, float)):
        attrs["gen_ai.request.temperature"] = float(temperature)
    if outcome.response_model:
        attrs["gen_ai.response.model"] = outcome.response_model
    if outcome.response_id:
        attrs["gen_ai.response.id"] = outcome.response_id
    if outcome.finish_reason:
        attrs["gen_ai.response.finish_reasons"] = (outcome.finish_reason,)
    if outcome.usage is not None:
        attrs["gen_ai.usage.input_tokens"] = outcome.usage.input_tokens
        attrs["gen_ai.usage.output_tokens"] = outcome.usage.output_tokens
    if outcome.error_kind is not None:
        attrs["error.type"] = error_type(outcome)
        if outcome.status:
            attrs["http.response.status_code"] = outcome.status
    if capture:
        attrs.update(messages(body, outcome))
    return attrs


def error_type(outcome: Any) -> str:
    """A failed attempt's ``error.type``: its kind (``rate_limit``, ``timeout``, ``server_error``...), low-cardinality."""
    kind = outcome.error_kind
    return getattr(kind, "value", None) or str(kind)


def messages(body: dict, outcome: Any) -> dict:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages`` (and ``gen_ai.system_instructions``) as JSON strings,
    in the conventions' shape (role and parts); only under the user's opt-in.

    Example:
        >>> from inferframe.providers.interface import Outcome
        >>> m = messages({"instructions": "Be brief.", "input": "Hi"}, Outcome(value="Hello", finish_reason="stop"))
        >>> json.loads(m["gen_ai.input.messages"]), json.loads(m["gen_ai.system_instructions"])
        ([{'role': 'user', 'parts': [{'type': 'text', 'content': 'Hi'}]}], [{'type': 'text', 'content': 'Be brief.'}])
    """
    out = {}
    sent = body.get("messages") if "messages" in body else body.get("input")
    if isinstance(body.get("instructions"), str):
        out["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": body["instructions"]}])
    if sent is not None:
        out["gen_ai.input.messages"] = json.dumps(_as_messages(sent), default=str)
    if outcome.ok and isinstance(outcome.value, str):
        answer = [{"role": "assistant", "parts": [{"type": "text", "content": outcome.value}],
                   "finish_reason": outcome.finish_reason or ""}]
        out["gen_ai.output.messages"] = json.dumps(answer)
    return out


def _as_messages(sent: Any) -> list:
    """Chat messages, a /responses input or embedding inputs as the conventions' [{role, parts}]."""
    if isinstance(sent, str):
        sent = [{"role": "user", "content": sent}]
    out = []
    for m in sent if isinstance(sent, list) else [sent]:
        if not isinstance(m, dict):  # an embedding input (text or token ids)
            out.append({"role": "user", "parts": [{"type": "text", "content": m}]})
            continue
        content = m.get("content")
        if isinstance(content, str):
            parts = [{"type": "text", "content": content}]
        else:  # content parts: their text; an image or a file is named by its type only
            parts = [{"type": "text", "content": p.get("text")} if "text" in p else {"type": p.get("type", "part")}
                     for p in content or () if isinstance(p, dict)]
        out.append({"role": m.get("role", "user"), "parts": parts})
    return out


class GenAIMeters:
    """The instruments of one job: the conventions' two histograms and inferframe's own counters.

    Parameters:
        meter: an ``opentelemetry.metrics.Meter``.
    """

    def __init__(self, meter: Any) -> None:
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS)
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self.rows = meter.create_counter("inferframe.rows", unit="{row}",
                                         description="Rows an AI stage answered (from its cache or a model).")
        self.cache_hits = meter.create_counter("inferframe.cache.hits", unit="{row}",
                                               description="Rows answered by inferframe's response cache: nothing sent.")
        self.waits = meter.create_counter("inferframe.rate_limit.waits", unit="{wait}",
                                          description="Requests that waited for the rate limit or a 429's pause "
                                                      "before they were sent.")
        self.cost = meter.create_counter("inferframe.cost", unit="{USD}",
                                         description="Dollars the AI stage's requests cost at the model's price.")

    def request(self, shared: "RequestMetricAttrs", outcome: Any, seconds: float) -> None:
        """One answered attempt: its duration, and its tokens when the server counted them."""
        if outcome.error_kind is None:
            self.duration.record(seconds, shared.ok)
        else:
            self.duration.record(seconds, {**shared.ok, "error.type": error_type(outcome)})
        usage = outcome.usage
        if usage is not None:
            self.tokens.record(usage.input_tokens, shared.input)
            if usage.output_tokens or shared.ok["gen_ai.operation.name"] != "embeddings":
                self.tokens.record(usage.output_tokens, shared.output)


class RequestMetricAttrs:
    """The attribute sets one stage's metrics record with, made once (not per request)."""

    __slots__ = ("ok", "input", "output")

    def __init__(self, base: dict) -> None:
        self.ok = dict(base)
        self.input = {**base, "gen_ai.token.type": "input"}
        self.output = {**base, "gen_ai.token.type": "output"}
