"""The counter relay: every worker's run counters reach the driver through the coordinator actor.

The actor keeps each source's latest snapshots (``CounterBoard``); the driver's coordinator sends
and collects them (``CounterRelay``).

Example:
    >>> board = CounterBoard()
    >>> board.report("w1", [{"label": "prompt[m]", "rows_done": 3}], seq=2)
    >>> board.report("w1", [{"label": "prompt[m]", "rows_done": 1}], seq=1)  # older, arrived late: ignored
    >>> board.reports()
    {'w1': [{'label': 'prompt[m]', 'rows_done': 3}]}
"""

from __future__ import annotations

from typing import Any

from inferframe.observe.stats import RunCounters


class CounterBoard:
    """The actor's store of every source's latest counter snapshots."""

    def __init__(self) -> None:
        self.latest: dict[str, list[dict]] = {}
        self.seq: dict[str, int] = {}

    def report(self, source: str, snapshots: list[dict], seq: int | None = None) -> None:
        """Keep ``source``'s latest counter snapshots (cumulative: they replace the earlier ones).

        ``seq`` numbers a source's reports: the actor runs calls concurrently, so an older report may
        arrive after a newer one and must not replace it (a round's last request went uncounted).
        """
        if seq is not None:
            if seq < self.seq.get(source, -1):
                return
            self.seq[source] = seq
        self.latest[source] = list(snapshots)

    def reports(self) -> dict[str, list[dict]]:
        """Every source's latest snapshots, for ``RunCounters.merge`` on the driver."""
        return {k: list(v) for k, v in self.latest.items()}


class CounterRelay:
    """Sends and collects counter snapshots through the coordinator actor.

    Parameters:
        link: the connection to the actor (``ActorLink``).
    """

    def __init__(self, link: Any) -> None:
        self.link = link

    def send(self, source: str, snapshots: list[dict], seq: int | None = None) -> Any:
        """Send ``source``'s snapshots (its ``seq``-th report); returns at once (an awaitable ObjectRef)."""
        return self.link.send("report_counters", source, snapshots, seq)

    def collect(self) -> dict[str, list[dict]]:
        """Every worker's latest snapshots (driver; blocking)."""
        return self.link.get("counter_reports")

    def merge_into(self, counters: RunCounters) -> None:
        """Merge every worker's latest counters into ``counters`` (driver; blocking)."""
        for source, snapshots in self.collect().items():
            counters.merge(source, snapshots)
