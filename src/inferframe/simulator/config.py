"""Configuration of the OpenAI-compatible simulator (one dataclass, JSON round-trippable).

Every knob of the simulator lives in :class:`SimulatorConfig`.  A running
server can be reconfigured with ``POST /_sim/config`` (JSON object of field
changes) or ``Simulator.configure(**changes)``; both go through
:meth:`SimulatorConfig.updated`, which validates the result.

Example:
    >>> cfg = SimulatorConfig(rpm=600, latency_ms=20, p_500=0.01, seed=7)
    >>> cfg2 = cfg.updated(fail_rules=[{"match": "ROW7", "status": 400}])
    >>> SimulatorConfig.from_dict(cfg2.to_dict()) == cfg2
    True
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Optional, Union

__all__ = [
    "DEFAULT_MODELS",
    "FAULT_KINDS",
    "FailRule",
    "SimulatorConfig",
]

#: Models listed by ``GET /v1/models`` and accepted by the inference endpoints.
DEFAULT_MODELS: tuple[str, ...] = (
    "gpt-4o-mini",
    "gpt-4o",
    "gpt-4.1",
    "gpt-4.1-mini",
    "gpt-4.1-nano",
    "gpt-5",
    "gpt-5-mini",
    "gpt-5-nano",
    "o4-mini",
    "text-embedding-3-small",
    "text-embedding-3-large",
    "text-embedding-ada-002",
)

#: Kinds of injected fault (``FailRule.kind`` values and keys of the fault counters).
FAULT_KINDS: tuple[str, ...] = (
    "error",  # an HTTP error body with FailRule.status (random faults use 500/503 below)
    "server_error",  # random p_500
    "overloaded",  # random p_503
    "connection_reset",  # transport closed without any response
    "timeout",  # request hangs for timeout_hang_s
    "malformed",  # 200 with a body that is not valid JSON
    "refusal",  # assistant refusal instead of content
    "length",  # answer truncated, finish_reason='length' / status='incomplete'
)

_RULE_KINDS = ("error", "connection_reset", "timeout", "malformed", "refusal", "length")
_LATENCY_DISTS = ("constant", "uniform", "lognormal")
_TOKENIZERS = ("estimate", "tiktoken")
_SCOPES = ("model", "global")
_RATELIMIT_MODES = ("bucket", "window", "quantized")
_RATELIMIT_HEADERS = ("all", "no_reset", "none")
_PROBS = ("p_500", "p_503", "p_connection_reset", "p_timeout", "p_malformed", "p_refusal", "p_length")


@dataclass(frozen=True)
class FailRule:
    """Deterministic fault: requests whose prompt text contains ``match`` fail.

    Params:
        match: substring searched in the request's prompt text (all message text,
            instructions and embedding inputs).
        status: HTTP status of the error body when ``kind == 'error'``
            (400, 401, 404, 429, 500, 503, ...).
        kind: 'error' (default) or one of 'connection_reset', 'timeout',
            'malformed', 'refusal', 'length'.
        times: fail only the first ``times`` attempts of each distinct request
            body (retries of the same body then succeed); None = always.
        message / code: override the error message / code of the error body.

    Example:
        >>> FailRule(match="ROW7", status=400)  # row 7 always gets a 400
        FailRule(match='ROW7', status=400, kind='error', times=None, message=None, code=None)
        >>> FailRule(match="flaky", status=503, times=2).times  # the first 2 attempts fail
        2
    """

    match: str
    status: int = 500
    kind: str = "error"
    times: Optional[int] = None
    message: Optional[str] = None
    code: Optional[str] = None

    def __post_init__(self) -> None:
        if not isinstance(self.match, str) or not self.match:
            raise ValueError("FailRule.match must be a non-empty string")
        if self.kind not in _RULE_KINDS:
            raise ValueError(f"FailRule.kind must be one of {_RULE_KINDS}, got {self.kind!r}")
        if not isinstance(self.status, int) or not 100 <= self.status <= 599:
            raise ValueError(f"FailRule.status must be an HTTP status code, got {self.status!r}")
        if self.times is not None and (not isinstance(self.times, int) or self.times < 0):
            raise ValueError("FailRule.times must be None or an int >= 0")

    @classmethod
    def coerce(cls, value: Any) -> "FailRule":
        """Build a rule from a FailRule or a dict (as sent to ``POST /_sim/config``)."""
        if isinstance(value, FailRule):
            return value
        if isinstance(value, dict):
            unknown = set(value) - {f.name for f in fields(cls)}
            if unknown:
                raise ValueError(f"unknown FailRule field(s): {sorted(unknown)}")
            return cls(**value)
        raise ValueError(f"cannot make a FailRule from {value!r}")


@dataclass(frozen=True)
class SimulatorConfig:
    """All settings of the simulator; immutable, replace with :meth:`updated`.

    Auth and models:
        require_api_key: when set, requests without ``Authorization: Bearer <key>``
            (or with another key) get 401 ``invalid_api_key``.
        models: model ids served (``GET /v1/models``); a dated snapshot such as
            ``gpt-4o-mini-2024-07-18`` of a listed id is accepted too.
        allow_unknown_models: accept any model id instead of 404 ``model_not_found``.
        reject_unknown_params: 400 on request fields the real API does not know.
    Answers:
        responder: ``callable(request_json) -> str | dict | None`` or an import path
            ``"package.module:function"`` (needed for spawned processes).  None or
            a None result -> the default echo answer.
        answer_prefix / answer_max_chars: default answer is
            ``answer_prefix + last_user_text[:answer_max_chars]``.
        answer_min_chars: pad the default answer with filler words up to this size
            (benchmarks that want realistic output token counts).
        refusal_text: text of injected refusals.
        tokenizer: 'estimate' (``len(text)//4 + 1``) or 'tiktoken' (falls back to
            the estimate when the encoding files cannot be loaded offline).
    Latency (applied with asyncio.sleep, never blocks other requests):
        latency_dist: 'constant' | 'uniform' | 'lognormal'.
        latency_ms: constant latency, or the median of the lognormal.
        latency_lo_ms / latency_hi_ms: bounds of the uniform distribution.
        latency_sigma: sigma of the lognormal.
        latency_per_output_token_ms: extra time per generated token.
    Capacity (a self-hosted server: vLLM, llama.cpp, TGI, SGLang; see :mod:`.capacity`):
        capacity: requests served at once; the rest wait in a FIFO (their wait is in
            ``/_sim/stats``: ``queued``, ``queue_wait_s``, ``mean_queue_wait_s``). None = no bound.
        capacity_slowdown: a request served with n others takes its latency times
            ``1 + capacity_slowdown x n / capacity`` (a batch of decode steps is slower the more it holds).
    Prefix cache and prefill (chat and responses; see :mod:`.prefix_cache`):
        prefix_cache_tokens: capacity of a vLLM-style automatic prefix cache in
            tokens (LRU of hashed blocks); 0 = off.  Cached tokens are reported in
            ``usage.prompt_tokens_details.cached_tokens`` /
            ``usage.input_tokens_details.cached_tokens``.
        prefix_block_tokens: tokens per cache block (only full blocks are cached).
        prefill_tokens_per_second: throughput of ONE prefill engine that all
            requests queue for (FIFO); each pays its uncached prompt tokens at this
            rate, on top of the latency above.  None or 0 = no prefill cost.
    Rate limits (continuously refilled token buckets, like OpenAI):
        rpm / tpm: requests / tokens per minute; None = unlimited.
        ratelimit_burst_s: bucket capacity in seconds of refill (60 = a whole
            minute's quota may be used in a burst; 1 = OpenAI-like quantisation).
        ratelimit_scope: 'model' (one bucket per model, like OpenAI) or 'global'.
        ratelimit_mode: 'bucket' (continuous refill, as above) or 'window': a fixed
            window of ``ratelimit_window_s`` seconds that allows ``rpm``/``tpm`` per
            minute of it at once (a burst) and nothing more until it ends.
            'quantized': headers of a per-minute bucket (the whole minute seems free), enforced
            by a bucket of ``ratelimit_quantum_s`` seconds of the rate (OpenAI's "60,000
            requests/minute may be enforced as 1,000 requests/second").
        ratelimit_window_s: length of a window in 'window' mode (default a minute).
        ratelimit_quantum_s: seconds of the rate the enforcing bucket holds ('quantized').
        ratelimit_headers: 'all', 'no_reset' (no x-ratelimit-reset-*) or 'none' (no
            x-ratelimit-* headers; 429s still carry Retry-After).
    Faults (seeded and reproducible; drawn per request body and attempt number):
        seed: seed of every random draw (faults, latency, generated JSON).
        p_500, p_503, p_connection_reset, p_timeout, p_malformed, p_refusal,
            p_length: probability of each fault kind (sum <= 1).
        fault_endpoints: stats names of the endpoints the random faults apply to.
        timeout_hang_s: how long a 'timeout' fault hangs before closing.
        fail_rules: deterministic :class:`FailRule` list (dicts accepted).
    Observability:
        record_requests / record_max: keep the last ``record_max`` request bodies.
        track_request_hashes: count requests per body hash (duplicate detection;
            also makes retries of one body draw fresh faults reproducibly).

    Example:
        >>> cfg = SimulatorConfig(rpm=60, latency_dist="uniform", latency_lo_ms=5, latency_hi_ms=50)
        >>> cfg.rpm, cfg.latency_dist
        (60, 'uniform')
    """

    # auth and models
    require_api_key: Optional[str] = None
    models: tuple[str, ...] = DEFAULT_MODELS
    allow_unknown_models: bool = False
    reject_unknown_params: bool = True
    # answers
    responder: Union[Callable[[dict], Any], str, None] = None
    answer_prefix: str = "sim answer: "
    answer_max_chars: int = 200
    answer_min_chars: int = 0
    refusal_text: str = "I'm sorry, but I can't help with that request."
    tokenizer: str = "estimate"
    # latency
    latency_dist: str = "constant"
    latency_ms: float = 0.0
    latency_lo_ms: float = 0.0
    latency_hi_ms: float = 0.0
    latency_sigma: float = 0.5
    latency_per_output_token_ms: float = 0.0
    # capacity (self-hosted server)
    capacity: Optional[int] = None
    capacity_slowdown: float = 0.0
    # prefix cache and prefill
    prefix_cache_tokens: int = 0
    prefix_block_tokens: int = 16
    prefill_tokens_per_second: Optional[float] = None
    # rate limits
    rpm: Optional[int] = None
    tpm: Optional[int] = None
    ratelimit_burst_s: float = 60.0
    ratelimit_scope: str = "model"
    ratelimit_mode: str = "bucket"
    ratelimit_window_s: float = 60.0
    ratelimit_quantum_s: float = 1.0
    ratelimit_headers: str = "all"
    # faults
    seed: int = 0
    p_500: float = 0.0
    p_503: float = 0.0
    p_connection_reset: float = 0.0
    p_timeout: float = 0.0
    p_malformed: float = 0.0
    p_refusal: float = 0.0
    p_length: float = 0.0
    fault_endpoints: tuple[str, ...] = ("chat.completions", "responses", "embeddings")
    timeout_hang_s: float = 600.0
    fail_rules: tuple[FailRule, ...] = field(default_factory=tuple)
    # observability
    record_requests: bool = False
    record_max: int = 1000
    track_request_hashes: bool = True

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "models", tuple(self.models))
        set_(self, "fault_endpoints", tuple(self.fault_endpoints))
        set_(self, "fail_rules", tuple(FailRule.coerce(r) for r in self.fail_rules))
        for name in _PROBS:
            p = getattr(self, name)
            if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {p!r}")
        if sum(getattr(self, n) for n in _PROBS) > 1.0 + 1e-9:
            raise ValueError("the fault probabilities p_* must add up to at most 1")
        if self.latency_dist not in _LATENCY_DISTS:
            raise ValueError(f"latency_dist must be one of {_LATENCY_DISTS}")
        if self.tokenizer not in _TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {_TOKENIZERS}")
        if self.ratelimit_scope not in _SCOPES:
            raise ValueError(f"ratelimit_scope must be one of {_SCOPES}")
        for name in ("rpm", "tpm"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
                raise ValueError(f"{name} must be None or a positive int, got {v!r}")
        cap = self.capacity
        if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
            raise ValueError(f"capacity must be None or an int >= 1 (requests served at once), got {cap!r}")
        for name in ("latency_ms", "latency_lo_ms", "latency_hi_ms", "latency_sigma",
                     "latency_per_output_token_ms", "timeout_hang_s", "capacity_slowdown"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for name, least in (("prefix_cache_tokens", 0), ("prefix_block_tokens", 1)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < least:
                raise ValueError(f"{name} must be an int >= {least}, got {v!r}")
        tps = self.prefill_tokens_per_second
        if tps is not None and (not isinstance(tps, (int, float)) or isinstance(tps, bool) or tps < 0):
            raise ValueError(f"prefill_tokens_per_second must be None or a number >= 0, got {tps!r}")
        if self.latency_hi_ms < self.latency_lo_ms:
            raise ValueError("latency_hi_ms must be >= latency_lo_ms")
        if self.ratelimit_burst_s <= 0:
            raise ValueError("ratelimit_burst_s must be > 0")
        if self.ratelimit_mode not in _RATELIMIT_MODES:
            raise ValueError(f"ratelimit_mode must be one of {_RATELIMIT_MODES}")
        if self.ratelimit_window_s <= 0:
            raise ValueError("ratelimit_window_s must be > 0")
        if self.ratelimit_quantum_s <= 0:
            raise ValueError("ratelimit_quantum_s must be > 0")
        if self.ratelimit_headers not in _RATELIMIT_HEADERS:
            raise ValueError(f"ratelimit_headers must be one of {_RATELIMIT_HEADERS}")
        if self.record_max < 0 or self.answer_max_chars < 0 or self.answer_min_chars < 0:
            raise ValueError("record_max, answer_max_chars and answer_min_chars must be >= 0")
        if self.responder is not None and not (callable(self.responder) or isinstance(self.responder, str)):
            raise ValueError("responder must be a callable, an import path 'module:function' or None")

    # -- construction helpers ------------------------------------------------

    def updated(self, **changes: Any) -> "SimulatorConfig":
        """Return a validated copy with ``changes`` applied (unknown names -> ValueError).

        Example:
            >>> cfg = SimulatorConfig(rpm=600).updated(rpm=None, p_500=0.1)
            >>> cfg.rpm, cfg.p_500
            (None, 0.1)
        """
        names = {f.name for f in fields(self)}
        unknown = set(changes) - names
        if unknown:
            raise ValueError(f"unknown SimulatorConfig field(s): {sorted(unknown)}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SimulatorConfig":
        """Build a config from a JSON-style dict (lists become tuples; unknown keys rejected)."""
        return cls().updated(**(data or {}))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict of every field; a callable responder is shown as its qualified name.

        Use :meth:`to_json_dict` when the dict must rebuild the same config elsewhere.
        """
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "fail_rules":
                v = [dataclasses.asdict(r) for r in v]
            elif isinstance(v, tuple):
                v = list(v)
            elif f.name == "responder" and callable(v):
                v = f"<callable {getattr(v, '__module__', '?')}.{getattr(v, '__qualname__', repr(v))}>"
            out[f.name] = v
        return out

    def to_json_dict(self) -> dict[str, Any]:
        """Like :meth:`to_dict` but refuses a callable responder (it cannot cross a process)."""
        if callable(self.responder):
            raise ValueError(
                "a callable responder cannot be sent to another process; "
                "pass it as an import path 'package.module:function'"
            )
        return self.to_dict()

    @classmethod
    def cli_fields(cls) -> list[tuple[str, type, bool]]:
        """(name, scalar type, optional) of the fields settable from the command line."""
        hints = typing.get_type_hints(cls)
        out = []
        for f in fields(cls):
            tp = hints[f.name]
            optional = False
            args = typing.get_args(tp)
            if typing.get_origin(tp) is Union and type(None) in args:
                rest = [a for a in args if a is not type(None)]
                optional = True
                tp = rest[0] if len(rest) == 1 else None
            if tp in (int, float, str, bool):
                out.append((f.name, tp, optional))
        return out
