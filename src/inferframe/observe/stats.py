"""Live counters of one job, read by the progress line, the run history and ``last_run()``.

Each job has its own ``RunCounters``: the runner makes them (or takes the DataFrame's) and its run's
services carry them to every AI operator (``inferframe.ai.run``), so two jobs running at once in one
process never count into each other. Counters are kept where the work happens and flow back to the
driver with the results: a worker process sends a snapshot of its counters with every reply, and the
driver merges it into the job's, so the progress line and ``last_run()`` are right whatever process
did the work.

Example:
    >>> counters = RunCounters()
    >>> s = RunStats(label="prompt[m]"); s.rows_done = 2; counters.add(s)
    >>> counters.merge("worker-1", [{"label": "prompt[m]", "rows_done": 3}])
    >>> [r.rows_done for r in counters.runs()]
    [5]
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import threading
import time

from inferframe.observe.bounds import merge_bounds
from inferframe.observe.quality import merge_field_counts

# Counter fields summed across processes (everything but the label and the start time).
_SUMMED = ("rows_done", "in_flight", "retrying", "requests", "retries", "rate_limited", "pauses", "errors", "not_run",
           "cache_hits", "deduped", "truncated", "returned", "input_tokens", "output_tokens", "cost", "cached_tokens",
           "cache_saved", "cascade_saved")


# Upper bounds (seconds) of the latency histogram's buckets: 1 ms to 10 min, 4 a decade; the last is open.
LATENCY_BOUNDS = tuple(round(10 ** (e / 4) / 1000, 6) for e in range(0, 24)) + (float("inf"),)


def latency_quantile(hist: list[int], q: float) -> float | None:
    """The q-quantile (0..1) of a latency histogram: its bucket's upper bound, in seconds (None: empty).

    Example:
        >>> h = [0] * len(LATENCY_BOUNDS); h[8] = 90; h[12] = 10   # 90 answers <= 0.1 s, 10 <= 1 s
        >>> latency_quantile(h, 0.5), latency_quantile(h, 0.95)
        (0.1, 1.0)
    """
    total = sum(hist)
    if not total:
        return None
    seen = 0
    for count, bound in zip(hist, LATENCY_BOUNDS):
        seen += count
        if seen >= q * total:
            return bound if bound != float("inf") else LATENCY_BOUNDS[-2]
    return LATENCY_BOUNDS[-2]


@dataclasses.dataclass
class RunStats:
    """Counters for one AI call of one job; updated on the event loop, read from any thread.

    ``cache_hits`` are rows answered by inferframe's own response cache (nothing sent);
    ``cached_tokens`` are input tokens the provider's prompt cache served (part of
    ``input_tokens``), and ``cache_saved`` the dollars they saved against the full input rate.
    What rows wait for when none is in flight: ``retrying`` rows sleep before their next attempt,
    and admission is paused for a spent rate limit until ``paused_until`` (``paused_for`` seconds
    from now); ``rate_limited`` counts every 429, ``pauses`` the 429s that paused everyone.
    """

    label: str = ""
    rows_total: int | None = None
    rows_done: int = 0
    in_flight: int = 0
    retrying: int = 0  # rows waiting out a backoff or a Retry-After before their next attempt
    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    pauses: int = 0  # 429s that paused admission for every row (a spent budget)
    errors: int = 0
    not_run: int = 0
    cache_hits: int = 0
    deduped: int = 0
    truncated: int = 0  # answers cut at max_tokens (kept as text; finish_reason "length")
    # Answers handed to the output, each one's finish reason read: what ``truncated`` counts among. Not ``rows_done``,
    # which counts a row as its answer arrives: a stopped job has rows answered in batches never handed on.
    returned: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cached_tokens: int = 0  # input tokens served by the provider's prompt cache (included in input_tokens)
    cache_saved: float = 0.0  # dollars those tokens saved against the full input rate
    started: float = dataclasses.field(default_factory=time.monotonic)
    latency_hist: list = dataclasses.field(default_factory=lambda: [0] * len(LATENCY_BOUNDS))
    paused_until: float = 0.0  # time.monotonic() at which admission resumes (a gauge; merged by max)
    # A cascade (classify_text(cascade=[...])): rows each stage answered (summed per stage across
    # processes), each stage's confidence threshold (a setting: the same everywhere), and the dollars
    # it saved against its last stage answering every row.
    stage_rows: dict = dataclasses.field(default_factory=dict)
    stage_thresholds: dict = dataclasses.field(default_factory=dict)
    cascade_saved: float = 0.0
    # A label-scoring or classifying call: answers per label, and per label before calibration (summed
    # across processes), for the quality guard (``observe.quality``) at the end of the job.
    answers: dict = dataclasses.field(default_factory=dict)
    answers_raw: dict = dataclasses.field(default_factory=dict)
    # A structured call: per-field value counts and numbers out of range (``observe.quality.count_record``).
    fields: dict = dataclasses.field(default_factory=dict)

    # A call with max_cost/max_tokens_budget: its caps, and the worst case of a request it held back
    # (``runtime.budget``), for the end-of-job BudgetExceededWarning; a setting, the same in every process.
    budget: dict = dataclasses.field(default_factory=dict)
    # The in-flight bound over time and why it moved: [seconds since the start, bound, reason] (the runtime's
    # ``AdaptiveLimit.history``, shared by reference; see runtime.concurrency). Empty: the call sent nothing.
    concurrency: list = dataclasses.field(default_factory=list)

    @property
    def capacity_bound(self) -> int | None:
        """The bound, when the job is bound by the server's capacity (queueing was seen and the bound is full).

        Example:
            >>> s = RunStats(in_flight=250, concurrency=[[0.0, 64, "start"], [3.1, 256, "capacity"]])
            >>> s.capacity_bound
            256
        """
        hist = self.concurrency
        if hist and hist[-1][2] == "capacity" and self.in_flight >= 0.9 * hist[-1][1]:
            return hist[-1][1]
        return None

    def pause_for(self, seconds: float) -> None:
        """Admission is paused for ``seconds`` from now (a spent rate limit); shown on the progress line.

        Example:
            >>> s = RunStats(); s.pause_for(30.0)
            >>> 29.0 < s.paused_for <= 30.0
            True
        """
        self.paused_until = max(self.paused_until, time.monotonic() + seconds)

    @property
    def paused_for(self) -> float:
        """Seconds until admission resumes (0: not paused)."""
        return max(0.0, self.paused_until - time.monotonic())

    def add_latency(self, seconds: float) -> None:
        """Count one answer's latency in the histogram (percentiles and the report's plot)."""
        self.latency_hist[bisect.bisect_left(LATENCY_BOUNDS, seconds)] += 1

    def add_usage(self, input_tokens: int, output_tokens: int, cost: float, cached_tokens: int = 0,
                  cache_saved: float = 0.0) -> None:
        """Count one answer's tokens and dollars (``cached_tokens``: the part of the input a prompt cache served).

        Example:
            >>> s = RunStats(); s.add_usage(2000, 10, 0.001, cached_tokens=1536, cache_saved=0.0003)
            >>> s.input_tokens, s.cached_tokens, s.cached_share
            (2000, 1536, 0.768)
        """
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cost += cost
        self.cached_tokens += cached_tokens
        self.cache_saved += cache_saved

    @property
    def cached_share(self) -> float:
        """The share of input tokens the provider's prompt cache served (0 before any input)."""
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0

    def snapshot(self) -> dict:
        """The counters as plain data, to send to the driver."""
        return {"label": self.label, "age_s": time.monotonic() - self.started, **{k: getattr(self, k) for k in _SUMMED},
                "budget": dict(self.budget), "concurrency": [list(e) for e in self.concurrency],
                "paused_for": self.paused_for, "latency_hist": list(self.latency_hist),
                "stage_rows": dict(self.stage_rows), "stage_thresholds": dict(self.stage_thresholds),
                "answers": dict(self.answers), "answers_raw": dict(self.answers_raw),
                "fields": copy.deepcopy(self.fields)}

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["elapsed_s"] = round(time.monotonic() - d.pop("started"), 3)
        d.pop("paused_until")  # a moment of this process's clock, nothing to report
        hist = d.pop("latency_hist")
        for q in (50, 90, 99):
            d[f"latency_p{q}_s"] = latency_quantile(hist, q / 100)
        return d


class RunCounters:
    """The AI calls of one job, from this process and from every worker that reported (one per job, never shared)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local: list[RunStats] = []
        self._remote: dict[str, list[dict]] = {}  # source -> its latest snapshots (cumulative)
        # The job's OpenTelemetry recorder (``observe.otel.JobTrace``; None: nothing recorded): its AI operators
        # find their stage span here, as they find these counters on the run's services.
        self.trace = None

    def add(self, stats: RunStats) -> None:
        with self._lock:
            self._local.append(stats)

    def merge(self, source: str, snapshots: list[dict]) -> None:
        """Take a worker's latest counters (cumulative per source, so a later snapshot replaces an earlier one)."""
        if snapshots:
            with self._lock:
                self._remote[source] = list(snapshots)

    def snapshot(self) -> list[dict]:
        """This process's own counters, to send to the driver."""
        with self._lock:
            return [s.snapshot() for s in self._local]

    def runs(self) -> list[RunStats]:
        """One RunStats per call label, summed over this process and every worker."""
        with self._lock:
            local = list(self._local)
            remote = [(source, s) for source, snaps in self._remote.items() for s in snaps]
        if not remote and len({s.label for s in local}) == len(local):
            return local
        now = time.monotonic()
        out: dict[str, RunStats] = {}
        # label -> process -> (start, bound timeline): the calls of one process share its bound (one history).
        bounds: dict[str, dict] = {}
        for s in local:
            if s.concurrency:
                bounds.setdefault(s.label, {})[""] = (s.started, s.concurrency)
            total = out.setdefault(s.label, RunStats(label=s.label, rows_total=s.rows_total, started=s.started))
            total.started = min(total.started, s.started)
            for k in _SUMMED:
                setattr(total, k, getattr(total, k) + getattr(s, k))
            total.paused_until = max(total.paused_until, s.paused_until)
            total.latency_hist = [a + b for a, b in zip(total.latency_hist, s.latency_hist)]
            _merge_stages(total, s.stage_rows, s.stage_thresholds)
            _merge_answers(total, s.answers, s.answers_raw)
            total.budget.update(s.budget)
            merge_field_counts(total.fields, s.fields)
        for source, snap in remote:
            label = snap.get("label", "")
            if snap.get("concurrency"):
                bounds.setdefault(label, {})[source] = (now - snap.get("age_s", 0.0), snap["concurrency"])
            total = out.setdefault(label, RunStats(label=label, started=now - snap.get("age_s", 0.0)))
            total.started = min(total.started, now - snap.get("age_s", 0.0))
            for k in _SUMMED:
                setattr(total, k, getattr(total, k) + snap.get(k, 0))
            if snap.get("paused_for"):  # sent as seconds left: the processes' clocks differ
                total.paused_until = max(total.paused_until, now + snap["paused_for"])
            if snap.get("latency_hist"):
                total.latency_hist = [a + b for a, b in zip(total.latency_hist, snap["latency_hist"])]
            _merge_stages(total, snap.get("stage_rows") or {}, snap.get("stage_thresholds") or {})
            _merge_answers(total, snap.get("answers") or {}, snap.get("answers_raw") or {})
            total.budget.update(snap.get("budget") or {})
            merge_field_counts(total.fields, snap.get("fields") or {})
        for label, total in out.items():  # the job's bound: the sum of the workers' (``observe.bounds``)
            sources = [(start - total.started, hist) for start, hist in bounds.get(label, {}).values()]
            total.concurrency = merge_bounds(sources)
        return list(out.values())

    def clear(self) -> None:
        with self._lock:
            self._local.clear()
            self._remote.clear()


def _merge_stages(total: RunStats, rows: dict, thresholds: dict) -> None:
    for stage, n in rows.items():
        total.stage_rows[stage] = total.stage_rows.get(stage, 0) + n
    total.stage_thresholds.update(thresholds)


def _merge_answers(total: RunStats, answers: dict, raw: dict) -> None:
    for mine, theirs in ((total.answers, answers), (total.answers_raw, raw)):
        for label, n in theirs.items():
            mine[label] = mine.get(label, 0) + n
