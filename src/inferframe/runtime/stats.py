"""Live counters of one run, read by the progress bar and the run report."""

from __future__ import annotations

import dataclasses
import threading
import time

from inferframe.runtime.types import Usage


@dataclasses.dataclass
class RunStats:
    """Counters for one job; updated on the event loop, read from any thread."""

    label: str = ""
    rows_total: int | None = None
    rows_done: int = 0
    in_flight: int = 0
    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    errors: int = 0
    not_run: int = 0
    cache_hits: int = 0
    deduped: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    started: float = dataclasses.field(default_factory=time.monotonic)

    def add_usage(self, usage: Usage, cost: float) -> None:
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cost += cost

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["elapsed_s"] = round(time.monotonic() - d.pop("started"), 3)
        return d


class StatsRegistry:
    """The runs of the current job, so the progress bar can show them together."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: list[RunStats] = []

    def add(self, stats: RunStats) -> None:
        with self._lock:
            self._runs.append(stats)

    def runs(self) -> list[RunStats]:
        with self._lock:
            return list(self._runs)

    def clear(self) -> None:
        with self._lock:
            self._runs.clear()


CURRENT_RUN = StatsRegistry()  # the AI calls of the job now running, for the progress bar and run report
