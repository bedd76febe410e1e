"""The operators of ``sem_filter``: a yes/no answer per row as a boolean, with a limit, or through a cascade.

``SemFilterOperator`` asks the model "is the statement true?" with the labels ("yes", "no"), by
label scoring or constrained generation (``ClassifyOperator``), and returns a boolean with
P(yes) as its confidence. With a ``limit`` (pushed down from ``.limit(n)``) its batches come one
at a time and it sends rows in order, at most ``limited_window`` at once, and sends no more once
the rows answered so far, with none before them pending, hold ``limit`` that pass.

``SemFilterCascade`` scores every row with a cheap proxy (the cosine similarity of the row's
embedding to the statement's, computed in process) and asks the model only about rows between
two thresholds (``inferframe.ai.filter_thresholds``), chosen once per run on labelled examples or
on a random sample of the first batch answered by the model (``oracle_budget`` rows).

Example:
    >>> import pyarrow as pa
    >>> out = pa.array([{"value": "yes", "error": None, "usage": None, "confidence": 0.8},
    ...                 {"value": "no", "error": None, "usage": None, "confidence": 0.7}], result_type(pa.string(), True))
    >>> p = as_predicate(out)
    >>> p.field("value").to_pylist(), [round(c, 2) for c in p.field("confidence").to_pylist()]
    ([True, False], [0.8, 0.3])
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
from typing import Any

import numpy as np
import pyarrow as pa

from inferframe.ai.call import build_operator
from inferframe.ai.classify import ClassifyConfig, ClassifyOperator, count_answers
from inferframe.ai.columns import result_type
from inferframe.ai.filter_thresholds import choose_filter_thresholds
from inferframe.ai.run import services_or_default
from inferframe.errors import RowFailed
from inferframe.observe.stats import RunStats
from inferframe.series import Series

__all__ = ["SemFilterCascade", "SemFilterCascadeConfig", "SemFilterConfig", "SemFilterOperator", "as_predicate"]

PREDICATE_TYPE = result_type(pa.bool_(), confidence=True)
SKIPPED = "skipped (limit reached)"
# last_run()'s stage_rows: failed rows that sem_filter keeps with their error (error_column), so none was dropped.
FAILED_KEPT = "failed, kept with their error"


@dataclasses.dataclass(frozen=True)
class SemFilterConfig(ClassifyConfig):
    """A yes/no classification config plus the filter's own settings.

    Parameters:
        limit: stop sending once this many rows pass with none before them pending (None: every row).
        keep_errors: a failed row counts toward ``limit`` (sem_filter keeps failed rows with their error).
    """

    limit: int | None = None
    keep_errors: bool = False

    def explain(self, rows: int | None) -> str:
        """The plan and its estimated calls over ``rows`` rows (None: not known before the run), for ``explain()``."""
        how = ("label scoring: P(yes) from the log-probabilities of 'yes' and 'no'"
               + (", calibrated on the statement with the row content-free" if self.content_free else "")
               if self.method == "score" else "constrained generation of 'yes' or 'no'")
        calls = "calls unknown until run" if rows is None else f"up to {rows} calls (one per row)"
        if self.limit is not None:
            calls += f"; stops once {self.limit} rows pass with none before them pending"
        return f"{how}; {calls}"

    def with_limit(self, n: int) -> "SemFilterConfig":
        """This config with ``limit`` n (the optimizer pushes ``.limit(n)`` into the filter)."""
        return dataclasses.replace(self, limit=n)


def as_predicate(out: pa.StructArray) -> pa.StructArray:
    """A yes/no classifier's struct{value, error, usage, confidence} as struct{bool value, ..., confidence = P(yes)}."""
    values = out.field("value").to_pylist()
    confs = out.field("confidence").to_pylist() if "confidence" in out.type.names else [None] * len(values)
    value = [None if v is None else v == "yes" for v in values]
    p_yes = [None if v is None or c is None else (c if v else 1.0 - c) for v, c in zip(value, confs)]
    fields = [pa.array(value, pa.bool_()), out.field("error"), out.field("usage"), pa.array(p_yes, pa.float64())]
    return pa.StructArray.from_arrays(fields, fields=list(PREDICATE_TYPE))


def note_kept_failures(stats: RunStats, out: pa.StructArray, keep_errors: bool) -> pa.StructArray:
    """``out``, its failed rows counted under ``FAILED_KEPT`` where the filter keeps them (no warning of dropped rows)."""
    failed = len(out) - out.field("error").null_count
    if keep_errors and failed:
        stats.stage_rows[FAILED_KEPT] = stats.stage_rows.get(FAILED_KEPT, 0) + failed
    return out


def _kept(row: dict, keep_errors: bool) -> bool:
    return row["value"] is True or (keep_errors and row["error"] is not None)


def limited_window(config: SemFilterConfig) -> int:
    """Rows in flight at once under a limit: enough to keep the server busy, few enough to waste little past the limit.

    Example:
        >>> from inferframe.providers.spec import ProviderSpec
        >>> from inferframe.runtime.config import RuntimeConfig
        >>> limited_window(SemFilterConfig("chat", ProviderSpec("lm_studio"), "m", None, (), RuntimeConfig(), 1, "f", limit=5))
        16
    """
    return max(1, min(config.runtime.max_concurrency, max(16, 2 * (config.limit or 0))))


class SemFilterOperator(ClassifyOperator):
    """A boolean per row: the model's yes/no answer ("yes" is True), with P(yes) as confidence (null when generated)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._passed = 0  # with a limit: rows that passed in the batches before (they come in order, one at a time)

    async def __call__(self, *columns) -> pa.StructArray:
        if self.config.limit is None:
            out = as_predicate(await super().__call__(*columns))
        else:
            out = await self._limited(columns)
        return note_kept_failures(self.stats, out, self.config.keep_errors)

    async def _limited(self, columns) -> pa.StructArray:
        c = self.config
        arrays = [s.to_arrow() for s in columns]
        n = len(arrays[0]) if arrays else 0
        outs: list[dict | None] = [None] * n
        width = limited_window(c)
        passed, prefix, tasks = self._passed, 0, []

        async def one(i: int) -> None:
            out = as_predicate(await ClassifyOperator.__call__(self, *[Series(a.slice(i, 1)) for a in arrays]))
            outs[i] = out.to_pylist()[0]

        try:
            # A window anchored at the earliest pending row: row i starts only once rows before i - width are answered.
            while len(tasks) < n:
                while prefix < len(tasks) and outs[prefix] is not None:
                    passed += _kept(outs[prefix], c.keep_errors)
                    prefix += 1
                if passed >= c.limit:
                    break
                running = [t for t in tasks[prefix:] if not t.done()]
                if len(tasks) >= prefix + width or len(running) >= width:
                    done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    for t in done:
                        t.result()  # a row that raised (on_error="raise") ends the batch
                    continue
                tasks.append(asyncio.ensure_future(one(len(tasks))))
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
        skipped = n - len(tasks)
        if skipped:
            self.stats.rows_done += skipped
            self.stats.stage_rows[SKIPPED] = self.stats.stage_rows.get(SKIPPED, 0) + skipped
        rows = [o or {"value": None, "error": None, "usage": None, "confidence": None} for o in outs]
        self._passed += sum(_kept(r, c.keep_errors) for r in rows)
        return pa.array(rows, PREDICATE_TYPE)


@dataclasses.dataclass(frozen=True)
class SemFilterCascadeConfig:
    """What a cascaded filter runs: the proxy embedding call, the model's yes/no call, and how thresholds are chosen.

    Parameters:
        label: how the progress line and ``last_run()`` name it.
        oracle: the model's ``SemFilterConfig``.
        proxy: (operator class, args, kwargs, method) of the in-process embedding call.
        statement: the text every row's embedding is compared with.
        text_parts: (start, stop): the input parts that make a row's text for the proxy.
        examples: labelled (text, bool) rows the thresholds are chosen on, or ().
        oracle_budget: else, rows of the first batch sampled and answered by the model to choose them.
        target_recall / target_precision / delta: the targets and the allowed failure probability.
        on_error: "null" or "raise", for the model's answers.
        seed: the sample's seed.
    """

    label: str
    oracle: SemFilterConfig
    proxy: tuple
    statement: str
    text_parts: tuple
    examples: tuple = ()
    oracle_budget: int = 0
    target_recall: float | None = None
    target_precision: float | None = None
    delta: float = 0.1
    on_error: str = "null"
    seed: int = 0

    def explain(self, rows: int | None) -> str:
        """The plan and its estimated calls over ``rows`` rows, for ``explain()``."""
        targets = ", ".join(f"{k}={v}" for k, v in (("recall", self.target_recall), ("precision", self.target_precision))
                            if v is not None)
        sample = f"{len(self.examples)} labelled examples" if self.examples else f"{self.oracle_budget} rows the model labels"
        bound = "calls unknown until run" if rows is None else f"at most {rows} model calls"
        return (f"cascade: embedding similarity, then {self.oracle.explain(None).split(';')[0]} on rows between two "
                f"thresholds chosen on {sample} ({targets}, delta={self.delta}); {bound}, fewer as the proxy decides rows")

    def priced(self) -> list:
        """The model's requests (the proxy runs in process): every row counted, an upper bound."""
        return [(self.oracle, None)]

    def identity(self) -> list:
        return ["sem_filter_cascade", self.oracle.identity(), repr(self.proxy[1:]), self.statement, repr(self.examples),
                self.oracle_budget, self.target_recall, self.target_precision, self.delta, self.seed]

    def summary(self) -> dict:
        return {"label": self.label, "provider": self.oracle.provider.name, "base_url": None,
                "model": self.oracle.model, "endpoint": self.oracle.endpoint, "prompt_version": None}


class SemFilterCascade:
    """Runs a cascaded filter per batch: proxy scores for every row, the model for the rows between the thresholds.

    Built once per run (per worker on Ray: each worker chooses its thresholds on its own first batch).
    ``last_run()`` shows, under ``stage_rows``, the rows the proxy dropped, kept, and sent to the model,
    and under ``stage_thresholds`` the finite thresholds.
    """

    def __init__(self, config: SemFilterCascadeConfig, services: Any = None) -> None:
        self.config = config
        self._services = services
        self.stats = RunStats(label=config.label)
        services_or_default(services).counters.add(self.stats)
        self._proxy = self._oracle = self._statement = None
        self.thresholds: tuple[float, float] | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def for_run(cls, services: Any, config: SemFilterCascadeConfig) -> "SemFilterCascade":
        return cls(config, services)

    async def aclose(self) -> None:
        if self._oracle is not None:
            await self._oracle.aclose()

    async def _embed(self, texts: list[str]) -> list[np.ndarray | None]:
        _, _, _, method = self.config.proxy
        out = await asyncio.to_thread(getattr(self._proxy, method), Series(pa.array(texts, pa.string())))
        values = out.field("value") if isinstance(out, pa.StructArray) else out
        return [None if v is None else np.asarray(v, dtype=np.float32) for v in values.to_pylist()]

    async def _scores(self, texts: list[str | None]) -> list[float | None]:
        todo = [i for i, t in enumerate(texts) if t]
        scores: list[float | None] = [None] * len(texts)
        for i, v in zip(todo, await self._embed([texts[i] for i in todo]) if todo else []):
            if v is not None:
                norm = float(np.linalg.norm(v)) * self._statement_norm
                scores[i] = float(v @ self._statement) / norm if norm else None
        return scores

    async def _ask(self, arrays: list[pa.Array], rows: list[int]) -> list[dict]:
        if not rows:
            return []
        idx = pa.array(rows, pa.int64())
        out = await self._oracle(*[Series(a.take(idx)) for a in arrays])
        return out.to_pylist()

    async def _prepare(self, arrays: list[pa.Array], texts: list, scores_of: Any) -> dict[int, dict]:
        """Build the proxy and the model and choose the thresholds (once); the sampled rows' answers of this batch."""
        async with self._lock:
            if self.thresholds is not None:
                return {}
            c = self.config
            op, args, kwargs, _ = c.proxy
            self._proxy = await asyncio.to_thread(build_operator, op, self._services, args, dict(kwargs))
            self._oracle = SemFilterOperator(c.oracle, self._services)
            (statement,) = await self._embed([c.statement])
            self._statement, self._statement_norm = statement, float(np.linalg.norm(statement))
            answered: dict[int, dict] = {}
            if c.examples:
                sample_scores = await self._scores([t for t, _ in c.examples])
                labels = [y for _, y in c.examples]
            else:
                rng = random.Random(c.seed)
                valid = [i for i, t in enumerate(texts) if t]
                picked = sorted(rng.sample(valid, min(c.oracle_budget, len(valid))))
                for i, row in zip(picked, await self._ask(arrays, picked)):
                    answered[i] = row
                scores = await scores_of()
                usable = [i for i in picked if answered[i]["value"] is not None and scores[i] is not None]
                sample_scores, labels = [scores[i] for i in usable], [answered[i]["value"] for i in usable]
            pairs = [(s, y) for s, y in zip(sample_scores, labels) if s is not None]
            self.thresholds = choose_filter_thresholds(
                [s for s, _ in pairs], [y for _, y in pairs], target_recall=c.target_recall,
                target_precision=c.target_precision, delta=c.delta)
            low, high = self.thresholds
            self.stats.stage_thresholds.update({k: v for k, v in (("drop below", low), ("keep from", high))
                                                if math.isfinite(v)})
            return answered

    async def __call__(self, *columns) -> pa.StructArray:
        c = self.config
        arrays = [s.to_arrow() for s in columns]
        n = len(arrays[0]) if arrays else 0
        start, stop = c.text_parts
        parts = [a.to_pylist() for a in arrays[start:stop]]
        texts = [None if any(v is None for v in vals) else "".join(map(str, vals)) for vals in zip(*parts)]
        scored: list = []

        async def scores_of():
            if not scored:
                scored.append(await self._scores(texts))
            return scored[0]

        answered = await self._prepare(arrays, texts, scores_of)
        scores = await scores_of()
        low, high = self.thresholds
        rows: list[dict | None] = [None] * n
        dropped = kept = 0
        ask = []
        for i, s in enumerate(scores):
            if i in answered:
                rows[i] = answered[i]
            elif s is not None and s < low:
                rows[i], dropped = {"value": False, "error": None, "usage": None, "confidence": None}, dropped + 1
            elif s is not None and s >= high:
                rows[i], kept = {"value": True, "error": None, "usage": None, "confidence": None}, kept + 1
            else:  # between the thresholds, or no score (a null input, a failed embedding)
                ask.append(i)
        for i, row in zip(ask, await self._ask(arrays, ask)):
            rows[i] = row
        empty = {"value": None, "error": None, "usage": None, "confidence": None}
        rows = [r or empty for r in rows]
        st = self.stats
        for name, k in (("proxy dropped", dropped), ("proxy kept", kept), ("model", len(ask) + len(answered))):
            st.stage_rows[name] = st.stage_rows.get(name, 0) + k
        st.rows_done += n
        # The guard judges the filter's answers, not the model's share of them (it sees only the unsure rows).
        count_answers(st.answers, [None if r["value"] is None else ("yes" if r["value"] else "no") for r in rows])
        self._oracle.stats.answers.clear()
        self._oracle.stats.answers_raw.clear()
        failed = next((r["error"] for r in rows if r["error"] is not None), None)
        if failed is not None and c.on_error == "raise":
            raise RowFailed.of(failed)
        return note_kept_failures(st, pa.array(rows, PREDICATE_TYPE), c.oracle.keep_errors)

