"""Find a self-hosted server's capacity from latency alone, without making it queue.

vLLM, llama.cpp's server, TGI and SGLang send no rate-limit headers: such a server has a capacity
(its batch size) instead of a rate. Up to it the latency stays near its floor; past it requests
queue and the latency grows with the queue. ``CapacityFinder`` moves a bound on requests in flight
from what the latency shows, after the published adaptive concurrency limiters:

* **The floor (minimum RTT).** Netflix's Vegas keeps the lowest single RTT seen; Gradient2 a long
  average; Envoy's adaptive concurrency filter measures ``minRTT`` while it pins concurrency low, so
  nothing queues, and repeats that now and then. A batch job gets Envoy's measurement for free at
  its start: the first ``FIRST`` requests sent reach an idle server, so their median latency is the
  floor before any queue formed (in a FIFO the earliest sent are served first, even when the job
  starts above the capacity). After that the floor is the least median of the windows below,
  rising ``DRIFT_PER_S`` a second toward what is seen (Gradient2's long average decays the same
  way), and re-based at once when a cut left nothing queued yet the latency stayed up (the server
  became slower, as Vegas's periodic probe re-bases its ``rtt_noload``). Medians, not single
  answers: a mix of prompt-cache hits and misses has fast single answers that are no floor.
* **The gradient.** Every window of answers to requests sent since the bound last moved (at
  least ``WINDOW`` of them, so at least one round trip) gives the median latency; ``ratio`` =
  median / floor. Envoy's and Gradient2's rule ``new = bound x floor / sample`` is taken for the
  cut, with the in-flight count the window actually had: by Little's law, requests in flight over
  latency is the throughput, so in flight x floor / latency is the number the server serves at
  once (its capacity, for a FIFO) and the cut loses no throughput. As in both, one cut at most
  halves the bound (a stall of the client's own loop must not wipe it out). A cut that cost more than
  ``1 - KEPT`` of the throughput is undone, and no later cut goes below halfway: cutting a queue at
  the server costs no throughput (Little's law), so that cut went below the capacity, or the latency
  came from elsewhere (this client's own event loop, whose lag grows with the answers it handles on a
  busy machine). And no cut where the window's extra in flight over an earlier one's bought at least half the answers
  a second it would without a queue (BBR's test of its probes, ``_bought``): a FIFO past its capacity answers no more
  a second, so that latency is this load's floor (a busy client, a server whose batch steps slow as it fills).
* **Growth.** TCP's slow start, per answer, with BBR's startup gain and Vegas's proof of room: until
  the first queueing is seen, the answers within ``1 + CUT_ABOVE`` of the floor whose requests left
  within ``TOGETHER`` x the floor of each other show the server served n of them at once, and the
  bound goes to ``GAIN`` x n (see there). Slow start ends when ``SLOW_TO_EXIT`` of the last
  ``WINDOW`` answers came back ``SURE`` x the floor late (a FIFO's queued requests come back a round
  trip after the others) while this client's event loop was seen waiting after they were due (a
  timer on time, ``_watch``: a busy client reads a wave of answers late, and that is no queue at the
  server): cut to the most that came back at the floor, what a FIFO serves at once, judged from the
  first request sent once the requests in flight fell under it. Where the sends come with no bound
  (a cluster's coordinator; a job sized from rate limits), slow start doubles the bound per window
  instead, while the latency stays within ``GROW_BELOW`` of the floor and the bound was used (Vegas
  does not grow a limit the application leaves half empty). Once a capacity is found, it grows by
  ``sqrt(bound)`` per quiet window (the queue headroom of Netflix's Gradient), in one process only
  once the answers to requests sent at the last growth matured (``MATURE``) and at most a tenth of
  the answers came a round trip late, so it follows a server that gained capacity without flooding
  one that did not. Between ``GROW_BELOW`` and ``CUT_ABOVE`` it holds: the steady state
  keeps a queue of at most about a tenth of the floor.

Example:
    >>> from inferframe.runtime.clock import FakeClock
    >>> clock = FakeClock()
    >>> finder = CapacityFinder(start=64, maximum=1024, clock=clock)
    >>> clock.now = 1.0
    >>> for _ in range(64):                  # the first round trip: 1 s, the bound used, so the floor; double it
    ...     finder.sent(); _ = finder.on_answer(1.0, in_flight=64, sent_at=0.0)
    >>> finder.floor, finder.bound, finder.found
    (1.0, 128, False)
    >>> clock.now = 1.5
    >>> for _ in range(64):                  # half a floor later: the next window's cohort leaves
    ...     finder.sent()
    >>> clock.now = 3.5
    >>> for _ in range(64):                  # sent at 128: twice the floor, so the capacity is 64
    ...     _ = finder.on_answer(2.0, in_flight=128, sent_at=1.5)
    >>> finder.bound, finder.found, finder.reason
    (64, True, 'capacity')
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import math
import statistics

from inferframe.runtime.clock import REAL, Clock

# The first requests of a job: their median latency is the floor (they reach an idle server).
FIRST = 16
# A send time worked out as the answer's time less its latency is two reads of the clock apart: this much early.
SLACK_S = 1e-4
# Answers a window needs at least (and at most a quarter of the bound more): one median per round trip.
WINDOW = 16
# Grow while the window's median is within this share of the floor; cut when it is this far above.
GROW_BELOW = 0.10
CUT_ABOVE = 0.25
# A window this far above the floor cuts at once; one less far cuts only when the window before was not quiet.
SURE = 1.6
# One cut keeps at least this share of the bound (Envoy's and Gradient2's least gradient).
LEAST_GRADIENT = 0.5
# The floor rises by at most this share a second toward the medians seen.
DRIFT_PER_S = 0.002
# A cut after which the latency / floor stays above this share of what it was left no queue to drain.
STALE = 0.9
# Requests sent within this share of the floor after the bound moved are left out of the next window.
SETTLE = 0.5
# A cut must keep this share of the throughput (answers/s) of the window before it, or it is undone.
KEPT = 0.85
# The bound counts as used when the window saw this share of it in flight.
USED = 0.8
# Slow start (TCP's, per answer, not once a judged window): the n answers back at the floor whose requests were served
# together prove the server serves n at once, and the bound goes to GAIN x n, BBR's startup gain 2/ln 2 (the least that
# doubles the delivery rate each round). Grown from what was proven, never from the bound, the probe stays within GAIN
# x the capacity: requests sent past it queue and prove nothing. A job of 20 round trips that starts at 64 loses one to
# the probe (``RateLimiter``) and then one per round of the ramp: at 1,024 and 1 s a gain of 2 took four rounds, this
# one three. Only n of at least USED of the bound their requests left under count (Vegas grows no limit left half
# empty): the first 32 of 64 back at the floor of a capacity of 32 would grow it to 92 and queue most of a short job.
GAIN = 2.89
# Slow start ends when this many of the last WINDOW answers came back SURE x the floor or later (queued).
SLOW_TO_EXIT = WINDOW // 2
# Past a capacity found, the bound grows again only this many floors after it last grew: the requests a FIFO queues
# come back a round trip after the others sent with them (2 floors), and the windows before judged without them.
MATURE = 2.5
# This client's event loop is watched every WATCH_S (or a twentieth of the floor, at least WATCH_MIN_S); a tick this
# late (or LATE_TICK x the floor) shows the loop busy, not waiting for answers.
WATCH_S, WATCH_MIN_S, LATE_TICK = 0.05, 0.005, 0.05
# Answers back at the floor whose requests left within this share of the floor of each other were served together.
TOGETHER = 0.9


class CapacityFinder:
    """A bound on requests in flight that finds a server's capacity from latency (see module docstring).

    Parameters:
        start: the bound before anything is known.
        maximum: the bound never grows past this (the user's max_concurrency, or the default ceiling).
        minimum: the bound never shrinks below this.
        clock: where time comes from (a FakeClock in tests).

    Attributes:
        bound: the bound now; ``found``: queueing was seen, so the bound is a capacity found, not a probe;
        ``floor``: the latency floor in seconds (None until the first answers); ``reason``: why the
        bound last moved: "latency" (grown: the latency stayed at its floor), "capacity" (cut: queueing),
        "cap" (grown to ``maximum``).
    """

    def __init__(self, start: int, maximum: int, minimum: int = 1, clock: Clock = REAL) -> None:
        self.clock = clock
        self.maximum = maximum
        self.minimum = minimum
        self.bound = max(minimum, min(start, maximum))
        # Starting at the ceiling: the user's own max_concurrency (or a local server's slots). A queue beyond doubt
        # (SURE, two windows in a row) cuts it; what a busy client's own loop adds to the latency must not.
        self.careful = start >= maximum
        # Seconds more before a window's cohort starts, and of slack on send times: 0 in one process; a cluster's
        # reports lag (``runtime.capacity_cluster.ClusterFinder``).
        self.delay_s = 0.0
        self.found = False
        self.floor: float | None = None
        self.reason = ""
        self.moves = 0  # times the bound moved
        self._job_start = False  # the next window is a later job's first (its sends left at once): judged on a round
        self._sends = 0  # requests sent while the first FIRST were counted
        self._first: list[tuple] = []  # the first FIRST requests sent: (latency, load, send time)
        self._first_by: float | None = None  # when the FIRST-th request was sent
        self._first_last = -math.inf  # the latest send time of the first FIRST + 1 counted
        self._latest = -math.inf  # the latest send time counted
        # A window is a cohort: the next ``_cohort`` requests sent from ``_since`` on (to ``_cohort_end``), judged when
        # most are answered (the first answers back were the fastest: they found a free slot while the rest queued).
        self._since = -math.inf
        self._cohort = self._cohort_left = WINDOW + min(256, int(self.bound) // 4)
        self._cohort_end = math.inf
        self._window: list[float] = []
        self._in_flight = 0  # the most in flight during the window
        self._floor_at = 0.0
        self._quiet = False  # the last window's latency was within GROW_BELOW of the floor
        self._answers, self._judged_at = 0, clock.monotonic()  # answers since the last window was judged, and when
        self._round = 0  # of them, answers to requests sent since the window began (``_since``)
        self._late = 0  # of them, those SURE x the floor late (queued a round trip)
        self._latency_sum = 0.0  # of them, their latencies summed (a cluster's mean: Little's law, see ``_judge``)
        self._grown_at = -math.inf  # when the bound last grew past a capacity found
        self._least = 0.0  # no cut goes below this: a cut there cost throughput once
        self._rates: collections.deque[tuple[int, float]] = collections.deque(maxlen=32)  # (in flight, answers/s)
        self._cut: tuple | None = None  # the last window cut: (the bound before, the throughput before, found before)
        self._last_ratio: float | None = None  # the latency / floor that made the last window cut (None: it did not)
        # Slow start per answer (``GAIN``), where the sends come with their in-flight counts (one process; a cluster's
        # reports carry none, and its windows double instead): the most in flight that came back at the floor; the
        # last WINDOW answers, late or not; when answers came in the last two floors (the throughput before the exit).
        self._proven = 0
        self._recent: collections.deque[bool] = collections.deque(maxlen=WINDOW)
        self._lately: collections.deque[float] = collections.deque()
        # Send times of the answers back at the floor (sorted; the last two floors'), and when slow start's sends began.
        self._fast: list[float] = []
        self._fast_bounds: list[int] = []  # the bound each of them left under
        self._proving_since = self._proving_last = math.inf
        # When this client's event loop last ran a timer on time (``_watch``; None: not watched, as a cluster's finder).
        self.responsive_at: float | None = None
        self._watching = False

    def sent(self, at: float | None = None, proving: bool = False) -> int | None:
        """A request left (``at``: when, on the clock's time; None: now): the first ``FIRST`` give the floor, then
        each window's cohort is counted. A cluster's finder hears of sends a report late: ``at`` says when.

        ``proving``: its answer comes back with ``sent``'s return, the bound it left under (None: slow start is over),
        for slow start to grow per answer (one process; a cluster's reports carry none).
        """
        at = self.clock.monotonic() if at is None else at
        load = None
        if proving and not self.found and not self.careful:
            load = self.bound
            self._proving_since, self._proving_last = min(self._proving_since, at), at
            if not self._watching:
                self._watch()
        if self._since == math.inf:
            self._since = at  # the first request sent after slow start's cut: the bound before's queue is behind it
        if self._sends <= FIRST:
            self._sends += 1
            # The latest of the first sends: a cluster's reports come out of order, and a 17th counted before
            # requests sent later left too few answers for the floor (in one process: the 17th's time).
            self._first_last = max(self._first_last, at)
            if self._sends <= FIRST:
                return load
            self._first_by = self._first_last  # a request leaves just after it is counted: the 17th marks the end
        self._latest = max(self._latest, at)
        if self._cohort_left and at >= self._since:
            self._cohort_left -= 1
            if not self._cohort_left:
                self._cohort_end = self._latest  # the latest counted: a cluster's reports come out of order
        return load

    def recall(self, earlier: "CapacityFinder") -> None:
        """Start from what an earlier job learned about the same endpoint (its floor and capacity).

        Example:
            >>> a, b = CapacityFinder(64, 1024), CapacityFinder(64, 1024)
            >>> a.floor, a.bound, a.found = 0.2, 256, True
            >>> b.recall(a); b.floor, b.bound, b.found
            (0.2, 256, True)
        """
        if earlier.floor is None:
            return
        self.floor, self.found = earlier.floor, earlier.found
        self.bound = max(self.minimum, min(self.maximum, earlier.bound))
        self._sends = FIRST + 1  # the floor is known: no first window
        self._since = self.clock.monotonic()
        self._floor_at = self.clock.monotonic()

    def idle(self) -> None:
        """Nothing of this client's is in flight or waiting (a cluster's job ended). The window so far spans the pause
        (its few answers a second are no lost throughput): judged afresh from the next requests; the last cut stands (a
        Spark session's coordinator lives from job to job: the next job's first window undid the cut found before)."""
        if self.floor is not None:
            self._cut, self._last_ratio = None, None
            self._new_window(self.clock.monotonic())
            self._job_start = True

    def window_from(self, at: float) -> None:
        """The next window: the requests sent from ``at`` on (a cluster's, once its workers filled a bound grown)."""
        self._new_window(self.clock.monotonic())
        self._since = at

    def on_answer(self, latency: float, in_flight: int, sent_at: float | None = None,
                  load: int | None = None) -> bool:
        """One answer after ``latency`` seconds; True when the bound moved.

        ``in_flight``: the most requests in flight since the last answer (counted as they were sent: as answers
        come back together, the count at each answer falls through the wave and says less).
        ``sent_at``: when the request left, on the clock's time (None: now less the latency).
        ``load``: what ``sent`` returned for it (None: unknown; slow start then doubles per judged window).
        """
        now = self.clock.monotonic()
        if sent_at is None:
            sent_at = now - latency - SLACK_S
        # ``delay_s``: a cluster's send times come from reports other than the answers', each a call's delay off.
        if self.floor is None and (self._first_by is None or sent_at <= self._first_by + self.delay_s):
            self._first.append((latency, load, sent_at))
            if len(self._first) < FIRST:
                return False
            first, self._first = self._first, []
            self.floor, self._floor_at = statistics.quantiles([f[0] for f in first], n=4, method="inclusive")[2], now
            # What the first answers prove, now that the floor says which came back at it.
            return any([self._slow_start(lat, then, at, now) for lat, then, at in first if then])
        self._answers += 1
        self._round += sent_at >= self._since
        self._latency_sum += latency
        self._late += latency >= SURE * self.floor if self.floor is not None else 0
        moved = self._slow_start(latency, load, sent_at, now) if load and self.floor is not None else False
        if sent_at < self._since or sent_at > self._cohort_end + self.delay_s:
            return moved  # not one of the window's cohort
        self._window.append(latency)
        self._in_flight = max(self._in_flight, in_flight)
        if self.floor is None or self._cohort_left or len(self._window) < 0.75 * self._cohort:
            return moved
        if self._waits_for_a_round():
            return moved
        return self._judge(now) or moved

    # The rules a cluster's finder (``runtime.capacity_cluster.ClusterFinder``) changes; these are one process's.
    reports_late = False  # answers and sends come as they happen, not a report late

    def _waits_for_a_round(self) -> bool:
        """The window waits for more answers than its cohort's (never, in one process)."""
        return False

    def _gradient(self, sample: float, floor: float, mean: float | None, late: float, spread: float) -> tuple:
        """(ratio, little): the window's latency over the floor that judges it, and the one a cut divides by."""
        return sample / floor, sample / floor

    def _level(self, sample: float, mean: float | None) -> float:
        """The latency a new floor is set to when a cut did not bring the latency down."""
        return sample

    def _slow_start(self, latency: float, bound_then: int, sent_at: float, now: float) -> bool:
        """One answer whose request left under ``bound_then`` (see ``sent``): slow start grows or ends; True: moved."""
        if self.found or self.careful:
            return False
        floor, lately = self.floor, self._lately
        lately.append(now)
        while lately[0] <= now - 2 * floor:
            lately.popleft()
        # Served at once: a FIFO's queued requests come back a round trip late; this client's own loop makes a wave's
        # last answers late by the time it takes to read the wave (at 1,024 and 1 s on a busy 2-core machine, over a
        # tenth of the floor: slow start waited a round trip more for proof). CUT_ABOVE: the top of the band it holds.
        if latency <= floor * (1 + CUT_ABOVE):
            self._recent.append(False)
            # What it proves: the answers back at the floor whose requests left within TOGETHER x the floor before it
            # (each was served when it arrived). Counted from the answers, not from the requests in flight as it left:
            # those count a wave's answers this client has not read yet, and requests sent after it on pooled
            # connections reach the server first (new ones wait for a handshake): 1,024 "proved" at a capacity of 256.
            fast, bounds = self._fast, self._fast_bounds
            at = bisect.bisect_right(fast, sent_at)
            fast.insert(at, sent_at)
            bounds.insert(at, bound_then)
            if fast[0] < sent_at - 2 * floor:
                old = bisect.bisect_left(fast, sent_at - 2 * floor)
                del fast[:old], bounds[:old]
            lo, hi = bisect.bisect_right(fast, sent_at - TOGETHER * floor), bisect.bisect_right(fast, sent_at)
            load = hi - lo
            self._proven = max(self._proven, load)
            new = min(self.maximum, int(GAIN * load))
            # Grown once the bound was used (Vegas): the largest bound those requests left under, not this one's (sent
            # to replace an answer under the bound before, it would let 256 of 531 at the floor grow 531 to 739).
            if new <= self.bound or load < USED * max(bounds[lo:hi]):
                return False
            self.bound, self.reason = new, "latency" if new < self.maximum else "cap"
            self.moves += 1
            return True
        # Late at the server, not in this client: its loop ran a timer on time after the answer was due, and shortly
        # before it read the answer (``_waited``). A wave of 1,024 answers at 1 s on a busy 2-core machine is read over
        # more than half a second: its last answers came SURE x the floor late, slow start ended, cut 1,024 to 531.
        self._recent.append(latency >= floor * SURE and self._waited(sent_at + (1 + CUT_ABOVE) * floor, now))
        if sum(self._recent) < SLOW_TO_EXIT:
            return False
        # Queued answers (a FIFO's come back a round trip late): the capacity is the most in flight that came back at
        # the floor, exactly what a FIFO serves at once. A busy client's own loop makes answers late too: then the cut
        # costs throughput (``KEPT``, judged against the answers of the last two floors: one floor can hold two of a
        # FIFO's waves, and undid the cut of a capacity of 16 found at 100 ms) and is undone.
        bound, throughput = self.bound, len(lately) / (2 * floor)
        self.found, self._recent = True, collections.deque(maxlen=WINDOW)
        self._fast, self._fast_bounds, self._proving_since = [], [], math.inf  # counted afresh if the cut is undone
        self.responsive_at = None  # the watch ends with slow start
        self._new_window(now)
        self._since = math.inf  # judged from the first request sent once the requests in flight fell under the cut
        new = max(self.minimum, min(bound, max(self._proven, int(self._least)) or int(bound * LEAST_GRADIENT)))
        if new >= bound:
            return False
        self._cut, self._last_ratio = (bound, throughput, False), None
        self.bound, self.reason = new, "capacity"
        self.moves += 1
        return True

    def _waited(self, due: float, now: float) -> bool:
        """This client's loop ran a timer on time after ``due`` and within a quarter floor before ``now`` (or it is not
        watched): what it reads now was late at the server. A loop on time once, then busy reading a burst that came
        before, says nothing of it (at 50 ms on a loaded machine, slow start cut 231 to 80 at a capacity of 256)."""
        seen = self.responsive_at
        return seen is None or seen >= max(due, now - CUT_ABOVE * self.floor)

    def _watch(self, due: float | None = None) -> None:
        """Watch this client's event loop while slow start lasts: a tick on time says when it last waited (idle)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._watching = False
            return
        now = self.clock.monotonic()
        period = WATCH_S if self.floor is None else max(WATCH_MIN_S, min(WATCH_S, self.floor / 20))
        if due is not None and now - due <= max(WATCH_MIN_S, LATE_TICK * (self.floor or 0.0)):
            self.responsive_at = now
        # While slow start lasts and its sends go on (a job sized from rate limits sends none: see ``sent``).
        self._watching = not (self.found or self.careful) and now - self._proving_last <= 2 * (self.floor or 1.0)
        if self._watching:
            loop.call_later(period, self._watch, now + period)
        else:
            self.responsive_at = None  # not watched: latency is judged as it is

    def _new_window(self, now: float) -> None:
        """The next window: requests sent in the next half floor are not judged (the first ones sent after a move
        find the slots the earlier requests free as they end, and a queue shows only about a round trip later)."""
        self._answers, self._late, self._latency_sum, self._judged_at = 0, 0, 0.0, now
        self._round, self._job_start = 0, False  # answers to requests sent since the window began; not idle()'s
        self._window, self._in_flight = [], 0
        self._since = now + SETTLE * self.floor + self.delay_s
        self._cohort = self._cohort_left = WINDOW + min(256, int(self.bound) // 4)
        self._cohort_end = math.inf

    def _judge(self, now: float) -> bool:
        # The cohort's upper quartile (those not back yet are its slowest), not the median: after a move, half queue.
        window = sorted(self._window)
        rank = (3 * self._cohort) // 4
        sample = window[rank] if len(window) > rank else window[-1]
        spread = (sum(window) + max(0, self._cohort - len(window)) * sample) / max(self._cohort, len(window))
        used = self._in_flight
        throughput = self._answers / max(1e-9, now - self._judged_at)
        self._rates.append((used, throughput))
        # All answers since the last window, not the cohort's alone: a FIFO's answers come in waves, a queue of a few
        # slots makes a few a round trip late while the cohort's quartile stays at the floor (32 crept to 49 at 1 s).
        late = self._late / max(1, self._answers)
        mean = self._latency_sum / self._answers if self._answers else None
        seen = self._waited(self._cohort_end + (1 + CUT_ABOVE) * self.floor, now)  # the loop waited after they were due
        self._new_window(now)
        floor = self.floor = min(self.floor * (1 + DRIFT_PER_S * (now - self._floor_at)), max(sample, 1e-6)) \
            if sample < self.floor * (1 + CUT_ABOVE) else self.floor
        self._floor_at = now
        ratio, little = self._gradient(sample, floor, mean, late, spread)  # ``little``: the cut's, by Little's law
        bound, after_cut = self.bound, self._cut is not None
        if self._undo_cut(throughput, used, ratio):
            return True
        quiet, self._quiet = self._quiet, ratio <= 1 + GROW_BELOW
        if self.careful and ratio >= 1 + CUT_ABOVE and (ratio < SURE or self._last_ratio is None):
            self._last_ratio = ratio if ratio >= SURE else None
            return False  # the user's own bound: only a queue beyond doubt, two windows in a row, cuts it
        if ratio >= 1 + CUT_ABOVE and not seen:
            return False  # the answers may have waited for this client's busy loop, not in the server's queue
        if ratio >= 1 + CUT_ABOVE and quiet and ratio < SURE:
            self._last_ratio = None
            return False  # once after a quiet window, and not by far: noise of this client's own loop, perhaps
        if ratio >= 1 + CUT_ABOVE and after_cut and self.reports_late:
            return False  # a cut reaches a cluster's workers a call late: the next window judges it
        if ratio >= 1 + CUT_ABOVE:
            last, self._last_ratio = self._last_ratio, ratio
            level = self._level(sample, mean)
            if last is not None and level / floor >= STALE * last and not self.careful:
                # The last cut did not bring the latency down: no queue of ours made it (a queue shrinks with
                # the requests in flight), the server or this client's own loop is slower now. A new floor.
                self.floor, self._last_ratio = level, None
                return False
            if not (after_cut or self.reports_late) and _bought(used, throughput, list(self._rates)[:-1]):
                self.floor, self._last_ratio = sample, None  # the latency of this load, not a queue's: a new floor
                return False
            new = max(self.minimum, int(max(used / little, bound * LEAST_GRADIENT, self._least)))  # Little's law
            if new >= bound:
                return False
            if new > used / little + 1:
                self._last_ratio = None  # held above Little's law: a queue may stay, and says nothing of the floor
            self._cut = (bound, throughput, self.found)
            self.found, reason = True, "capacity"
        else:
            self._last_ratio = None
            if ratio > 1 + GROW_BELOW or used < USED * bound or (self._proving_since < math.inf and not self.found):
                return False  # (slow start with in-flight counts grows per answer: ``_slow_start``)
            mature = now >= self._grown_at + MATURE * floor
            if self.found and (late > GROW_BELOW or (self._proving_last < math.inf and not mature)):
                return False  # a standing queue already (Gradient's headroom is full), or not shown yet (one process's
                # only: a cluster's coordinator hears of answers a report late, and its windows grow as they did)
            self._grown_at = now
            want = bound * 2 if not self.found else bound + max(1, int(math.sqrt(bound)))
            new = min(self.maximum, want)
            reason = "latency" if new == want else "cap"
        if new == bound:
            return False
        self.bound, self.reason = new, reason
        self.moves += 1
        return True

    def _undo_cut(self, throughput: float, used: int, ratio: float) -> bool:
        """The window after a cut (``_cut``): back to the bound before where the cut cost throughput; True: undone."""
        cut, self._cut = self._cut, None
        if cut is None or throughput >= KEPT * cut[1] or used < USED * self.bound or ratio > 1 + GROW_BELOW:
            return False
        # The cut cost throughput: it went below what the server serves at once (cutting a queue costs none, by
        # Little's law), or the latency was this client's own loop, whose lag grows with the answers it handles.
        # Back to the bound before; no later cut goes below halfway between the two. Judged only where the window
        # used its bound (a job's tail lowers it too), and where the latency fell to the floor: a queue still
        # shown says the cut left the server its capacity (a cluster's answers a second read low from late reports).
        self._least = (cut[0] + self.bound) / 2
        self._last_ratio, self.found = None, cut[2]
        self.bound, self.reason = cut[0], "latency"
        self.moves += 1
        return True


def _bought(used: int, throughput: float, earlier: list[tuple[int, float]]) -> bool:
    """Whether ``used`` in flight bought at least half the throughput it would without a queue, against an earlier
    window with a quarter to half as few (BBR's test of a probe: more in flight that delivers no more only queued).
    A FIFO past its capacity delivers no more; a busy client (or a server whose batch steps slow as it fills) answers
    later with more in flight, yet more a second: at 50 ms and a capacity of 1,024 on 2 cores, 1.3-1.5x the idle floor
    at 1,024 in flight while the answers a second doubled. One process only, not in the window after a cut: a cluster's
    answers come in reports, late and in batches (four Ray workers took 512 at a capacity of 256 for a gain).

    Example:
        >>> _bought(256, 3900.0, [(170, 2850.0)]), _bought(512, 256.0, [(256, 250.0)])
        (True, False)
    """
    return any(1.25 * u <= used <= 2 * u and throughput >= t * (1 + 0.5 * (used / u - 1)) for u, t in earlier if t > 0)
