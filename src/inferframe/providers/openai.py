"""OpenAI and every OpenAI-compatible server (vLLM, LM Studio, llama.cpp, Ollama, OpenRouter).

Single requests go out through one pooled HTTP client (providers/http.py): reqwest, parsed off the
event loop, where it runs, else aiohttp (``INFERFRAME_HTTP`` chooses). The official SDK's
per-request CPU cost caps a 2-core machine near 125 requests/s, and even aiohttp's parsing on the
event loop costs more than the engine itself (issue 36). The Batch API's files go through aiohttp.
The SDK stays the reference for shapes and is used in tests to check them.

Example:
    >>> from inferframe.providers.spec import ProviderSpec
    >>> p = OpenAIProvider(ProviderSpec("openai"), base_url="http://127.0.0.1:8000/v1", api_key="sk-x")
    >>> p.service, "sk-x" in repr(p)
    ('openai at http://127.0.0.1:8000/v1', False)
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from types import MappingProxyType
from typing import Any

from inferframe.errors import BatchAPIError, ErrorKind, PlanError
from inferframe.providers import openai_format as wire
from inferframe.providers import http
from inferframe.providers.interface import (
    LLAMA_CPP_BODY_OPTIONS, VLLM_BODY_OPTIONS, BaseTransport, BatchState, Capabilities, Outcome, OutputCap, Request,
)
from inferframe.providers.spec import ProviderSpec

_JSON = MappingProxyType({"Content-Type": "application/json"})

try:  # orjson is several times faster for the request/response bodies
    import orjson

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)

    _loads = orjson.loads
except ImportError:  # pragma: no cover
    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    _loads = json.loads

# Output sizes and input limits of OpenAI's embedding models, so the column type is exact before anything is sent.
EMBEDDING_MODELS = MappingProxyType({
    "text-embedding-3-small": (1536, 8191),
    "text-embedding-3-large": (3072, 8191),
    "text-embedding-ada-002": (1536, 8191),
})
# Context windows of OpenAI's models (platform.openai.com/docs/models), by name prefix: the first match wins.
CONTEXT_TOKENS = (("gpt-5", 400_000), ("gpt-4.1", 1_047_576), ("gpt-4o", 128_000), ("o1", 200_000),
                  ("o3", 200_000), ("o4", 200_000), ("gpt-4-turbo", 128_000), ("gpt-3.5", 16_385))
_OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "text-embedding-", "chatgpt-")
# OpenAI's /responses refuses a smaller max_output_tokens on every request (HTTP 400 "Invalid
# 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 10 instead.").
RESPONSES_MIN_OUTPUT_TOKENS = 16
# OpenAI's models by whether they read images (the first matching prefix wins; others: not known).
_OPENAI_VISION = (("gpt-3.5", False), ("o1-mini", False), ("o3-mini", False), ("text-embedding-", False),
                  ("gpt-4o", True), ("gpt-4.1", True), ("gpt-4-turbo", True), ("gpt-5", True), ("o1", True),
                  ("o3", True), ("o4", True), ("chatgpt-4o", True))


class OpenAIProvider(BaseTransport):
    """Send one request to an OpenAI-compatible endpoint and say what happened.

    Its wire format implements ``RequestFormat``, ``SchemaFormat``, ``RepairFormat`` and
    ``SpecCapabilities``; its transport ``LabelScoring`` (top log-probabilities) and ``BatchAPI``.

    Parameters:
        spec: provider name, base URL and options (``timeout`` seconds, ``headers``, ``server``:
            "vllm" when an OpenAI-compatible URL is a vLLM server).
        base_url / api_key: resolved by the registry in this process; the key goes into a header only.
    """

    capabilities = Capabilities(default_endpoint="chat", batch_api=True, logprobs="top")

    def __init__(self, spec: ProviderSpec, *, base_url: str | None = None, api_key: str | None = None,
                 capabilities: Capabilities | None = None) -> None:
        self.name = spec.name
        self.base_url = (base_url or "https://api.openai.com/v1").rstrip("/")
        self.service = f"{spec.name} at {self.base_url}"
        self.cache_identity = f"{spec.name}:{self.base_url}"  # what answers depend on; never the key
        if capabilities is not None:
            self.capabilities = capabilities
        self.timeout = float(spec.option("timeout", 120.0))
        self._headers = dict(spec.option("headers", ()) or ())
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._session = None  # aiohttp, for the Batch API's files, /tokenize and downloads
        self._http = http.connect(self._headers, self.timeout)  # single requests: reqwest or aiohttp
        self._closed = False

    def __reduce__(self):
        raise TypeError("A live provider holds a key and a connection pool; pickle its ProviderSpec instead.")

    # --- what planning asks ---------------------------------------------------------------------
    @classmethod
    def capabilities_for(cls, spec: Any, declared: Capabilities) -> Capabilities:
        http.check()  # asked when the plan is built: a wrong INFERFRAME_HTTP is a PlanError before any request
        if spec.option("server") == "vllm":
            return dataclasses.replace(declared, structured_outputs="vllm")
        return declared

    @classmethod
    def request_body(cls, endpoint, model, parts, system, options, format_fields, media=None,
                     max_output_tokens=None) -> dict:
        return wire.request_body(endpoint, model, parts, system, options, format_fields, media, max_output_tokens)

    @classmethod
    def follow_up_body(cls, endpoint: str, body: dict, answer: str, message: str) -> dict:
        return wire.follow_up_body(endpoint, body, answer, message)

    @classmethod
    def format_fields(cls, caps: Capabilities, endpoint: str, name: str, schema: dict, labels) -> dict:
        from inferframe.structured import response_format_for

        if caps.structured_outputs == "none":
            return {}
        return response_format_for(name, schema, "vllm" if caps.structured_outputs == "vllm" else endpoint)

    @classmethod
    def estimate_tokens(cls, body: dict, model: str | None) -> tuple[int, int]:
        return wire.estimate_tokens(body, model)

    @classmethod
    def prompt_text(cls, endpoint: str, body: dict) -> str | None:
        return wire.prompt_text(body) if endpoint != "embeddings" else None

    # --- sending --------------------------------------------------------------------------------
    async def _client(self):
        if self._closed:  # a request still running when the job stopped must not open a new session
            raise ConnectionError("the job stopped: this provider's connections are closed")
        if self._session is None:
            import aiohttp

            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=30),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers=self._headers,
            )
        return self._session

    async def send(self, request: Request) -> Outcome:
        try:
            status, raw, headers = await self._http.post(self._url(request.endpoint), _dumps(request.body))
        except http.SendFailed as e:
            return Outcome(error_kind=e.kind, message=e.message)
        try:
            body = _loads(raw)
        except ValueError:
            if status >= 400:
                message = f"HTTP {status}: {raw[:200].decode(errors='replace')}"
                return wire.unsupported_input(status, message) or Outcome(
                    status=status, error_kind=wire.status_kind(status, None), limits=wire.limit_hints(headers),
                    message=message, retry_after=wire.retry_after(headers))
            return Outcome(status=status, error_kind=ErrorKind.MALFORMED, limits=wire.limit_hints(headers),
                           message=f"The server's answer is not valid JSON: {raw[:120]!r}")
        return wire.parse_answer(request.endpoint, status, body, headers)

    def _url(self, endpoint: str) -> str:
        return self.base_url + wire.PATHS[endpoint]

    async def label_scorer(self, labels: tuple):
        from inferframe.providers.label_scores import TopLogprobsScorer

        return TopLogprobsScorer(labels)

    # --- the Batch API: files and batches --------------------------------------------------------
    def batch_lines(self, endpoint: str, items: list[tuple[str, dict]]) -> list[bytes]:
        return wire.batch_lines(endpoint, items)

    async def _json(self, method: str, path: str, **kw) -> dict:
        session = await self._client()
        async with session.request(method, self.base_url + path, headers=_JSON, **kw) as resp:
            raw = await resp.read()
            if resp.status >= 400:
                msg, _ = wire.error_message(_loads(raw) if raw[:1] == b"{" else {}, resp.status)
                raise BatchAPIError(f"{method} {path} answered HTTP {resp.status}: {msg}")
            return _loads(raw)

    async def submit_batch(self, endpoint: str, name: str, data: bytes) -> str:
        """Upload a JSONL file with purpose 'batch' and create a batch over it; return the batch id."""
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", data, filename=name, content_type="application/jsonl")
        session = await self._client()
        async with session.post(self.base_url + "/files", data=form) as resp:
            body = _loads(await resp.read())
            if resp.status >= 400:
                raise BatchAPIError(f"file upload answered HTTP {resp.status}: {wire.error_message(body, resp.status)[0]}")
            file_id = body["id"]
        batch = await self._json("POST", "/batches", data=_dumps(
            {"input_file_id": file_id, "endpoint": "/v1" + wire.PATHS[endpoint], "completion_window": "24h"}))
        return batch["id"]

    async def poll_batch(self, batch_id: str) -> BatchState:
        batch = await self._json("GET", f"/batches/{batch_id}")
        status = batch.get("status")
        files = tuple(f for f in (batch.get("output_file_id"), batch.get("error_file_id")) if f)
        failure = None
        if status == "failed" and not files:
            errors = (batch.get("errors") or {}).get("data") or []
            failure = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors[:3]) or "the batch failed"
        return BatchState(batch_id, status in ("completed", "failed", "expired", "cancelled"), files, failure)

    async def batch_results(self, endpoint: str, state: BatchState) -> list[tuple[str, Outcome]]:
        session = await self._client()
        out = []
        for file_id in state.result_files:
            async with session.get(self.base_url + f"/files/{file_id}/content") as resp:
                if resp.status >= 400:
                    raise BatchAPIError(f"downloading {file_id} answered HTTP {resp.status}")
                data = await resp.read()
            for raw in data.splitlines():
                if raw.strip():
                    out.append(wire.parse_batch_line(endpoint, json.loads(raw)))
        return out

    async def aclose(self) -> None:
        self._closed = True
        await self._http.aclose()
        if self._session is not None:
            await self._session.close()
            self._session = None


class HostedOpenAIProvider(OpenAIProvider):
    """OpenAI's own API: /responses by default, its model names and embedding sizes known."""

    capabilities = Capabilities(default_endpoint="responses", batch_api=True, logprobs="top")

    @classmethod
    def knows_model(cls, model: str) -> bool:
        return model.startswith(_OPENAI_PREFIXES)

    @classmethod
    def request_body(cls, endpoint, model, parts, system, options, format_fields, media=None,
                     max_output_tokens=None) -> dict:
        """As every OpenAI-compatible server's, but the chat cap is ``max_completion_tokens``: OpenAI's reasoning models refuse ``max_tokens``."""
        chat = endpoint == "chat"
        body = wire.request_body(endpoint, model, parts, system, options, format_fields, media,
                                 None if chat else max_output_tokens)
        if chat and max_output_tokens is not None:
            body["max_completion_tokens"] = max_output_tokens
        return body

    @classmethod
    def check_options(cls, fn: str, endpoint: str, model: str | None, caps: Capabilities, options: dict,
                      cap: OutputCap | None) -> None:
        """Refuse an answer cap below what OpenAI's /responses takes (``RESPONSES_MIN_OUTPUT_TOKENS``).

        Example:
            >>> HostedOpenAIProvider.check_options("prompt", "responses", "gpt-5-mini", None, {}, OutputCap("max_tokens", 10))
            Traceback (most recent call last):
            ...
            inferframe.errors.PlanError: prompt(): max_tokens=10 is below what OpenAI's /responses takes: max_output_tokens must be >= 16, and the server refuses every request with a smaller one. Use max_tokens=16 or more (ask for a short answer in the instructions), or use_chat_completions=True, whose cap may be smaller.
            >>> HostedOpenAIProvider.check_options("prompt", "chat", "gpt-5-mini", None, {}, OutputCap("max_tokens", 10))
        """
        if endpoint != "responses" or cap is None or cap.tokens >= RESPONSES_MIN_OUTPUT_TOKENS:
            return
        name, tokens = cap
        least = RESPONSES_MIN_OUTPUT_TOKENS
        raise PlanError(f"{fn}(): {name}={tokens} is below what OpenAI's /responses takes: max_output_tokens must be "
                        f">= {least}, and the server refuses every request with a smaller one. Use max_tokens={least} "
                        "or more (ask for a short answer in the instructions), or use_chat_completions=True, whose "
                        "cap may be smaller.")

    @classmethod
    def context_size(cls, model: str | None, caps: Capabilities) -> int | None:
        for prefix, tokens in CONTEXT_TOKENS:
            if model and model.startswith(prefix):
                return tokens
        return caps.context_tokens

    @classmethod
    def embedding_size(cls, model: str) -> int | None:
        return EMBEDDING_MODELS.get(model, (None, None))[0]

    @classmethod
    def reads_images(cls, model: str | None, caps: Capabilities) -> bool | None:
        if caps.vision is not None or not model:
            return caps.vision
        return next((reads for prefix, reads in _OPENAI_VISION if model.startswith(prefix)), None)

    @classmethod
    def embedding_max_input_tokens(cls, model: str) -> int | None:
        return EMBEDDING_MODELS.get(model, (None, None))[1]

    async def prefix_lanes(self) -> int | None:
        return None  # one cache, shared; PrefixRouting is asked whole, so it is said

    def routed(self, body: dict, lane: int | None, group: str) -> dict:
        # OpenAI routes requests with the same key and prefix to the same cache machine.
        return body if "prompt_cache_key" in body else {**body, "prompt_cache_key": group}


class LlamaCppProvider(OpenAIProvider):
    """A llama.cpp ``llama-server``: each of its slots keeps the KV cache of its last prompt.

    Rows of one prefix group go to one slot (``id_slot``) with ``cache_prompt``, so the slot
    re-reads only what follows the shared prefix; the slots are read from ``/props`` once.
    """

    capabilities = Capabilities(default_endpoint="chat", batch_api=False, logprobs="tokens",
                                body_options=LLAMA_CPP_BODY_OPTIONS)
    _lanes: int | None = None

    @property
    def root_url(self) -> str:
        """The server's own routes (/completion, /tokenize, /props) sit at the root, not under /v1."""
        return self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url

    def _url(self, endpoint: str) -> str:
        return self.root_url + wire.PATHS[endpoint] if endpoint == "completion" else super()._url(endpoint)

    async def token_ids(self, text: str) -> list[int]:
        """The model's token ids of ``text`` (llama.cpp's /tokenize; no BOS)."""
        session = await self._client()
        async with session.post(self.root_url + "/tokenize", json={"content": text}) as resp:
            resp.raise_for_status()
            return [t if isinstance(t, int) else t["id"] for t in (await resp.json())["tokens"]]

    async def label_scorer(self, labels: tuple):
        from inferframe.providers.label_scores import LlamaCppScorer

        # Each label as it follows "Label:" in the prompt: after a space.
        return LlamaCppScorer(labels, tuple([tuple(await self.token_ids(" " + label)) for label in labels]))

    async def prefix_lanes(self) -> int | None:
        if self._lanes is None:
            self._lanes = 0
            try:
                session = await self._client()
                async with session.get(self.root_url + "/props") as resp:
                    if resp.status == 200:
                        self._lanes = int((await resp.json()).get("total_slots") or 0)
            except Exception:  # noqa: BLE001 - an older server without /props: no slot routing, nothing else changes
                self._lanes = 0
        return self._lanes or None

    def routed(self, body: dict, lane: int | None, group: str) -> dict:
        if lane is None or "id_slot" in body:
            return body
        return {**body, "id_slot": lane, "cache_prompt": True}


class VLLMProvider(OpenAIProvider):
    """A vLLM server: its schema goes in ``structured_outputs`` through the request body."""

    capabilities = Capabilities(default_endpoint="chat", batch_api=True, structured_outputs="vllm", logprobs="top",
                                body_options=VLLM_BODY_OPTIONS)


def register(registry) -> None:
    """Entry-point hook: the built-in OpenAI-compatible providers."""
    registry.register("openai", HostedOpenAIProvider, key_env="OPENAI_API_KEY", base_url_env="OPENAI_BASE_URL",
                      default_base_url="https://api.openai.com/v1", needs_key=True, auto=True)
    registry.register("lm_studio", OpenAIProvider, default_base_url="http://127.0.0.1:1234/v1")
    registry.register("vllm", VLLMProvider, key_env="VLLM_API_KEY", base_url_env="VLLM_BASE_URL",
                      default_base_url="http://127.0.0.1:8000/v1")
    registry.register("llama_cpp", LlamaCppProvider, base_url_env="LLAMA_CPP_BASE_URL",
                      default_base_url="http://127.0.0.1:8080/v1")
    registry.register("ollama", OpenAIProvider, default_base_url="http://127.0.0.1:11434/v1")
    registry.register("openrouter", OpenAIProvider, key_env="OPENROUTER_API_KEY",
                      default_base_url="https://openrouter.ai/api/v1", needs_key=True)
