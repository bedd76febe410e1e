"""Requests-per-minute and tokens-per-minute budgets, set by the user or learned from the server's hints.

Hand-written because the limiter must be shared by every row of a job, honour
Retry-After for everyone, and correct itself from the server's limit hints; no
well-kept async library does all three. The hints come as neutral ``LimitHints``:
which headers carry them is the provider's business.

What keeps a job at the limit without 429s:

* The bucket is never larger than the server's. Servers differ in how much of a minute's
  budget they let through at once (hosted APIs about one second of it, a per-minute window
  all of it), and a burst beyond what the server holds comes back as a storm of 429s. Until
  the server tells, a bucket holds ``burst_seconds`` (one second) of its rate; a hint with the
  remaining budget and the time until it is whole again tells the server's size:
  ``remaining + reset * rate``, at most a minute's budget.
* Headers are hints, 429s are facts. A continuously refilled bucket that claims to hold more
  than ``burst_seconds`` may be quantized (OpenAI: "60,000 requests/minute may be enforced as
  1,000 requests/second"): its headers say 1,187 of 1,200 are left while it refuses the 21st
  request within a second. Only a fixed window (its reset is far longer than what was spent
  explains) is trusted with more than ``burst_seconds``, and only hints that fit the bucket
  modelled (a window's, or a remaining budget no larger than it) raise the level. A 429 the headers did not predict (budget left in them, or none sent) halves the
  burst (``contradicted``; once per ``SHRINK_GAP_S``, so one burst's 429s count once, never
  below ``MIN_BURST_SECONDS`` of the rate) and empties the bucket: the rate stays, so the
  requests go evenly spread instead of in bursts. The burst grows back slowly while no such
  429 comes (doubling in about ``REGROW_SECONDS * ln 2``), never past what the hints allow.
* A reserve: the client keeps the server's bucket ``RESERVE_SECONDS`` of rate above empty,
  so requests that arrive bunched together (network and event-loop jitter) still find budget;
  more for a large burst, whose first request reaches the server (and starts its refill) a
  while after the client started counting (``SEND_SECONDS`` per request of the burst). It
  costs no throughput: the pace is the same, only the level is lower.
* A hint is read against what was sent after it. A hint tells the server's budget when it
  admitted that request; everything this job sent since is taken off (``low``), and for a
  bucket what refilled since is added back (``high``). The client's level is kept between the
  two, less the reserve: never above what the server can have, and raised to what it surely
  has (so a per-minute window's burst is used).

Which 429s pause admission for everyone (``on_429``): only those that show the budget is spent.
A 429 whose hints say nothing is left (requests remaining below one, or tokens remaining below
what the request costs) is the limit itself: every other row would get one too, so all of them
wait for the Retry-After. So are ``STORM_429S`` of the last ``STORM_ANSWERS`` answers being 429s
within ``STORM_SECONDS`` (a server that sends no headers: once its budget is spent, nearly every
answer is a 429). Any other 429 (budget left in its headers, or no headers and few 429s around it)
is isolated: a proxy's or a replica's refusal, a per-key concurrency cap, a quantized limit, a
hiccup; pausing every row for it cost 80% of the throughput at 3% of such 429s (issue 15), so only
its own row waits for its Retry-After (the runtime's retry), the burst shrinks (see above: the rate
is kept), and the in-flight bound takes one cut (``AdaptiveLimit.on_rate_limited``).
"""

from __future__ import annotations

import asyncio
import copy
import collections
import dataclasses

from inferframe.providers.interface import LimitHints
from inferframe.runtime.clock import REAL, Clock
from inferframe.runtime.token_bucket import RESERVE_SECONDS, Bucket

# Seconds this process takes to put one request of a burst on the wire (event loop, new connections). The
# server's bucket starts refilling when the first request of a burst arrives, later than the client's:
# a burst of n requests needs n times this much more of the rate in reserve.
SEND_SECONDS = 0.002
# A 429 is part of a storm (a spent budget on a server that sends no headers) when at least STORM_429S of
# the last STORM_ANSWERS answers were 429s within STORM_SECONDS. Half of ten: a 3% share of isolated
# 429s gets there in about one window in 200,000, a spent budget within one round trip (its 429s come back at once).
STORM_429S = 5
STORM_ANSWERS = 10
STORM_SECONDS = 10.0
# A later job starts from an earlier one's limits when its last answer is at most this old: an
# account's limits change with its tier, rarely within minutes.
RECALL_SECONDS = 600.0


@dataclasses.dataclass
class Ticket:
    """One admitted request: how much had been sent when it was admitted (itself included), and when it went.

    The server's hint in its answer counts every request up to this one; what was sent after it
    is the difference between the counters then and now.
    """

    requests: float = 0.0
    tokens: float = 0.0
    sent_at: float = 0.0
    load: int | tuple | bool | None = None  # the in-flight bound it left under (``CapacityFinder.sent``)


class RefusalRule:
    """Which 429s show the rate budget spent (see the module docstring): the hints say nothing is left, or a storm.

    Kept per limiter (a process's, or a cluster worker's): it counts the answers so it can tell a
    storm of 429s from isolated ones.

    Example:
        >>> rule = RefusalRule()
        >>> rule.answered(); rule.judge(None, 20, now=0.0)                          # alone, no headers
        (False, False)
        >>> rule.answered(); rule.judge(LimitHints(requests_remaining=0), 20, now=0.1)
        (True, False)
    """

    def __init__(self) -> None:
        self.answers = 0  # answers so far: where each 429 stands among them
        self._recent_429s: collections.deque[tuple[int, float]] = collections.deque(maxlen=STORM_429S)

    def answered(self) -> None:
        """One answer came back (a 429 included: its ``judge`` follows)."""
        self.answers += 1

    def judge(self, hints: LimitHints | None, tokens: int, now: float) -> tuple[bool, bool]:
        """One 429 at ``now``: (its hints say the budget is spent, it is part of a storm of 429s)."""
        self._recent_429s.append((self.answers, now))
        spent = hints is not None and (
            (hints.requests_remaining is not None and hints.requests_remaining < 1)
            or (hints.tokens_remaining is not None and hints.tokens_remaining < max(1, tokens)))
        storm = len(self._recent_429s) >= STORM_429S and all(
            n > self.answers - STORM_ANSWERS and t >= now - STORM_SECONDS for n, t in self._recent_429s)
        return spent, storm

    def react(self, limiter, hints: LimitHints | None, retry_after: float, tokens: int) -> bool:
        """Apply the rule to ``limiter`` (its clock, ``pause``, ``contradicted``); True when it paused everyone.

        A 429 the hints did not predict shrinks the burst; a spent budget or a storm pauses admission.
        """
        spent, storm = self.judge(hints, tokens, limiter.clock.monotonic())
        if not spent:
            limiter.contradicted()
        if spent or storm:
            limiter.pause(retry_after)
            return True
        return False


class RateLimiter:
    """Admit requests within RPM/TPM budgets; a 429 that shows the budget spent pauses admission for everyone.

    Parameters:
        rpm: requests per minute (None: unlimited until headers say otherwise).
        tpm: tokens per minute (None: unlimited until headers say otherwise).
        burst_seconds: how many seconds of budget may be spent at once until the server's
            hints tell how much it holds.
        clock: where time comes from (a FakeClock in tests).

    Until the first response arrives, only one request is admitted when the user set no
    limits: the first answer's limit hints say what the limits are, so the job never
    opens with a burst the server refuses.

    Example:
        >>> lim = RateLimiter(rpm=1200)            # 20 a second, one second held at once, less the reserve
        >>> lim.requests.capacity, lim.requests_per_second()
        (19.0, 20.0)
        >>> lim.observe(LimitHints(requests_limit=1200, requests_remaining=1199, requests_reset=60.0))
        >>> lim.requests.capacity                   # a per-minute window: the whole minute at once, less the reserve
        1199.0
        >>> q = RateLimiter()                       # a bucket that claims the whole minute may be quantized
        >>> q.observe(LimitHints(requests_limit=1200, requests_remaining=1199, requests_reset=0.05))
        >>> q.requests.capacity                     # one second of it, less the reserve
        19.0
    """

    def __init__(self, rpm: float | None = None, tpm: float | None = None, burst_seconds: float = 1.0,
                 clock: Clock = REAL) -> None:
        self.clock = clock
        self.requests = Bucket(rpm, burst_seconds, clock)
        self.tokens = Bucket(tpm, burst_seconds, clock)
        self.user_set = (rpm is not None, tpm is not None)
        self.paused_until = 0.0
        self.refusals = RefusalRule()
        self.in_flight_requests = 0
        self.in_flight_tokens = 0.0
        self.mean_tokens: float | None = None  # tokens per request, to turn a TPM into requests per second
        self.answered_at: float | None = None  # when an answer last told something (``recall``)
        self._lock = asyncio.Lock()
        self._probe_done = asyncio.Event()
        # Set when the probe in flight is answered or lost: a new one replaces it for the next probe.
        self._probe_round = asyncio.Event()
        self._probing = False
        if rpm is not None or tpm is not None:
            self._probe_done.set()
        self._size_reserve()

    def _unlimited(self) -> bool:
        return self.requests.rate is None and self.tokens.rate is None

    def _size_reserve(self) -> None:
        """Both buckets keep the reserve a burst of the requests the server lets go at once needs."""
        burst = [b.size for b in (self.requests,) if b.rate]
        if self.tokens.rate and self.mean_tokens:
            burst.append(self.tokens.size / self.mean_tokens)
        seconds = max(RESERVE_SECONDS, SEND_SECONDS * min(burst)) if burst else RESERVE_SECONDS
        self.requests.reserve_seconds = self.tokens.reserve_seconds = seconds

    def requests_per_second(self) -> float | None:
        """Requests per second the known limits allow (None: no limit known)."""
        rates = []
        if self.requests.rate:
            rates.append(self.requests.rate / 60.0)
        if self.tokens.rate and self.mean_tokens:
            rates.append(self.tokens.rate / 60.0 / self.mean_tokens)
        return min(rates) if rates else None

    @property
    def probe_out(self) -> bool:
        """A probe request was admitted and its answer has not come back (every other request waits for it)."""
        return self._probing and not self._probe_done.is_set()

    def probe_lost(self) -> None:
        """The probe's answer will never come (its sender died): the next ``acquire`` sends a probe again."""
        if not self._probe_done.is_set():
            self._next_probe()

    def _next_probe(self) -> None:
        """The next row to ask becomes the probe; the rows waiting for the last one's answer ask again."""
        self._probing = False
        woken, self._probe_round = self._probe_round, asyncio.Event()
        woken.set()

    async def acquire(self, tokens: int) -> Ticket:
        """Wait until one request of ``tokens`` may go; the ticket goes back with its answer to ``release``."""
        while not self._probe_done.is_set():
            if not self._probing:
                self._probing = True  # this row is the probe; the others wait for its headers
                break
            await self._probe_round.wait()  # set when the probe is answered, refused or lost
        if self._unlimited() and self.clock.monotonic() >= self.paused_until:
            return self._admit(tokens)
        async with self._lock:  # FIFO admission keeps waiting rows in order and avoids stampedes
            while True:
                now = self.clock.monotonic()
                if now < self.paused_until:
                    await self.clock.sleep(self.paused_until - now)
                    continue
                self.requests.refill(now)
                self.tokens.refill(now)
                wait = max(self.requests.wait_for(1), self.tokens.wait_for(tokens))
                if wait <= 0:
                    return self._admit(tokens)
                await self.clock.sleep(max(0.001, min(wait, 1.0)))  # floor: float rounding must not spin

    def admit_now(self, tokens: int) -> Ticket | None:
        """A ticket at once, without waiting, when the budget has room and no row waits before this one; else None.

        The runtime's senders ask this first and ``acquire`` only when it says None: most requests of a
        job under its limits go with no coroutine and no lock.

        Example:
            >>> lim = RateLimiter(rpm=1200)
            >>> [lim.admit_now(1) is not None for _ in range(20)]   # 19 at once (the bucket less its reserve)
            [True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, False]
        """
        if not self._probe_done.is_set() or self._lock.locked():
            return None
        now = self.clock.monotonic()
        if now < self.paused_until:
            return None
        if not self._unlimited():
            self.requests.refill(now)
            self.tokens.refill(now)
            if self.requests.wait_for(1) > 0 or self.tokens.wait_for(tokens) > 0:
                return None
        return self._admit(tokens)

    def _admit(self, tokens: int) -> Ticket:
        self.requests.take(1)
        self.tokens.take(tokens)
        self.in_flight_requests += 1
        self.in_flight_tokens += tokens
        if self.mean_tokens is None:
            self.mean_tokens = tokens
            self._size_reserve()
        else:
            self.mean_tokens = 0.98 * self.mean_tokens + 0.02 * tokens
        return Ticket(self.requests.sent, self.tokens.sent, self.clock.monotonic())

    def release(self, tokens: int, hints: LimitHints | None, ticket: Ticket | None = None,
                refused: bool = False) -> None:
        """A request admitted with ``tokens`` got its answer (or failed): learn from its limit hints.

        ``refused``: the answer refused the request itself (an unknown model, an invalid option) and the job
        stops when the first rows are refused the same way. Then the probe is not done: the next row probes
        again, one request at a time, so a job every row of which would be refused sends a few requests,
        not a whole in-flight bound of them, before it stops.

        Example:
            >>> lim = RateLimiter()
            >>> async def first_two():
            ...     await lim.acquire(1)                    # the probe
            ...     lim.release(1, None, refused=True)      # refused: still probing, one at a time
            ...     probing_again = lim.probe_out
            ...     await lim.acquire(1)
            ...     return probing_again, lim.probe_out
            >>> asyncio.run(first_two())
            (False, True)
        """
        self.refusals.answered()
        self.in_flight_requests -= 1
        self.in_flight_tokens -= tokens
        self.heard()
        self.observe(hints, ticket)
        if not self._probe_done.is_set():
            if refused:
                self._next_probe()
            else:
                self._probe_done.set()
                self._probe_round.set()

    def heard(self) -> None:
        """An answer came (this limiter's own, or a cluster's worker's, reported to its coordinator): what this one
        knows of the server is that fresh, for ``recall``."""
        self.answered_at = self.clock.monotonic()

    def recall(self, earlier: "RateLimiter", max_age: float = RECALL_SECONDS) -> bool:
        """Start from what an earlier limiter of the same server, model and key learned; True when it did.

        A job that knows nothing sends one request and waits for its limit hints (one round trip:
        a second or more of a model's latency) before any other; a later job of this process
        starts from the earlier one's buckets instead, their levels refilled since, its shrunk
        bursts and any pause it was in. Only an earlier limiter that had its answer ``max_age``
        seconds ago at most, and only where the user set no limit (theirs are known already).

        Example:
            >>> old = RateLimiter(); old.release(1, LimitHints(requests_limit=600, requests_remaining=599))
            >>> new = RateLimiter(); new.recall(old), new.requests_per_second(), new.probe_out
            (True, 10.0, False)
        """
        if any(self.user_set) or earlier.answered_at is None or earlier.clock is not self.clock:
            return False
        if self.clock.monotonic() - earlier.answered_at > max_age:
            return False
        self.requests, self.tokens = copy.copy(earlier.requests), copy.copy(earlier.tokens)
        self.mean_tokens = earlier.mean_tokens
        self.paused_until = earlier.paused_until
        self.answered_at = earlier.answered_at  # what it knows is as old as the earlier one's answer, no newer
        self._size_reserve()
        self._probe_done.set()
        self._probe_round.set()
        return True

    def on_429(self, hints: LimitHints | None, retry_after: float, tokens: int = 0) -> bool:
        """A 429 came back (after its ``release``): pause admission for everyone when it shows the budget is spent.

        True when it paused (see the module's docstring for which 429s do); False for an isolated
        429, whose row alone waits for ``retry_after``. ``tokens``: what the refused request costs.

        Example:
            >>> from inferframe.runtime.clock import FakeClock
            >>> lim = RateLimiter(clock=FakeClock())
            >>> lim.release(20, None); lim.on_429(None, 1.0, 20)                 # alone, no headers
            False
            >>> lim.release(20, None); lim.on_429(LimitHints(requests_remaining=0), 1.0, 20), lim.paused_until
            (True, 1.0)
        """
        return self.refusals.react(self, hints, retry_after, tokens)

    def adopt(self, rpm: float | None, tpm: float | None, mean_tokens: float | None) -> None:
        """Take limits another limiter knows (a cluster's coordinator): the rates and tokens per request.

        For a limiter that mirrors what is known, not one that admits: the buckets' levels are left.

        Example:
            >>> mirror = RateLimiter()
            >>> mirror.adopt(1200, 60000, 100.0); mirror.requests_per_second(), mirror.tokens.rate
            (10.0, 60000)
        """
        self.requests.rate, self.tokens.rate, self.mean_tokens = rpm, tpm, mean_tokens

    def contradicted(self) -> None:
        """A 429 its hints did not predict (budget left in them, or none sent): smaller bursts, same rate.

        Example:
            >>> from inferframe.runtime.clock import FakeClock
            >>> lim = RateLimiter(rpm=1200, clock=FakeClock())
            >>> lim.requests.capacity
            19.0
            >>> lim.contradicted(); lim.requests.capacity, lim.requests.level, lim.requests_per_second()
            (9.0, 0.0, 20.0)
        """
        now = self.clock.monotonic()
        self.requests.contradicted(now)
        self.tokens.contradicted(now)
        self._size_reserve()

    def pause(self, seconds: float) -> None:
        """A spent budget: stop admitting for ``seconds``, and restart from an empty bucket, not a stampede."""
        self.paused_until = max(self.paused_until, self.clock.monotonic() + seconds)
        for bucket in (self.requests, self.tokens):
            if bucket.rate is not None:
                bucket.level = min(bucket.level, 0.0)

    def correct(self, estimated: int, actual: int) -> None:
        """Charge usage beyond the estimate.

        Never refund: servers charge the estimate (prompt + max_tokens) when a request
        arrives, as OpenAI does, so a refund would make us believe in budget they don't have.
        """
        if actual > estimated and self.tokens.rate is not None:
            self.tokens.level -= actual - estimated

    def observe(self, hints: LimitHints | None, ticket: Ticket | None = None) -> None:
        """Learn limits from the server's hints, and never believe we have more than the server says.

        Without the request's ticket, everything still in flight counts as sent after it.
        """
        if hints is None:
            return
        now = self.clock.monotonic()
        if ticket is None:  # unknown: assume every request in flight went after it, and nothing refilled
            ticket = Ticket(self.requests.sent - max(0, self.in_flight_requests),
                            self.tokens.sent - max(0.0, self.in_flight_tokens), now)
        self.requests.observe(hints.requests_limit, hints.requests_remaining, hints.requests_reset, self.user_set[0],
                              ticket.requests, ticket.sent_at, now)
        self.tokens.observe(hints.tokens_limit, hints.tokens_remaining, hints.tokens_reset, self.user_set[1],
                            ticket.tokens, ticket.sent_at, now)
        self._size_reserve()
