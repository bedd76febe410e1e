"""The provider interface: a transport that sends one request, plus small protocols for what a provider can do.

A provider is two things. Its **wire format** (class methods: request bodies, the prompt as the
server reads it, structured-output fields, the Batch API's files, model facts) is looked up once
when the plan is built and travels with the call's ``ProviderSpec``. Its **transport** (``send``
and ``aclose``, as httpx's ``BaseTransport`` is ``handle_request`` and ``close``) is built in the
process that sends and reports neutral records: an :class:`Outcome` with a value or an
:class:`ErrorKind`, usage, a retry hint and :class:`LimitHints`. Everything about *when* and *how
often* lives in ``inferframe.runtime``, which sees only these records.

Each capability is one small protocol, as Daft's ``Prompter``/``TextEmbedder``: a plugin implements
only what it can do (:class:`RequestFormat` to be called at all; :class:`SchemaFormat`,
:class:`RepairFormat`, :class:`ModelCatalog`, :class:`EmbeddingCatalog`, :class:`PrefixRouting`,
:class:`LabelScoring`, :class:`Tokenizer`, :class:`BatchAPI` as it can). What it lacks is a
:class:`PlanError` before any request (``require``) or the neutral answer of the helpers below
(no schema fields, no known context size, ...). ``Provider``, the old base of 21 hooks, stays one
release as a deprecated shim.

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
from types import MappingProxyType
from typing import Any, Awaitable, Callable, Protocol, runtime_checkable

from inferframe.errors import ErrorKind, PlanError


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

    def with_body(self, body: dict) -> "Request":
        """The same request with another body (the server's cache hints added): a plain Request, estimate kept."""
        return Request(self.endpoint, body, self.est_tokens, self.prompt, self.max_output_tokens)


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


# --- the wire format: class methods, looked up once when the plan is built --------------------------


@runtime_checkable
class RequestFormat(Protocol):
    """Builds request bodies and says what the server reads of them: needed by every AI function that sends requests."""

    @classmethod
    def request_body(cls, endpoint: str, model: str | None, parts: list, system: str | None, options: dict,
                     format_fields: dict, media: Any = None) -> dict:
        """The wire body of one request; ``parts`` are (value, kind, name) with kind text, image, file or messages."""

    @classmethod
    def prompt_text(cls, endpoint: str, body: dict) -> str | None:
        """The prompt as the server reads it (asked once, when the request is built); None: no prefix order."""


@runtime_checkable
class SchemaFormat(Protocol):
    """Asks the server to enforce a return format; without it answers are only validated."""

    @classmethod
    def format_fields(cls, caps: Capabilities, endpoint: str, name: str, schema: dict,
                      choices: list[str] | None) -> dict:
        """Body fields that ask the server to enforce ``schema`` ({} when it cannot)."""


@runtime_checkable
class AnswerBudget(Protocol):
    """Gives an answer an output bound when the user sets none (a base model may not stop on its own)."""

    @classmethod
    def default_max_tokens(cls, schema: dict | None) -> int | None:
        """The max_tokens of an answer of ``schema`` (None: free text) when the user sets none; None: the server's."""


@runtime_checkable
class RepairFormat(Protocol):
    """Continues a conversation: needed by ``repair=True`` (the answer and the validation error sent back)."""

    @classmethod
    def follow_up_body(cls, endpoint: str, body: dict, answer: str, message: str) -> dict:
        """``body`` continued: the model's ``answer``, then a new user ``message``."""


@runtime_checkable
class ModelCatalog(Protocol):
    """Knows its models by name: picks the provider when none is named, and what a model can read."""

    @classmethod
    def knows_model(cls, model: str) -> bool: ...

    @classmethod
    def context_size(cls, model: str | None, caps: Capabilities) -> int | None: ...

    @classmethod
    def reads_images(cls, model: str | None, caps: Capabilities) -> bool | None: ...


@runtime_checkable
class EmbeddingCatalog(Protocol):
    """Knows its embedding models: the vector size and the longest input, so nothing is probed."""

    @classmethod
    def embedding_size(cls, model: str) -> int | None: ...

    @classmethod
    def embedding_max_input_tokens(cls, model: str) -> int | None: ...


@runtime_checkable
class SpecCapabilities(Protocol):
    """Refines the declared capabilities per spec (e.g. an OpenAI-compatible URL that is a vLLM server)."""

    @classmethod
    def capabilities_for(cls, spec: Any, declared: Capabilities) -> Capabilities: ...


# --- what a live transport can do besides sending ------------------------------------------------------


@runtime_checkable
class PrefixRouting(Protocol):
    """Prompt caches: server slots that each keep their own cache, and the hints that route a row to one."""

    async def prefix_lanes(self) -> int | None:
        """Server slots that each keep their own prompt cache (llama.cpp); None: one shared cache."""

    def routed(self, body: dict, lane: int | None, group: str) -> dict:
        """The body to send for a row of prefix ``group`` on ``lane`` (with the server's cache hints)."""


@runtime_checkable
class LabelScoring(Protocol):
    """Scores labels by log-probability (``providers.label_scores``): classification without generation."""

    async def label_scorer(self, labels: tuple) -> Any: ...


@runtime_checkable
class Tokenizer(Protocol):
    """The model's own tokens (exact chunking)."""

    async def tokenize(self, text: str) -> list[bytes]: ...


@runtime_checkable
class BatchAPI(Protocol):
    """The Batch API in neutral terms: the runtime submits lines, polls, and reads (key, Outcome) pairs."""

    def batch_lines(self, endpoint: str, items: list[tuple[str, dict]]) -> list[bytes]: ...

    async def submit_batch(self, endpoint: str, name: str, data: bytes) -> str: ...

    async def poll_batch(self, batch_id: str) -> BatchState: ...

    async def batch_results(self, endpoint: str, state: BatchState) -> list[tuple[str, Outcome]]: ...


# What each capability lets a call do, for the PlanError of a provider that lacks it.
_NEEDED_FOR = MappingProxyType({RequestFormat: "send requests (prompt, classify, embeddings, semantic operators)",
               RepairFormat: "repair an answer (repair=True)", BatchAPI: "use a Batch API (batch=True)",
               LabelScoring: "score labels by log-probability", Tokenizer: "tokenize text"})


def supports(provider: Any, protocol: type) -> bool:
    """Whether ``provider`` (a transport or its wire-format class) implements every method of ``protocol``.

    Example:
        >>> supports(MockProvider(lambda r: Outcome()), Transport), supports(MockProvider, RequestFormat)
        (True, False)
    """
    return isinstance(provider, protocol)


def require(provider: Any, protocol: type, name: str, fn: str) -> Any:
    """``provider`` when it implements ``protocol``; else a PlanError naming what is missing (before any request).

    Example:
        >>> require(MockProvider, RepairFormat, "mock", "prompt")
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: prompt(): provider 'mock' cannot repair an answer (repair=True): it implements no RepairFormat (follow_up_body). Use a provider that does, or leave the option out.
    """
    if supports(provider, protocol):
        return provider
    methods = ", ".join(m for m in protocol.__dict__ if not m.startswith("_") and callable(getattr(protocol, m)))
    raise PlanError(f"{fn}(): provider {name!r} cannot {_NEEDED_FOR.get(protocol, protocol.__name__)}: it implements "
                    f"no {protocol.__name__} ({methods}). Use a provider that does, or leave the option out.")


def _ask(wire: Any, method: str, default: Any, *args: Any) -> Any:
    fn = getattr(wire, method, None)
    return default if fn is None else fn(*args)


def knows_model(wire: Any, model: str | None) -> bool:
    """The provider serves ``model`` by name (``ModelCatalog``); False when it keeps no catalog."""
    return bool(model) and bool(_ask(wire, "knows_model", False, model))


def context_size(wire: Any, model: str | None, caps: Capabilities) -> int | None:
    """The tokens one request to ``model`` may hold (``ModelCatalog``), else the declared ``context_tokens``."""
    return _ask(wire, "context_size", caps.context_tokens, model, caps)


def reads_images(wire: Any, model: str | None, caps: Capabilities) -> bool | None:
    """Whether ``model`` reads images (``ModelCatalog``), else the declared ``vision`` (None: the server decides)."""
    return _ask(wire, "reads_images", caps.vision, model, caps)


def embedding_size(wire: Any, model: str) -> int | None:
    """The vector size of an embedding model (``EmbeddingCatalog``); None: probed."""
    return _ask(wire, "embedding_size", None, model)


def embedding_max_input_tokens(wire: Any, model: str) -> int | None:
    """The most tokens one embedding input may have (``EmbeddingCatalog``); None: not known."""
    return _ask(wire, "embedding_max_input_tokens", None, model)


def format_fields(wire: Any, caps: Capabilities, endpoint: str, name: str, schema: dict,
                  choices: list[str] | None) -> dict:
    """The body fields that enforce ``schema`` (``SchemaFormat``); {}: the answer is only validated."""
    return _ask(wire, "format_fields", {}, caps, endpoint, name, schema, choices)


def default_max_tokens(wire: Any, schema: dict | None) -> int | None:
    """An answer's bound when the user sets none (``AnswerBudget``); None: the server's."""
    return _ask(wire, "default_max_tokens", None, schema)


def capabilities_for(wire: Any, spec: Any, declared: Capabilities) -> Capabilities:
    """The capabilities of ``spec``: refined by the wire format (``SpecCapabilities``), and only those it implements.

    A Batch API, label scoring or a tokenizer declared by a provider that lacks the protocol is
    not offered, so asking for it is the usual PlanError before any request.

    Example:
        >>> capabilities_for(MockProvider, None, Capabilities(batch_api=True, logprobs="top")).batch_api
        False
    """
    caps = _ask(wire, "capabilities_for", declared, spec, declared)
    lacks = {}
    if caps.batch_api and not supports(wire, BatchAPI):
        lacks["batch_api"] = False
    if caps.logprobs != "none" and not supports(wire, LabelScoring):
        lacks["logprobs"] = "none"
    if caps.tokenizer and not supports(wire, Tokenizer):
        lacks["tokenizer"] = False
    return dataclasses.replace(caps, **lacks) if lacks else caps


async def prefix_lanes(provider: Any) -> int | None:
    """The provider's prefix lanes (``PrefixRouting``); None: one shared cache, or none."""
    fn = getattr(provider, "prefix_lanes", None)
    return None if fn is None else await fn()


def routed(provider: Any, body: dict, lane: int | None, group: str) -> dict:
    """The body with the provider's prompt-cache hints (``PrefixRouting``); as is without them."""
    fn = getattr(provider, "routed", None)
    return body if fn is None else fn(body, lane, group)


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
                     format_fields: dict, media: Any = None) -> dict:
        raise NotImplementedError(f"{cls.__name__} builds no request bodies")

    @classmethod
    def follow_up_body(cls, endpoint: str, body: dict, answer: str, message: str) -> dict:
        raise NotImplementedError(f"{cls.__name__} cannot continue a conversation")

    @classmethod
    def format_fields(cls, caps: Capabilities, endpoint: str, name: str, schema: dict, choices) -> dict:
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
