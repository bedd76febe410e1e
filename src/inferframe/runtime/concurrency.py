"""A job-wide bound on requests in flight: sized from the rate limit and the latency, adapted by AIMD.

With no rate limit known (a self-hosted server: no limit headers), the bound is the capacity that
``runtime.capacity.CapacityFinder`` finds from the latency; with one, it is the smaller of the
rate's need (below) and a capacity found. ``history`` keeps the bound over time and why it moved.

When the rate limit is known (given or learned from the server's hints), the bound follows it by
Little's law: requests in flight = rate x latency, times ``HEADROOM`` for the spread of latencies
and the first burst, never below the bound used while nothing is known and never above the hard
ceiling. A fixed bound either starves a fast limit at a long latency (30,000 RPM at 1 s needs
about 500 in flight) or floods a server that has no limit to speak of. AIMD still moves the bound
below that size: grow additively (about one slot per round trip) while healthy; cut
multiplicatively (at most once a second) on the signals that say the server has more than it can
take, and only on those:

* a spent rate budget (a 429 that paused admission, see ``RateLimiter.on_429``): ``on_rate_limited(spent=True)``;
* the smoothed latency rising well above the best smoothed latency seen (queueing at the server):
  ``on_congestion`` from ``on_success``;
* an isolated 429 (budget left): one milder cut (``ISOLATED_CUT``) per episode (``on_rate_limited``).
  A steady trickle of such 429s says little about how many requests are in flight, and a cut for
  each one kept the bound near its floor (issue 15); the first of an episode still backs off
  once, in case it was a concurrency cap;
* failures that persist: a ``FAILURE_SHARE`` or more of the last ``FAILURE_WINDOW`` answers were 5xx,
  reset connections, timeouts, malformed bodies or 429s (``on_fault``). One such failure is the
  row's problem (its retry handles it); a share that high is a server falling over.
"""

from __future__ import annotations

import asyncio
import collections
import math

from inferframe.runtime.capacity import CapacityFinder
from inferframe.runtime.clock import REAL, Clock

# In flight = rate x mean latency (Little's law) times this, for the spread of latencies and bursts.
HEADROOM = 2.0
# Answers averaged before the latency is judged for queueing (after a start or a cut).
LATENCY_WARMUP = 20
# The multiplicative cut of AIMD on congestion.
CUT = 0.7
# The cut for the first isolated 429 of an episode: a weaker signal (the budget is not spent). A 0.7 cut
# took about 20 round trips to grow back at 64 in flight, 10% of the throughput of a 2,000-row run.
ISOLATED_CUT = 0.9
# Isolated 429s belong to one episode until none came for this many seconds; an episode cuts the bound once.
EPISODE_QUIET_S = 30.0
# Failures persist when at least this share of the last FAILURE_WINDOW answers failed (judged from
# FAILURE_MIN answers on). A 10% fault mix reaches 25% of 100 in about one window in 75,000 (one
# 2,000-row run in 400, simulated); of 50 in one in 1,000, which cut the bound in one run in five.
FAILURE_SHARE = 0.25
FAILURE_WINDOW = 100
FAILURE_MIN = 50
# Entries of ``history`` at most; moves for the same reason within this many seconds are one entry.
HISTORY_MAX = 500
HISTORY_MERGE_S = 1.0


class AdaptiveLimit:
    """An async semaphore whose size moves between ``minimum`` and a target of at most ``maximum``.

    Parameters:
        initial: starting bound on requests in flight (clamped to the target).
        maximum: the hard ceiling: the bound never grows past this (the user's max_concurrency).
        minimum: the bound never shrinks below this.
        adaptive: False keeps the bound fixed at ``initial``.
        clock: where time comes from (a FakeClock in tests).
        base: the target while no rate limit is known to size it from (None: ``maximum``);
            once sized, the target never goes below it.

    Example:
        >>> lim = AdaptiveLimit(initial=64, maximum=1024, base=64)
        >>> lim.on_success(1.0, rate=200.0)         # 200 requests/s at 1 s: 2 x 200 in flight
        >>> lim.target, int(lim.limit)
        (400, 400)
    """

    def __init__(self, initial: int, maximum: int, minimum: int = 1, adaptive: bool = True, clock: Clock = REAL,
                 *, base: int | None = None) -> None:
        self.clock = clock
        self.maximum = maximum
        self.minimum = minimum
        self.base = min(base, maximum) if base is not None else maximum
        self.target = self.base
        self.limit = float(max(minimum, min(initial, self.target)))
        self.adaptive = adaptive
        self.in_flight = 0
        self.peak = 0
        self._waiters: collections.deque[asyncio.Future] = collections.deque()
        self._ahead: collections.deque[asyncio.Future] = collections.deque()  # retries: served first
        self._last_cut = -math.inf
        self._base_latency: float | None = None
        self._latency = 0.0
        self._answers = 0  # answers in the smoothed latency since it was last reset
        self._mean_latency: float | None = None
        self._latencies = 0  # answers in the mean latency: a plain mean over the first ones, then an EWMA
        self._sized: tuple[float, bool] | None = None
        self._cut_since_sized = False  # AIMD cut the bound since it was last sized: it regrows by AIMD alone
        self._last_429 = -math.inf
        self._recent: collections.deque[bool] = collections.deque(maxlen=FAILURE_WINDOW)  # True: failed
        self._failed = 0  # failures in _recent
        self.cuts = 0  # multiplicative cuts so far
        # The server's capacity, found from the latency: the bound while no rate limit is known.
        self.capacity = CapacityFinder(self.base, maximum, minimum, clock) if adaptive else None
        self._used = 0  # the most in flight since the last answer (for the capacity finder)
        # A cluster worker's: the coordinator's one finder leads the bound (``follow``); the answers go to it.
        self.observed: list[tuple[float, float]] | None = None
        self.sends: list[float] = []  # when requests were sent since the last report (``take_observed``)
        self.peak_since = 0  # the most in flight since the last report
        self._t0 = clock.monotonic()
        # (seconds since the start, bound, why it moved): "start", "limits" (sized from rate-limit headers or the
        # user's rpm/tpm), "latency" (grown: the latency stayed at its floor), "capacity" (queueing: cut to the
        # capacity found), "429", "faults", "cap" (the user's max_concurrency or a worker's share).
        self.history: list[list] = [[0.0, int(self.limit), "start"]]

    async def __aenter__(self):
        # Single-threaded asyncio: no await between the check and the increment, so no lock is needed.
        if self.in_flight >= int(self.limit):
            await self._wait(self._waiters)
        self._take()
        return self

    async def __aexit__(self, *exc):
        self.leave()

    def enter_now(self) -> bool:
        """Take a place if one is free (True), as ``async with`` would without waiting; no coroutine (issue 36)."""
        if self.in_flight >= int(self.limit):
            return False
        self._take()
        return True

    def _take(self) -> None:
        self.in_flight += 1
        if self.in_flight > self.peak:
            self.peak = self.in_flight
        if self.in_flight > self._used:
            self._used = self.in_flight
        if self.in_flight > self.peak_since:
            self.peak_since = self.in_flight

    def started(self, at: float) -> int | tuple | bool:
        """A request left at ``at`` (its place taken, its admission granted); False: no need to say so again.

        The capacity finder's floor, its cohorts and its slow start (what an answer at the floor proves: returned,
        for ``on_success``'s ``load``) come from the sends.
        """
        if self.capacity is None:
            return False
        if self.observed is not None:
            self.sends.append(at)  # counted by the coordinator's finder (``take_observed``)
            return True
        return self.capacity.sent(at, proving=not self.sized) or ()  # sized from known limits: no slow start

    def follow(self) -> None:
        """Let a cluster coordinator's one capacity finder lead this bound: the ceiling set is the bound.

        N workers probing one server alone each find its capacity and together queue it N-fold: so this
        finder stops, the answers go to the coordinator (``take_observed``), and the share told is the bound.

        Example:
            >>> lim = AdaptiveLimit(1, 1, base=1); lim.follow(); lim.set_ceiling(40, base=64, initial=64, found=True)
            >>> int(lim.limit), lim.capacity.found, lim.history[-1][2]
            (40, True, 'capacity')
        """
        self.observed = []

    def take_observed(self, now: float) -> dict:
        """Since the last call: each send's age, the most in flight, each answer's (latency, age of its request)."""
        observed, self.observed = self.observed or [], []
        out = {"sent": [now - at for at in self.sends], "peak": max(self.peak_since, self.in_flight),
               "answers": [(latency, now - sent_at) for latency, sent_at in observed]}
        self.sends, self.peak_since = [], self.in_flight
        return out

    def _note(self, reason: str) -> None:
        """The bound moved for ``reason``: one more entry of ``history`` (merged with the last of the same reason)."""
        now = round(self.clock.monotonic() - self._t0, 3)
        bound, hist = int(self.limit), self.history
        last = hist[-1]
        if last[1] == bound:
            return
        if (last[2] == reason and now - last[0] < HISTORY_MERGE_S) or len(hist) >= HISTORY_MAX:
            last[1] = bound
        else:
            hist.append([now, bound, reason])

    @property
    def capacity_bound(self) -> bool:
        """The job is bound by the server's capacity: queueing was seen and the bound is full.

        Example:
            >>> AdaptiveLimit(initial=64, maximum=1024).capacity_bound
            False
        """
        cap = self.capacity
        return cap is not None and cap.found and self.in_flight >= 0.9 * int(self.limit) \
            and int(self.limit) <= cap.bound

    def leave(self) -> None:
        """Give back a place taken by ``enter_now`` or ``async with``."""
        self.in_flight -= 1
        if self._waiters or self._ahead:
            self._wake(1)

    def ahead(self) -> "_Ahead":
        """The same bound, entered before the rows waiting for a first attempt: for a row's retry.

        Every row of a job waits here at once, so a retry queued behind them went out last and
        made the tail of a run under faults (its rows waited for the whole queue, then for a
        backoff again if the retry failed); a row already started is finished first.

        Example:
            >>> import asyncio
            >>> async def order():
            ...     lim, seen = AdaptiveLimit(initial=1, maximum=1), []
            ...     async def row(name, slot):
            ...         async with slot:
            ...             seen.append(name); await asyncio.sleep(0)
            ...     await asyncio.gather(row("a", lim), row("b", lim), row("retry", lim.ahead()))
            ...     return seen
            >>> asyncio.run(order())
            ['a', 'retry', 'b']
        """
        return _Ahead(self)

    async def _wait(self, queue: collections.deque) -> None:
        while self.in_flight >= int(self.limit):
            fut = asyncio.get_running_loop().create_future()
            queue.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._wake(1)  # pass on the slot we were handed
                raise

    def _wake(self, n: int) -> None:
        for queue in (self._ahead, self._waiters):
            while n > 0 and queue:
                fut = queue.popleft()
                if not fut.done():
                    fut.set_result(None)
                    n -= 1

    def _set_limit(self, limit: float) -> None:
        grew = int(self.limit)
        self.limit = limit
        if int(limit) > grew:
            self._wake(int(limit) - grew)

    def set_ceiling(self, ceiling: int, *, base: int, initial: int, found: bool | None = None) -> None:
        """Make ``ceiling`` (at least ``minimum``) the hard bound; the size follows within it.

        For a bound that is a share of a larger one (a cluster worker's part of ``max_concurrency``):
        ``base`` and ``initial`` are the configured target floor and starting bound, applied within
        the ceiling. A smaller ceiling applies at once; a larger one lets the bound grow. Led by a
        coordinator's finder (``follow``), the ceiling is the bound and ``found`` says whether it is a capacity found.

        Example:
            >>> lim = AdaptiveLimit(1, 1, base=1)
            >>> lim.set_ceiling(25, base=64, initial=64); lim.maximum, int(lim.limit)
            (25, 25)
            >>> lim.set_ceiling(10, base=64, initial=64); lim.maximum, int(lim.limit)
            (10, 10)
            >>> lim.capacity.bound, lim.capacity.maximum      # the capacity finder probes within the share
            (10, 10)
        """
        ceiling = max(self.minimum, int(ceiling))
        led = self.observed is not None and self.capacity is not None
        if led and found is not None:
            self.capacity.found = found
        if ceiling == self.maximum:
            return
        grew = ceiling > self.maximum
        self.maximum = ceiling
        self.base = min(base, ceiling)
        self.target = min(max(self.target, self.base), ceiling)
        self._sized = None  # the next size() goes to the size the new ceiling allows at once
        cap = self.capacity
        if self.limit > ceiling:
            self.limit = float(ceiling)
        elif grew:
            start = initial if not self.adaptive else max(self.limit, self.base)
            if min(start, ceiling) > self.limit:
                self._set_limit(float(min(start, ceiling)))
        if led:  # the share is this worker's part of the cluster's bound: the coordinator's finder decided it
            cap.maximum = cap.bound = ceiling
            if not self.sized:
                self.target = ceiling
                self._set_limit(float(ceiling))
            self._note("capacity" if cap.found else "latency")
            return
        if cap is not None:  # the capacity finder probes on from this worker's bound, within its share
            cap.maximum, cap.careful = ceiling, self.base >= ceiling
            cap.bound = max(cap.minimum, min(ceiling, max(cap.bound, int(self.limit))))
        self._note("cap")

    @property
    def sized(self) -> bool:
        """The bound was sized from known limits (a rate and the latency), not left at its base."""
        return self._sized is not None

    def size(self, rate: float | None) -> None:
        """Size the target from ``rate`` (requests/s the limits allow) and the mean latency seen.

        With a rate but no answer yet, the target is the ceiling: the rate limiter paces the first
        round trip, and the first latency measured brings the target down to its size. The bound
        follows the target as the mean latency moves, until AIMD cuts it: then it regrows by AIMD.
        """
        if not self.adaptive or not rate:
            return
        latency = self._mean_latency
        if latency is None:
            self.target = self.maximum
        else:
            self.target = max(self.base, min(self.maximum, math.ceil(HEADROOM * rate * latency)))
        cap = self.capacity
        if cap.found and cap.bound < self.target:
            self.target = cap.bound  # the server's capacity is the smaller bound: more would only queue there
        known = self._sized
        if known is None or known[1] != (latency is not None) or abs(rate - known[0]) > 0.25 * known[0]:
            # New limits, or the first latency: go to the new size at once (one slot per round trip would take
            # minutes). A rate that drifts (a TPM limit over requests of varying size) does not undo AIMD's cuts.
            self._sized = (rate, latency is not None)
            self._cut_since_sized = False
            self._set_limit(float(max(self.minimum, self.target)))
            self._note("limits")
        elif self.limit > self.target:
            self.limit = float(max(self.minimum, self.target))
            self._note("capacity" if self.target == cap.bound else "limits")
        elif self.limit < self.target and not self._cut_since_sized:
            # The mean latency grew: the first answers back are the fastest of the first burst, and a bound
            # sized from them left no room for the spread (one slot per round trip took minutes to grow).
            self._set_limit(float(self.target))
            self._note("limits")

    def recall_capacity(self, earlier: CapacityFinder) -> None:
        """Start from the capacity an earlier job of this process found at the same endpoint (no rate known yet).

        Example:
            >>> earlier = CapacityFinder(64, 1024); earlier.floor, earlier.bound, earlier.found = 0.2, 256, True
            >>> lim = AdaptiveLimit(initial=64, maximum=1024, base=64); lim.recall_capacity(earlier)
            >>> int(lim.limit), lim.history[-1]
            (256, [0.0, 256, 'capacity'])
        """
        cap = self.capacity
        if cap is None or earlier.floor is None:
            return
        cap.recall(earlier)
        cap.reason = "capacity" if cap.found else "latency"
        if not self.sized:  # sized from recalled limits: the capacity caps them at the next request (``size``)
            self._capacity_moved(None)

    def _capacity_moved(self, rate: float | None) -> None:
        """The capacity finder moved its bound: with no rate known it is the target, else it caps the rate's."""
        if rate:
            self.size(rate)
            return
        cap = self.capacity
        self.target = cap.bound
        if cap.bound > self.limit:
            self._set_limit(float(cap.bound))
        else:
            self.limit = float(max(self.minimum, cap.bound))
        self._note(cap.reason)

    def on_success(self, latency: float, rate: float | None = None, sent_at: float | None = None,
                   load: int | None = None) -> None:
        """One answer came back after ``latency`` seconds; ``rate``: requests/s the known limits allow.

        ``sent_at``: when its request left (the clock's time; None: now less the latency); ``load``: ``started``'s.
        """
        self._record(False)
        if not self.adaptive:
            return
        used, self._used = self._used, self.in_flight
        if self.observed is not None:  # led by the coordinator's finder: it judges the latency
            self.observed.append((latency, self.clock.monotonic() - latency if sent_at is None else sent_at))
        elif self.capacity.on_answer(latency, max(used, self.in_flight + 1), sent_at, load or None):
            self._capacity_moved(rate)
        self._latencies += 1
        mean = self._mean_latency
        self._mean_latency = latency if mean is None else mean + (latency - mean) * max(0.05, 1.0 / self._latencies)
        self.size(rate)
        # The smoothed latency (a plain mean over the first answers, then an EWMA) against the best
        # smoothed latency seen, drifting up slowly so a permanently slower server becomes the new
        # normal. Smoothed on both sides: a steady mix of prompt-cache hits (20 ms) and misses
        # (400 ms) is no queueing, but its fastest single answer made the mix look like it.
        self._answers += 1
        self._latency += (latency - self._latency) * max(0.05, 1.0 / self._answers)
        if self._answers >= LATENCY_WARMUP:
            base = self._base_latency
            self._base_latency = self._latency if base is None else min(self._latency, base * 1.002)
            if self._latency > 4 * self._base_latency + 0.05:
                self.on_congestion(reason="latency")  # queueing at the server: back off before it starts failing
                return
        if self.limit < self.target:
            self._set_limit(min(self.target, self.limit + 1.0 / max(1.0, self.limit)))
            if self.history[-1][2] != "start":
                self._note(self.history[-1][2])  # regrowth after a cut: the same entry's reason

    def on_congestion(self, factor: float = CUT, reason: str = "latency") -> None:
        """The server has more than it can take (a spent budget, queueing): cut the bound, once a second at most."""
        if not self.adaptive:
            return
        now = self.clock.monotonic()
        if now - self._last_cut < 1.0:  # one cut per round of feedback, not one per failed row
            return
        self._last_cut = now
        self.cuts += 1
        self._cut_since_sized = True
        self.limit = max(self.minimum, self.limit * factor)
        self._note(reason)
        self._latency, self._answers = 0.0, 0  # judge the latency afresh at the new bound

    def on_rate_limited(self, spent: bool = False) -> None:
        """A 429: cut the bound; for an isolated one (``spent`` False) once per episode of them, not once per 429.

        ``spent``: the 429 showed the rate budget spent (it paused admission): an ordinary cut.

        Example:
            >>> from inferframe.runtime.clock import FakeClock
            >>> clock = FakeClock()
            >>> lim = AdaptiveLimit(initial=100, maximum=100, clock=clock)
            >>> for _ in range(3):
            ...     lim.on_rate_limited(); clock.now += 5.0
            >>> lim.limit, lim.cuts
            (90.0, 1)
            >>> lim.on_rate_limited(spent=True); round(lim.limit, 3)     # a spent budget: an ordinary cut
            63.0
        """
        self._record(True)
        if not self.adaptive:
            return
        now = self.clock.monotonic()
        first = now - self._last_429 > EPISODE_QUIET_S
        self._last_429 = now
        if spent:
            self.on_congestion(reason="429")
        elif first:
            self.on_congestion(ISOLATED_CUT, "429")

    def on_fault(self) -> None:
        """A retryable failure that is not a 429 (5xx, reset, timeout, malformed): cut only when failures persist.

        Example:
            >>> lim = AdaptiveLimit(initial=100, maximum=100)
            >>> for i in range(100):
            ...     lim.on_fault() if i % 10 == 0 else lim.on_success(0.1)    # 10%: each row's own problem
            >>> lim.limit
            100.0
            >>> for i in range(40):
            ...     lim.on_fault() if i % 2 == 0 else lim.on_success(0.1)     # half: the server is failing
            >>> lim.limit < 100
            True
        """
        self._record(True)

    @property
    def failing(self) -> bool:
        """Failures persist: a ``FAILURE_SHARE`` or more of the recent answers failed (kept with a fixed bound too).

        Example:
            >>> lim = AdaptiveLimit(initial=8, maximum=8, adaptive=False)
            >>> for i in range(60):
            ...     lim.on_fault() if i % 3 == 0 else lim.on_success(0.1)
            >>> lim.failing, lim.limit
            (True, 8.0)
        """
        recent = self._recent
        return len(recent) >= FAILURE_MIN and self._failed >= FAILURE_SHARE * len(recent)

    def _record(self, failed: bool) -> None:
        recent = self._recent
        if len(recent) == recent.maxlen and recent[0]:
            self._failed -= 1
        recent.append(failed)
        if failed:
            self._failed += 1
            if self.failing:
                self.on_congestion(reason="faults")


class _Ahead:
    """Enter an AdaptiveLimit ahead of its other waiters (``AdaptiveLimit.ahead``)."""

    __slots__ = ("limit",)

    def __init__(self, limit: AdaptiveLimit) -> None:
        self.limit = limit

    async def __aenter__(self) -> AdaptiveLimit:
        lim = self.limit
        if lim.in_flight >= int(lim.limit):
            await lim._wait(lim._ahead)
        return await lim.__aenter__()

    async def __aexit__(self, *exc) -> None:
        await self.limit.__aexit__(*exc)
