"""The cluster's one capacity finder per key: every worker's answers feed it; the in-flight shares split its bound.

The rule, and why: ONE ``runtime.capacity.CapacityFinder`` per endpoint+model key in the coordinator,
fed every worker's answers (batched with their lease calls), with the cluster's requests in flight as
its in-flight count (the sum of each worker's most in flight since its last report). Its rules then
hold for the cluster as for one process: the floor from the first answers, slow start while the
latency stays at the floor, and the Little's-law cut (in flight x floor / latency is what the server
serves at once, whoever sent the requests). A finder per worker instead probes alone: N of them
against one server each find its capacity and together queue it N-fold, or, each cut by the queue
the others made, ramp slowly. The workers' shares (``actor._KeyState.share_for``) split
``min(max_concurrency, bound)``, so together they never hold more than the capacity found, and a
worker's own bound is its share (``AdaptiveLimit.follow``). One difference: a bound grown reaches the
workers at their next calls, so the window after a growth is the requests sent once their reports show
they filled it (``USED`` of it in flight), and past a capacity found a probe that queued is cut by
Little's law on its cohort's mean (``runtime.capacity_cluster.ClusterFinder``), not on its quartile, which a FIFO's
last wave of a few late answers puts a round trip high.

While a rate limit is known and no queue was seen, the finder's probe does not bound the cluster
(as in one process: ``AdaptiveLimit.size`` caps the rate's need by a capacity found only); with a
fixed bound (``adaptive`` False) there is no finder and ``max_concurrency`` is split as before.

Example (two workers, 64 in flight each, against a server that serves 64 at once: half of it queues):
    >>> from inferframe.runtime.clock import FakeClock
    >>> clock = FakeClock()
    >>> cap = ClusterCapacity({"adaptive": True, "base": 128, "max_concurrency": 1024}, clock)
    >>> for w in ("w1", "w2"):   # each sends 64
    ...     _ = cap.observe(w, {"sent": [0.0] * 64, "peak": 64, "answers": []})
    >>> clock.now = 1.0
    >>> for w in ("w1", "w2"):   # answered in 1 s with the bound used: the floor; double it
    ...     _ = cap.observe(w, {"sent": [], "peak": 64, "answers": [(1.0, 1.0)] * 64})
    >>> cap.bound(1024, rate_known=False), cap.found
    (256, False)
    >>> clock.now = 1.8
    >>> for w in ("w1", "w2"):   # each fills its share of 128: the next window is the requests sent after that
    ...     _ = cap.observe(w, {"sent": [0.0] * 128, "peak": 128, "answers": []})
    >>> clock.now = 2.5
    >>> for w in ("w1", "w2"):
    ...     _ = cap.observe(w, {"sent": [0.0] * 64, "peak": 128, "answers": []})
    >>> clock.now = 4.5
    >>> for w in ("w1", "w2"):   # sent at 256 in all, answered in twice the floor: the capacity is 128
    ...     _ = cap.observe(w, {"sent": [], "peak": 128, "answers": [(2.0, 2.0)] * 64})
    >>> cap.bound(1024, rate_known=False), cap.found, cap.reason
    (128, True, 'capacity')
"""

from __future__ import annotations

from inferframe.runners.ray_limits.tuning import CHUNK_SECONDS
from inferframe.runtime.capacity import USED
from inferframe.runtime.capacity_cluster import ClusterFinder
from inferframe.runtime.clock import Clock

# Sends and answers one report carries at most (about 100 ms of a worker's answers: more is a worker far past any server).
MAX_ANSWERS = 4096
# A window after the bound grew waits at most this many latency floors for the workers to fill it.
FILL_FLOORS = 2.0
# Moves of the bound kept for ``describe`` (the first ones: how it was found).
HISTORY_MAX = 200


class ClusterCapacity:
    """The capacity found for one key from every worker's answers (see the module docstring).

    Parameters:
        config: the lease's config: ``adaptive`` (False: no finder), ``base`` (the bound it starts from),
            ``max_concurrency`` (its ceiling).
        clock: the coordinator's clock (answers come with their age: the workers' clocks are not this one).
    """

    def __init__(self, config: dict, clock: Clock) -> None:
        top = max(1, int(config.get("max_concurrency") or 1))
        start = int(config.get("base") or top)
        self.clock = clock
        # Answers come a report late, a move reaches the workers at their next call: two calls' slack.
        self.finder = ClusterFinder(start, top, delay_s=2 * CHUNK_SECONDS, clock=clock) if config.get("adaptive") else None
        self._filling = 0  # a bound grown that the workers have not yet filled (``observe``)
        self.peaks: dict[str, int] = {}  # worker -> the most it had in flight since its report before the last
        self._t0 = clock.monotonic()
        # (seconds since the first lease, bound, why it moved): what ``describe`` shows, as ``AdaptiveLimit.history``.
        self.history: list[tuple[float, int, str]] = []

    @property
    def found(self) -> bool:
        return self.finder is not None and self.finder.found

    @property
    def floor(self) -> float | None:
        """The latency floor found (seconds; None: not yet, or no finder)."""
        return self.finder.floor if self.finder is not None else None

    @property
    def reason(self) -> str:
        return self.finder.reason if self.finder is not None else ""

    def observe(self, worker: str, observed: dict | None) -> bool:
        """Feed one worker's report (``AdaptiveLimit.take_observed``) to the finder; True when the bound moved."""
        finder = self.finder
        if finder is None or not observed:
            return False
        self.peaks[worker] = int(observed.get("peak", 0))
        in_flight = sum(self.peaks.values())
        now, moved, before = self.clock.monotonic(), False, finder.bound
        for age in observed.get("sent", ())[:MAX_ANSWERS]:  # when each left: a cohort is the requests sent after a move
            finder.sent(now - float(age))
        if self._filling and in_flight >= USED * self._filling:
            self._filling = 0  # the workers filled the bound grown: the next window is the requests sent from now on
            finder.window_from(now)
        for latency, age in observed.get("answers", ())[:MAX_ANSWERS]:
            moved |= finder.on_answer(float(latency), in_flight, sent_at=now - float(age))
        if moved and finder.bound > before and finder.floor is not None:
            # A bound grown reaches the workers at their next lease calls, and they fill it as answers free their
            # requests: a window of requests sent before then found the server's old load (four workers at 512 sent a
            # cohort at 256 in flight, served at the floor, and doubled to 1,024 at a capacity of 256). No window until
            # they filled it, or ``FILL_FLOORS`` floors (a job's tail may never fill it).
            self._filling = finder.bound
            finder.window_from(now + FILL_FLOORS * finder.floor)
        elif moved:
            self._filling = 0
        if moved and len(self.history) < HISTORY_MAX:
            self.history.append((round(now - self._t0, 3), finder.bound, finder.reason))
        return moved

    def forget(self, worker: str) -> None:
        """A worker left (idle): its requests in flight no longer count. The last one gone: the finder is idle."""
        self.peaks.pop(worker, None)
        if not self.peaks and self.finder is not None:
            self._filling = 0  # the job ended: the next one's first window is judged as ``idle`` says
            self.finder.idle()

    def bound(self, max_concurrency: int, rate_known: bool) -> int:
        """The cluster's in-flight bound: ``max_concurrency``, or less where the finder bounds it."""
        finder = self.finder
        if finder is None or (rate_known and not finder.found):
            return max_concurrency
        return max(1, min(max_concurrency, finder.bound))
