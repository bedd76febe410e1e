"""The job's in-flight bound over time, merged from every process that sent its requests.

Each process keeps its own bound's timeline (``runtime.concurrency.AdaptiveLimit.history``:
``[seconds since it started, bound, why it moved]``). On Ray or Spark each worker bounds its own
requests (its share of the cluster's bound), so the job's bound at a moment is the sum of the
workers' bounds then; ``last_run()`` showed only the driver's timeline, which sent nothing (issue
46, item 5). This merges the timelines on one clock: each source's times are counted from when it
started (a worker sends its age with its counters, as the processes' clocks differ), every move of
any source is one entry of the sum, with the reason of that move.

Example (two workers, the second starting a second later):
    >>> merge_bounds([(0.0, [[0.0, 32, "start"], [2.0, 64, "latency"]]),
    ...               (1.0, [[0.0, 32, "start"], [3.0, 50, "capacity"]])])
    [[0.0, 32, 'start'], [1.0, 64, 'start'], [2.0, 96, 'latency'], [4.0, 114, 'capacity']]
"""

from __future__ import annotations

__all__ = ["merge_bounds"]

# Entries of a merged timeline at most (the first ones: how the bound was found), as a process's own history.
MERGED_MAX = 500


def merge_bounds(sources: list[tuple[float, list]]) -> list[list]:
    """One timeline from ``(start, history)`` per process: ``start`` in seconds after the earliest source's start.

    A single source is returned as it is (one process's own history); an empty history adds nothing.
    """
    sources = [(start, hist) for start, hist in sources if hist]
    if len(sources) <= 1:
        return [list(e) for e in sources[0][1]] if sources else []
    events = sorted((start + entry[0], i, entry[1], entry[2]) for i, (start, hist) in enumerate(sources)
                    for entry in hist)
    now: dict[int, int] = {}
    out: list[list] = []
    for at, i, bound, why in events:
        now[i] = bound
        total, at = sum(now.values()), round(at, 3)
        if out and out[-1][0] == at:
            out[-1][1:] = [total, why]  # moves at the same moment: one entry, the last reason
        elif not out or out[-1][1] != total:
            if len(out) >= MERGED_MAX:
                break
            out.append([at, total, why])
    return out
