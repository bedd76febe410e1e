"""The provider interface: a transport that sends one request, plus small protocols for what a provider can do.

A provider is two things. Its **wire format** (class methods: request bodies, the prompt as the
server reads it, structured-output fields, the Batch API's files, model facts) is looked up once
when the plan is built and travels with the call's ``ProviderSpec``. Its **transport** (``send``
and ``aclose``, as httpx's ``BaseTransport`` is ``handle_request`` and ``close``) is built in the
process that sends and reports neutral records: an :class:`Outcome` with a value or an
:class:`ErrorKind`, usage, a retry hint and :class:`LimitHints`. Everything about *when* and *how
often* lives in ``inferframe.runtime``, which sees only these records.

Each capability is one small protocol (``providers.protocols``, re-exported here), as Daft's
``Prompter``/``TextEmbedder``: a plugin implements only what it can do (:class:`RequestFormat` to
be called at all; :class:`SchemaFormat`, :class:`RepairFormat`, :class:`ModelCatalog`,
:class:`BatchAPI`, ... as it can). What it lacks is a ``PlanError`` before any request
(``require``) or the neutral answer of the helpers (no schema fields, no known context size).
``Provider``, the old base of 21 hooks, stays one release as a deprecated shim.

Example:
    >>> import asyncio
    >>> p = MockProvider(lambda request: Outcome(value=request.body["q"].upper()))
    >>> asyncio.run(p.send(Request("chat", {"q": "hi"}))).value
    'HI'
    >>> isinstance(p, Transport), supports(p, BatchAPI)
    (True, False)
"""

from __future__ import annotations

import abc
import dataclasses
import warnings
from typing import Any, Awaitable, Callable, Protocol, runtime_checkable

from inferframe.errors import ErrorKind
# The capability protocols and how a call asks for them, re-exported: the interface is one import.
from inferframe.providers.protocols import (
    AnswerBudget, BatchAPI, EmbeddingCatalog, LabelScoring, ModelCatalog, OptionLimits, OutputCap, PrefixRouting,
    RepairFormat, RequestFormat, SchemaFormat, SpecCapabilities, Tokenizer, capabilities_for, check_options, context_size,
    default_max_tokens, embedding_max_input_tokens, embedding_size, format_fields, knows_model,
    prefix_lanes, reads_images, require, routed, supports,
)

__all__ = ["AnswerBudget", "BaseTransport", "BatchAPI", "BatchState", "Capabilities", "EmbeddingCatalog",
    "LLAMA_CPP_BODY_OPTIONS", "LabelScoring", "LimitHints", "MediaOptions", "MockProvider", "ModelCatalog",
    "OPENAI_BODY_OPTIONS", "OptionLimits", "Outcome", "OutputCap", "PrefixRouting", "Provider", "RepairFormat", "Request",
    "RequestFormat", "SchemaFormat", "SpecCapabilities", "Tokenizer", "Transport", "Usage",
    "VLLM_BODY_OPTIONS", "capabilities_for", "check_options", "context_size", "default_max_tokens",
    "embedding_max_input_tokens", "embedding_size", "format_fields", "knows_model", "prefix_lanes",
    "reads_images", "require", "routed", "supports"]


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
    """One request: its endpoint, its wire body, and what the runtime needs to know of it without reading the body.

    Parameters:
        endpoint: "chat", "responses", "embeddings" (or a provider's own, e.g. "completion").
        body: the JSON body the wire format built.
        est_tokens: the tokens the rate limiter reserves for it (prompt and answer), estimated up front.
        prompt: the prompt's text as the server reads it, kept when the body is built: the prefix
            scheduler groups rows by it and the cost estimate finds shared prefixes in it (None: no order).
        max_output_tokens: the answer's token bound as the call set it (None: the server's own).
        part_of_refused: a part of a packed request the server refused as a whole (``EmbeddingOperator`` splits
            one until the bad input stands alone): its refusal repeats one already counted, so the breaker does
            not count it as another row refused the same way.

    Example:
        >>> r = Request("chat", {"messages": []}, 12, prompt="Hi", max_output_tokens=5)
        >>> r.with_body({"messages": [], "id_slot": 0}).prompt, r.with_body({}).max_output_tokens
        ('Hi', 5)
    """

    endpoint: str
    body: dict
    est_tokens: int = 0
    prompt: str | None = None
    max_output_tokens: int | None = None
    part_of_refused: bool = False

    def with_body(self, body: dict) -> "Request":
        """The same request with another body (the server's cache hints added): a plain Request, estimate kept."""
        return Request(self.endpoint, body, self.est_tokens, self.prompt, self.max_output_tokens, self.part_of_refused)


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
    # The answer's own id and model as the server named them (traces: gen_ai.response.id / .model).
    response_id: str | None = None
    response_model: str | None = None

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
            request), or None: not known (the server's answer decides; see ``ModelCatalog.reads_images``).
        context_tokens: the tokens one request may hold, prompt and answer (None: not known; see
            ``ModelCatalog.context_size`` for a size per model).
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


# --- the transport: what every provider is --------------------------------------------------------


@runtime_checkable
class Transport(Protocol):
    """Sends one request and says what happened; closes its connections. Every provider is one.

    ``send`` never raises for a failed request: it reports it as an :class:`Outcome`. A transport
    also has ``name``, ``service`` (how errors name the server, never with a key),
    ``cache_identity`` (what answers depend on, never the key) and ``capabilities``.
    """

    async def send(self, request: Request) -> Outcome: ...

    async def aclose(self) -> None: ...


class BaseTransport(abc.ABC):
    """A convenient base for a transport: the attributes with defaults, ``send`` to write, ``aclose`` a no-op.

    A plugin subclasses it and adds the protocols' methods for what it can do.

    Example:
        >>> import asyncio
        >>> class Echo(BaseTransport):
        ...     async def send(self, request):
        ...         return Outcome(value=request.prompt)
        >>> asyncio.run(Echo().send(Request("chat", {}, prompt="hi"))).value, repr(Echo())
        ('hi', 'Echo(the provider)')
    """

    name: str = "provider"
    service: str = "the provider"
    cache_identity: str = "provider"
    capabilities: Capabilities = Capabilities()

    @abc.abstractmethod
    async def send(self, request: Request) -> Outcome:
        """Send one request; never raises for a failed request, reports it as an Outcome instead."""

    async def aclose(self) -> None:
        """Release connections."""

    def __repr__(self) -> str:  # never show a key
        return f"{type(self).__name__}({self.service})"


# --- the old base, one release longer -------------------------------------------------------------------


class Provider(BaseTransport):
    """Deprecated: the old base with every hook and its default; subclass ``BaseTransport`` and implement the protocols.

    A subclass still works as before (its hooks are the protocols' methods); defining one warns.
    """

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        warnings.warn(f"{cls.__name__}: inferframe.providers.interface.Provider is deprecated and goes in the next "
                      "release; subclass BaseTransport and implement the protocols your provider supports "
                      "(RequestFormat, SchemaFormat, BatchAPI, ...).", DeprecationWarning, stacklevel=3)

    @classmethod
    def capabilities_for(cls, spec: Any, declared: Capabilities) -> Capabilities:
        return declared

    @classmethod
    def knows_model(cls, model: str) -> bool:
        return False

    @classmethod
    def embedding_size(cls, model: str) -> int | None:
        return None

    @classmethod
    def context_size(cls, model: str | None, caps: Capabilities) -> int | None:
        return caps.context_tokens

    @classmethod
    def reads_images(cls, model: str | None, caps: Capabilities) -> bool | None:
        return caps.vision

    @classmethod
    def embedding_max_input_tokens(cls, model: str) -> int | None:
        return None

    @classmethod
    def request_body(cls, endpoint: str, model: str | None, parts: list, system: str | None, options: dict,
                     format_fields: dict, media: Any = None, max_output_tokens: int | None = None) -> dict:
        raise NotImplementedError(f"{cls.__name__} builds no request bodies")

    @classmethod
    def follow_up_body(cls, endpoint: str, body: dict, answer: str, message: str) -> dict:
        raise NotImplementedError(f"{cls.__name__} cannot continue a conversation")

    @classmethod
    def format_fields(cls, caps: Capabilities, endpoint: str, name: str, schema: dict, labels) -> dict:
        return {}

    @classmethod
    def default_max_tokens(cls, schema: dict | None) -> int | None:
        return None

    @classmethod
    def estimate_tokens(cls, body: dict, model: str | None) -> tuple[int, int]:
        return 0, 0

    @classmethod
    def prompt_text(cls, endpoint: str, body: dict) -> str | None:
        return None

    async def prefix_lanes(self) -> int | None:
        return None

    def routed(self, body: dict, lane: int | None, group: str) -> dict:
        return body

    async def label_scorer(self, labels: tuple) -> Any:
        return None

    async def tokenize(self, text: str) -> list[bytes]:
        raise NotImplementedError(f"{self.service} has no tokenizer")

    def batch_lines(self, endpoint: str, items: list[tuple[str, dict]]) -> list[bytes]:
        raise NotImplementedError(f"{self.service} has no Batch API")

    async def submit_batch(self, endpoint: str, name: str, data: bytes) -> str:
        raise NotImplementedError(f"{self.service} has no Batch API")

    async def poll_batch(self, batch_id: str) -> BatchState:
        raise NotImplementedError(f"{self.service} has no Batch API")

    async def batch_results(self, endpoint: str, state: BatchState) -> list[tuple[str, Outcome]]:
        raise NotImplementedError(f"{self.service} has no Batch API")


Handler = Callable[[Request], "Outcome | Awaitable[Outcome]"]


class MockProvider(BaseTransport):
    """A transport built from a handler function, for tests of the runtime without HTTP.

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
