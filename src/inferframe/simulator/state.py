"""Shared runtime state of one simulator: config, derived helpers, limiter, counters, request log.

``SimState`` is what every route module receives.  It precomputes whatever
the hot path needs from the config (fault thresholds, latency model, token
counter, responder, auth header, model lookups) and rebuilds it on
:meth:`configure`.  Only use it from the server's event loop thread.

It also owns the prefix cache and the prefill engine; :meth:`SimState.prefill`
runs a prepared chat/responses request through them.

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
from .capacity import ServingSlots
from .config import FailRule, SimulatorConfig
from .errors import SimError, invalid_request, model_not_found
from .faults import FaultPicker, LatencyModel
from .jsonio import loads
from .prefill import PrefillEngine
from .prefix_cache import PrefixCache, prompt_blocks
from .prompts import prompt_parts
from .ratelimit import RateLimiter
from .stats import Stats
from .tokens import TokenCounter

__all__ = ["SimState"]

_SNAPSHOT_RE = re.compile(r"^(.*)-\d{4}-\d{2}-\d{2}$")
_MODEL_CREATED = 1_715_367_049


def _limiter(cfg: SimulatorConfig) -> Optional[RateLimiter]:
    if not (cfg.rpm or cfg.tpm):
        return None
    return RateLimiter(cfg.rpm, cfg.tpm, cfg.ratelimit_burst_s, cfg.ratelimit_mode, cfg.ratelimit_window_s,
                       cfg.ratelimit_quantum_s, cfg.ratelimit_headers)


def _serving(cfg: SimulatorConfig) -> Optional[ServingSlots]:
    return ServingSlots(cfg.capacity, cfg.capacity_slowdown) if cfg.capacity else None


def _prefix_cache(cfg: SimulatorConfig) -> Optional[PrefixCache]:
    return PrefixCache(cfg.prefix_cache_tokens, cfg.prefix_block_tokens) if cfg.prefix_cache_tokens else None


def _prefill_engine(cfg: SimulatorConfig) -> Optional[PrefillEngine]:
    return PrefillEngine(cfg.prefill_tokens_per_second) if cfg.prefill_tokens_per_second else None


class SimState:
    """Runtime state (see module docstring).

    Attributes used by routes: cfg, stats, limiter, faults, latency, counter,
    responder, responder_async, seed_key, auth_header, records, prefix_cache,
    prefill_engine.
    """

    def __init__(self, config: Optional[SimulatorConfig] = None) -> None:
        self.stats = Stats()
        self.records: deque = deque(maxlen=1000)
        self.limiter: Optional[RateLimiter] = None
        self.prefix_cache: Optional[PrefixCache] = None
        self.prefill_engine: Optional[PrefillEngine] = None
        self.serving: Optional[ServingSlots] = None  # the capacity's slots and FIFO (None: no bound)
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
                  cfg.ratelimit_window_s, cfg.ratelimit_quantum_s, cfg.ratelimit_headers)
        if old is None or limits != (old.rpm, old.tpm, old.ratelimit_burst_s, old.ratelimit_scope,
                                     old.ratelimit_mode, old.ratelimit_window_s, old.ratelimit_quantum_s,
                                     old.ratelimit_headers):
            self.limiter = _limiter(cfg)
        # rebuilt only when their own knobs change, so other changes keep what is cached
        if old is None or (cfg.prefix_cache_tokens, cfg.prefix_block_tokens) != (old.prefix_cache_tokens,
                                                                                  old.prefix_block_tokens):
            self.prefix_cache = _prefix_cache(cfg)
        if old is None or cfg.prefill_tokens_per_second != old.prefill_tokens_per_second:
            self.prefill_engine = _prefill_engine(cfg)
        if old is None or (cfg.capacity, cfg.capacity_slowdown) != (old.capacity, old.capacity_slowdown):
            self.serving = _serving(cfg)  # requests already waiting finish on the slots they queued for
        if self.records.maxlen != cfg.record_max:
            self.records = deque(self.records, maxlen=cfg.record_max)

    def configure(self, **changes: Any) -> SimulatorConfig:
        """Apply field changes (validated); returns the new config."""
        cfg = self.cfg.updated(**changes)
        self.apply(cfg)
        return cfg

    def reset(self) -> None:
        """Zero the counters, empty the request log and the prefix cache, refill the rate-limit buckets."""
        self.stats.reset()
        self.records.clear()
        self.limiter = _limiter(self.cfg)
        self.prefix_cache = _prefix_cache(self.cfg)
        self.prefill_engine = _prefill_engine(self.cfg)
        self.serving = _serving(self.cfg)

    def prefill(self, prep: Any, now: Optional[float]) -> float:
        """Serve a prepared request's prompt from the prefix cache and queue its prefill.

        Sets ``prep.cached_tokens``, counts the prompt in the stats and returns the
        seconds until its prefill is done (0 without an engine, or when ``now`` is
        None: batch requests, which keep their own pace).

        Params:
            prep: a ``pipeline.Prepared`` of a chat or responses request.
            now: ``time.monotonic()`` at arrival, or None.

        Example:
            >>> from inferframe.simulator.pipeline import Prepared
            >>> st = SimState(SimulatorConfig(prefix_cache_tokens=4096, prefill_tokens_per_second=1000))
            >>> body = {"model": "m", "messages": [{"role": "user", "content": "x" * 800}]}
            >>> p1, p2 = Prepared("m", body, "", "", 210), Prepared("m", body, "", "", 210)
            >>> round(st.prefill(p1, 0.0), 6), round(st.prefill(p2, 0.0), 6)  # p2 queues, then reuses p1
            (0.21, 0.228)
            >>> p1.cached_tokens, p2.cached_tokens
            (0, 192)
        """
        cached = 0
        cache = self.prefix_cache
        if cache is not None:
            blocks, n = prompt_blocks(prompt_parts(prep.body), self.counter, prep.model, cache.block_tokens)
            # prompt_tokens counts per-message overhead on top, so this min only guards odd inputs
            cached = min(cache.serve_blocks(blocks, n, prep.model), prep.prompt_tokens)
            prep.cached_tokens = cached
        self.stats.prefilled(prep.prompt_tokens, cached, prep.body.get("prompt_cache_key"))
        engine = self.prefill_engine
        if engine is None or now is None:
            return 0.0
        return engine.reserve(prep.prompt_tokens - cached, now)

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
        """Counters as a dict (see :class:`Stats`), with ``prefix_cache`` / ``prefill_busy_s`` when on."""
        out = self.stats.snapshot(include_hashes)
        if self.prefix_cache is not None:
            out["prefix_cache"] = self.prefix_cache.snapshot()
        if self.prefill_engine is not None:
            out["prefill_busy_s"] = round(self.prefill_engine.busy_s, 6)
        serving = self.serving
        if serving is not None:
            out.update(capacity=serving.capacity, served=serving.served, serving=serving.serving, waiting=serving.waiting,
                       queued=serving.queued, max_waiting=serving.max_waiting,
                       queue_wait_s=round(serving.queue_wait_s, 6),
                       mean_queue_wait_s=round(serving.queue_wait_s / max(1, serving.served), 6))
        return out
