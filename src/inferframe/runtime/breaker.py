"""Stop the whole job fast when the service, not a row, is the problem."""

from __future__ import annotations

import collections
from types import MappingProxyType
from typing import Callable

from inferframe.errors import ErrorKind


# A 4xx answer refuses the request itself, so the same request is refused again; 408, 409 and 429 say
# the server is busy or slow, not that the request is wrong.
_NOT_REFUSALS = frozenset({408, 409, 429})
# What to change when every row is refused the same way, by kind (the server's message says the rest).
_FIX = MappingProxyType({
    ErrorKind.NOT_FOUND: "Check the model name (and the base_url): the server does not know it, or this key may "
                         "not use it.",
    ErrorKind.AUTH: "Check the API key and that it may use this model.",
})
_FIX_OTHER = "Change the option or model the message names: every request of this job carries it."


def refused(kind: str | None, status: int | None) -> bool:
    """Whether a failed row's answer refuses the request itself (a 4xx other than 408/409/429), so that it recurs.

    Example:
        >>> refused("not_found", 404), refused("bad_request", 400), refused("rate_limit", 429), refused("server", 500)
        (True, True, False, False)
        >>> refused("bad_request", None), refused("schema", None)
        (True, False)
    """
    if kind is None or kind == ErrorKind.UNSUPPORTED:  # unsupported input has its own count (``unsupported_after``)
        return False
    if status is not None:
        return 400 <= status < 500 and status not in _NOT_REFUSALS
    return kind in (ErrorKind.BAD_REQUEST, ErrorKind.NOT_FOUND, ErrorKind.AUTH)


class Breaker:
    """Trips on an auth failure, an unreachable server, every recent row failing, a model refusing the input,
    or the same refusal of the request on the first rows.

    A refusal of the request (a 4xx other than 408/409/429: an unknown model, an invalid parameter)
    recurs on every row when it says the same thing each time: ``first_rows`` identical ones in a row
    before any success, or ``min_rows`` identical ones in a row after one, trip the breaker. Refusals
    whose messages differ (one row's input too long) are the rows' own: they never trip it.

    Parameters:
        window: how many recent finished rows to look at.
        min_rows: rows needed before "every recent row failed" can trip.
        unreachable_after: connection failures, before any success, that mean the server is not there.
        unsupported_after: rows the model refused as input it cannot read (kind "unsupported",
            e.g. images for a text-only model): the rest of such rows would be refused too.
        unanswered_after: timeouts, before any answer, that mean the requests cannot be answered in
            time (a model that generates without end, a server far too slow for the timeout).
        first_rows: rows that failed the same retryable way, before any request succeeded, that mean
            the job would fail the same way on every row (a 5-row job trips too, not only after ``min_rows``);
            also the identical refusals, before any success, that mean every row would be refused.

    Example:
        >>> b = Breaker(unsupported_after=2)
        >>> b.row(False, "unsupported", "The model does not accept this input")
        >>> b.tripped
        False
        >>> b.row(False, "unsupported", "The model does not accept this input")
        >>> b.reason
        'The model refused 2 rows: The model does not accept this input'
        >>> b = Breaker()
        >>> for _ in range(3):
        ...     b.row(False, "not_found", "HTTP 404: The model `x` does not exist", status=404)
        >>> b.reason.split(":")[0]
        'The first 3 rows were refused with the same error, and every row would be'
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
        # The refusal the latest rows got, and how many rows in a row got it (``refused``).
        self.same_refusal: tuple[str, str] | None = None
        self.same_refusals = 0
        self.reason: str | None = None
        # Called with the reason on the first trip that ``notify`` allows: a cluster coordinator tells the other workers.
        self.on_trip: Callable[[str], None] | None = None

    @property
    def tripped(self) -> bool:
        return self.reason is not None

    def attempt(self, kind: str | None, message: str, service: str, max_tokens: int | None = None) -> None:
        """Record one attempt; trip on a fatal kind or a server that never answered.

        ``max_tokens``: the attempt's answer cap as the call set it (None: none set), for the advice on timeouts.
        """
        if kind is None:
            self.any_success = True
            self.connection_failures = 0
            return
        if ErrorKind(kind).fatal:
            self.trip(message)
        elif kind == ErrorKind.CONNECTION:
            self.connection_failures += 1
            if not self.any_success and self.connection_failures >= self.unreachable_after:
                # The transport's message names the address and the fix where it knows that nothing listens there.
                advice = "" if "base_url" in message else ". Is the server running and the base_url right?"
                self.trip(f"Cannot reach {service}: {message}{advice}")
        elif kind == ErrorKind.TIMEOUT:
            self.timeouts += 1
            if not self.any_success and self.timeouts >= self.unanswered_after:
                self.trip(f"{self.timeouts} requests got no answer in time and none has been answered yet ({message}): "
                          "the model may be generating without end, or the server is too slow for these requests. "
                          + _timeout_advice(max_tokens))

    def row(self, ok: bool, kind: str | None, message: str, status: int | None = None, recurring: bool = True) -> None:
        """Record a finished row; trip when every one of the recent rows failed the same way.

        ``status``: the HTTP status of a failed row's answer (None: none). ``recurring=False``: a refusal of
        this row does not count towards the same refusal on every row (``on_error="null"`` given).
        """
        self.recent.append(ok)
        if not ok and recurring and refused(kind, status):
            self._refusal(str(kind), message)
        else:
            self.same_refusals = 0  # a success, or another failure, in between: not the same refusal every time
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

    def _refusal(self, kind: str, message: str) -> None:
        """Count a refusal of the request; trip when the latest rows all got this very one."""
        said = (kind, message)
        self.same_refusals = self.same_refusals + 1 if said == self.same_refusal else 1
        self.same_refusal = said
        first = not (self.any_row_ok or self.any_success)
        if self.same_refusals < (self.first_rows if first else self.min_rows):
            return
        rows = f"The first {self.same_refusals} rows were" if first else f"The last {self.same_refusals} rows were all"
        stop = "" if message.endswith((".", "!", "?")) else "."
        self.trip(f"{rows} refused with the same error, and every row would be: {message}{stop} "
                  f"{_FIX.get(ErrorKind(kind), _FIX_OTHER)} (on_error='null' keeps such failures as data and "
                  "goes on instead.)")

    def rows_ok(self, n: int) -> None:
        """Record ``n`` rows that finished well (answers from the cache: one call per batch)."""
        self.any_row_ok = self.any_row_ok or n > 0
        if n > 0:
            self.same_refusals = 0
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


def _timeout_advice(max_tokens: int | None) -> str:
    """What to change when nothing is answered in time, given the answer cap the call set.

    Example:
        >>> _timeout_advice(None)
        'Set max_tokens=... to cap each answer, or a longer timeout=...'
        >>> _timeout_advice(4000)
        'Each answer may run to max_tokens=4000 tokens: lower max_tokens, or set a longer timeout=...'
    """
    if max_tokens is None:
        return "Set max_tokens=... to cap each answer, or a longer timeout=..."
    return f"Each answer may run to max_tokens={max_tokens} tokens: lower max_tokens, or set a longer timeout=..."
