"""OpenAI and every OpenAI-compatible server (vLLM, LM Studio, llama.cpp, Ollama, OpenRouter).

Requests go out through one pooled aiohttp session: the official SDK's
per-request CPU cost caps a 2-core machine near 125 requests/s, while a lean
client reaches the server's limit. The SDK stays the reference for shapes and
is used in tests to check them.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from inferframe.providers.base import ProviderSpec, api_key_for, base_url_for
from inferframe.runtime.types import Outcome, Request, Usage

_PATHS = {"chat": "/chat/completions", "responses": "/responses", "embeddings": "/embeddings"}
_JSON = {"Content-Type": "application/json"}

try:  # orjson is several times faster for the request/response bodies when present
    import orjson

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)

    _loads = orjson.loads
except ImportError:  # pragma: no cover
    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    _loads = json.loads


def _status_kind(status: int, code: str | None) -> str:
    if status == 429:
        return "quota" if code == "insufficient_quota" else "rate_limit"
    if status in (401, 403):
        return "auth"
    if status == 408:
        return "timeout"
    if status == 404:
        return "not_found"
    if status >= 500 or status == 409:
        return "server"
    return "bad_request"


def _retry_after(headers) -> float | None:
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if ra:
        try:
            return float(ra)
        except ValueError:
            return None
    return None


def _error_message(body: Any, status: int) -> tuple[str, str | None]:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        return str(err.get("message") or err), err.get("code")
    if isinstance(body, dict) and "error" in body:
        return str(body["error"]), None
    return f"HTTP {status}", None


class BatchAPIError(RuntimeError):
    """The Batch API refused a file or batch operation."""


def parse_chat(body: dict) -> Outcome:
    usage = body.get("usage") or {}
    u = Usage(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0)
    choice = body["choices"][0]
    msg = choice.get("message") or {}
    if msg.get("refusal"):
        return Outcome(usage=u, status=200, error_kind="refusal", message=f"The model refused: {msg['refusal']}")
    content = msg.get("content")
    if choice.get("finish_reason") == "length":
        return Outcome(usage=u, status=200, error_kind="length", raw=content,
                       message="The answer was cut off at max_tokens (finish_reason 'length'); raise max_tokens.")
    if content is None and msg.get("tool_calls"):
        content = json.dumps(msg["tool_calls"])
    return Outcome(value=content, usage=u, status=200)


def parse_responses(body: dict) -> Outcome:
    usage = body.get("usage") or {}
    u = Usage(usage.get("input_tokens") or 0, usage.get("output_tokens") or 0)
    texts, refusal = [], None
    for item in body.get("output") or []:
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    texts.append(part.get("text") or "")
                elif part.get("type") == "refusal":
                    refusal = part.get("refusal")
        elif item.get("type") == "function_call":
            texts.append(json.dumps({"name": item.get("name"), "arguments": item.get("arguments")}))
    if refusal:
        return Outcome(usage=u, status=200, error_kind="refusal", message=f"The model refused: {refusal}")
    text = "".join(texts)
    if body.get("status") == "incomplete":
        reason = (body.get("incomplete_details") or {}).get("reason")
        return Outcome(usage=u, status=200, error_kind="length", raw=text,
                       message=f"The response is incomplete ({reason}); raise max_output_tokens.")
    return Outcome(value=text, usage=u, status=200)


def parse_embeddings(body: dict) -> Outcome:
    """One vector per input, in input order: lists of floats, or float32 arrays for base64 answers."""
    usage = body.get("usage") or {}
    u = Usage(usage.get("prompt_tokens") or usage.get("total_tokens") or 0, 0)
    data = sorted(body["data"], key=lambda d: d.get("index", 0))
    return Outcome(value=[_vector(d["embedding"]) for d in data], usage=u, status=200)


def _vector(v: Any) -> Any:
    if not isinstance(v, str):
        return v
    import binascii

    import numpy as np

    try:
        return np.frombuffer(base64.b64decode(v, validate=True), dtype="<f4")
    except (binascii.Error, ValueError):
        # Reported by send() as a malformed answer, which is retried like any other.
        raise TypeError("an embedding in base64 float32") from None


_PARSERS = {"chat": parse_chat, "responses": parse_responses, "embeddings": parse_embeddings}


class OpenAIProvider:
    """Send one request to an OpenAI-compatible endpoint and say what happened.

    Parameters:
        spec: provider name, base URL and options (``timeout`` seconds, ``headers``).
    """

    is_local = False
    supports_batch = True

    def __init__(self, spec: ProviderSpec) -> None:
        self.name = spec.name
        self.base_url = (base_url_for(spec) or "https://api.openai.com/v1").rstrip("/")
        self.service = f"{spec.name} at {self.base_url}"
        self.cache_identity = f"{spec.name}:{self.base_url}"  # what answers depend on; never the key
        self.timeout = float(spec.option("timeout", 120.0))
        key = api_key_for(spec)
        self._headers = dict(spec.option("headers", ()) or ())
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._session = None

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIProvider({self.service})"

    def __reduce__(self):
        raise TypeError("A live provider holds a key and a connection pool; pickle its ProviderSpec instead.")

    async def _client(self):
        if self._session is None:
            import aiohttp

            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=30),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers=self._headers,
            )
        return self._session

    async def send(self, request: Request) -> Outcome:
        import aiohttp

        session = await self._client()
        url = self.base_url + _PATHS[request.endpoint]
        try:
            async with session.post(url, data=_dumps(request.body), headers=_JSON) as resp:
                raw = await resp.read()
                status, headers = resp.status, resp.headers
        except asyncio.TimeoutError:
            return Outcome(error_kind="timeout", message=f"No answer within {self.timeout:g} s")
        except aiohttp.ClientConnectorError as e:
            return Outcome(error_kind="connection", message=f"connection failed ({e.os_error or e})")
        except (aiohttp.ClientError, ConnectionError, OSError) as e:
            return Outcome(error_kind="connection", message=f"{type(e).__name__}: {e}")
        try:
            body = _loads(raw)
        except ValueError:
            if status >= 400:
                return Outcome(status=status, error_kind=_status_kind(status, None), headers=headers,
                               message=f"HTTP {status}: {raw[:200].decode(errors='replace')}", retry_after=_retry_after(headers))
            return Outcome(status=status, error_kind="malformed", headers=headers,
                           message=f"The server's answer is not valid JSON: {raw[:120]!r}")
        if status >= 400:
            msg, code = _error_message(body, status)
            return Outcome(status=status, error_kind=_status_kind(status, code), message=f"HTTP {status}: {msg}",
                           retry_after=_retry_after(headers), headers=headers)
        try:
            out = _PARSERS[request.endpoint](body)
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            return Outcome(status=status, error_kind="malformed", headers=headers,
                           message=f"The server's answer lacks {e} for a {request.endpoint} response")
        out.headers = headers
        return out

    # --- the Batch API: files and batches ------------------------------
    async def _json(self, method: str, path: str, **kw) -> dict:
        session = await self._client()
        async with session.request(method, self.base_url + path, headers=_JSON, **kw) as resp:
            raw = await resp.read()
            if resp.status >= 400:
                msg, _ = _error_message(_loads(raw) if raw[:1] == b"{" else {}, resp.status)
                raise BatchAPIError(f"{method} {path} answered HTTP {resp.status}: {msg}")
            return _loads(raw)

    async def upload_batch_file(self, name: str, data: bytes) -> str:
        """Upload a JSONL file with purpose 'batch'; return its file id."""
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", data, filename=name, content_type="application/jsonl")
        session = await self._client()
        async with session.post(self.base_url + "/files", data=form) as resp:
            body = _loads(await resp.read())
            if resp.status >= 400:
                raise BatchAPIError(f"file upload answered HTTP {resp.status}: {_error_message(body, resp.status)[0]}")
            return body["id"]

    async def create_batch(self, file_id: str, endpoint: str) -> dict:
        return await self._json("POST", "/batches", data=_dumps(
            {"input_file_id": file_id, "endpoint": "/v1" + _PATHS[endpoint], "completion_window": "24h"}))

    async def get_batch(self, batch_id: str) -> dict:
        return await self._json("GET", f"/batches/{batch_id}")

    async def file_content(self, file_id: str) -> bytes:
        session = await self._client()
        async with session.get(self.base_url + f"/files/{file_id}/content") as resp:
            if resp.status >= 400:
                raise BatchAPIError(f"downloading {file_id} answered HTTP {resp.status}")
            return await resp.read()

    @staticmethod
    def parse_batch_line(endpoint: str, line: dict) -> Outcome:
        """One line of a batch output or error file, as an Outcome."""
        response, error = line.get("response"), line.get("error")
        if response is None:
            code = (error or {}).get("code") or "batch_error"
            kind = "timeout" if code in ("batch_expired", "batch_cancelled") else "server"
            return Outcome(error_kind=kind, message=f"{code}: {(error or {}).get('message', '')}")
        status, body = response.get("status_code", 500), response.get("body") or {}
        if status >= 400:
            msg, code = _error_message(body, status)
            return Outcome(status=status, error_kind=_status_kind(status, code), message=f"HTTP {status}: {msg}")
        try:
            return _PARSERS[endpoint](body)
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            return Outcome(status=status, error_kind="malformed", message=f"batch answer lacks {e}")

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def register(registry) -> None:
    """Entry-point hook: the built-in OpenAI-compatible providers."""
    registry.register("openai", OpenAIProvider, key_env="OPENAI_API_KEY", base_url_env="OPENAI_BASE_URL",
                      default_base_url="https://api.openai.com/v1", needs_key=True)
    registry.register("lm_studio", OpenAIProvider, default_base_url="http://127.0.0.1:1234/v1")
    # vLLM gets its schema through extra_body["structured_outputs"]; the rest of the API is OpenAI's.
    registry.register("vllm", OpenAIProvider, key_env="VLLM_API_KEY", base_url_env="VLLM_BASE_URL",
                      default_base_url="http://127.0.0.1:8000/v1")
    registry.register("ollama", OpenAIProvider, default_base_url="http://127.0.0.1:11434/v1")
    registry.register("openrouter", OpenAIProvider, key_env="OPENROUTER_API_KEY",
                      default_base_url="https://openrouter.ai/api/v1", needs_key=True)
