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
  busy machine).
* **Growth.** TCP's slow start (grow per acknowledgement, so the window doubles once a round trip)
  with Vegas's proof of room: until the first queueing is seen, each answer within ``GROW_BELOW`` of
  the floor whose request left with n in flight shows the server serves n at once, and the bound
  goes to ``GAIN`` x n (2: twice a round trip's worth, as TCP). Growth from what was proven, not
  from the bound, caps the overshoot at twice the capacity: requests sent past it queue and prove
  nothing. BBR's startup gain (2/ln 2, about 2.89) reached the capacity a round trip sooner at 1,024
  but queued a capacity of 32 for 0.8x its latency (it starts at 64, and 2.89 x 32 is 92). Slow
  start ends once ``SLOW_TO_EXIT`` of the last ``WINDOW`` answers queued and the answers per round
  trip stopped growing (BBR's full pipe: late answers while they still grow are this client's own
  loop working through a wave of them), cut to the most in flight that came back at the floor (a
  FIFO's capacity); what an answer proves leaves out the requests in flight sent over a floor ago
  (answered, their answers waiting for this client's loop, or queued). Once a
  capacity is found, it grows by ``sqrt(bound)`` per quiet window (the queue headroom of Netflix's
  Gradient), only once the answers to requests sent at the bound matured (``MATURE``: a FIFO's queued
  requests come back a round trip after the others) and at most ``GROW_BELOW`` of them came a round
  trip late. So it follows a server that gained capacity without flooding one that did not. Between ``GROW_BELOW`` and ``CUT_ABOVE`` it holds: the steady state
  keeps a queue of at most about a tenth of the floor. Where no in-flight counts come with the sends
  (a cluster's coordinator), slow start doubles once per judged window instead.

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

import collections
import heapq
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
# Slow start: an answer at the floor whose request left with n in flight proves the server serves n at once, and the
# bound goes to GAIN x n at once (per answer, as TCP's slow start grows per ack: twice per round trip, not once a
# judged window). Growth from what was proven, not from the bound, keeps the overshoot within GAIN x the capacity.
GAIN = 2.0
# Slow start ends when this many of the last WINDOW answers came back CUT_ABOVE over the floor (queued).
SLOW_TO_EXIT = WINDOW // 2
# Slow start's delivery rate still grows while a round trip's is this many times the one before's (BBR's full pipe).
STILL_GROWING = 1.25
# Answers are tallied once their requests left this many floors ago: a FIFO's queued requests come back a round trip
# after the others sent with them (a tally that took the fast ones at once read too few as queued).
MATURE = 2.5
# Answers kept until they mature at most.
PENDING_MAX = 8192
# Send times remembered for their in-flight counts at most (beyond: the oldest are dropped; failures leave theirs).
LOADS_MAX = 8192


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
        # Seconds more before a window's cohort starts, and of slack on send times: a cluster's answers reach its finder
        # a report late, a move reaches the workers at their next call, and a send time from one report and an
        # answer's from another are each a call's delay off (``runners.ray_limits.cluster_capacity``); 0 in one process.
        self.delay_s = 0.0
        self.found = False
        self.floor: float | None = None
        self.reason = ""
        self.moves = 0  # times the bound moved
        self._sends = 0  # requests sent while the first FIRST were counted
        self._first: list[float] = []  # latencies of the first FIRST requests sent
        self._first_by: float | None = None  # when the FIRST-th request was sent
        self._first_last = -math.inf  # the latest send time of the first FIRST + 1 counted
        self._latest = -math.inf  # the latest send time counted
        # A window is a cohort: the next ``_cohort`` requests sent from ``_since`` on (until ``_cohort_end``), judged
        # when most are answered. Judging the first answers back instead judged the fastest: they were the ones
        # that found a free slot, while the rest of their cohort still queued.
        self._since = -math.inf
        self._cohort = self._cohort_left = WINDOW + min(256, int(self.bound) // 4)
        self._cohort_end = math.inf
        self._window: list[float] = []
        self._in_flight = 0  # the most in flight during the window
        self._floor_at = 0.0
        self._quiet = False  # the last window's latency was within GROW_BELOW of the floor
        self._answers, self._judged_at = 0, clock.monotonic()  # answers since the last window was judged, and when
        # Answers to requests sent from ``_settled`` on (half a floor after the bound last moved), once matured (see
        # MATURE): how many, how many came a round trip late (SURE x the floor); the answers not matured yet,
        # (send time, latency).
        self._settled, self._tally = -math.inf, [0, 0]
        self._pending: list[tuple[float, float]] = []  # a heap: earliest sent first
        self._least = 0.0  # no cut goes below this: a cut there cost throughput once
        self._cut: tuple | None = None  # the last window cut: (the bound before, the throughput before, found before)
        self._last_ratio: float | None = None  # the latency / floor that made the last window cut (None: it did not)
        # Send time -> the in-flight counts its requests left with (lowest first: in a FIFO the first sent of one
        # instant are served first). Known in one process; a cluster's reports carry none (its windows double instead).
        self._loads: dict[float, list[int]] = {}
        self._proving = False  # in-flight counts come with the sends: slow start grows per answer from them
        self._proven = 0  # slow start: the most in flight that came back at the floor
        self._recent: collections.deque[bool] = collections.deque(maxlen=WINDOW)  # slow start: answers queued?
        self._lately: collections.deque[float] = collections.deque()  # slow start: when answers came, last 2 floors
        # Slow start's rounds (BBR's): a round ends at the first answer to a request sent after it began. When the
        # current one began and its answers so far; the delivery rates (answers/s) of the last two rounds ended.
        self._round_at, self._round_answers, self._rates = -math.inf, 0, (0.0, 0.0)
        # Slow start: requests in flight sent over a floor ago ("due": answered at the server, their answers waiting
        # for this client's loop, or queued there) take no slot a new request can prove. Counted from ``_due_from``:
        # send times not yet a floor old, how many older were sent; answered send times not yet a floor old (a
        # heap), how many older were answered.
        self._due_from = math.inf
        self._due_sends: collections.deque[float] = collections.deque()
        self._due_answers: list[float] = []
        self._sent_old = self._answered_old = 0

    def sent(self, at: float | None = None, in_flight: int | None = None) -> None:
        """A request left (``at``: when, on the clock's time; None: now): the first ``FIRST`` give the floor, then
        each window's cohort is counted. A cluster's finder hears of sends a report late: ``at`` says when.
        ``in_flight``: requests in flight as it left, itself included (what its answer proves, see ``GAIN``)."""
        at = self.clock.monotonic() if at is None else at
        if in_flight is not None:
            self._proving = True
            if self._settled == math.inf:
                self._settled = at  # the first request sent after a cut (see ``_move``)
            if self._since == math.inf:
                self._since = at
            if self.floor is not None and not self.found:
                # What it proves: the requests the server holds as it arrives. A wave of answers is handled one at a
                # time, and each sends the next while the rest of the wave still counts in flight: counted, a
                # capacity of 256 at 1 s on a busy machine "proved" 338 and slow start overshot to 676.
                self._due_from = min(self._due_from, at)
                self._due_sends.append(at)
                in_flight = max(1, in_flight - self._due(at))
            loads = self._loads
            loads.setdefault(at, []).append(in_flight)
            if len(loads) > LOADS_MAX:
                for key in list(loads)[: LOADS_MAX // 2]:
                    del loads[key]
        if self._sends <= FIRST:
            self._sends += 1
            # The latest of the first sends: a cluster's reports come out of order, and a 17th counted before
            # requests sent later left too few answers for the floor (in one process: the 17th's time).
            self._first_last = max(self._first_last, at)
            if self._sends <= FIRST:
                return
            self._first_by = self._first_last  # a request leaves just after it is counted: the 17th marks the end
        self._latest = max(self._latest, at)
        if self._cohort_left and at >= self._since:
            self._cohort_left -= 1
            if not self._cohort_left:
                self._cohort_end = self._latest  # the latest counted: a cluster's reports come out of order

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

    def on_answer(self, latency: float, in_flight: int, sent_at: float | None = None) -> bool:
        """One answer after ``latency`` seconds; True when the bound moved.

        ``in_flight``: the most requests in flight since the last answer (counted as they were sent: as answers
        come back together, the count at each answer falls through the wave and says less).
        ``sent_at``: when the request left, on the clock's time (None: now less the latency).
        """
        now = self.clock.monotonic()
        load = None
        if sent_at is None:
            sent_at = now - latency - SLACK_S
        elif self._loads:
            loads = self._loads.get(sent_at)
            if loads:
                load = loads.pop(loads.index(min(loads)))
                if not loads:
                    del self._loads[sent_at]
        # ``delay_s``: a cluster's send times come from reports other than the answers', each a call's delay off.
        if self.floor is None and (self._first_by is None or sent_at <= self._first_by + self.delay_s):
            self._first.append(latency)
            if len(self._first) >= FIRST:
                self.floor = _upper_quartile(self._first)
                self._first = []
                self._floor_at = now
            return False
        self._answers += 1
        if sent_at >= self._settled and self._proving and len(self._pending) < PENDING_MAX:
            heapq.heappush(self._pending, (sent_at, latency))
        moved = self._prove(latency, load, sent_at, now) if load is not None and self.floor is not None else False
        if sent_at < self._since or sent_at > self._cohort_end + self.delay_s:
            return moved  # not one of the window's cohort
        self._window.append(latency)
        self._in_flight = max(self._in_flight, in_flight)
        if self.floor is None or self._cohort_left or len(self._window) < 0.75 * self._cohort:
            return moved
        return self._judge(now) or moved

    def _due(self, now: float) -> int:
        """Requests in flight sent over a floor ago (see ``_due_from``)."""
        edge = now - self.floor
        sends, answers = self._due_sends, self._due_answers
        while sends and sends[0] < edge:
            sends.popleft()
            self._sent_old += 1
        while answers and answers[0] < edge:
            heapq.heappop(answers)
            self._answered_old += 1
        return max(0, self._sent_old - self._answered_old)

    def _prove(self, latency: float, load: int, sent_at: float, now: float) -> bool:
        """One answer whose request left with ``load`` in flight: slow start grows from it or ends; True: moved."""
        if self.found or self.careful:
            return False
        if sent_at >= self._due_from:
            heapq.heappush(self._due_answers, sent_at)
        if sent_at >= self._round_at:  # a round ended: its delivery rate
            if self._round_answers:
                self._rates = (self._rates[1], self._round_answers / max(1e-9, now - self._round_at))
            self._round_at, self._round_answers = now, 0
        self._round_answers += 1
        fast = latency <= self.floor * (1 + GROW_BELOW)
        lately = self._lately
        lately.append(now)
        while lately[0] <= now - 2 * self.floor:
            lately.popleft()
        if fast:
            self._proven = max(self._proven, load)
            self._recent.append(False)
            new = min(self.maximum, int(GAIN * load))
            if new <= self.bound:
                return False
            return self._move(new, "latency" if new < self.maximum else "cap", now)
        self._recent.append(latency > self.floor * (1 + CUT_ABOVE))
        before, last = self._rates
        if now - self._round_at >= self.floor:  # a round of queued answers lasts longer: judged from a floor on
            before, last = last, self._round_answers / (now - self._round_at)
        if sum(self._recent) < SLOW_TO_EXIT or not before or last >= STILL_GROWING * before:
            # Late answers while the delivery rate still grows are no queue at the server (a queue caps it): a wave
            # of answers that came together waits for this client's own loop, and on a busy machine (load 8-10 on
            # 2 cores) 8 of 16 of a 512-answer wave came a quarter floor late; slow start ended at half the capacity.
            return False
        # Queued answers: the capacity is the most in flight that came back at the floor (in a FIFO exactly what it
        # serves at once). Within a round trip of the first queued answer, not a judged window later (issue 46).
        # The throughput it is judged by (``KEPT``): the answers of the last two floors, at the bound being cut. A busy
        # client's own loop, working through a wave of answers, also makes them late: then the cut costs throughput
        # and is undone (a server's queue costs none, by Little's law).
        bound, throughput = self.bound, len(self._lately) / (2 * self.floor)
        self.found, self._recent = True, collections.deque(maxlen=WINDOW)
        self._due_from, self._sent_old, self._answered_old = math.inf, 0, 0  # tracked again if the cut is undone
        self._due_sends.clear()
        self._due_answers = []
        self._new_window(now)
        new = max(self.minimum, min(bound, max(self._proven, int(self._least))))
        if new >= bound:
            return False
        self._cut, self._last_ratio = (bound, throughput, False), None
        return self._move(new, "capacity", now)

    def _move(self, new: int, reason: str, now: float) -> bool:
        """The bound moves to ``new`` for ``reason``: the answers that judge it are those sent half a floor later, or
        after a cut, from the first request sent once the requests in flight fell below it (``sent``)."""
        cut = new < self.bound
        self.bound, self.reason = new, reason
        self.moves += 1
        # After a cut, requests sent at once would be judged by the queue the bound before left (its requests still in
        # flight): their mean latency cut 338 to 177 at capacity 256 after slow start's overshoot.
        settled = math.inf if cut else now + SETTLE * self.floor
        self._settled, self._tally = settled + self.delay_s, [0, 0]
        if cut and self._proving:
            self._since = math.inf  # the cohort too: from the first request sent after the cut (``sent``)
        self._pending.clear()
        return True

    def _matured(self, now: float) -> list:
        """The tally of answers to requests sent since the bound settled, MATURE floors ago or more (see ``_tally``)."""
        pending, tally, edge = self._pending, self._tally, now - MATURE * self.floor
        queued = self.floor * SURE
        while pending and pending[0][0] <= edge:
            latency = heapq.heappop(pending)[1]
            tally[0] += 1
            tally[1] += latency > queued
        return tally

    def _new_window(self, now: float) -> None:
        """Start the next window: its cohort leaves from half a floor on (see ``SETTLE``)."""
        self._answers, self._judged_at = 0, now
        self._window, self._in_flight = [], 0
        # Requests sent in the next half floor are not judged: the first ones sent after a move find the slots
        # the earlier requests free as they end, and a queue shows only about a round trip later.
        self._since = now + SETTLE * self.floor + self.delay_s
        self._cohort = self._cohort_left = WINDOW + min(256, int(self.bound) // 4)
        self._cohort_end = math.inf

    def _judge(self, now: float) -> bool:
        # The cohort's upper quartile: the answers not back yet are the slowest (its requests left together). Not the
        # median: a cohort that left at a job's start or just after a move is half served at once and half queued.
        window = sorted(self._window)
        rank = (3 * self._cohort) // 4
        sample = window[rank] if len(window) > rank else window[-1]
        used = self._in_flight
        throughput = self._answers / max(1e-9, now - self._judged_at)
        # All answers to requests sent since the bound settled, not the cohort's alone: with a FIFO's answers in
        # waves, a queue of a few slots delays a few answers by a whole round trip and leaves the cohort's quartile
        # at the floor, and the bound crept up by its square root each window into a standing queue (0.28x the
        # latency at capacity 32, 1 s). The share of them a round trip late (SURE: not the spread of a busy
        # client's loop, which held the bound at a fifth of a capacity of 256 at 50 ms when it counted) stops growth.
        count, queued = self._matured(now)
        tallied = self._proving and self.found and not self.careful and count >= WINDOW
        slow = queued / count if tallied else 0.0
        self._new_window(now)
        floor = self.floor = min(self.floor * (1 + DRIFT_PER_S * (now - self._floor_at)), max(sample, 1e-6)) \
            if sample < self.floor * (1 + CUT_ABOVE) else self.floor
        self._floor_at = now
        ratio = sample / floor
        bound = self.bound
        cut, self._cut = self._cut, None
        if cut is not None and throughput < KEPT * cut[1]:
            # The cut cost throughput: it went below what the server serves at once (cutting a queue costs none, by
            # Little's law), or the latency was this client's own loop, whose lag grows with the answers it handles.
            # Back to the bound before; no later cut goes below halfway between the two.
            self._least = (cut[0] + self.bound) / 2
            self._last_ratio, self.found = None, cut[2]
            return self._move(cut[0], "latency", now)
        quiet, self._quiet = self._quiet, ratio <= 1 + GROW_BELOW
        if self.careful and ratio >= 1 + CUT_ABOVE and (ratio < SURE or self._last_ratio is None):
            self._last_ratio = ratio if ratio >= SURE else None
            return False  # the user's own bound: only a queue beyond doubt, two windows in a row, cuts it
        if ratio >= 1 + CUT_ABOVE and quiet and ratio < SURE:
            self._last_ratio = None
            return False  # once after a quiet window, and not by far: noise of this client's own loop, perhaps
        if ratio >= 1 + CUT_ABOVE:
            last, self._last_ratio = self._last_ratio, ratio
            if last is not None and ratio >= STALE * last and not self.careful:
                # The last cut did not bring the latency down: no queue of ours made it (a queue shrinks with
                # the requests in flight), the server or this client's own loop is slower now. A new floor.
                self.floor, self._last_ratio = sample, None
                return False
            new = max(self.minimum, int(max(used / ratio, bound * LEAST_GRADIENT, self._least)))  # Little's law
            if new >= bound:
                return False
            self._cut = (bound, throughput, self.found)
            self.found, reason = True, "capacity"
        else:
            self._last_ratio = None
            if ratio > 1 + GROW_BELOW or used < USED * bound:
                return False
            if self._proving and (not self.found or (not tallied and not self.careful) or slow > GROW_BELOW):
                # Slow start grows per answer (``_prove``). Past a capacity found: only once the answers to requests
                # sent at this bound matured (the requests a FIFO queues come back a round trip after the others)
                # and at most a GROW_BELOW share of them queued.
                return False
            want = bound * 2 if not self.found else bound + max(1, int(math.sqrt(bound)))
            new = min(self.maximum, want)
            reason = "latency" if new == want else "cap"
        if new == bound:
            return False
        return self._move(new, reason, now)


def _upper_quartile(values: list[float]) -> float:
    """The upper quartile of the latencies (the statistic of the floor and of every window)."""
    return statistics.quantiles(values, n=4, method="inclusive")[2]
