"""Plain records passed between the executor, the runtime and providers."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

# Error kinds a provider may report, and what the runtime does with them.
RETRYABLE = frozenset({"rate_limit", "timeout", "server", "connection", "malformed"})
FATAL = frozenset({"auth", "quota", "unreachable"})  # stop the whole job: no row can succeed


@dataclasses.dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclasses.dataclass(frozen=True)
class Request:
    """One request for one row: which endpoint, the JSON body, and an up-front token estimate."""

    endpoint: str  # "chat", "responses" or "embeddings"
    body: dict
    est_tokens: int = 0


@dataclasses.dataclass
class Outcome:
    """What happened to one attempt, as a provider reports it.

    ``error_kind`` is None on success, else one of: rate_limit, timeout,
    server, connection, malformed, bad_request, not_found, auth, unreachable,
    length, refusal.
    """

    value: Any = None
    usage: Usage | None = None
    status: int | None = None
    error_kind: str | None = None
    message: str = ""
    retry_after: float | None = None
    headers: Mapping[str, str] | None = None
    raw: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None


@dataclasses.dataclass
class RowError:
    kind: str
    message: str
    status: int | None
    attempts: int
    raw: str | None = None  # what the model said, when it said something unusable (cut off, off-schema)

    def as_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message, "status": self.status, "attempts": self.attempts,
                "raw": self.raw}


@dataclasses.dataclass
class Result:
    value: Any = None
    error: RowError | None = None
    usage: Usage = dataclasses.field(default_factory=Usage)
    cost: float = 0.0
    attempts: int = 0
