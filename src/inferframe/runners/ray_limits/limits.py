"""The worker side of the cluster's limits: the runtime's protocols (admission, in-flight bound, breaker) over leases."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import uuid

from inferframe.errors import ServiceError
from inferframe.providers.interface import LimitHints
from inferframe.runners.ray_limits.transport import ActorLink
from inferframe.runners.ray_limits.tuning import CHUNK_SECONDS, IDLE_GRACE_S, IDLE_S
from inferframe.runtime.breaker import Breaker
from inferframe.runtime.clock import REAL, Clock
from inferframe.runtime.concurrency import AdaptiveLimit
from inferframe.runtime.config import RuntimeConfig
from inferframe.runtime.ratelimit import RateLimiter, RefusalRule, Ticket


def shared_slots(config: RuntimeConfig, clock: Clock = REAL) -> AdaptiveLimit:
    """An AdaptiveLimit for a worker whose ceiling will be its share of the cluster's ``max_concurrency``.

    It starts with a ceiling of one until the coordinator tells the share (the first lease comes
    before the first request); ``LeasedLimiter`` sets each share with ``AdaptiveLimit.set_ceiling``.

    Parameters:
        config: the call's RuntimeConfig (adaptive or fixed).
        clock: where time comes from.

    Example:
        >>> slots = shared_slots(RuntimeConfig(max_concurrency=100))
        >>> slots.maximum, int(slots.limit)
        (1, 1)
    """
    slots = AdaptiveLimit(1, 1, adaptive=config.adaptive, clock=clock, base=1)
    slots.follow()  # the coordinator's one capacity finder leads it (ray_limits.cluster_capacity)
    return slots


def shared_breaker() -> Breaker:
    """A Breaker for a worker: ``LeasedLimiter`` sets its ``on_trip`` so a trip goes to the coordinator at once."""
    return Breaker()


# The names the worker-side pieces had when they were subclasses (tests and benchmarks import them).
SharedSlots = shared_slots
SharedBreaker = shared_breaker


@dataclasses.dataclass
class _Report:
    """What a worker learned since its last call; sent batched with the next lease call."""

    hint: tuple | None = None  # (hint values, ticket requests, ticket tokens, sent_at)
    extra_tokens: int = 0
    pause_until: float = 0.0  # this process's monotonic time
    tripped: str | None = None
    probe_done: bool = False
    ack: bool = False  # a smaller in-flight share was applied: the actor may hand the rest to others
    contradicted: int = 0  # 429s the headers did not predict: the cluster's burst shrinks
    answers: bool = False  # answers for the cluster's capacity finder wait (sent at most once per CHUNK_SECONDS)
    idle: bool = False  # nothing in flight and nothing asked for IDLE_GRACE_S: this worker's share is free
    answered: bool = False  # an answer came: the cluster's knowledge of the server is that fresh (not urgent)

    def urgent(self) -> bool:
        return bool(self.pause_until or self.tripped or self.probe_done or self.ack or self.contradicted
                    or self.answers or self.idle)

    def take(self, now: float) -> dict:
        out = {}
        if self.hint is not None:
            values, requests, tokens, sent_at = self.hint
            out["hints"] = (values, requests, tokens, max(0.0, now - sent_at))
        if self.extra_tokens:
            out["extra_tokens"] = self.extra_tokens
        if self.pause_until > now:
            out["pause_s"] = self.pause_until - now
        if self.tripped:
            out["tripped"] = self.tripped
        if self.probe_done:
            out["probe_done"] = True
        if self.contradicted:
            out["contradicted"] = self.contradicted
        if self.idle:
            out["idle"] = True
        if self.answered:
            out["answered"] = True
        self.hint, self.extra_tokens, self.pause_until, self.tripped, self.probe_done = None, 0, 0.0, None, False
        self.contradicted = 0
        self.ack = self.answers = self.idle = self.answered = False
        return out


class LeasedLimiter:
    """The admission protocol (``runtime.coordinator.Admission``) over leases of the cluster's budget.

    ``acquire`` spends the local lease and asks the coordinator for the next chunk when half of it is
    left (ask-ahead, so a busy worker rarely waits); it never blocks the event loop (actor calls are
    awaited). ``release``'s hints and ``correct``'s extra tokens go with the next lease call;
    ``pause`` and a trip of the breaker go at once. ``requests_per_second`` is the cluster's rate
    (the in-flight bound is capped by this worker's share, see shared_slots). Built by
    ``RayCoordinator.limits``; one per key in each worker process, used on one event loop.

    Parameters:
        link: the connection to the coordinator actor.
        key: the endpoint+model key.
        config: the call's RuntimeConfig (rpm, tpm and max_concurrency go to the actor).
        slots: this worker's in-flight bound (its ceiling is set from every reply).
        breaker: this worker's breaker.
        account: the API key's fingerprint (``secrets.fingerprint``): limits learned are the key's.

    Example (needs a running Ray cluster):
        >>> lim = start_coordinator().limits("openai:https://x/v1|gpt-5", RuntimeConfig(rpm=600)).limiter  # doctest: +SKIP
        >>> ticket = await lim.acquire(20); lim.release(20, None, ticket)  # doctest: +SKIP
    """

    def __init__(self, link: ActorLink | None, key: str, config: RuntimeConfig, slots: AdaptiveLimit,
                 breaker: Breaker, account: str = "") -> None:
        self.clock: Clock = REAL
        # What the cluster knows of the limits (from every reply): the rates, and what a request costs.
        self.known = RateLimiter(config.rpm, config.tpm)
        self.refusals = RefusalRule()  # the local rule for which 429s pause, decided in this worker
        self.paused_until = 0.0
        self.in_flight_requests = 0
        self.in_flight_tokens = 0.0
        self._lock = asyncio.Lock()
        self.link, self.key, self.slots, self.breaker = link, key, slots, breaker
        self.config = {"rpm": config.rpm, "tpm": config.tpm, "max_concurrency": config.max_concurrency,
                       "adaptive": config.adaptive, "base": config.concurrency_base,
                       "account": account}  # the key's fingerprint: a later job starts from what this one learned
        self.slot_base = config.concurrency_base  # the configured bound, applied within each share
        self.slot_initial = config.initial_concurrency or self.slot_base
        self.worker = uuid.uuid4().hex[:16]
        self.left_requests = 0
        self.left_tokens = 0.0
        self.chunk = 1
        self.share = 0  # the in-flight share last told (0: none yet)
        self.unlimited_until = 0.0
        self.retry_at = 0.0
        self.calls = 0  # calls to the actor (for benchmarks)
        self.received = 0  # requests granted to this worker in all
        self._next = (0.0, 0.0)  # the cluster's counters at the next request of the lease (for hints)
        self._probe_next = False
        self._probe_ticket: Ticket | None = None
        self._pending = _Report()
        self._lease_task: asyncio.Task | None = None
        self._report_task: asyncio.Task | None = None
        self._beat_task: asyncio.Task | None = None
        self._idle_task: asyncio.Task | None = None
        self._active_at = 0.0  # when a request was last admitted or answered here (the idle check's "nothing since")
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop its rows run on (``task_ended`` comes from another)
        self._error: BaseException | None = None
        self._last_call = 0.0
        self._draining = False  # in flight above a share that shrank
        breaker.on_trip = self._tripped

    # --- the admission protocol ---------------------------------------------------------------------
    @property
    def requests(self):
        """The cluster's requests-per-minute as known here (``.rate``)."""
        return self.known.requests

    @property
    def tokens(self):
        """The cluster's tokens-per-minute as known here (``.rate``)."""
        return self.known.tokens

    @property
    def mean_tokens(self) -> float | None:
        return self.known.mean_tokens

    def requests_per_second(self) -> float | None:
        """Requests per second the cluster's known limits allow (None: none known)."""
        return self.known.requests_per_second()

    def on_429(self, hints: LimitHints | None, retry_after: float, tokens: int = 0) -> bool:
        """A 429 came back: ``RateLimiter.on_429``'s rule, decided here; a pause and a contradiction go to the cluster."""
        return self.refusals.react(self, hints, retry_after, tokens)

    async def acquire(self, tokens: int) -> Ticket:
        """Wait until one request of ``tokens`` may go (a lease covers it); FIFO among this worker's rows.

        With the breaker tripped it returns at once (no budget spent): the runtime stops at its check.
        """
        self._loop = asyncio.get_running_loop()
        async with self._lock:
            while True:
                self._raise_error()
                now = self.clock.monotonic()
                if self.breaker.tripped:
                    return Ticket(sent_at=now)
                if now < self.paused_until:
                    await self.clock.sleep(self.paused_until - now)
                    continue
                if now < self.unlimited_until:
                    if self._lease_task is None and self.unlimited_until - now < CHUNK_SECONDS / 2:
                        self._start_lease(tokens)  # renew ahead
                    return self._admit_local(tokens, now, count=False)
                if self.left_requests >= 1 and self.left_tokens >= tokens:
                    ticket = self._admit_local(tokens, now)
                    if self._lease_task is None and self.left_requests <= self.chunk // 2:
                        self._start_lease(tokens)  # ask ahead: the next chunk comes while this one is spent
                    return ticket
                if now < self.retry_at:
                    await self.clock.sleep(self.retry_at - now)
                    continue
                if self._lease_task is None:
                    self._start_lease(tokens)
                await asyncio.shield(self._lease_task)

    def release(self, tokens: int, hints: LimitHints | None, ticket: Ticket | None = None,
                refused: bool = False) -> None:
        """A request got its answer (or failed): its hints go with the next lease call.

        ``refused`` is not used here: the cluster's probe is the coordinator's, and the breaker it shares
        stops every worker after the first identical refusals.
        """
        self.refusals.answered()  # this worker's answers: on_429 tells a storm of 429s from isolated ones by them
        self.in_flight_requests -= 1
        self.in_flight_tokens -= tokens
        self._active_at = self.clock.monotonic()
        self._pending.answered = True
        if self.in_flight_requests <= 0 and self._idle_task is None and self.share > 0:
            self._idle_task = asyncio.ensure_future(self._leave_when_idle())
        self.observe(hints, ticket)
        if self.slots.observed and self.clock.monotonic() - self._last_call >= CHUNK_SECONDS:
            # The capacity finder needs the answers as they come, and leases stop once every row was admitted
            # (rows are admitted before they wait for a place): a report of its own, once per chunk's time at most.
            self._pending.answers = True
            self._urgent()
        if self._draining and self.slots.in_flight <= max(1, self.share):
            self._draining = False
            self._pending.ack = True  # drained to the smaller share: the rest is free for other workers
            self._urgent()
        if ticket is not None and ticket is self._probe_ticket:
            self._probe_ticket = None
            self._pending.probe_done = True  # the cluster waits for this answer: send it now
            self._urgent()

    def observe(self, hints: LimitHints | None, ticket: Ticket | None = None) -> None:
        """Keep the newest hints (by the cluster's count at admission) for the next lease call."""
        if hints is None:
            return
        if ticket is None:
            ticket = Ticket(self._next[0], self._next[1], self.clock.monotonic())
        old = self._pending.hint
        if old is None or ticket.requests >= old[1]:
            self._pending.hint = (dataclasses.astuple(hints), ticket.requests, ticket.tokens, ticket.sent_at)

    def pause(self, seconds: float) -> None:
        """A spent budget (``on_429``): stop admitting here now, drop the lease, and tell the coordinator at once.

        The coordinator pauses every worker. Isolated 429s never get here: the local rule
        (``RefusalRule``, as in ``RateLimiter.on_429``) decides in the worker that got the 429, so a 429 with
        budget left retries only its row in every process, as in one.
        """
        until = self.clock.monotonic() + seconds
        self.paused_until = max(self.paused_until, until)
        self._drop_lease()
        self._pending.pause_until = max(self._pending.pause_until, until)
        self._urgent()

    def contradicted(self) -> None:
        """A 429 its headers did not predict: the coordinator shrinks the cluster's burst (told at once)."""
        self._pending.contradicted += 1
        self._urgent()

    def correct(self, estimated: int, actual: int) -> None:
        """Usage beyond the estimate is charged to the cluster's token bucket with the next lease call."""
        if actual > estimated:
            self._pending.extra_tokens += actual - estimated

    async def flush(self) -> None:
        """Send what is pending now and take the coordinator's state (pause, breaker, share)."""
        await self._guarded(0)
        self._raise_error()

    # --- leases -------------------------------------------------------------------------------------
    def _admit_local(self, tokens: int, now: float, count: bool = True) -> Ticket:
        if count:
            self.left_requests -= 1
            self.left_tokens -= tokens
            requests, sent_tokens = self._next
            self._next = (requests + 1, sent_tokens + tokens)
            ticket = Ticket(requests, sent_tokens, now)
        else:
            ticket = Ticket(sent_at=now)
        self.in_flight_requests += 1
        self.in_flight_tokens += tokens
        self._active_at = now
        if self._probe_next:
            self._probe_next = False
            self._probe_ticket = ticket
        if self._beat_task is None:
            self._beat_task = asyncio.ensure_future(self._heartbeat())
        return ticket

    def _drop_lease(self) -> None:
        self.left_requests = 0
        self.left_tokens = 0.0
        self.unlimited_until = 0.0

    def _start_lease(self, tokens: int) -> None:
        self._lease_task = asyncio.ensure_future(self._lease(tokens))

    async def _lease(self, tokens: int) -> None:
        try:
            await self._guarded(max(1, int(tokens)))
        finally:
            self._lease_task = None

    def _urgent(self) -> None:
        """Send the pending report in a call of its own (a pause, a trip, the probe's answer)."""
        if self._report_task is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a trip outside the runtime): it goes with the next call
            return
        self._report_task = loop.create_task(self._send_urgent())

    async def _send_urgent(self) -> None:
        try:
            while self._pending.urgent() and self._error is None:
                await self._guarded(0)
        finally:
            self._report_task = None

    async def _heartbeat(self) -> None:
        """While requests are in flight, check in every IDLE_S / 3 so the in-flight share stays ours."""
        try:
            while self.in_flight_requests > 0 and self._error is None:
                await self.clock.sleep(IDLE_S / 3)
                if self.in_flight_requests > 0 and self.clock.monotonic() - self._last_call >= IDLE_S / 3:
                    await self._guarded(0)
        finally:
            self._beat_task = None

    def task_ended(self) -> None:
        """The worker's task ended (a Spark partition's rows are all answered): give the share back now, not a
        grace later; a later task's first request asks again. Called from any thread.

        On Spark the next task often runs in another Python worker, which got no share until this one's
        grace ran out (a small job's second task waited 0.5-1 s).
        """
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._leave_now)
        except RuntimeError:  # its loop closed (the job's end): nothing is held there any more, and the task must not fail
            pass

    def _leave_now(self) -> None:
        if self.in_flight_requests <= 0 and self.share > 0 and self._lease_task is None and not self._lock.locked():
            self._give_back()

    def _give_back(self) -> None:
        self._drop_lease()
        self.share = 0  # given back: the reply's share of 0 is no cut to acknowledge
        self._pending.idle = True
        self._urgent()

    async def _leave_when_idle(self) -> None:
        """Nothing in flight: after ``IDLE_GRACE_S`` with nothing admitted or asked for, give the share back.

        A worker whose tasks ended held its share until the coordinator's ``IDLE_S`` passed: on Spark, the
        next task's worker waited 10 s for it (one of two tasks of each small AI job). Its lease goes too, so
        its next request asks the coordinator again and gets a share back.
        """
        try:
            while self.in_flight_requests <= 0 and self.share > 0 and self._error is None:
                # From the last admission or answer, not from this check's start: slept a whole grace at a time, a
                # request within one made it sleep another (Spark's next task waited two graces, not one).
                wait = self._active_at + IDLE_GRACE_S - self.clock.monotonic()
                if wait > 0:
                    await self.clock.sleep(wait)
                    continue
                if self._lease_task is not None or self._lock.locked():  # a row asks: that is no quiet either
                    self._active_at = self.clock.monotonic()
                    continue
                self._give_back()
                return
        finally:
            self._idle_task = None

    def _tripped(self, reason: str) -> None:
        self._pending.tripped = reason
        self._urgent()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    async def _guarded(self, tokens: int) -> None:
        """One call to the actor; a failure is kept and raised by the next acquire (a task must not raise)."""
        try:
            await self._call(tokens)
        except asyncio.CancelledError:
            raise
        except ServiceError as e:
            self._error = e
        except Exception as e:  # anything else the call raised: the job cannot share its limits
            self._error = self.link.unreachable(f"{type(e).__name__}: {e}")

    async def _call(self, tokens: int) -> None:
        now = self.clock.monotonic()
        report = self._pending.take(now)
        report["applied"] = self.share
        report["in_flight"] = self.slots.in_flight
        report["possible"] = max(0, self.in_flight_requests) + max(0, self.left_requests)
        report["received"] = self.received
        report["unlimited"] = now < self.unlimited_until
        if self.slots.observed is not None and self.slots.capacity is not None:  # answers for the cluster's finder
            report["capacity"] = self.slots.take_observed(self.slots.clock.monotonic())
        self._last_call = now
        self.calls += 1
        reply = await self.link.call("lease", self.key, self.worker, self.config, tokens, report, self.link.wait_s)
        self._apply(reply)

    def _apply(self, reply: dict) -> None:
        now = self.clock.monotonic()
        self._last_call = now
        if reply["tripped"] and not self.breaker.tripped:
            self.breaker.trip(reply["tripped"], notify=False)  # told by the coordinator: not reported back
        if reply["paused_for"] > 0:
            until = now + reply["paused_for"]
            if until > self.paused_until + 0.05:  # a pause we did not know of: the lease went with it
                self._drop_lease()
            self.paused_until = max(self.paused_until, until)
        self.known.adopt(reply["rpm"], reply["tpm"], reply["mean_tokens"])
        if reply["share"] < self.share:  # tell the actor at once that the smaller share is in force,
            self._pending.ack = True     # and again once the requests in flight are within it (release)
            self._draining = True
            self._urgent()
        self.share = reply["share"]
        self.slots.set_ceiling(reply["share"], base=self.slot_base, initial=self.slot_initial, found=reply.get("found"))
        granted = reply["granted"]
        if granted:
            if self.left_requests <= 0:
                self._next = tuple(reply["ticket"])
            self.left_requests += granted
            self.received += granted
            if reply["tokens"] is None:
                self.left_tokens = math.inf
            else:
                self.left_tokens = (0.0 if self.left_tokens == math.inf else self.left_tokens) + reply["tokens"]
            self.chunk = granted
            if reply["probe"]:
                self._probe_next = True
        self.unlimited_until = now + reply["unlimited_for"] if reply["unlimited_for"] else 0.0
        self.retry_at = now + reply["retry_in"]

