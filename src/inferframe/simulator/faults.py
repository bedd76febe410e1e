"""Seeded, reproducible fault and latency draws.

Every random decision of a request comes from ``draws(seed, request_hash,
attempt)``: a keyed hash of the body hash and how many times that same body
was seen before.  Results therefore do not depend on how concurrent requests
interleave, and a retry of the same body gets a fresh (but reproducible) draw.

Classes:
    FaultPicker(config).pick(u) -> fault kind or None
    LatencyModel(config).sample(u) -> seconds

Example:
    >>> u_fault, u_lat = draws(b"seed", b"\\x01" * 16, 0)
    >>> FaultPicker(SimulatorConfig(p_500=1.0)).pick(u_fault)
    'server_error'
"""

from __future__ import annotations

import math
from hashlib import blake2b
from statistics import NormalDist
from typing import Optional

from .config import SimulatorConfig

__all__ = ["draws", "FaultPicker", "LatencyModel"]

_INV = 1.0 / 18446744073709551616.0  # 2**-64
_from = int.from_bytes


def draws(seed_key: bytes, request_hash: bytes, attempt: int) -> tuple[float, float]:
    """Two independent uniforms in [0, 1) for (seed, request body, attempt number)."""
    d = blake2b(request_hash + attempt.to_bytes(8, "little"), digest_size=16, key=seed_key).digest()
    return _from(d[:8], "little") * _INV, _from(d[8:], "little") * _INV


# (config field, fault kind) in the order their probability intervals are laid out.
_ORDER = (
    ("p_500", "server_error"),
    ("p_503", "overloaded"),
    ("p_connection_reset", "connection_reset"),
    ("p_timeout", "timeout"),
    ("p_malformed", "malformed"),
    ("p_refusal", "refusal"),
    ("p_length", "length"),
)


class FaultPicker:
    """Maps a uniform draw to a fault kind using the config's p_* probabilities.

    Attributes: active (any probability > 0), endpoints (stats names they apply to).
    """

    __slots__ = ("_cum", "active", "endpoints")

    def __init__(self, cfg: SimulatorConfig) -> None:
        acc = 0.0
        cum = []
        for name, kind in _ORDER:
            p = getattr(cfg, name)
            if p > 0:
                acc += p
                cum.append((acc, kind))
        self._cum = tuple(cum)
        self.active = bool(cum)
        self.endpoints = frozenset(cfg.fault_endpoints)

    def pick(self, u: float) -> Optional[str]:
        """Fault kind for draw ``u`` (None = no fault)."""
        for bound, kind in self._cum:
            if u < bound:
                return kind
        return None


_STD_NORMAL = NormalDist()


class LatencyModel:
    """Latency distribution from the config: constant, uniform(lo, hi) or lognormal(median, sigma).

    Attributes: zero (True when it always returns 0), per_token_s.
    """

    __slots__ = ("kind", "a", "b", "zero", "per_token_s")

    def __init__(self, cfg: SimulatorConfig) -> None:
        self.kind = cfg.latency_dist
        self.per_token_s = cfg.latency_per_output_token_ms / 1000.0
        if self.kind == "uniform":
            self.a, self.b = cfg.latency_lo_ms / 1000.0, cfg.latency_hi_ms / 1000.0
            base_zero = self.b == 0
        elif self.kind == "lognormal":
            self.a, self.b = cfg.latency_ms / 1000.0, cfg.latency_sigma
            base_zero = self.a == 0
        else:
            self.a, self.b = cfg.latency_ms / 1000.0, 0.0
            base_zero = self.a == 0
        self.zero = base_zero and self.per_token_s == 0

    def sample(self, u: float) -> float:
        """Latency in seconds for uniform draw ``u``."""
        if self.kind == "constant":
            return self.a
        if self.kind == "uniform":
            return self.a + (self.b - self.a) * u
        if self.a == 0:
            return 0.0
        u = min(max(u, 1e-12), 1 - 1e-12)
        return self.a * math.exp(self.b * _STD_NORMAL.inv_cdf(u))
