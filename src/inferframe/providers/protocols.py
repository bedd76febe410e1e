"""What a provider can do besides sending: one small protocol per capability, and how a call asks for one.

As Daft's ``Prompter``/``TextEmbedder`` protocols, each is a method or two; a provider plugin
implements the ones it can. The wire format's (class methods, looked up once when the plan is
built into the call's ``ProviderSpec``): :class:`RequestFormat` (needed to send anything),
:class:`SchemaFormat`, :class:`AnswerBudget`, :class:`RepairFormat`, :class:`ModelCatalog`,
:class:`EmbeddingCatalog`, :class:`SpecCapabilities`, :class:`OptionLimits`. The live transport's:
:class:`PrefixRouting`, :class:`LabelScoring`, :class:`Tokenizer`, :class:`BatchAPI`.

A call that needs a capability the provider lacks gets a PlanError before any request
(``require``); an optional question gets the neutral answer (``context_size``, ``format_fields``,
...), and capabilities declared without their protocol are not offered (``capabilities_for``).
Every question is asked through ``supports``: a provider that implements only part of a protocol
is not asked it (no method is probed on its own).
``inferframe.providers.interface`` re-exports every name here.

Example:
    >>> class Plain:
    ...     @classmethod
    ...     def request_body(cls, endpoint, model, parts, system, options, format_fields, media=None):
    ...         return {"text": parts[0][0]}
    ...     @classmethod
    ...     def prompt_text(cls, endpoint, body):
    ...         return body["text"]
    >>> supports(Plain, RequestFormat), supports(Plain, BatchAPI), format_fields(Plain, None, "chat", "R", {}, None)
    (True, False, {})
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, runtime_checkable

from inferframe.errors import PlanError

# The records these protocols take and give live in ``providers.interface``, which re-exports this
# module: named here as the strings they are under postponed annotations, never imported (no cycle).
Capabilities = BatchState = Outcome = Any


# --- the wire format: class methods, looked up once when the plan is built --------------------------


@runtime_checkable
class RequestFormat(Protocol):
    """Builds request bodies and says what the server reads of them: needed by every AI function that sends requests."""

    @classmethod
    def request_body(cls, endpoint: str, model: str | None, parts: list, system: str | None, options: dict,
                     format_fields: dict, media: Any = None, max_output_tokens: int | None = None) -> dict:
        """The wire body of one request; ``parts`` are (value, kind, name) with kind text, image, file or messages.

        ``max_output_tokens`` is the call's answer cap (its config's one field; passed only when set):
        the format spells it as its endpoint wants, ``options`` never hold it."""

    @classmethod
    def prompt_text(cls, endpoint: str, body: dict) -> str | None:
        """The prompt as the server reads it (asked once, when the request is built); None: no prefix order."""


@runtime_checkable
class SchemaFormat(Protocol):
    """Asks the server to enforce a return format; without it answers are only validated."""

    @classmethod
    def format_fields(cls, caps: Capabilities, endpoint: str, name: str, schema: dict,
                      labels: list[str] | None) -> dict:
        """Body fields that ask the server to enforce ``schema`` ({} when it cannot); ``labels``: a choice format's."""


@runtime_checkable
class AnswerBudget(Protocol):
    """Gives an answer an output bound when the user sets none (a base model may not stop on its own)."""

    @classmethod
    def default_max_tokens(cls, schema: dict | None) -> int | None:
        """The max_tokens of an answer of ``schema`` (None: free text) when the user sets none; None: the server's."""


@runtime_checkable
class OptionLimits(Protocol):
    """Knows the limits its server documents for request options: an option it would refuse on every row is a
    PlanError when the call is built, before any request."""

    @classmethod
    def check_options(cls, fn: str, endpoint: str, model: str | None, caps: Capabilities, options: dict,
                      cap: OutputCap | None) -> None:
        """Raise a PlanError naming the option, the limit and the fix; ``options`` as the user gave them, and
        ``cap`` the answer's token cap as the call's config step read it (None: not set)."""


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
        """The body to send for a row of prefix ``group`` on ``lane`` (with the server's cache hints).

        Not asked for a row that shares no prefix worth caching with another (``group`` "") unless it
        has a lane (a llama.cpp slot)."""


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
        >>> class Echo:
        ...     @classmethod
        ...     def follow_up_body(cls, endpoint, body, answer, message):
        ...         return body
        >>> supports(Echo, RepairFormat), supports(Echo, RequestFormat)
        (True, False)
    """
    return isinstance(provider, protocol)


def require(provider: Any, protocol: type, name: str, fn: str) -> Any:
    """``provider`` when it implements ``protocol``; else a PlanError naming what is missing (before any request).

    Example:
        >>> require(object, RepairFormat, "mock", "prompt")
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: prompt(): provider 'mock' cannot repair an answer (repair=True): it implements no RepairFormat (follow_up_body). Use a provider that does, or leave the option out.
    """
    if supports(provider, protocol):
        return provider
    methods = ", ".join(m for m in protocol.__dict__ if not m.startswith("_") and callable(getattr(protocol, m)))
    raise PlanError(f"{fn}(): provider {name!r} cannot {_NEEDED_FOR.get(protocol, protocol.__name__)}: it implements "
                    f"no {protocol.__name__} ({methods}). Use a provider that does, or leave the option out.")


def knows_model(wire: Any, model: str | None) -> bool:
    """The provider serves ``model`` by name (``ModelCatalog``); False when it keeps no catalog."""
    return bool(model) and supports(wire, ModelCatalog) and bool(wire.knows_model(model))


def context_size(wire: Any, model: str | None, caps: Capabilities) -> int | None:
    """The tokens one request to ``model`` may hold (``ModelCatalog``), else the declared ``context_tokens``."""
    return wire.context_size(model, caps) if supports(wire, ModelCatalog) else caps.context_tokens


def reads_images(wire: Any, model: str | None, caps: Capabilities) -> bool | None:
    """Whether ``model`` reads images (``ModelCatalog``), else the declared ``vision`` (None: the server decides)."""
    return wire.reads_images(model, caps) if supports(wire, ModelCatalog) else caps.vision


def embedding_size(wire: Any, model: str) -> int | None:
    """The vector size of an embedding model (``EmbeddingCatalog``); None: probed."""
    return wire.embedding_size(model) if supports(wire, EmbeddingCatalog) else None


def embedding_max_input_tokens(wire: Any, model: str) -> int | None:
    """The most tokens one embedding input may have (``EmbeddingCatalog``); None: not known."""
    return wire.embedding_max_input_tokens(model) if supports(wire, EmbeddingCatalog) else None


def format_fields(wire: Any, caps: Capabilities, endpoint: str, name: str, schema: dict,
                  labels: list[str] | None) -> dict:
    """The body fields that enforce ``schema`` (``SchemaFormat``); {}: the answer is only validated."""
    return wire.format_fields(caps, endpoint, name, schema, labels) if supports(wire, SchemaFormat) else {}


def default_max_tokens(wire: Any, schema: dict | None) -> int | None:
    """An answer's bound when the user sets none (``AnswerBudget``); None: the server's."""
    return wire.default_max_tokens(schema) if supports(wire, AnswerBudget) else None


class OutputCap(NamedTuple):
    """The answer's token cap as the user set it: the name they gave it (for messages) and its tokens.

    Read from the user's options once, by the call's config step (``ai.options.answer_cap``).

    Example:
        >>> OutputCap("max_output_tokens", 10).tokens
        10
    """

    name: str
    tokens: int


def check_options(wire: Any, fn: str, endpoint: str, model: str | None, caps: Capabilities, options: dict,
                  cap: OutputCap | None) -> None:
    """Refuse, before any request, options the server would refuse on every row (``OptionLimits``), and an answer
    cap that leaves no room for the prompt in the model's context (``context_size``).

    Example:
        >>> from inferframe.providers.interface import Capabilities
        >>> check_options(object, "prompt", "chat", "m", Capabilities(context_tokens=4096), {}, OutputCap("max_tokens", 5000))
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: prompt(): max_tokens=5000 does not fit m's context of 4,096 tokens (prompt and answer together); use a smaller max_tokens.
    """
    if supports(wire, OptionLimits):
        wire.check_options(fn, endpoint, model, caps, options, cap)
    context = context_size(wire, model, caps)
    if cap is not None and context and cap.tokens >= context:
        name = cap.name
        raise PlanError(f"{fn}(): {name}={cap.tokens} does not fit {model or 'the model'}'s context of {context:,} tokens "
                        f"(prompt and answer together); use a smaller {name}.")


def capabilities_for(wire: Any, spec: Any, declared: Capabilities) -> Capabilities:
    """The capabilities of ``spec``: refined by the wire format (``SpecCapabilities``), and only those it implements.

    A Batch API, label scoring or a tokenizer declared by a provider that lacks the protocol is
    not offered, so asking for it is the usual PlanError before any request.

    Example:
        >>> from inferframe.providers.interface import Capabilities
        >>> capabilities_for(object, None, Capabilities(batch_api=True, logprobs="top")).batch_api
        False
    """
    caps = wire.capabilities_for(spec, declared) if supports(wire, SpecCapabilities) else declared
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
    return await provider.prefix_lanes() if supports(provider, PrefixRouting) else None


def routed(provider: Any, body: dict, lane: int | None, group: str) -> dict:
    """The body with the provider's prompt-cache hints (``PrefixRouting``); as is without them."""
    return provider.routed(body, lane, group) if supports(provider, PrefixRouting) else body
