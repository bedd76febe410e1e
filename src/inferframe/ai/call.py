"""``AICall``: the one typed, frozen description every AI function builds, and the sizing of its batches.

A function of ``inferframe.functions`` checks its arguments, resolves its model (``ModelRef``) and
options once, and returns an ``AICall``; one builder turns any call into a column expression. The
run history, drift and ``estimate()`` read the call back from the plan (``fingerprint``, ``summary``),
whatever kind of model it runs, and a cascade is built from its stages' calls.

Example:
    >>> sizing(8), sizing(8, prefix_window=4096), sizing(64, rows_per_request=2048), sizing(1, rows_per_call=1024)
    (Sizing(batch=128, window=2), Sizing(batch=128, window=33), Sizing(batch=8192, window=2), Sizing(batch=1024, window=1))
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import pyarrow as pa

from inferframe.providers.interface import Capabilities
from inferframe.providers.spec import ProviderSpec

# Rows per call of an operator that sends one request per row; whole requests per call otherwise.
ROWS_PER_CALL = 128
# Rows per call through a Batch API: one batch file holds many.
BATCH_API_ROWS = 50_000


@dataclasses.dataclass(frozen=True)
class Sizing:
    """How the executor feeds an operator: ``batch`` rows per call, ``window`` calls in flight at once."""

    batch: int
    window: int


def sizing(max_concurrency: int, *, batch_api: bool = False, rows_per_request: int = 1, prefix_window: int = 0,
           rows_per_call: int | None = None) -> Sizing:
    """The one rule for an AI call's batches: enough rows pending to keep ``max_concurrency`` requests in flight.

    Parameters:
        max_concurrency: requests in flight at once (an in-process model: instances).
        batch_api: the call goes through a Batch API (many rows per call).
        rows_per_request: rows packed into one request (embeddings); calls hold whole requests.
        prefix_window: rows that must be pending at once for prefix ordering (0: none).
        rows_per_call: an in-process model's batch size: one call per instance at a time.

    Example:
        >>> sizing(32, batch_api=True)
        Sizing(batch=50000, window=2)
    """
    if rows_per_call is not None:
        return Sizing(rows_per_call, max_concurrency)
    if batch_api:
        batch = BATCH_API_ROWS
    else:
        # Whole requests per call, and several of them, so calls in flight keep requests in flight.
        batch = rows_per_request * max(4, -(-ROWS_PER_CALL // rows_per_request))
    # Rows pending at once: twice the in-flight ceiling keeps it full; prefix ordering wants its window.
    pending = max(2 * max_concurrency, prefix_window)
    return Sizing(batch, max(2, -(-pending // batch) + 1))


@dataclasses.dataclass(frozen=True)
class ModelRef:
    """The model a call runs, resolved once from the provider registry (an HTTP provider or an in-process kind).

    Parameters:
        provider: the registered provider name ("openai", "local", "sentence_transformers", ...).
        model: the model's name (for an in-process model, as shown: the packaged default's name when none was given).
        spec: over HTTP, the resolved provider (URL, an opaque key handle, timeout); None in process.
        caps: what the provider declares.
        path: in process, the model's directory on this machine.
        runner: in process, the class that runs the model (built on each worker; an operator of this
            layer that embeds, such as the embedding head, gets it as ``embedder``: a class, pickled by reference).
        size: in process, the model's native vector size (None: not an embedding model or not known).
    """

    provider: str
    model: str | None
    spec: ProviderSpec | None = None
    caps: Capabilities = Capabilities()
    path: str | None = None
    runner: type | None = None
    size: int | None = None

    @property
    def in_process(self) -> bool:
        return self.spec is None


@dataclasses.dataclass(frozen=True)
class Instances:
    """Where an in-process model runs: at most ``max_concurrency`` instances, in processes, with ``gpus`` each."""

    max_concurrency: int | None = None
    use_process: bool = False
    gpus: float = 0.0


class AIOperatorFactory(Protocol):
    """What every AI operator class offers: built once per run (per worker) from its call's arguments.

    ``for_run(services, *args, **kwargs)`` gets the run's ``RunServices`` (None: local ones) and the
    call's ``args``/``kwargs``; a class without ``for_run`` is built as ``cls(*args, **kwargs)``.
    """

    @classmethod
    def for_run(cls, services: Any, *args: Any, **kwargs: Any) -> Any: ...


def build_operator(operator: type, services: Any, args: tuple, kwargs: dict) -> Any:
    """An operator for one run, through ``for_run`` where the class has it (see ``AIOperatorFactory``)."""
    for_run = getattr(operator, "for_run", None)
    return for_run(services, *args, **kwargs) if for_run is not None else operator(*args, **kwargs)


@dataclasses.dataclass(frozen=True, eq=False)
class AICall:
    """One AI function's call, resolved when the plan is built: what runs, on what, and how it is fed.

    Parameters:
        function: the function's name as messages and the plan show it ("prompt", "embed_text[transformers]").
        operator: the class built per run (``AIOperatorFactory``) from ``args`` and ``kwargs``.
        args / kwargs: its arguments; ``args[0]`` is the run-time config (a path for an in-process model).
        parts: the input expression nodes, in order.
        value_type: the Arrow type of the answer.
        sizing: rows per call and calls in flight (``sizing()``).
        model: the model, resolved from the registry (None: no model, e.g. a download).
        options: the parsed options (``parse_options``), where the function takes them.
        method: the operator's method called with each batch.
        is_async: the method is a coroutine (HTTP operators); in-process models are called on a thread.
        error_column / usage_column / confidence_column: the side columns the call adds.
        on_error: "null" or "raise".
        instances: where an in-process model runs.
        no_images: the model that reads no images: an image input is a PlanError ("": images may be sent).
        accepts: the input kinds an in-process model takes ("text", "binary"); () takes any.
        identity: what the run history's fingerprint covers for this call (beyond its config's own identity).
    """

    function: str
    operator: type
    args: tuple
    parts: tuple
    value_type: pa.DataType
    sizing: Sizing
    kwargs: tuple = ()
    model: ModelRef | None = None
    options: Any = None
    method: str = "__call__"
    is_async: bool = True
    error_column: bool = True
    usage_column: bool = False
    confidence_column: bool = False
    on_error: str = "null"
    instances: Instances = Instances()
    no_images: str = ""
    accepts: tuple = ()
    identity: tuple = ()

    @property
    def config(self) -> Any:
        """The run-time config (the operator's first argument)."""
        return self.args[0]

    @property
    def label(self) -> str:
        """How the progress line and the run history name this call."""
        label = getattr(self.config, "label", None) or dict(self.kwargs).get("label")
        return label or self.function

    def build(self, services: Any) -> Any:
        """This call's operator for one run (the run's services; None: local ones)."""
        return build_operator(self.operator, services, self.args, dict(self.kwargs))

    def priced(self) -> list:
        """The configs of the requests this call may pay for, each with its part template (None: the call's own parts).

        A prompt or an embedding over HTTP is one; a cascade names its language-model stages; an
        in-process model or a download none.
        """
        own = getattr(self.config, "priced", None)
        if callable(own):
            return own()
        return [(self.config, None)] if hasattr(self.config, "endpoint") else []

    @property
    def fingerprint(self) -> list:
        """What makes this call the same call in another run: its model, instructions, options and formats.

        An HTTP call's part is its config's endpoint, provider and URL, model, system message, options,
        return format and parts; other calls give their function, model and settings.
        """
        own = getattr(self.config, "identity", None)
        if callable(own):
            return own()
        m = self.model
        args = tuple(a for a in self.args if m is None or m.path is None or a != m.path)  # not this machine's path
        return [self.function, m and m.provider, m and m.model, repr(args), repr(self.kwargs), repr(self.identity)]

    @property
    def summary(self) -> dict | None:
        """The call as the run history lists it (label, provider, URL, model, endpoint, prompt version); None without a model."""
        own = getattr(self.config, "summary", None)
        if callable(own):
            return own()
        m = self.model
        if m is None:
            return None
        return {"label": self.label, "provider": m.provider, "base_url": None, "model": m.model, "endpoint": None,
                "prompt_version": None}
