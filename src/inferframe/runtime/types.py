"""Plain records of the runtime: one row's final result and its error.

The records a provider reports (Request, Outcome, Usage, LimitHints) come from the provider
interface and are re-exported here for the runtime's users.

Example:
    >>> RowError(ErrorKind.TIMEOUT, "no answer", None, 3).as_dict()["kind"]
    'timeout'
"""

from __future__ import annotations

import dataclasses
from typing import Any

from inferframe.errors import ErrorKind
from inferframe.providers.interface import LimitHints, Outcome, Request, Usage

__all__ = ["ErrorKind", "LimitHints", "Outcome", "Request", "Result", "RowError", "Usage"]


@dataclasses.dataclass
class RowError:
    """Why one row failed: its kind, a message, the HTTP status, the attempts, and an unusable answer."""

    kind: ErrorKind
    message: str
    status: int | None
    attempts: int
    raw: str | None = None  # what the model said, when it said something unusable (cut off, off-schema)

    def __post_init__(self) -> None:
        self.kind = ErrorKind(self.kind)

    def as_dict(self) -> dict:
        return {"kind": self.kind.value, "message": self.message, "status": self.status, "attempts": self.attempts,
                "raw": self.raw}


@dataclasses.dataclass
class Result:
    """One row's final answer: a value or an error, with what it used and cost."""

    value: Any = None
    error: RowError | None = None
    usage: Usage = dataclasses.field(default_factory=Usage)
    cost: float = 0.0
    attempts: int = 0
    finish_reason: str | None = None  # "length": cut at max_tokens (None for an error)

    @classmethod
    def cached(cls, hit: tuple) -> "Result":
        """The result of an answer the cache holds (value, input tokens, output tokens, finish reason).

        The usage counts what this run paid: a cached answer cost nothing now. ``finish_reason`` is
        the answer's own, as first answered (None for an entry stored before it was kept).

        Example:
            >>> r = Result.cached(("cut off", 12, 8, "length"))
            >>> r.value, r.finish_reason, r.usage.output_tokens, r.cost
            ('cut off', 'length', 0, 0.0)
        """
        return cls(value=hit[0], finish_reason=hit[3])
