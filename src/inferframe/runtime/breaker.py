"""Stop the whole job fast when the service, not a row, is the problem."""

from __future__ import annotations

import collections
from typing import Callable

from inferframe.errors import ErrorKind


class Breaker:
    """Trips on an auth failure, an unreachable server, every recent row failing, or a model refusing the input.

    Parameters:
        window: how many recent finished rows to look at.
        min_rows: rows needed before "every recent row failed" can trip.
        unreachable_after: connection failures, before any success, that mean the server is not there.
        unsupported_after: rows the model refused as input it cannot read (kind "unsupported",
            e.g. images for a text-only model): the rest of such rows would be refused too.
        unanswered_after: timeouts, before any answer, that mean the requests cannot be answered in
            time (a model that generates without end, a server far too slow for the timeout).
        first_rows: rows that failed the same retryable way, before any request succeeded, that mean
            the job would fail the same way on every row (a 5-row job trips too, not only after ``min_rows``).

    Example:
        >>> b = Breaker(unsupported_after=2)
        >>> b.row(False, "unsupported", "The model does not accept this input")
        >>> b.tripped
        False
        >>> b.row(False, "unsupported", "The model does not accept this input")
        >>> b.reason
        'The model refused 2 rows: The model does not accept this input'
    """

    def __init__(self, window: int = 50, min_rows: int = 20, unreachable_after: int = 3,
                 unsupported_after: int = 3, unanswered_after: int = 3, first_rows: int = 3) -> None:
        self.recent: collections.deque[bool] = collections.deque(maxlen=window)
        self.min_rows = min_rows
        self.unreachable_after = unreachable_after
        self.unsupported_after = unsupported_after
        self.unsupported = 0
        self.connection_failures = 0
        self.any_success = False
        self.unanswered_after = unanswered_after
        self.timeouts = 0
        self.first_rows = first_rows
        self.any_row_ok = False
        self.first_failures: list[str] = []  # the kinds of the rows that failed before any row succeeded
        self.reason: str | None = None
        # Called with the reason on the first trip that ``notify`` allows: a cluster coordinator tells the other workers.
        self.on_trip: Callable[[str], None] | None = None

    @property
    def tripped(self) -> bool:
        return self.reason is not None

    def attempt(self, kind: str | None, message: str, service: str) -> None:
        """Record one attempt; trip on a fatal kind or a server that never answered."""
        if kind is None:
            self.any_success = True
            self.connection_failures = 0
            return
        if ErrorKind(kind).fatal:
            self.trip(message)
        elif kind == ErrorKind.CONNECTION:
            self.connection_failures += 1
            if not self.any_success and self.connection_failures >= self.unreachable_after:
                self.trip(f"Cannot reach {service}: {message}. Is the server running and the base_url right?")
        elif kind == ErrorKind.TIMEOUT:
            self.timeouts += 1
            if not self.any_success and self.timeouts >= self.unanswered_after:
                self.trip(f"{self.timeouts} requests got no answer in time and none has been answered yet ({message}): "
                          "the model may be generating without end, or the server is too slow for these requests. "
                          "Set max_tokens=... to cap each answer, or a longer timeout=...")

    def row(self, ok: bool, kind: str | None, message: str) -> None:
        """Record a finished row; trip when every one of the recent rows failed the same way."""
        self.recent.append(ok)
        if ok:
            self.any_row_ok = True
        elif not (self.any_row_ok or self.any_success) and kind is not None and ErrorKind(kind).retryable:
            self.first_failures.append(str(kind))
            if len(self.first_failures) >= self.first_rows and len(set(self.first_failures)) == 1:
                self.trip(f"The first {len(self.first_failures)} rows all failed the same way ({kind}) and none "
                          f"succeeded: the service looks down, and every row would fail. Last error: {message}")
        if not ok and kind == ErrorKind.UNSUPPORTED:
            self.unsupported += 1
            if self.unsupported >= self.unsupported_after:
                self.trip(f"The model refused {self.unsupported} rows: {message}")
        if not ok and kind is not None and ErrorKind(kind).retryable:
            if len(self.recent) >= self.min_rows and not any(self.recent):
                self.trip(f"The last {len(self.recent)} rows all failed; the service looks down. Last error: {message}")

    def rows_ok(self, n: int) -> None:
        """Record ``n`` rows that finished well (answers from the cache: one call per batch)."""
        self.any_row_ok = self.any_row_ok or n > 0
        self.recent.extend([True] * min(n, self.recent.maxlen or n))

    def trip(self, reason: str, *, notify: bool = True) -> None:
        """Trip with ``reason`` (the first reason stays); ``on_trip`` hears of it unless ``notify`` is False.

        ``notify=False``: the trip came from elsewhere (another worker, told by a coordinator), so it
        is not reported back.

        Example:
            >>> b = Breaker(); seen = []
            >>> b.on_trip = seen.append
            >>> b.trip("HTTP 401: invalid key"); b.tripped, seen
            (True, ['HTTP 401: invalid key'])
            >>> b.trip("other", notify=False); b.reason, seen    # the first reason stays
            ('HTTP 401: invalid key', ['HTTP 401: invalid key'])
        """
        if self.reason is None:
            self.reason = reason
            if notify and self.on_trip is not None:
                self.on_trip(reason)
