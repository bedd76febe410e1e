"""Records one job with AI calls into the run history: its output distributions, a review sample,
its counters over time, and drift against the earlier runs of the same pipeline.

The driver sees every output batch (``observe``) and the job's counters, merged from every worker. The run
is stored when it starts and every ``CHECKPOINT_S`` seconds with what it has done so far (status
``running``), so a process killed outright still leaves its run, shown as ``interrupted``; at the end
(``finish``) the run is stored whole and, when an AI column's output moved, one ``DriftWarning``
says which column, which value, before and after.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from inferframe.observe.history import RunHistory
    >>> d = tempfile.mkdtemp()
    >>> rec = RunRecorder({"fingerprint": "f", "calls": [], "directory": d}, ["label"], sample=1.0)
    >>> rec.observe(pa.record_batch({"q": ["a", "b"], "label": ["pos", "neg"], "label_error": pa.nulls(2)}))
    >>> run = rec.finish()
    >>> run["distributions"]["label"]["categories"], len(RunHistory(d).sample(run["run_id"]))
    ({'neg': 1, 'pos': 1}, 2)
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from inferframe.errors import warn_user
from inferframe.observe.history import MAX_CATEGORIES, RunHistory, drift
from inferframe.observe.owner import owner_tag
from inferframe.observe.stats import RunCounters, latency_quantile


class DriftWarning(UserWarning):
    """An AI column's output distribution moved against the earlier runs of the same pipeline."""


def attach_evaluation(evaluation: dict, run: tuple[str, str] | None) -> str | None:
    """Store an evaluation with a stored run; its run id (None: no run to attach to).

    Parameters:
        evaluation: the scores, as plain data.
        run: (run_id, history directory) of the run (``evaluate()`` gives the session's ``last_recorded``).

    Example:
        >>> attach_evaluation({"accuracy": 1.0}, None) is None
        True
    """
    if run is None:
        return None
    run_id, directory = run
    RunHistory(directory).update(run_id, evaluation=evaluation)
    return run_id


CHECKPOINT_S = 2.0  # a running run stores what it has done this often

_NUMERIC_KEEP = 20_000  # values kept per numeric column for its quantiles (a deterministic thinning)


class _Column:
    """The running output distribution of one AI column (or struct field)."""

    def __init__(self) -> None:
        self.rows = self.nulls = self.errors = 0
        self.categories: dict[str, int] | None = {}
        self.numbers: list[float] = []
        self.lengths: list[int] = []
        self.seen = 0

    def add(self, values: pa.Array) -> None:
        self.rows += len(values)
        self.nulls += values.null_count
        t = values.type
        if pa.types.is_struct(t):
            return
        valid = values.drop_null() if values.null_count else values
        if pa.types.is_floating(t):
            self._numbers(valid.to_pylist())
            self.categories = None
            return
        if self.categories is not None and (pa.types.is_string(t) or pa.types.is_large_string(t) or
                                            pa.types.is_boolean(t) or pa.types.is_integer(t)):
            counts = pc.value_counts(valid).to_pylist() if len(valid) else []
            for c in counts:
                key = str(c["values"]).lower() if pa.types.is_boolean(t) else str(c["values"])
                self.categories[key] = self.categories.get(key, 0) + c["counts"]
            if len(self.categories) > MAX_CATEGORIES:
                self.categories = None  # free text or many values: described by numbers instead
        if pa.types.is_integer(t):
            self._numbers(valid.to_pylist())
        elif self.categories is None and (pa.types.is_string(t) or pa.types.is_large_string(t)):
            if len(self.lengths) < _NUMERIC_KEEP:  # free text: described by its lengths
                self.lengths += pc.utf8_length(valid).to_pylist()[: _NUMERIC_KEEP - len(self.lengths)]

    def _numbers(self, values: list) -> None:
        for v in values:
            self.seen += 1
            if len(self.numbers) < _NUMERIC_KEEP:
                self.numbers.append(float(v))

    def summary(self) -> dict:
        out: dict[str, Any] = {"rows": self.rows, "null_rate": self.nulls / self.rows if self.rows else 0.0,
                               "error_rate": self.errors / self.rows if self.rows else 0.0}
        if self.categories:
            out["categories"] = dict(sorted(self.categories.items()))
        if self.numbers:
            out["numbers"] = _describe(self.numbers)
        if self.lengths and not self.categories:
            out["length"] = _describe([float(v) for v in self.lengths])
        return out


def _describe(values: list[float]) -> dict:
    arr = pa.array(values, pa.float64())
    qs = pc.quantile(arr, q=[0.05, 0.25, 0.5, 0.75, 0.95]).to_pylist()
    return {"mean": pc.mean(arr).as_py(), "std": pc.stddev(arr, ddof=1).as_py() if len(values) > 1 else 0.0,
            "min": pc.min(arr).as_py(), "max": pc.max(arr).as_py(),
            **{f"p{p}": q for p, q in zip((5, 25, 50, 75, 95), qs)}}


class RunRecorder:
    """Watches one job's output and counters; ``finish()`` stores the run.

    Parameters:
        job: ``fingerprint``, ``calls`` (provider, model, endpoint, prompt_version, label per AI call),
            ``directory`` (where the history lives).
        ai_columns: the output columns that AI calls produced.
        sample / max_sample: the review sample (a job gets the session's, ``set_history``).
        counters: the job's counters (the same the runner's services carry); None: new ones, nothing counted.
        on_stored: called with (run_id, directory) once ``finish()`` has stored the run (the DataFrame
            makes it the session's ``last_recorded``, which ``evaluate()`` attaches to).
        live: store the run as ``running`` from its start and every few seconds; False for a run recorded
            once it has ended (a Spark action), which is stored only by ``finish()``.
    """

    def __init__(self, job: dict, ai_columns: list[str], sample: float = 0.01, max_sample: int = 1000,
                 counters: RunCounters | None = None, on_stored: Callable[[str, str], None] | None = None,
                 live: bool = True) -> None:
        self.job = job
        self.counters = counters if counters is not None else RunCounters()
        self.on_stored = on_stored
        self.ai_columns = ai_columns
        self.sample_share = sample
        self.max_sample = max_sample
        self.run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.started = time.time()
        self.columns: dict[str, _Column] = {}
        self.errors_by_kind: dict[str, int] = {}
        self.sample: list[dict] = []
        self.offset = 0  # rows seen so far (the review sample picks by row number)
        self.timeline: list[list[float]] = []
        self._lock = threading.Lock()  # observe() (the job's thread) against the checkpoints (the ticker's)
        self._finished = False
        self._history = RunHistory(job["directory"])
        self._stored = 0  # rows of the review sample already stored
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if live:
            self._checkpoint()  # stored from its start: a run killed outright is not missing from the history
            self._thread = threading.Thread(target=self._tick, name="inferframe-history", daemon=True)
            self._thread.start()

    def _point(self) -> list:
        """[seconds, rows done, requests, 429s, retries, errors, in flight, in-flight bound, why it last moved]."""
        runs = self.counters.runs()
        bounds = [r.concurrency[-1] for r in runs if r.concurrency]
        return [round(time.time() - self.started, 3), *(sum(getattr(r, k) for r in runs) for k in
                ("rows_done", "requests", "rate_limited", "retries", "errors", "in_flight")),
                sum(b[1] for b in bounds), bounds[0][2] if bounds else ""]

    def _tick(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(0.5):
            self.timeline.append(self._point())
            if time.monotonic() - last >= CHECKPOINT_S:
                last = time.monotonic()
                try:
                    self._checkpoint()
                except sqlite3.Error:  # the file is busy or locked: the next checkpoint tries again
                    pass

    def _checkpoint(self) -> None:
        """Store the run so far as ``running``, with its owner process (see ``RunHistory.runs``)."""
        with self._lock:
            if self._finished:  # finish() has stored the run whole: never overwrite it
                return
            run = {**self._summary("running"), "owner": owner_tag()}
            self._history.record(run, self.sample, first=self._stored)
            self._stored = len(self.sample)

    def observe(self, batch: pa.RecordBatch) -> None:
        """Count one output batch into the distributions and the review sample."""
        with self._lock:
            self._observe(batch)

    def _observe(self, batch: pa.RecordBatch) -> None:
        for name in self.ai_columns:
            if name not in batch.schema.names:
                continue
            values = batch.column(name)
            errors = batch.column(f"{name}_error") if f"{name}_error" in batch.schema.names else None
            col = self.columns.setdefault(name, _Column())
            col.add(values)
            if errors is not None and errors.null_count < len(errors):
                col.errors += len(errors) - errors.null_count
                kinds = pc.struct_field(errors, [0]).drop_null()
                for c in pc.value_counts(kinds).to_pylist():
                    self.errors_by_kind[c["values"]] = self.errors_by_kind.get(c["values"], 0) + c["counts"]
            if pa.types.is_struct(values.type):
                for i in range(values.type.num_fields):
                    self.columns.setdefault(f"{name}.{values.type.field(i).name}", _Column()).add(
                        pc.struct_field(values, [i]))
        if self.sample_share > 0 and len(self.sample) < self.max_sample:
            self._sample(batch)
        else:
            self.offset += batch.num_rows

    def _sample(self, batch: pa.RecordBatch) -> None:
        # A systematic sample: every k-th row of the job (k = 1 / share), so the same data in the
        # same order (the plan's) gives the same sample, and choosing costs nothing per row.
        n, start = batch.num_rows, self.offset
        self.offset += n
        stride = max(1, round(1 / self.sample_share))
        first = (stride // 2 - start) % stride
        chosen = list(range(first, n, stride))[: self.max_sample - len(self.sample)]
        if chosen:
            rows = [r for i in chosen for r in batch.slice(i, 1).to_pylist()]  # slices: no copy of the batch
            self.sample += [{**{k: _short(v) for k, v in row.items()}, "_run_id": self.run_id} for row in rows]

    def finish(self, *, failed: bool = False, status: str | None = None) -> dict:
        """Store the run (and warn about drift); returns what was stored.

        ``status``: ``"ok"`` (default), ``"failed"`` (also ``failed=True``) or ``"interrupted"`` (stopped
        before its end by Ctrl-C or its consumer).
        """
        status = status or ("failed" if failed else "ok")
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            self._finished = True
            self.timeline.append(self._point())
            run = self._summary(status)
        history = self._history
        if status == "ok":
            earlier = [r["distributions"] for r in history.runs(self.job["fingerprint"], limit=20)
                       if r["prompt_versions"] == run["prompt_versions"] and r["status"] == "ok"]
            run["drift"] = drift(run["distributions"], earlier) if earlier else []
        history.record(run, self.sample)
        if self.on_stored is not None:
            self.on_stored(self.run_id, self.job["directory"])
        for move in run["drift"]:
            warn_user(f"Drift in {move['column']!r}: the share of {move['value']!r} moved from {move['before']:.1%} "
                      f"to {move['after']:.1%} ({move['sigmas']:.1f} sigma against the {move['runs_before']} earlier "
                      f"run(s) of this pipeline; run {self.run_id}). Check the inputs and the prompt.",
                      DriftWarning)
        return run

    def _summary(self, status: str) -> dict:
        """The run as stored, from what was seen so far (``ended``: now)."""
        runs = self.counters.runs()
        hist = [sum(h) for h in zip(*[r.latency_hist for r in runs])] if runs else []
        total = {k: sum(getattr(r, k) for r in runs) for k in
                 ("requests", "input_tokens", "output_tokens", "cost", "retries", "rate_limited", "errors",
                  "cache_hits", "truncated", "cached_tokens", "cache_saved")}
        distributions = {name: col.summary() for name, col in self.columns.items()}
        versions = sorted({c.get("prompt_version") or "" for c in self.job.get("calls", [])})
        run = {
            "run_id": self.run_id, "started": self.started, "ended": time.time(), "fingerprint": self.job["fingerprint"],
            # Rows of the job: those that came out (several AI calls each count every row once).
            "status": status,
            "rows": self.offset or max([r.rows_done for r in runs], default=0), **total,
            "latency_p50_s": latency_quantile(hist, 0.5), "latency_p90_s": latency_quantile(hist, 0.9),
            "latency_p99_s": latency_quantile(hist, 0.99), "calls": self.job.get("calls", []),
            "prompt_versions": versions, "errors_by_kind": self.errors_by_kind, "latency_hist": hist,
            "timeline": _thin(list(self.timeline), 40), "distributions": distributions, "drift": [],
            "evaluation": None,
        }
        return run


def _short(v: Any, limit: int = 2000) -> Any:
    if isinstance(v, str) and len(v) > limit:
        return v[:limit] + "..."
    if isinstance(v, (bytes, bytearray)):
        return f"<{len(v)} bytes>"
    return v


def _thin(points: list, n: int) -> list:
    if len(points) <= n:
        return points
    step = (len(points) - 1) / (n - 1)
    return [points[round(i * step)] for i in range(n)]
