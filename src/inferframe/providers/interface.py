"""The provider interface: one small class that sends one request and says what happened.

The shape is httpx's transport: one ``send`` method, plus declared capabilities. A provider
owns its wire format (request bodies, headers, rate-limit headers, the Batch API's files) and
reports neutral records: an :class:`Outcome` with a value or an :class:`ErrorKind`, usage,
a retry hint and :class:`LimitHints`. Everything about *when* and *how often* lives in
``inferframe.runtime``, which sees only these records.

Example:
    >>> import asyncio
    >>> p = MockProvider(lambda request: Outcome(value=request.body["q"].upper()))
    >>> asyncio.run(p.send(Request("chat", {"q": "hi"}))).value
    'HI'
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Awaitable, Callable

from inferframe.errors import ErrorKind


@dataclasses.dataclass
class Usage:
    """Tokens one request used, as the server counted them.

    ``cached_tokens`` is the part of ``input_tokens`` the server's prompt cache served (as OpenAI
    counts it: included in ``input_tokens``, billed at the cached-input rate).

    Example:
        >>> u = Usage(input_tokens=1200, output_tokens=5, cached_tokens=1024)
        >>> u.total, u.input_tokens - u.cached_tokens
        (1205, 176)
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclasses.dataclass(frozen=True)
class Request:
    """One request: which endpoint ("chat", "responses" or "embeddings"), its body, and an up-front token estimate."""

    endpoint: str
    body: dict
    est_tokens: int = 0


@dataclasses.dataclass(frozen=True)
class LimitHints:
    """What the server said about its rate limits with one answer (None: not said).

    ``*_limit`` is the budget per minute; ``*_remaining`` what is left of it now; ``*_reset`` the
    seconds until the budget is whole again (with the remaining part and the rate it tells how much
    the server lets through at once).
    """

    requests_limit: float | None = None
    requests_remaining: float | None = None
    tokens_limit: float | None = None
    tokens_remaining: float | None = None
    requests_reset: float | None = None
    tokens_reset: float | None = None


@dataclasses.dataclass
class Outcome:
    """What happened to one attempt, as a provider reports it.

    ``error_kind`` is None on success, else an :class:`ErrorKind`; ``retry_after`` is the
    server's wait hint in seconds; ``raw`` keeps an unusable answer (off-schema); a text answer
    cut at max_tokens is a value with ``finish_reason="length"``.
    """

    value: Any = None
    usage: Usage | None = None
    status: int | None = None
    error_kind: ErrorKind | None = None
    message: str = ""
    retry_after: float | None = None
    limits: LimitHints | None = None
    raw: str | None = None
    finish_reason: str | None = None  # why generation stopped: "stop", "length" (cut at max_tokens), ...

    def __post_init__(self) -> None:
        if self.error_kind is not None and not isinstance(self.error_kind, ErrorKind):
            self.error_kind = ErrorKind(self.error_kind)

    @property
    def ok(self) -> bool:
        return self.error_kind is None


@dataclasses.dataclass(frozen=True)
class BatchState:
    """Where one Batch API job stands: still running, or done with result files (or failed)."""

    id: str
    done: bool
    result_files: tuple[str, ...] = ()
    failure: str | None = None  # the whole batch was refused (e.g. validation): why


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a provider can do, declared so that planning needs no server.

    Parameters:
        default_endpoint: "chat" or "responses": the API used when the call does not choose.
        structured_outputs: how a schema is enforced: "json_schema" (OpenAI strict), "vllm"
            (``structured_outputs`` in the body), "grammar" (llama.cpp GBNF for labels) or "none".
        batch_api: has the OpenAI-style Batch API (files + batches).
        batch_max_requests, batch_max_bytes: the Batch API's limits per file.
        tokenizer: ``tokenize()`` gives the model's own tokens (exact chunking).
        local: runs on this machine: costs nothing.
        default_concurrency: requests in flight when the user sets none.
        default_model: the model used when the call names none.
        default_embedding_model: the embedding model used when ``embed_text`` names none.
        embedding_max_input_tokens: longest input of one embedding (None: the model table decides).
        embedding_max_batch_inputs: inputs per ``/embeddings`` request when the user sets none.
        in_process: the model runs inside this process (no HTTP, no runtime).
        logprobs: what label scoring can read: "tokens" (every token's raw log-probability, e.g.
            llama.cpp: labels scored in full), "top" (the first token's top log-probabilities,
            OpenAI chat), or "none" (classification falls back to constrained generation).
        vision: its models read images: True, False (image inputs are a PlanError before any
            request), or None: not known (the server's answer decides; see ``Provider.reads_images``).
        context_tokens: the tokens one request may hold, prompt and answer (None: not known; see
            ``Provider.context_size`` for a size per model).
        body_options: request options this server takes beyond the OpenAI API's (``OPENAI_BODY_OPTIONS``),
            e.g. llama.cpp's sampling options; any other option is a PlanError unless sent in ``extra_body=``.
    """

    default_endpoint: str = "chat"
    structured_outputs: str = "json_schema"
    batch_api: bool = False
    batch_max_requests: int = 50_000
    batch_max_bytes: int = 200 * 1024 * 1024
    tokenizer: bool = False
    local: bool = False
    default_concurrency: int = 64
    default_model: str | None = None
    default_embedding_model: str | None = None
    embedding_max_input_tokens: int | None = None
    embedding_max_batch_inputs: int = 2048
    in_process: bool = False
    logprobs: str = "none"
    vision: bool | None = None
    context_tokens: int | None = None
    body_options: frozenset = frozenset()


# The request options of OpenAI's chat completions and responses APIs that a user may pass to an AI
# function (the rest of the body is built from its arguments). An OpenAI-compatible server accepts
# them or ignores them; a name outside this set (and the provider's ``body_options``) is a typo
# until the user says otherwise through ``extra_body=`` (the openai SDK's own escape hatch).
OPENAI_BODY_OPTIONS = frozenset({
    "max_tokens", "max_output_tokens", "max_completion_tokens", "temperature", "top_p", "n", "seed", "stop",
    "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "user", "metadata", "store",
    "service_tier", "reasoning", "reasoning_effort", "verbosity", "text", "truncation", "tools", "tool_choice",
    "parallel_tool_calls", "max_tool_calls", "include", "prediction", "modalities", "audio", "web_search_options",
    "prompt_cache_key", "safety_identifier", "response_format", "dimensions", "encoding_format", "extra_body",
})
# llama.cpp's server (llama-server) sampling and slot options beyond OpenAI's.
LLAMA_CPP_BODY_OPTIONS = frozenset({
    "top_k", "min_p", "typical_p", "repeat_penalty", "repeat_last_n", "dry_multiplier", "dry_base",
    "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers", "xtc_probability", "xtc_threshold",
    "mirostat", "mirostat_tau", "mirostat_eta", "dynatemp_range", "dynatemp_exponent", "n_predict", "n_probs",
    "min_keep", "ignore_eos", "samplers", "cache_prompt", "id_slot", "grammar", "json_schema", "t_max_predict_ms",
})
# vLLM's OpenAI-compatible server: its SamplingParams extras and structured outputs.
VLLM_BODY_OPTIONS = frozenset({
    "top_k", "min_p", "repetition_penalty", "length_penalty", "min_tokens", "ignore_eos", "skip_special_tokens",
    "spaces_between_special_tokens", "stop_token_ids", "include_stop_str_in_output", "best_of", "use_beam_search",
    "structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar", "priority",
    "chat_template_kwargs", "add_generation_prompt",
})


@dataclasses.dataclass(frozen=True)
class MediaOptions:
    """How images and files become message parts.

    Parameters:
        max_image_size: longest image side in pixels (None: as is).
        image_format: "png", "jpeg" or "webp" to re-encode images (None: keep).
        image_detail: "auto", "low", "high".
        pdf_mode: "file" sends PDFs as file parts; "text" sends their extracted text.
    """

    max_image_size: int | None = None
    image_format: str | None = None
    image_detail: str = "auto"
    pdf_mode: str = "file"


class Provider(abc.ABC):
    """One kind of model server behind one method: ``send`` a request, get an :class:`Outcome`.

    Subclasses set ``name``, ``service`` (how errors name the server, never with a key) and
    ``cache_identity`` (what answers depend on: kind and endpoint, never the key or a port that
    changes per run). The Batch API methods are needed only with ``capabilities.batch_api``.
    """

    name: str = "provider"
    service: str = "the provider"
    cache_identity: str = "provider"
    capabilities: Capabilities = Capabilities()

    # --- what planning asks of a provider kind, without building one (no server starts) ---
    @classmethod
    def capabilities_for(cls, spec: Any, declared: Capabilities) -> Capabilities:
        """The capabilities for one spec (e.g. an OpenAI-compatible URL that is a vLLM server)."""
        return declared

    @classmethod
    def knows_model(cls, model: str) -> bool:
        """This provider serves ``model`` by name (used to pick a provider when none is named)."""
        return False

    @classmethod
    def embedding_size(cls, model: str) -> int | None:
        """The vector size of an embedding model this provider knows, else None (probed)."""
        return None

    @classmethod
    def context_size(cls, model: str | None, caps: Capabilities) -> int | None:
        """The tokens one request to ``model`` may hold (prompt and answer), else None (not known)."""
        return caps.context_tokens

    @classmethod
    def reads_images(cls, model: str | None, caps: Capabilities) -> bool | None:
        """Whether ``model`` reads image inputs: True, False, or None when not known (the server decides)."""
        return caps.vision

    @classmethod
    def embedding_max_input_tokens(cls, model: str) -> int | None:
        """The most tokens one embedding input may have, when known."""
        return None

    @classmethod
    def request_body(cls, endpoint: str, model: str | None, parts: list, system: str | None, options: dict,
                     format_fields: dict, media: Any = None) -> dict:
        """The wire body of one request; ``parts`` are (value, kind, name) with kind text, image, file or messages."""
        raise NotImplementedError(f"{cls.__name__} builds no request bodies")

    @classmethod
    def follow_up_body(cls, endpoint: str, body: dict, answer: str, message: str) -> dict:
        """``body`` continued: the model's ``answer``, then a new user ``message`` (used to ask for a repair)."""
        raise NotImplementedError(f"{cls.__name__} cannot continue a conversation")

    @classmethod
    def format_fields(cls, caps: Capabilities, endpoint: str, name: str, schema: dict,
                      choices: list[str] | None) -> dict:
        """Body fields that ask the server to enforce ``schema`` ({} when it cannot)."""
        return {}

    @classmethod
    def default_max_tokens(cls, schema: dict | None) -> int | None:
        """The max_tokens an answer gets when the user sets none: of ``schema``, or free text (None); None: the server's."""
        return None

    @classmethod
    def estimate_tokens(cls, body: dict, model: str | None) -> tuple[int, int]:
        """(input tokens, most output tokens) of a body, before sending it."""
        return 0, 0

    # --- prompt caches: what the runtime's prefix scheduler asks (runtime.scheduler) ---
    @classmethod
    def prompt_text(cls, endpoint: str, body: dict) -> str | None:
        """The prompt as the server reads it, to send rows sharing a prefix together (None: no order)."""
        return None

    async def prefix_lanes(self) -> int | None:
        """Server slots that each keep their own prompt cache (llama.cpp); None: one shared cache."""
        return None

    def routed(self, body: dict, lane: int | None, group: str) -> dict:
        """The body to send for a row of prefix ``group`` on ``lane`` (with the server's cache hints; default as is)."""
        return body

    async def label_scorer(self, labels: tuple) -> Any:
        """How this server scores ``labels`` by log-probability (``providers.label_scores``); None: it cannot."""
        return None

    @abc.abstractmethod
    async def send(self, request: Request) -> Outcome:
        """Send one request; never raises for a failed request, reports it as an Outcome instead."""

    async def aclose(self) -> None:
        """Release connections."""

    async def tokenize(self, text: str) -> list[bytes]:
        """The model's tokens of ``text``, each as its bytes (only with ``capabilities.tokenizer``)."""
        raise NotImplementedError(f"{self.service} has no tokenizer")

    # The Batch API, in neutral terms: the runtime submits lines, polls, and reads (key, Outcome) pairs.
    def batch_lines(self, endpoint: str, items: list[tuple[str, dict]]) -> list[bytes]:
        raise NotImplementedError(f"{self.service} has no Batch API")

    async def submit_batch(self, endpoint: str, name: str, data: bytes) -> str:
        raise NotImplementedError(f"{self.service} has no Batch API")

    async def poll_batch(self, batch_id: str) -> BatchState:
        raise NotImplementedError(f"{self.service} has no Batch API")

    async def batch_results(self, endpoint: str, state: BatchState) -> list[tuple[str, Outcome]]:
        raise NotImplementedError(f"{self.service} has no Batch API")

    def __repr__(self) -> str:  # never show a key
        return f"{type(self).__name__}({self.service})"


Handler = Callable[[Request], "Outcome | Awaitable[Outcome]"]


class MockProvider(Provider):
    """A provider built from a handler function, for tests of the runtime without HTTP.

    Parameters:
        handler: takes a Request, returns an Outcome (or awaits one).
        name: the provider's name; also its service and cache identity.
        capabilities: what it declares.

    Example:
        >>> import asyncio
        >>> p = MockProvider(lambda r: Outcome(error_kind="rate_limit", retry_after=0.5))
        >>> asyncio.run(p.send(Request("chat", {}))).error_kind
        <ErrorKind.RATE_LIMIT: 'rate_limit'>
    """

    def __init__(self, handler: Handler, *, name: str = "mock", capabilities: Capabilities | None = None,
                 **_: Any) -> None:
        self.handler = handler
        self.name = name
        self.service = f"the {name} provider"
        self.cache_identity = f"{name}:"
        if capabilities is not None:
            self.capabilities = capabilities
        self.requests: list[Request] = []

    async def send(self, request: Request) -> Outcome:
        self.requests.append(request)
        out = self.handler(request)
        if isinstance(out, Awaitable):
            out = await out
        return out
