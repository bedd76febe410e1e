"""Rate limits shared by every Ray worker of a job: one coordinator actor leases budget in chunks.

What "shared" means: per endpoint+model key (``AICallConfig.limits_key``: the same key the local
``LocalCoordinator`` uses) the whole cluster has ONE requests/tokens-per-minute budget, ONE 429
pause, ONE bound on requests in flight (``max_concurrency``) and ONE breaker, however many worker
processes run the job. The authoritative state lives in one Ray actor (``LimitsActor``, started by
``start_coordinator`` on the driver); each worker holds a ``LeasedLimiter`` that spends a local
lease and asks the actor for the next chunk before the lease runs out, so the actor is called about
once per chunk, not once per request. The actor runs the very ``RateLimiter`` the local runtime
uses (its buckets, learning from the server's limit hints, Retry-After pauses, first-request probe):
every worker's requests are admitted by it, a chunk at a time.

Chunk size: about ``CHUNK_SECONDS`` (100 ms) of the known rate per worker: ``rate x 0.1 s / workers
leasing``, at least one request (and never more than the bucket holds). At 1,200 RPM and 4 workers a
chunk is one request; at 10,000 requests/s and 100 workers it is 10 requests. With no limit known
(none set, no hints yet) the cluster behaves as one ``RateLimiter``: ONE probe request in the whole
cluster until its answer's hints arrive, then (if the server names no limit) leases of 100 ms of
free admission.

What travels with the next lease call (batched, not one call per event): the newest limit hints,
token corrections (usage beyond the estimate), and the worker's in-flight count. What goes at once
(its own call): a 429's pause, a tripped breaker, the probe's answer. Only a 429 that shows the
budget spent pauses (its headers say nothing is left, or a storm of them without headers: the
local runtime's rule, ``RateLimiter.on_429``, decided in the worker that got it); an isolated 429
retries its own row after its Retry-After, and goes at once as a fact that the server holds less
than its headers say (``contradicted``: the cluster's burst shrinks, its rate stays). Every reply carries the
paused-until time, the breaker's state and the worker's in-flight share, so a 429 or a trip anywhere
reaches every other worker within about one chunk's time: a worker waiting for budget is answered
at once, a worker with budget left learns it at its next lease (at most one chunk later), and drops
what is left of its lease.

In-flight bound: the actor splits ``max_concurrency`` among the workers that lease for the key; each
worker's ``AdaptiveLimit`` ceiling is its share, and capacity moves to another worker only once the
worker that gives it up cannot fill it (it drained below its new share, or its lease lets it send
fewer), so the requests in flight across the cluster never exceed ``max_concurrency`` (with more
workers than ``max_concurrency``, the extra workers wait for a share). A worker silent for ``IDLE_S`` seconds (with nothing in flight: one with
requests in flight checks in every ``IDLE_S / 3``) gives its share back.

When the coordinator dies: Ray restarts it (``max_restarts=-1``; calls in flight are retried) with
EMPTY state. Budgets restart conservatively: a user-set rpm/tpm is known again from the config every
lease call carries, with an empty bucket; a learned limit is learned again (one probe request for the
whole cluster, then the hints). Leases the workers already hold are spent as granted; the in-flight
shares are rebuilt from the workers' next calls (until each has called once, about one chunk's time,
the bound is not enforced across workers). If it cannot be reached (killed for good, or no answer
within ``call_timeout_s``, 30 s by default), the worker raises ``ServiceError`` with one message
instead of hanging.

Why hand-written: Ray has no shared (cluster-wide) rate limiter, so the lease protocol is ours.

Example (the actor's logic runs in-process here; in a job it is a Ray actor):
    >>> import asyncio
    >>> actor = LimitsActor()
    >>> cfg = {"rpm": 600, "tpm": None, "max_concurrency": 8}
    >>> async def two_workers():
    ...     a = await actor.lease("openai:https://x/v1|gpt-5", "w1", cfg, 20)
    ...     b = await actor.lease("openai:https://x/v1|gpt-5", "w2", cfg, 20)
    ...     return a["granted"], a["share"], b["granted"], b["share"]
    >>> asyncio.run(two_workers())   # a chunk is one request at 10/s; w1 holds one of its 8 slots until it calls again
    (1, 8, 1, 4)
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import threading
import time
import uuid
from typing import Any

from inferframe.errors import ServiceError
from inferframe.observe.stats import RunCounters
from inferframe.providers.interface import LimitHints
from inferframe.runtime.breaker import Breaker
from inferframe.runtime.clock import REAL, Clock
from inferframe.runtime.concurrency import AdaptiveLimit
from inferframe.runtime.config import RuntimeConfig
from inferframe.runtime.coordinator import Coordinator, SharedLimits
from inferframe.runtime.ratelimit import RateLimiter, Ticket

# A lease is about this many seconds of a worker's part of the known rate (at least one request).
CHUNK_SECONDS = 0.1
# Every actor call is bounded by this (seconds): past it the coordinator counts as unreachable.
CALL_TIMEOUT_S = 30.0
# The longest the actor holds one lease call waiting for budget (a third of the call timeout at most).
LEASE_WAIT_S = 10.0
# A worker that has not called for this long (and had nothing in flight) gives its in-flight share back.
IDLE_S = 10.0
# A probe whose answer was not reported after this long (its worker died) is handed to another worker.
PROBE_TIMEOUT_S = 60.0
# Lease calls one actor serves at once (waiting ones included): one per worker and key.
MAX_CALLS_IN_FLIGHT = 4096


def _ray():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - the install has it
        raise ImportError("The Ray runner needs ray: pip install 'inferframe[ray]'.") from e
    return ray


def _was_restarted() -> bool:
    """True in a Ray actor that Ray restarted after it died."""
    try:
        ray = _ray()
        return bool(ray.is_initialized() and ray.get_runtime_context().was_current_actor_reconstructed)
    except Exception:  # not in an actor (an in-process LimitsActor)
        return False


# ---------------------------------------------------------------------------------------------- the actor


class _KeyState:
    """The authoritative limits of one endpoint+model key: the cluster's RateLimiter and its shares."""

    def __init__(self, config: dict, restarted: bool) -> None:
        self.limiter = RateLimiter(config.get("rpm"), config.get("tpm"))
        if restarted:  # the server's bucket may be nearly spent: a known rate starts from an empty bucket
            for bucket in (self.limiter.requests, self.limiter.tokens):
                if bucket.rate is not None:
                    bucket.level = 0.0
        self.max_concurrency = max(1, int(config.get("max_concurrency") or 1))
        self.seen: dict[str, float] = {}  # worker -> when it last called
        self.share: dict[str, int] = {}  # worker -> the in-flight share it was told
        self.held: dict[str, int] = {}  # worker -> the most slots it may fill until its next call (see hold)
        self.sent: dict[str, int] = {}  # worker -> requests granted to it in all
        self.held_sum = 0
        self.pruned_at = 0.0
        self.tripped: str | None = None
        self.wake = asyncio.Event()  # set (and replaced) by a pause or a trip: waiting lease calls answer at once
        self.probe_since: float | None = None
        self.calls = 0
        self.granted = 0

    def interrupt(self) -> None:
        self.wake.set()
        self.wake = asyncio.Event()

    def paused_for(self, now: float) -> float:
        return max(0.0, self.limiter.paused_until - now)

    def apply(self, report: dict | None, now: float) -> None:
        """Take what one worker reports: hints, token corrections, a pause, a trip, the probe's answer."""
        if not report:
            return
        lim = self.limiter
        hint = report.get("hints")
        if hint is not None:
            values, requests, tokens, age = hint
            lim.observe(LimitHints(*values), Ticket(requests, tokens, now - age))
        if report.get("extra_tokens"):
            lim.correct(0, int(report["extra_tokens"]))
        if report.get("contradicted"):
            lim.contradicted()  # a 429 with budget left in its headers: smaller bursts for the whole cluster
        if report.get("probe_done"):
            lim.release(0, None)  # the probe answered: the other workers' leases go on
            self.probe_since = None
        if report.get("pause_s"):
            lim.pause(float(report["pause_s"]))
            self.interrupt()
        if report.get("tripped") and self.tripped is None:
            self.tripped = str(report["tripped"])
            self.interrupt()

    def share_for(self, worker: str, now: float) -> int:
        """The in-flight share of ``worker``: ``max_concurrency`` split evenly among the workers that lease.

        A share shrinks at once; it grows only into capacity no other worker may still be using
        (``held``), so the requests in flight across the cluster never exceed the bound.
        """
        if now - self.pruned_at > 1.0:  # at most once a second: a lease must not cost O(workers)
            self.pruned_at = now
            for other, seen in list(self.seen.items()):
                if other != worker and now - seen > IDLE_S:
                    self._set_held(other, 0)
                    for d in (self.seen, self.share, self.held, self.sent):
                        d.pop(other, None)
        self.seen[worker] = now
        fair = self.max_concurrency // len(self.seen)
        current = self.share.get(worker, 0)
        if current >= fair:
            new = fair
        else:
            others = self.held_sum - self.held.get(worker, 0)
            new = max(current, min(fair, self.max_concurrency - others))
        self.share[worker] = new
        # It may fill the new share once a grant reaches it: held so before this call ends (hold() then tells).
        self._set_held(worker, max(self.held.get(worker, 0), new))
        return new

    def _set_held(self, worker: str, value: int) -> None:
        self.held_sum += value - self.held.get(worker, 0)
        self.held[worker] = value

    def hold(self, worker: str, report: dict, unlimited: bool) -> None:
        """Record the most slots ``worker`` may fill until its next call.

        That is its ceiling (the share it applied, the new one, or what it has in flight above them),
        and, under a counted lease, no more than the requests it can send without another grant: the
        ones in flight, its lease left, and the grants not yet received. An idle worker holds little.
        """
        # An AdaptiveLimit never bounds below one: a worker with a lease and no share yet may still send one.
        top = max(1, self.share.get(worker, 0), int(report.get("applied", 0)), int(report.get("in_flight", 0)))
        if not unlimited and not report.get("unlimited"):
            in_transit = max(0, self.sent.get(worker, 0) - int(report.get("received", 0)))
            top = min(top, int(report.get("possible", 0)) + in_transit)
        self._set_held(worker, top)

    def chunk(self, tokens: int) -> int:
        """Requests in one lease: CHUNK_SECONDS of the known rate split among the workers, at least one."""
        lim = self.limiter
        rate = lim.requests_per_second()
        if rate is None:
            return 1
        n = max(1, int(CHUNK_SECONDS * rate / max(1, len(self.seen))))
        if lim.requests.rate:
            n = min(n, max(1, int(lim.requests.capacity)))
        if lim.tokens.rate and tokens:
            n = min(n, max(1, int(lim.tokens.capacity // tokens)))
        return n


class LimitsActor:
    """The coordinator: per key, the cluster's rate limiter, pause, breaker and in-flight shares.

    Run as a Ray actor by ``start_coordinator`` (async: a lease call waits for budget without
    blocking the others); its methods are plain coroutines, so it also runs in-process.

    Example:
        >>> import asyncio
        >>> actor = LimitsActor()
        >>> actor.report_counters("w1", [{"label": "prompt[m]", "rows_done": 3}])
        >>> actor.counter_reports()
        {'w1': [{'label': 'prompt[m]', 'rows_done': 3}]}
        >>> reply = asyncio.run(actor.lease("k", "w1", {"rpm": None, "tpm": None, "max_concurrency": 4}, 10))
        >>> reply["granted"], reply["probe"]    # nothing known: this worker sends the cluster's one probe
        (1, True)
    """

    def __init__(self) -> None:
        self.keys: dict[str, _KeyState] = {}
        self.reports: dict[str, list[dict]] = {}
        self.calls = 0
        self.restarted = _was_restarted()

    def ping(self) -> bool:
        """True: the actor is up."""
        return True

    def _state(self, key: str, config: dict) -> _KeyState:
        st = self.keys.get(key)
        if st is None:  # the first lease's settings win, as with LocalCoordinator
            st = self.keys[key] = _KeyState(config, self.restarted)
        return st

    async def lease(self, key: str, worker: str, config: dict, tokens: int, report: dict | None = None,
                    wait_s: float = LEASE_WAIT_S) -> dict:
        """Apply ``worker``'s report, then grant it a chunk of requests of ``tokens`` each (0: report only).

        Parameters:
            key: the endpoint+model key.
            worker: the leasing worker's id (one per LeasedLimiter).
            config: ``{"rpm", "tpm", "max_concurrency"}`` of the worker's RuntimeConfig (builds the key's
                state on the first call, and again after a restart).
            tokens: the token estimate of each request of the chunk; 0 asks for nothing.
            report: what the worker learned since its last call (see LeasedLimiter).
            wait_s: the longest this call waits for budget; it then answers with what it has.

        Returns a dict: ``granted`` requests (and ``tokens``, None when no TPM is known), ``ticket``
        (the cluster's counters at the chunk's first request), ``probe``, ``unlimited_for`` (seconds of
        free admission), ``paused_for``, ``tripped``, ``share`` (in-flight ceiling), ``rpm``/``tpm``/
        ``mean_tokens`` (what is known), ``retry_in`` (ask again after this many seconds).
        """
        self.calls += 1
        st = self._state(key, config)
        st.calls += 1
        lim = st.limiter
        now = time.monotonic()
        report = report or {}
        st.apply(report, now)
        if (not lim._probe_done.is_set() and lim._probing and st.probe_since is not None
                and now - st.probe_since > PROBE_TIMEOUT_S):
            lim._probing = False  # the probe's worker never answered: the next asker probes
            st.probe_since = None
        share = st.share_for(worker, now)
        granted, first, probe, retry_in = 0, None, False, 0.0
        if tokens and st.tripped is None and st.paused_for(now) <= 0:
            if share <= 0:
                retry_in = CHUNK_SECONDS  # no in-flight share free yet: others are draining theirs
            else:
                granted, first, probe = await self._grant(st, st.chunk(tokens), tokens, wait_s)
        now = time.monotonic()
        st.seen[worker] = now
        if granted:
            st.granted += granted
            st.sent[worker] = st.sent.get(worker, 0) + granted
        share = st.share.get(worker, 0)  # another call of this worker may have moved it while this one waited
        unlimited = bool(granted and not probe and lim.requests_per_second() is None)
        st.hold(worker, report, unlimited)
        return {
            "granted": granted,
            "tokens": granted * tokens if lim.tokens.rate is not None else None,
            "ticket": (first.requests, first.tokens) if first is not None else (0.0, 0.0),
            "probe": probe,
            "unlimited_for": CHUNK_SECONDS if unlimited else 0.0,
            "paused_for": st.paused_for(now),
            "tripped": st.tripped,
            "share": share,
            "rpm": lim.requests.rate,
            "tpm": lim.tokens.rate,
            "mean_tokens": lim.mean_tokens,
            "retry_in": retry_in,
        }

    async def _grant(self, st: _KeyState, n: int, tokens: int, wait_s: float) -> tuple[int, Ticket | None, bool]:
        """Admit ``n`` requests through the key's RateLimiter (the local runtime's own admission).

        Stops early, granting nothing, when a pause or a trip interrupts; after ``wait_s`` it grants
        what it has.
        """
        lim = st.limiter
        got: list[Ticket] = []
        probe = []

        async def take() -> None:
            for i in range(n):
                got.append(await lim.acquire(tokens))  # about 9 us each when budget is there
                if i == 0 and not lim._probe_done.is_set():
                    probe.append(True)  # admitted as the cluster's one probe: nothing more until it answers
                    return
                if i % 256 == 255:
                    await asyncio.sleep(0)  # a large chunk must not hold the other calls up

        wake = st.wake
        taking = asyncio.ensure_future(take())
        waking = asyncio.ensure_future(wake.wait())
        done, _ = await asyncio.wait({taking, waking}, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        waking.cancel()
        if taking not in done:
            taking.cancel()
            try:
                await taking
            except asyncio.CancelledError:
                pass
        if wake.is_set():  # a pause or a trip: what was taken before it is dropped, as a local pause drops the bucket
            return 0, None, False
        if probe:
            st.probe_since = time.monotonic()
        return len(got), (got[0] if got else None), bool(probe)

    def report_counters(self, source: str, snapshots: list[dict]) -> None:
        """Keep ``source``'s latest counter snapshots (cumulative: they replace the earlier ones)."""
        self.reports[source] = list(snapshots)

    def counter_reports(self) -> dict[str, list[dict]]:
        """Every source's latest snapshots, for ``RunCounters.merge`` on the driver."""
        return {k: list(v) for k, v in self.reports.items()}

    def describe(self, key: str | None = None) -> dict:
        """What the actor knows (for tests and benchmarks): calls, and per key its rate, shares and state."""
        now = time.monotonic()
        keys = {}
        for k, st in self.keys.items():
            if key is not None and k != key:
                continue
            lim = st.limiter
            keys[k] = {"rpm": lim.requests.rate, "tpm": lim.tokens.rate, "level": lim.requests.level,
                       "sent": lim.requests.sent, "paused_for": st.paused_for(now), "tripped": st.tripped,
                       "shares": dict(st.share), "held": dict(st.held), "workers": len(st.seen),
                       "calls": st.calls, "granted": st.granted}
        return {"calls": self.calls, "restarted": self.restarted, "keys": keys}


# ---------------------------------------------------------------------------------------------- the worker side


class SharedSlots(AdaptiveLimit):
    """An AdaptiveLimit whose ceiling is this worker's share of the cluster's ``max_concurrency``.

    It starts with a ceiling of one until the coordinator tells the share (the first lease comes
    before the first request).

    Parameters:
        config: the call's RuntimeConfig (base, initial bound, adaptive).
        clock: where time comes from.

    Example:
        >>> slots = SharedSlots(RuntimeConfig(max_concurrency=100))
        >>> slots.set_ceiling(25); slots.maximum, int(slots.limit)
        (25, 25)
        >>> slots.set_ceiling(10); slots.maximum, int(slots.limit)
        (10, 10)
    """

    def __init__(self, config: RuntimeConfig, clock: Clock = REAL) -> None:
        self.configured_base = config.concurrency_base
        self.configured_initial = config.initial_concurrency or self.configured_base
        super().__init__(1, 1, adaptive=config.adaptive, clock=clock, base=1)

    def set_ceiling(self, ceiling: int) -> None:
        """Make ``ceiling`` (at least one) the hard bound; the size follows within it."""
        ceiling = max(self.minimum, int(ceiling))
        if ceiling == self.maximum:
            return
        grew = ceiling > self.maximum
        self.maximum = ceiling
        self.base = min(self.configured_base, ceiling)
        self.target = min(max(self.target, self.base), ceiling)
        self._sized = None  # the next size() goes to the size the new ceiling allows at once
        if self.limit > ceiling:
            self.limit = float(ceiling)
        elif grew:
            start = self.configured_initial if not self.adaptive else max(self.limit, self.base)
            if min(start, ceiling) > self.limit:
                self._set_limit(float(min(start, ceiling)))


class SharedBreaker(Breaker):
    """A Breaker whose trip is sent to the coordinator at once, and tripped by a trip anywhere else.

    Example:
        >>> b = SharedBreaker(); seen = []
        >>> b.on_trip = seen.append
        >>> b.trip("HTTP 401: invalid key"); b.tripped, seen
        (True, ['HTTP 401: invalid key'])
        >>> b.trip_from_cluster("other"); b.reason    # the first reason stays
        'HTTP 401: invalid key'
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.on_trip = None

    def trip(self, reason: str) -> None:
        first = self.reason is None
        super().trip(reason)
        if first and self.on_trip is not None:
            self.on_trip(reason)

    def trip_from_cluster(self, reason: str) -> None:
        """Another worker tripped it (told by the coordinator): trip here, without reporting it back."""
        Breaker.trip(self, reason)


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

    def urgent(self) -> bool:
        return bool(self.pause_until or self.tripped or self.probe_done or self.ack or self.contradicted)

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
        self.hint, self.extra_tokens, self.pause_until, self.tripped, self.probe_done = None, 0, 0.0, None, False
        self.contradicted = 0
        self.ack = False
        return out


class LeasedLimiter(RateLimiter):
    """The RateLimiter interface (acquire/release/pause/correct/observe) over leases of the cluster's budget.

    ``acquire`` spends the local lease and asks the coordinator for the next chunk when half of it is
    left (ask-ahead, so a busy worker rarely waits); it never blocks the event loop (actor calls are
    awaited). ``release``'s hints and ``correct``'s extra tokens go with the next lease call;
    ``pause`` and a trip of the breaker go at once. ``requests_per_second`` is the cluster's rate
    (the in-flight bound is capped by this worker's share, see SharedSlots). Built by
    ``RayCoordinator.limits``; one per key in each worker process, used on one event loop.

    Parameters:
        link: the connection to the coordinator actor.
        key: the endpoint+model key.
        config: the call's RuntimeConfig (rpm, tpm and max_concurrency go to the actor).
        slots: this worker's in-flight bound (its ceiling is set from every reply).
        breaker: this worker's breaker.

    Example (needs a running Ray cluster):
        >>> lim = start_coordinator().limits("openai:https://x/v1|gpt-5", RuntimeConfig(rpm=600)).limiter  # doctest: +SKIP
        >>> ticket = await lim.acquire(20); lim.release(20, None, ticket)  # doctest: +SKIP
    """

    def __init__(self, link: "_Link", key: str, config: RuntimeConfig, slots: SharedSlots,
                 breaker: SharedBreaker) -> None:
        super().__init__(config.rpm, config.tpm)
        self.link, self.key, self.slots, self.breaker = link, key, slots, breaker
        self.config = {"rpm": config.rpm, "tpm": config.tpm, "max_concurrency": config.max_concurrency}
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
        self._error: BaseException | None = None
        self._last_call = 0.0
        self._draining = False  # in flight above a share that shrank
        breaker.on_trip = self._tripped

    # --- the RateLimiter interface ------------------------------------------------------------------
    async def acquire(self, tokens: int) -> Ticket:
        """Wait until one request of ``tokens`` may go (a lease covers it); FIFO among this worker's rows.

        With the breaker tripped it returns at once (no budget spent): the runtime stops at its check.
        """
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

    def release(self, tokens: int, hints: LimitHints | None, ticket: Ticket | None = None) -> None:
        """A request got its answer (or failed): its hints go with the next lease call."""
        self.answers += 1  # this worker's answers: on_429 tells a storm of 429s from isolated ones by them
        self.in_flight_requests -= 1
        self.in_flight_tokens -= tokens
        self.observe(hints, ticket)
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
        (``RateLimiter.on_429``, inherited) decides in the worker that got the 429, so a 429 with
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
        self._last_call = now
        self.calls += 1
        reply = await self.link.call("lease", self.key, self.worker, self.config, tokens, report, self.link.wait_s)
        self._apply(reply)

    def _apply(self, reply: dict) -> None:
        now = self.clock.monotonic()
        self._last_call = now
        if reply["tripped"] and not self.breaker.tripped:
            self.breaker.trip_from_cluster(reply["tripped"])
        if reply["paused_for"] > 0:
            until = now + reply["paused_for"]
            if until > self.paused_until + 0.05:  # a pause we did not know of: the lease went with it
                self._drop_lease()
            self.paused_until = max(self.paused_until, until)
        self.requests.rate, self.tokens.rate, self.mean_tokens = reply["rpm"], reply["tpm"], reply["mean_tokens"]
        if reply["share"] < self.share:  # tell the actor at once that the smaller share is in force,
            self._pending.ack = True     # and again once the requests in flight are within it (release)
            self._draining = True
            self._urgent()
        self.share = reply["share"]
        self.slots.set_ceiling(reply["share"])
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


# ---------------------------------------------------------------------------------------------- the coordinator


class _Link:
    """The connection to the coordinator actor: bounded calls, reconnection by name, one clear error."""

    def __init__(self, name: str, namespace: str | None, timeout: float, handle: Any = None) -> None:
        self.name, self.namespace, self.timeout = name, namespace, timeout
        self.wait_s = min(LEASE_WAIT_S, timeout / 3)
        self.handle = handle

    def unreachable(self, why: str) -> ServiceError:
        return ServiceError(
            f"The rate-limit coordinator of this job (Ray actor {self.name!r} in namespace {self.namespace!r}) "
            f"cannot be reached: {why}. It shares the job's rate limits among the workers; the job stops.")

    def _lookup(self) -> Any:
        ray = _ray()
        try:
            return ray.get_actor(self.name, namespace=self.namespace)
        except ValueError:
            raise self.unreachable("no actor of that name is alive (it died for good, or the job ended)") from None

    def handle_now(self) -> Any:
        """The actor's handle (looked up by name the first time in this process; blocks briefly)."""
        if self.handle is None:
            self.handle = self._lookup()
        return self.handle

    async def call(self, method: str, *args) -> Any:
        """``await actor.method.remote(*args)`` within the timeout; a restart in between is waited for."""
        ray = _ray()
        deadline = time.monotonic() + self.timeout
        while True:
            if self.handle is None:
                self.handle = await asyncio.to_thread(self._lookup)
            left = deadline - time.monotonic()
            if left <= 0:
                raise self.unreachable(f"no answer within {self.timeout:g} s")
            try:
                return await asyncio.wait_for(getattr(self.handle, method).remote(*args), left)
            except asyncio.TimeoutError:
                raise self.unreachable(f"no answer within {self.timeout:g} s") from None
            except ray.exceptions.ActorDiedError:  # restartable actors are waited for: this one is gone
                raise self.unreachable("the actor died and is not restarted") from None
            except ray.exceptions.RayActorError:  # restarting: try again until the deadline
                await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def get(self, method: str, *args) -> Any:
        """The blocking form of ``call``, for the driver (never on an event loop)."""
        ray = _ray()
        try:
            return ray.get(getattr(self.handle_now(), method).remote(*args), timeout=self.timeout)
        except ray.exceptions.GetTimeoutError:
            raise self.unreachable(f"no answer within {self.timeout:g} s") from None
        except ray.exceptions.RayActorError as e:
            raise self.unreachable(f"{type(e).__name__}") from None


class RayCoordinator(Coordinator):
    """Shared limits for every Ray worker of a job, from one coordinator actor (see the module docstring).

    Picklable: it travels to the workers as the actor's name and namespace and reconnects there. Each
    unpickled copy hands out one SharedLimits per key (a worker process unpickles it once).

    Parameters:
        name / namespace: the coordinator actor's name and Ray namespace.
        call_timeout_s: the bound on every actor call; past it, ServiceError.
        handle: the actor's handle (the driver's, which keeps the actor alive).

    Example (needs a running Ray cluster):
        >>> coord = start_coordinator()  # doctest: +SKIP
        >>> limits = coord.limits("openai:https://x/v1|gpt-5", RuntimeConfig(rpm=600))  # doctest: +SKIP
        >>> coord.close()  # doctest: +SKIP
    """

    def __init__(self, name: str, namespace: str | None, *, call_timeout_s: float = CALL_TIMEOUT_S,
                 handle: Any = None) -> None:
        self.name, self.namespace, self.call_timeout_s = name, namespace, call_timeout_s
        self._owner = handle is not None
        self._link = _Link(name, namespace, call_timeout_s, handle)
        self._limits: dict[str, SharedLimits] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"name": self.name, "namespace": self.namespace, "call_timeout_s": self.call_timeout_s}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["name"], state["namespace"], call_timeout_s=state["call_timeout_s"])

    @property
    def handle(self) -> Any:
        """The coordinator actor's handle (looked up by name in a worker)."""
        return self._link.handle_now()

    def limits(self, key: str, config: RuntimeConfig) -> SharedLimits:
        """The leased limits of ``key`` in this process (built from ``config`` the first time; no call yet)."""
        with self._lock:
            found = self._limits.get(key)
            if found is None:
                slots, breaker = SharedSlots(config), SharedBreaker()
                limiter = LeasedLimiter(self._link, key, config, slots, breaker)
                found = self._limits[key] = SharedLimits(limiter, slots, breaker)
            return found

    def report_counters(self, source: str, snapshots: list[dict]) -> Any:
        """Send ``source``'s counter snapshots to the coordinator; returns at once (an awaitable ObjectRef)."""
        return self._link.handle_now().report_counters.remote(source, snapshots)

    def counter_reports(self) -> dict[str, list[dict]]:
        """Every worker's latest counter snapshots (driver; blocking): merge them with ``RunCounters.merge``."""
        return self._link.get("counter_reports")

    def merge_counters(self, counters: RunCounters) -> None:
        """Merge every worker's latest counters into ``counters`` (driver; blocking)."""
        for source, snapshots in self.counter_reports().items():
            counters.merge(source, snapshots)

    def describe(self, key: str | None = None) -> dict:
        """The actor's view (driver; blocking): calls, and per key the rate, shares, pause and breaker."""
        return self._link.get("describe", key)

    def close(self) -> None:
        """End the coordinator actor (the driver, when the job ends); a worker's copy does nothing."""
        if self._owner and self._link.handle is not None:
            try:
                _ray().kill(self._link.handle, no_restart=True)
            except Exception:  # already gone
                pass
            self._link.handle = None


_ACTOR_CLASS = None


def _actor_class():
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        _ACTOR_CLASS = _ray().remote(LimitsActor)
    return _ACTOR_CLASS


def start_coordinator(name: str | None = None, *, call_timeout_s: float = CALL_TIMEOUT_S) -> RayCoordinator:
    """Start the job's coordinator actor (on the driver) and return the RayCoordinator to hand to workers.

    The actor is named (workers find it by name), owned by this driver (it ends with it), restarted by
    Ray if it dies (``max_restarts=-1``; with empty state, see the module docstring), and takes no CPU.

    Parameters:
        name: the actor's name (None: a fresh ``inferframe-limits-<id>``).
        call_timeout_s: the bound on every call to it; past it the workers raise ServiceError.

    Example (needs a running Ray cluster):
        >>> coord = start_coordinator("inferframe-job-1")  # doctest: +SKIP
        >>> coord.close()  # doctest: +SKIP
    """
    ray = _ray()
    if not ray.is_initialized():
        ray.init()
    name = name or f"inferframe-limits-{uuid.uuid4().hex[:12]}"
    namespace = ray.get_runtime_context().namespace
    handle = _actor_class().options(name=name, namespace=namespace, max_restarts=-1, max_task_retries=-1,
                                    num_cpus=0, max_concurrency=MAX_CALLS_IN_FLIGHT).remote()
    coordinator = RayCoordinator(name, namespace, call_timeout_s=call_timeout_s, handle=handle)
    coordinator._link.get("ping")  # up and named before any worker looks it up
    return coordinator
