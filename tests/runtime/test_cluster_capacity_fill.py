"""The coordinator's one capacity finder (``runners.ray_limits.cluster_capacity``) on a virtual clock, fed reports
as four Ray or Spark workers send them: what each sent since its last report, its most in flight, and its answers
(latency, age of the request). The sequences are the ones `bench/self_hosted_cluster.py` showed (capacity 256, 1 s).
"""

from __future__ import annotations

from inferframe.runners.ray_limits.cluster_capacity import ClusterCapacity
from inferframe.runtime.capacity import CapacityFinder
from inferframe.runtime.capacity_cluster import ClusterFinder
from inferframe.runtime.clock import FakeClock

WORKERS = ("w1", "w2", "w3", "w4")


def _report(cap: ClusterCapacity, clock: FakeClock, at: float, sent: int = 0, peak: int = 64,
            answers: tuple[int, float] = (0, 0.0)) -> None:
    """Each worker reports at ``at``: ``sent`` requests that left 10 ms before, its ``peak``, and ``answers`` =
    (how many, latency) that came 10 ms before."""
    clock.now = at
    n, latency = answers
    for w in WORKERS:
        cap.observe(w, {"sent": [0.01] * sent, "peak": peak, "answers": [(latency, latency + 0.01)] * n})


def test_a_grown_bound_is_judged_on_requests_sent_once_the_workers_filled_it():
    """Grown to 512, the workers' next sends left before their lease calls gave them the larger share: served by a
    capacity of 256 at once, answered at the floor, while the reports that carried the answers said 512 in flight.
    On 82f881f that window doubled the bound to 1,024 (the bench: 2 runs of 3, 1.04-1.12 s queued a request)."""
    clock = FakeClock()
    cap = ClusterCapacity({"adaptive": True, "base": 256, "max_concurrency": 4096}, clock)
    _report(cap, clock, 0.0, sent=64)
    _report(cap, clock, 1.0, answers=(64, 1.0))  # the floor, the bound used: doubled
    assert (cap.bound(4096, rate_known=False), cap.floor) == (512, 1.0)
    _report(cap, clock, 1.8, sent=40)  # the answers' replacements, still under the share of 64
    _report(cap, clock, 2.0, sent=64, peak=128)  # the shares of 128 reached the workers: filled
    _report(cap, clock, 2.8, peak=128, answers=(40, 1.0))  # the replacements: served at once, sent before the fill
    assert cap.bound(4096, rate_known=False) == 512, cap.history
    _report(cap, clock, 3.0, sent=40, peak=128)  # sent at 512 in flight: they queue a round
    _report(cap, clock, 3.8, peak=128, answers=(64, 1.8))  # the fill's own requests, part queued
    _report(cap, clock, 5.0, peak=128, answers=(40, 2.0))
    assert (cap.bound(4096, rate_known=False), cap.found, cap.reason) == (256, True, "capacity"), cap.history
    assert max(bound for _, bound, _ in cap.history) == 512


def test_a_probe_past_the_capacity_found_is_cut_by_littles_law_not_by_its_last_wave():
    """Past a capacity of 256 found, the bound grew by its square root to 304. A FIFO serves 48 of them a round trip
    late: the cohort's first sends (a wave that queued) came back at 1.9x the floor, the rest at it, and the window was
    judged at three quarters answered. On 82f881f its upper quartile (1.9x) cut 304 to 160 (the bench: 141-161, half
    the capacity, with 1.04-1.05x the floor as the mean of all answers); by Little's law on the cohort, 209."""
    clock = FakeClock()
    earlier = CapacityFinder(start=64, maximum=4096, clock=clock)
    earlier.floor, earlier.bound, earlier.found = 1.0, 304, True
    finder = ClusterFinder(start=64, maximum=4096, delay_s=0.2, clock=clock)  # a cluster's
    finder.recall(earlier)
    cohort = 16 + 64 // 4  # the window's cohort, as this finder counts it (it started at 64)
    for at in [0.1] * (cohort // 4) + [1.1] * (cohort - cohort // 4):
        finder.sent(at=at)
    clock.now = 2.0
    for _ in range(cohort // 4):
        finder.on_answer(1.9, 304, sent_at=0.1)
    clock.now = 2.1
    for _ in range(cohort - cohort // 4):
        finder.on_answer(1.0, 304, sent_at=1.1)
    assert (finder.found, finder.reason) == (True, "capacity")
    assert 200 <= finder.bound <= 260, finder.bound


def test_a_job_that_ends_before_its_workers_filled_a_grown_bound_leaves_the_next_job_its_first_round():
    """A Spark session's coordinator lives from job to job. A job that ended right after the bound grew (its window
    held for the fill) must not hand that wait to the next job: the next job's first window still waits for a round
    of answers (``CapacityFinder.idle``), and its burst past the capacity is cut, not doubled."""
    clock = FakeClock()
    cap = ClusterCapacity({"adaptive": True, "base": 64, "max_concurrency": 4096}, clock)
    _report(cap, clock, 0.0, sent=16, peak=16)
    _report(cap, clock, 1.0, peak=16, answers=(16, 1.0))  # the floor, the bound used: doubled, the window held
    assert cap.bound(4096, rate_known=False) == 128
    for w in WORKERS:
        cap.forget(w)  # the job ended
    _report(cap, clock, 5.0, sent=32, peak=32)  # the next job's workers send their shares of 128 at once
    _report(cap, clock, 6.0, peak=32, answers=(16, 1.0))  # a FIFO of 64 serves half at once...
    _report(cap, clock, 7.0, peak=32, answers=(16, 2.0))  # ... and the rest a round trip later
    assert (cap.bound(4096, rate_known=False), cap.found) == (64, True), cap.history
