"""Shared runtime state of one simulator: config, derived helpers, limiter, counters, request log.

``SimState`` is what every route module receives.  It precomputes whatever
the hot path needs from the config (fault thresholds, latency model, token
counter, responder, auth header, model lookups) and rebuilds it on
:meth:`configure`.  Only use it from the server's event loop thread.

Example:
    >>> st = SimState(SimulatorConfig(rpm=60))
    >>> st.configure(rpm=120, p_500=0.1).rpm
    120
    >>> st.stats_snapshot()["total_requests"]
    0
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from hashlib import blake2b
from typing import Any, Optional

from .answers import is_async, resolve_responder
from .config import FailRule, SimulatorConfig
from .errors import SimError, invalid_request, model_not_found
from .faults import FaultPicker, LatencyModel
from .jsonio import loads
from .ratelimit import RateLimiter
from .stats import Stats
from .tokens import TokenCounter

__all__ = ["SimState"]

_SNAPSHOT_RE = re.compile(r"^(.*)-\d{4}-\d{2}-\d{2}$")
_MODEL_CREATED = 1_715_367_049


def _limiter(cfg: SimulatorConfig) -> Optional[RateLimiter]:
    if not (cfg.rpm or cfg.tpm):
        return None
    return RateLimiter(cfg.rpm, cfg.tpm, cfg.ratelimit_burst_s, cfg.ratelimit_mode, cfg.ratelimit_window_s)


class SimState:
    """Runtime state (see module docstring).

    Attributes used by routes: cfg, stats, limiter, faults, latency, counter,
    responder, responder_async, seed_key, auth_header, records.
    """

    def __init__(self, config: Optional[SimulatorConfig] = None) -> None:
        self.stats = Stats()
        self.records: deque = deque(maxlen=1000)
        self.limiter: Optional[RateLimiter] = None
        self.endpoints: dict[str, Any] = {}  # path -> endpoint object, filled by inference_handler
        self._id_base = os.urandom(6).hex()
        self._id_n = 0
        self.initial_config = config or SimulatorConfig()
        self.apply(self.initial_config)

    # -- configuration ---------------------------------------------------------

    def apply(self, cfg: SimulatorConfig) -> None:
        """Install ``cfg`` and rebuild the derived helpers."""
        old = getattr(self, "cfg", None)
        responder = resolve_responder(cfg.responder)
        self.cfg = cfg
        self.responder = responder
        self.responder_async = responder is not None and is_async(responder)
        self.faults = FaultPicker(cfg)
        self.latency = LatencyModel(cfg)
        self.counter = TokenCounter(cfg.tokenizer)
        self.seed_key = blake2b(str(cfg.seed).encode(), digest_size=32).digest()
        self.auth_header = f"Bearer {cfg.require_api_key}" if cfg.require_api_key is not None else None
        self.rules: tuple[FailRule, ...] = cfg.fail_rules
        self._model_kind: dict[str, Optional[str]] = {}
        limits = (cfg.rpm, cfg.tpm, cfg.ratelimit_burst_s, cfg.ratelimit_scope, cfg.ratelimit_mode,
                  cfg.ratelimit_window_s)
        if old is None or limits != (old.rpm, old.tpm, old.ratelimit_burst_s, old.ratelimit_scope,
                                     old.ratelimit_mode, old.ratelimit_window_s):
            self.limiter = _limiter(cfg)
        if self.records.maxlen != cfg.record_max:
            self.records = deque(self.records, maxlen=cfg.record_max)

    def configure(self, **changes: Any) -> SimulatorConfig:
        """Apply field changes (validated); returns the new config."""
        cfg = self.cfg.updated(**changes)
        self.apply(cfg)
        return cfg

    def reset(self) -> None:
        """Zero the counters, empty the request log and refill the rate-limit buckets."""
        self.stats.reset()
        self.records.clear()
        self.limiter = _limiter(self.cfg)

    # -- helpers for routes ----------------------------------------------------

    def next_id(self, prefix: str) -> str:
        """Unique object id such as ``chatcmpl-<hex>``."""
        self._id_n += 1
        return f"{prefix}{self._id_base}{self._id_n:010x}"

    def model_kind(self, model: str) -> Optional[str]:
        """'embedding', 'text' or None (unknown model)."""
        kind = self._model_kind.get(model, "?")
        if kind != "?":
            return kind
        cfg = self.cfg
        base = model
        if model not in cfg.models:
            m = _SNAPSHOT_RE.match(model)
            base = m.group(1) if m and m.group(1) in cfg.models else None
        if base is None and cfg.allow_unknown_models:
            base = model
        kind = None if base is None else ("embedding" if "embedding" in base else "text")
        if len(self._model_kind) < 10_000:
            self._model_kind[model] = kind
        return kind

    def check_model(self, body: dict, want: str, endpoint_path: str) -> str:
        """Validate ``body['model']`` for an endpoint that serves ``want`` models; return it."""
        model = body.get("model")
        if model is None:
            raise invalid_request(
                "you must provide a model parameter", param=None, code=None
            )
        if not isinstance(model, str):
            raise invalid_request(
                f"Invalid type for 'model': expected a string, but got {type(model).__name__} instead.",
                param="model",
                code="invalid_type",
            )
        kind = self.model_kind(model)
        if kind is None:
            raise model_not_found(model)
        if kind != want:
            if want == "text":
                raise SimError(
                    404,
                    f"This is not a chat model and thus not supported in the {endpoint_path} endpoint.",
                    "invalid_request_error",
                    "model",
                    None,
                )
            raise invalid_request(
                f"The model `{model}` does not support embeddings.", param="model", code="unsupported_model"
            )
        return model

    def list_models(self) -> list[dict]:
        """``Model`` objects for ``GET /v1/models``."""
        return [
            {"id": m, "object": "model", "created": _MODEL_CREATED, "owned_by": "system"} for m in self.cfg.models
        ]

    def record(self, method: str, path: str, raw: bytes, h: bytes) -> None:
        """Append a request to the bounded log (when ``record_requests``)."""
        self.records.append((time.time(), method, path, raw, h))

    def recorded(self) -> list[dict]:
        """The request log as dicts: ts, method, path, hash, body (parsed JSON, or text if invalid)."""
        out = []
        for ts, method, path, raw, h in list(self.records):
            try:
                body: Any = loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            out.append({"ts": ts, "method": method, "path": path, "hash": h.hex(), "body": body})
        return out

    def stats_snapshot(self, include_hashes: bool = False) -> dict:
        """Counters as a dict (see :class:`Stats`)."""
        return self.stats.snapshot(include_hashes)
