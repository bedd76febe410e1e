"""The capacity finder of a cluster's coordinator: the rules that differ where answers arrive a report late.

A coordinator (``runners.ray_limits.cluster_capacity``) feeds one ``CapacityFinder`` every worker's answers,
batched with their lease calls: it hears of sends and answers a report late, a move reaches the workers at their
next call, and its reports carry no in-flight count per request (so no slow start per answer: its windows double).
``ClusterFinder`` is that finder; each rule below says what a cluster showed that one process does not.

Example:
    >>> from inferframe.runtime.clock import FakeClock
    >>> finder = ClusterFinder(64, 1024, delay_s=0.2, clock=FakeClock())
    >>> finder.reports_late, finder.delay_s, finder.bound
    (True, 0.2, 64)
"""

from __future__ import annotations

from inferframe.runtime.capacity import CapacityFinder
from inferframe.runtime.clock import REAL, Clock


class ClusterFinder(CapacityFinder):
    """A ``CapacityFinder`` fed a cluster's reports (see the module docstring).

    Parameters:
        start, maximum, minimum, clock: as ``CapacityFinder``'s.
        delay_s: seconds a report may lag what it tells: the slack on send times, and the wait before a window's
            cohort starts (a move reaches the workers at their next call).
    """

    # A cut reaches the workers a call late and the queue drains a round trip after: judged on the window after, the
    # floor moved to the queued latency (0.258 -> 0.458 s at a capacity of 64) or cut again. And no test of whether
    # more in flight bought answers (``_bought``): the reports' in-flight counts are a call apart from their answers.
    reports_late = True

    def __init__(self, start: int, maximum: int, minimum: int = 1, *, delay_s: float, clock: Clock = REAL) -> None:
        super().__init__(start, maximum, minimum, clock=clock)
        self.delay_s = delay_s

    def _waits_for_a_round(self) -> bool:
        # A later job's workers send their shares at once: a FIFO serves the cohort first, the rest a round trip
        # later. Judged on the cohort, a later Spark job at 128 in flight at a capacity of 64 doubled: its first
        # window waits for a round of answers to requests sent since it began.
        return self._job_start and self._round < min(self._in_flight, self.bound)

    def _gradient(self, sample: float, floor: float, mean: float | None, late: float, spread: float) -> tuple:
        ratio = sample / floor
        if mean is None:
            return ratio, ratio
        # The cohorts found slots free while the same workers' later requests queued (Spark, 64: the quartile at the
        # floor, 31-57% of answers 1.6x late, 128 doubled): all answers' mean is in flight / throughput, and a FIFO's
        # waves serve (1 - late) of it at once. Past a capacity found a probe is cut on its cohort's mean (the rest at
        # ``sample``): its quartile cut 304 to 160 at 256 (a FIFO's wave). Not in a ramp: a burst's first round is
        # served half at once, yet every later round queues.
        ratio = max(ratio, mean / floor, 1 / (1 - min(late, 0.9)))
        return ratio, (max(1.0, spread / floor) if self.found else ratio)

    def _level(self, sample: float, mean: float | None) -> float:
        # A FIFO's waves bias the cohort (at 72 in flight at a capacity of 64 its upper quartile read 1.8x the floor,
        # all answers' mean 1.05x): a new floor only where the mean stayed up too.
        return sample if mean is None else min(sample, mean)
